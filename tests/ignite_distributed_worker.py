"""Run the Ignite metrics under ``ignite.distributed.Parallel`` (gloo, CPU).

    python tests/ignite_distributed_worker.py NPROC OUT_DIR PORT

Every rank builds the same seeded batches and evaluates only its share of
them (shares are uneven, and with 3 processes one rank gets no batch at all:
it never runs an engine and only takes part in the metrics' collective
``compute``). Each rank writes what it computed to ``OUT_DIR/rank{r}.json``;
``tests/test_ignite_distributed.py`` compares that with one process on all
the data (:func:`single_process`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from processes import parallel_main

#: which batches each rank evaluates, by world size
SHARES = {
    2: [[0], [1, 2, 3, 4, 5, 6]],
    3: [[0, 1, 2, 3, 4], [], [5, 6]],
}
NUM_BATCHES = 7


def batches() -> list[dict[str, torch.Tensor]]:
    """Seeded dense batches of different sizes, with ties, grades, masks, empty queries."""
    gen = torch.Generator().manual_seed(2024)
    out = []
    for i in range(NUM_BATCHES):
        rows = 3 + 2 * i
        preds = torch.randint(0, 6, (rows, 10), generator=gen).to(torch.float32)
        target = torch.randint(0, 4, (rows, 10), generator=gen).to(torch.float32)
        target[torch.rand(rows, 10, generator=gen) < 0.6] = 0
        target[0] = 0  # an empty query in every batch
        mask = torch.rand(rows, 10, generator=gen) < 0.9
        out.append({"y_pred": preds, "y": target, "mask": mask})
    return out


def make_metrics() -> dict[str, Any]:
    from ranking_plugins import ignite as rp

    return {
        "mrr": rp.MRR([1, 3, 10]),
        "ndcg": rp.NDCG([1, 5], gain_function="linear_rank"),
        "hit_rate": rp.HitRate([2], ignore_zero_hits=False),
        "map": rp.MAP(),
        "auc": rp.AUC(),
        "mean_rank": rp.MeanRank(),
        "all": rp.RankingMetrics(
            ["hit_rate", "mrr", "ndcg", "map", "recall", "fall_out", "r_precision"],
            [1, 3, 5],
            weighted=True,
        ),
    }


def flat(results: dict[str, Any]) -> dict[str, Any]:
    """Name -> result, RankingMetrics' dict spread into its keys as the engine does."""
    out: dict[str, Any] = {}
    for name, value in results.items():
        if isinstance(value, dict):
            out.update(value)
        else:
            out[name] = value
    return out


def single_process() -> dict[str, Any]:
    """The reference: one process, every batch, one engine."""
    from ignite.engine import Engine

    engine = Engine(lambda engine, batch: batch)
    for name, metric in make_metrics().items():
        metric.attach(engine, name)
    return dict(engine.run(batches()).metrics)


def worker(local_rank: int, out_dir: str) -> None:
    import ignite.distributed as idist
    from ignite.engine import Engine
    from ignite.exceptions import NotComputableError

    from ranking_plugins import ignite as rp

    rank, world_size = idist.get_rank(), idist.get_world_size()
    mine = [batches()[i] for i in SHARES[world_size][rank]]
    metrics = make_metrics()
    report: dict[str, Any] = {"rank": rank, "world_size": world_size, "batches": len(mine)}

    # 1. an engine per rank that has data; a rank without data only computes
    if mine:
        engine = Engine(lambda engine, batch: batch)
        for name, metric in metrics.items():
            metric.attach(engine, name)
        report["engine"] = dict(engine.run(mine).metrics)
    else:
        report["engine"] = flat({name: m.compute() for name, m in metrics.items()})

    # 2. state_dict gathers every rank's sums; loading it back gives the same result
    metric = metrics["all"]
    saved = metric.state_dict()
    restored = rp.RankingMetrics(
        ["hit_rate", "mrr", "ndcg", "map", "recall", "fall_out", "r_precision"],
        [1, 3, 5],
        weighted=True,
    )
    restored.load_state_dict(saved)
    report["restored"] = restored.compute()

    # 3. no rank counted a query: every rank raises, none hangs
    empty = rp.MRR([1, 2])
    if mine:
        empty.update((mine[0]["y_pred"], torch.zeros_like(mine[0]["y"])))
    try:
        empty.compute()
        report["not_computable"] = False
    except NotComputableError:
        report["not_computable"] = True

    # 4. direct updates (no engine), another uneven split: the last rank holds all
    direct = rp.RankingMetrics(["mrr", "ndcg", "auc"], [1, 4], ignore_zero_hits=False)
    if rank == world_size - 1:
        for batch in batches():
            direct.update(batch)
    report["direct"] = direct.compute()

    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    parallel_main(worker)
