"""NaN scores under ``validate_args=False`` (SPEC section 5: no internal error, no
wrong number): the accelerator paths (``host_reads.ACCELERATOR_PATHS_ON_CPU``, the
paths a GPU takes, which read no value) give the CPU paths' numbers, and both rank a
NaN as a descending sort does: above every number (+inf included), never tied with
another NaN (each its own place, lower index first; under "first", "pessimistic" and
"optimistic" ordered among themselves by the policy, as tied scores are).

The reference replaces each NaN by a finite score above every other one (distinct,
falling with the index, under "average"; one shared score under the other policies,
whose tie order is the index or the relevance) and is checked as usual.
"""

from __future__ import annotations

import math

import pytest
import torch
from exact import assert_same_values

from ranking_plugins import rank_metrics
from ranking_plugins.batch_cache import last_batch
from ranking_plugins.kernel import TIES, host_reads

AT_K = ["hit_rate", "mrr", "precision", "recall", "map", "ndcg"]
WHOLE_LIST = ["auc", "r_precision", "mean_rank"]
METRIC_SETS = [AT_K, ["hit_rate"], ["mrr"], ["hit_rate", "mrr"], [*AT_K, *WHOLE_LIST]]
LAYOUTS = ["binary float", "int grades", "masked", "item ids", "one item id", "grouped"]


def _scores(generator: torch.Generator, q: int, n: int, trial: int) -> torch.Tensor:
    """Few distinct values (tie groups cut by the lists' end), ±inf and NaN: rows with
    NaN beside ties, rows of NaN alone, NaN past the cutoffs and filling them."""
    preds = torch.randint(0, 3, (q, n), generator=generator).float()
    if trial % 2:
        preds[: q // 2] = torch.randn(q // 2, n, generator=generator)
    special = torch.rand(q, n, generator=generator)
    preds[special < 0.1] = math.inf
    preds[(special >= 0.1) & (special < 0.15)] = -math.inf
    nan_share = [0.3, 0.6, 0.9][trial % 3]
    preds[torch.rand(q, n, generator=generator) < nan_share] = math.nan
    preds[0] = math.nan  # every score NaN
    return preds


def _reference_scores(preds: torch.Tensor, ties: str) -> torch.Tensor:
    """float64 scores in the order the kernel ranks ``preds``: NaN above +inf above
    every float32 number; under "average" each NaN a value of its own, lower index
    higher."""
    scores = preds.to(torch.float64).nan_to_num(nan=math.nan, posinf=1e301)
    column = torch.arange(preds.shape[1], dtype=torch.float64).expand_as(scores)
    nan_value = 1e305 - column * 1e290 if ties == "average" else torch.full_like(scores, 1e305)
    return torch.where(preds.isnan(), nan_value, scores)


def _run(
    preds: torch.Tensor,
    target: torch.Tensor,
    metrics: list[str],
    ks: list[int] | None,
    ties: str,
    layout: str,
    mask: torch.Tensor | None,
    validate_args: bool,
) -> dict[str, torch.Tensor]:
    last_batch.clear()
    if layout != "grouped":
        return rank_metrics(
            preds,
            target,
            metrics,
            ks,
            mask=mask,
            ties=ties,
            reduction="none",
            validate_args=validate_args,
        )
    from ranking_plugins.torchmetrics import RankingMetrics

    q, n = preds.shape
    metric = RankingMetrics(metrics, ks, ties=ties, validate_args=validate_args)
    # the entries of each query spread over two updates, queries interleaved, each
    # query's entries in column order (the order that ranks its NaNs)
    indexes = torch.arange(q).expand(n, q)
    flat = (preds.T.flatten(), target.T.flatten(), indexes.flatten())
    half = q * n // 2
    metric.update(*(t[:half] for t in flat))
    metric.update(*(t[half:] for t in flat))
    return metric.compute()


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_nan_scores_rank_first_on_every_path(
    ties: str, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    generator = torch.Generator().manual_seed(11)
    for trial in range(9):
        q, n = int(torch.randint(2, 7, (), generator=generator)), 2 + trial * 2
        preds = _scores(generator, q, n, trial)
        levels = torch.randint(0, 5, (q, n), generator=generator)
        target = {
            "binary float": (levels > 2).float(),
            "int grades": levels - 1,
            "masked": (levels > 2).float(),
            "item ids": torch.randint(-1, n, (q, 3), generator=generator),
            "one item id": torch.randint(-1, n, (q,), generator=generator),
            "grouped": (levels > 2).float(),
        }[layout]
        mask = torch.rand(q, n, generator=generator) < 0.8 if layout == "masked" else None
        # below the lists' length a top-k selects the lists; at it whole rows are sorted
        ks = sorted({1, 2, n // 2} - {n} if trial % 2 == 0 else {1, 1 + trial % n, n})
        ids = layout in ("item ids", "one item id")
        # item ids ranked whole are counted (several listed ids compared with each other)
        cases = (
            [(m, ks) for m in METRIC_SETS[:-1]] + [(AT_K, None)]
            if ids
            else [(m, ks) for m in METRIC_SETS]
        )
        for metrics, top_k in cases:
            runs = []
            for accelerator in (False, True):
                monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator)
                runs.append(_run(preds, target, metrics, top_k, ties, layout, mask, False))
            monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", False)
            reference = _reference_scores(preds, ties)
            want = _run(reference, target, metrics, top_k, ties, layout, mask, True)
            cpu, accelerator_run = runs
            where = f"accelerator paths against CPU paths (trial {trial}, {metrics})"
            assert_same_values(accelerator_run, cpu, where)
            for got, path in zip(runs, ("CPU", "accelerator"), strict=True):
                assert got.keys() == want.keys()
                for key, values in want.items():
                    torch.testing.assert_close(
                        got[key],
                        values,
                        rtol=0,
                        atol=1e-12,
                        equal_nan=True,
                        msg=f"{key} on the {path} paths (trial {trial}, {metrics})",
                    )


@pytest.mark.parametrize("layout", ["binary float", "item ids"])
def test_lists_without_nan_take_no_nan_correction_where_reading_is_free(
    layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the CPU's paths (reading a value costs nothing there) the NaN corrections
    (a second top-k, the counts' NaN pass) run only for scores that hold a NaN: a
    user of ``validate_args=False`` pays nothing for them otherwise."""
    from ranking_plugins.kernel.ranking import selection
    from ranking_plugins.kernel.statistics import counting

    calls: list[str] = []
    real_rank_nan_first, real_may_hold_nan = counting.rank_nan_first, selection._may_hold_nan

    def rank_nan_first(*args: object, **kwargs: object) -> None:
        calls.append("counts")
        real_rank_nan_first(*args, **kwargs)  # type: ignore[arg-type]

    def may_hold_nan(values: torch.Tensor) -> bool:
        found = real_may_hold_nan(values)
        calls.extend(["top-k"] * found)
        return found

    monkeypatch.setattr(counting, "rank_nan_first", rank_nan_first)
    monkeypatch.setattr(selection, "_may_hold_nan", may_hold_nan)
    generator = torch.Generator().manual_seed(5)
    preds = torch.randn(8, 40, generator=generator)
    if layout == "item ids":
        target = torch.randint(0, 40, (8, 1), generator=generator)  # counted
    else:
        target = (torch.rand(8, 40, generator=generator) < 0.2).float()
    for has_nan in (False, True):
        calls.clear()
        scores = preds.clone()
        if has_nan:
            scores[2, 7] = math.nan
        last_batch.clear()
        rank_metrics(scores, target, AT_K, [1, 5], validate_args=False)
        assert bool(calls) == has_nan, (layout, has_nan, calls)
