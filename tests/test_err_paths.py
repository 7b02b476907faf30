"""ERR on the CPU paths and the accelerator (read-free) paths: the same bits under
every tie policy, and the value of its definition (Chapelle et al., CIKM 2009)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
import torch
from exact import assert_same_values

import ranking_plugins.kernel as kernel
from ranking_plugins import rank_metrics
from ranking_plugins.batch_cache import last_batch
from ranking_plugins.kernel import host_reads


def _err(
    preds: torch.Tensor,
    target: torch.Tensor,
    top_k: list[int] | None,
    ties: str,
    gain: str,
    accelerator: bool,
    mask: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    previous = host_reads.ACCELERATOR_PATHS_ON_CPU
    host_reads.ACCELERATOR_PATHS_ON_CPU = accelerator
    last_batch.clear()
    try:
        return rank_metrics(
            preds, target, "err", top_k, mask=mask, ties=ties, gain=gain, reduction="none"
        )
    finally:
        host_reads.ACCELERATOR_PATHS_ON_CPU = previous


@pytest.mark.parametrize("ties", kernel.TIES)
@pytest.mark.parametrize("grades", ["int", "float", "binary float", "bool"])
@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_err_gives_the_same_bits_on_both_paths(ties: str, grades: str, gain: str) -> None:
    """Tie-heavy rows (groups of mixed grades, cut by k or not), tie-free rows and
    masks: err at every k and over the whole list equal to the bit on both paths."""
    generator = torch.Generator().manual_seed(11)
    for trial in range(24):
        q, n = int(torch.randint(1, 7, (), generator=generator)), 2 + trial
        if trial % 2:
            preds = torch.randn(q, n, generator=generator)
        else:
            preds = torch.randint(0, 3, (q, n), generator=generator).float()
        levels = torch.randint(0, 5, (q, n), generator=generator)
        target = {
            "int": levels,
            # integer-valued: torch's CPU exp2 rounds a non-integer grade's 2^g by the
            # element's place in its tensor (vectorised body or scalar tail), which
            # the two paths' tensors place differently, a gain difference before ERR
            "float": levels.float(),
            "binary float": (levels > 2).float(),
            "bool": levels > 2,
        }[grades]
        mask = torch.rand(q, n, generator=generator) < 0.8 if trial % 3 == 1 else None
        for top_k in ([1, 5, 10], None):
            cpu = _err(preds, target, top_k, ties, gain, False, mask)
            accelerator = _err(preds, target, top_k, ties, gain, True, mask)
            assert cpu.keys() == accelerator.keys()
            assert_same_values(accelerator, cpu, f"(trial {trial}, top_k {top_k})")


def _definition(ranking: list[int], grades: list[int], k: int) -> Fraction:
    """Σ_{r ≤ k} R_r / r · Π_{i < r} (1 - R_i), R = (2^g - 1) / 2^g_max, exactly."""
    top = max(grades)
    value, keep = Fraction(0), Fraction(1)
    for place, item in enumerate(ranking[:k], start=1):
        stop = Fraction(2 ** max(grades[item], 0) - 1, 2**top)
        value += keep * stop / place
        keep *= 1 - stop
    return value


def _expected(scores: list[float], grades: list[int], k: int, ties: str) -> Fraction:
    """ERR@k under ``ties``: "average" enumerates every order of every tie group."""
    groups = [
        [i for i, s in enumerate(scores) if s == score]
        for score in sorted(set(scores), reverse=True)
    ]
    if ties != "average":
        sign = {"first": 0, "pessimistic": 1, "optimistic": -1}[ties]
        ranking = [i for group in groups for i in sorted(group, key=lambda i: sign * grades[i])]
        return _definition(ranking, grades, k)
    orders = list(itertools.product(*(itertools.permutations(group) for group in groups)))
    total = sum(
        (_definition([i for part in order for i in part], grades, k) for order in orders),
        Fraction(0),
    )
    return total / len(orders)


@pytest.mark.parametrize("ties", kernel.TIES)
@pytest.mark.parametrize("accelerator", [False, True])
def test_err_is_its_definition_over_the_orders_of_each_tie_group(
    ties: str, accelerator: bool
) -> None:
    """Small rows of graded items in tie groups: err@k as exact rationals (every order
    enumerated under "average"), met to within rounding on either path."""
    generator = torch.Generator().manual_seed(5)
    checked = 0
    for _ in range(60):
        n = int(torch.randint(2, 8, (), generator=generator))
        preds = torch.randint(0, 3, (1, n), generator=generator).float()
        target = torch.randint(0, 5, (1, n), generator=generator)
        if int(target.max()) == 0:
            continue  # no relevant item: empty, not a value of the definition
        ks = sorted({1, int(torch.randint(1, n + 1, (), generator=generator)), n})
        values = _err(preds, target, ks, ties, "linear", accelerator)
        for k in ks:
            exact = _expected(preds[0].tolist(), target[0].tolist(), k, ties)
            got = values[f"err@{k}"].item()
            assert abs(Fraction(got) - exact) <= Fraction(1, 2**50), (k, preds, target)
            checked += 1
    assert checked > 100
