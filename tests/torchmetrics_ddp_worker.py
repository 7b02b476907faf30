"""Worker of ``test_torchmetrics_ddp.py``: one process of a 2-process gloo group.

Imported by the spawned processes (and by the test, for the data): the data
of every scenario is made here from fixed seeds, split unevenly over ranks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ranking_plugins.torchmetrics import NDCG, RankingMetrics

Update = tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]


def scenarios() -> dict[str, list[list[Update]]]:
    """Per scenario, per rank, the ``update`` calls: ((preds, target), keywords)."""
    g = torch.Generator().manual_seed(0)

    def dense(rows: int) -> Update:
        preds = torch.randn(rows, 8, generator=g)
        target = torch.randint(0, 2, (rows, 8), generator=g) * (
            torch.rand(rows, 8, generator=g) < 0.5
        )
        return (preds, target), {}

    flat_indexes = torch.randint(0, 7, (50,), generator=g)
    flat_preds = torch.randn(50, generator=g)
    flat_target = (torch.rand(50, generator=g) < 0.3).long()

    def flat(lo: int, hi: int) -> Update:
        return (flat_preds[lo:hi], flat_target[lo:hi]), {"indexes": flat_indexes[lo:hi]}

    def whole(first: int, last: int) -> Update:
        """Whole queries ``first`` to ``last`` (ids), 6 entries each."""
        ids = torch.arange(first, last + 1).repeat_interleave(6)
        preds = torch.randn(ids.numel(), generator=g)
        target = (torch.rand(ids.numel(), generator=g) < 0.4).long()
        return (preds, target), {"indexes": ids}

    return {
        # uneven: rank 0 three batches, rank 1 one small one
        "dense": [[dense(5), dense(7), dense(6)], [dense(2)]],
        # the same queries on both ranks (a query is split across processes)
        "grouped": [[flat(0, 20), flat(20, 41)], [flat(41, 50)]],
        "mixed": [[dense(4), flat(0, 30)], [flat(30, 50), dense(3)]],
        # rank 1 never updates
        "one_rank_idle": [[dense(5), flat(0, 25), flat(25, 50)], []],
        # whole queries per update, other queries on each rank (whole_queries=True):
        # pending when compute synchronises
        "whole": [[whole(0, 3), whole(4, 6)], [whole(7, 9)]],
        "whole_one_rank_idle": [[whole(0, 3), whole(4, 6), whole(7, 9)], []],
    }


def make_metrics(scenario: str) -> dict[str, Any]:
    whole = scenario.startswith("whole")  # every update holds whole queries
    return {
        "several": RankingMetrics(["mrr", "ndcg", "map", "auc"], top_k=[1, 3], whole_queries=whole),
        "single": NDCG(top_k=3, whole_queries=whole),
        # per-query values gathered across processes
        "median": RankingMetrics(
            ["mrr", "ndcg"], top_k=[1, 3], aggregation="median", whole_queries=whole
        ),
    }


def results(metrics: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, metric in metrics.items():
        out[name] = metric.compute()
        out[name + "_se"] = metric.compute_standard_error()
    return out


def run(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size
    )
    try:
        saved: dict[str, Any] = {}
        for scenario, per_rank in scenarios().items():
            metrics = make_metrics(scenario)
            for args, kwargs in per_rank[rank]:
                for metric in metrics.values():
                    metric.update(*args, **kwargs)
            saved[scenario] = results(metrics)
            # the local state is back after the synced compute: a second epoch works
            for metric in metrics.values():
                metric.reset()
            for args, kwargs in per_rank[rank]:
                for metric in metrics.values():
                    metric.update(*args, **kwargs)
            saved[scenario + "_again"] = results(metrics)
        torch.save(saved, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()
