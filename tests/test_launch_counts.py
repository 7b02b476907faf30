"""The operations a call dispatches (each a kernel launch on an accelerator), and
the accelerator paths that cut them giving the CPU paths' numbers to the bit.

The counts are read on the CPU with the accelerator paths
(``host_reads.ACCELERATOR_PATHS_ON_CPU``), as ``benchmarks/ops_per_call.py``
reads them; each bound is the count that call has now, so a change that adds
operations to it shows here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import ranking_plugins.kernel as kernel
from ranking_plugins import rank_metrics
from ranking_plugins.batch_cache import last_batch
from ranking_plugins.kernel import host_reads

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import ops_per_call  # noqa: E402

AT_K = ["hit_rate", "mrr", "precision", "recall", "f1", "map", "ndcg", "fall_out"]
WHOLE_LIST = ["auc", "r_precision", "mean_rank"]


def _both_paths(call: Callable[[], dict[str, torch.Tensor]], monkeypatch: pytest.MonkeyPatch):
    runs = []
    for accelerator in (False, True):
        monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator)
        last_batch.clear()
        runs.append(call())
    return runs


@pytest.mark.parametrize("ties", kernel.TIES)
@pytest.mark.parametrize("grades", ["binary float", "bool", "int", "float"])
def test_accelerator_paths_give_the_cpu_paths_bits(
    ties: str, grades: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ties across the cutoff, masks, rows without ties and rows of one score: every
    metric at every k, and the whole-list ones, equal to the bit on both paths."""
    generator = torch.Generator().manual_seed(3)
    for trial in range(12):
        q, n = int(torch.randint(1, 9, (), generator=generator)), 2 + trial * 3
        preds = torch.randint(0, 3, (q, n), generator=generator).float()
        if trial % 2:
            preds[: q // 2] = torch.randn(q // 2, n, generator=generator)  # no ties
        levels = torch.randint(0, 5, (q, n), generator=generator)
        target = {
            "binary float": (levels > 3).float(),
            "bool": levels > 3,
            "int": levels - 1,
            "float": levels.float() / 2,
        }[grades]
        mask = torch.rand(q, n, generator=generator) < 0.8 if trial % 3 == 1 else None
        ks = sorted({1, 1 + trial % n, n, n + 2})
        for gain in ("linear", "exponential"):

            def call(metrics: list[str] = AT_K) -> dict[str, torch.Tensor]:
                return rank_metrics(
                    preds, target, metrics, ks, mask=mask, ties=ties, gain=gain,
                    reduction="none",
                )  # fmt: skip

            for metrics in (AT_K, [*AT_K, *WHOLE_LIST], ["hit_rate"], ["ndcg"]):
                cpu, accelerator = _both_paths(lambda m=metrics: call(m), monkeypatch)
                for key, values in cpu.items():
                    torch.testing.assert_close(
                        accelerator[key], values, rtol=0, atol=0, equal_nan=True,
                        msg=lambda text, key=key: f"{key} ({trial=}, {gain=}): {text}",
                    )  # fmt: skip
