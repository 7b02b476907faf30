"""The TorchMetrics grouped layout's exact scores across 2 processes (gloo).

Integer scores above 2^53 gathered from both processes (and from a process
that never updated, or a metric cast to low precision) give
:func:`ranking_plugins.rank_metrics`'s numbers; integer scores on one process
and floating-point ones on the other are refused at ``compute`` on every
process, naming ``preds``, without a hang.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from processes import spawn_and_wait

import ranking_plugins

pytestmark = pytest.mark.skipif(
    not dist.is_available(), reason="torch.distributed is not available"
)

BIG = 2**60
NAMES = ["mrr", "ndcg", "auc"]
TOP_K = [1, 3]

Triple = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def data() -> Triple:
    """Scores distinct only above 2^53; query 3 is split over both processes."""
    preds = BIG + torch.tensor([4, 1, 9, 3, 3, 7, 2, 8, 5, 6, 0, 10])
    target = torch.tensor([1, 0, 0, 1, 0, 2, 1, 0, 1, 0, 1, 0])
    indexes = torch.tensor([3, 3, 5, 5, 3, 6, 6, 3, 7, 7, 3, 5])
    return preds, target, indexes


def scenarios() -> dict[str, list[list[Triple]]]:
    """Per scenario, per rank, the grouped updates."""
    preds, target, indexes = data()

    def part(lo: int, hi: int) -> Triple:
        return preds[lo:hi], target[lo:hi], indexes[lo:hi]

    floats = (torch.tensor([0.5, 0.25]), torch.tensor([1, 0]), torch.tensor([8, 8]))
    return {
        "one_rank_idle": [[part(0, 5), part(5, 12)], []],
        "split": [[part(0, 7)], [part(7, 12)]],
        "mixed": [[part(0, 12)], [floats]],
    }


def run(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    from ranking_plugins.torchmetrics import RankingMetrics

    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size
    )
    try:
        saved: dict[str, Any] = {}
        for name, per_rank in scenarios().items():
            metric = RankingMetrics(NAMES, top_k=TOP_K)
            if rank == 1:
                metric.set_dtype(torch.float16)  # must change nothing
            for preds, target, indexes in per_rank[rank]:
                metric.update(preds, target, indexes=indexes)
            try:
                saved[name] = metric.compute()
            except ValueError as error:
                saved[name] = str(error)
        torch.save(saved, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ddp_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("ddp_grouped")
    spawn_and_wait(run, (2, str(tmp / "init"), str(tmp)), nprocs=2)
    return [torch.load(tmp / f"rank{r}.pt", weights_only=False) for r in range(2)]


@pytest.mark.parametrize("scenario", ["one_rank_idle", "split"])
@pytest.mark.parametrize("rank", [0, 1])
def test_integer_scores_gathered_from_every_process(
    ddp_results: list[dict[str, Any]], scenario: str, rank: int
) -> None:
    preds, target, indexes = data()
    expected = ranking_plugins.rank_metrics(
        preds, target, NAMES, TOP_K, indexes=indexes, gain="linear"
    )
    assert float(expected["mrr@1"]) != float(
        ranking_plugins.rank_metrics(
            preds.to(torch.float64), target, NAMES, TOP_K, indexes=indexes, gain="linear"
        )["mrr@1"]
    )  # float64 scores would give another number
    got = ddp_results[rank][scenario]
    assert isinstance(got, dict) and list(got) == list(expected)
    for key, value in expected.items():
        assert got[key].dtype == torch.float64
        assert torch.equal(got[key], value), key


@pytest.mark.parametrize("rank", [0, 1])
def test_integer_and_float_scores_from_two_processes_are_refused(
    ddp_results: list[dict[str, Any]], rank: int
) -> None:
    message = ddp_results[rank]["mixed"]
    assert isinstance(message, str), message
    assert "`preds`" in message and "floating-point" in message and "integer" in message
