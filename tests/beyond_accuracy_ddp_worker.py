"""The exposure metrics across processes (issue 14): gloo on CPU, 2 or 3 processes.

    python tests/beyond_accuracy_ddp_worker.py NPROC OUT_DIR PORT

Every rank builds the same seeded batches (tied scores, dense grades and
item-id targets) and updates only its share (uneven; with 3 processes one
rank gets none and only takes part in ``compute``). Each rank runs the Ignite
adapter on an engine (synced by ``sync_all_reduce``) and a TorchMetrics
``MetricCollection`` (NDCG beside the exposure metrics), and writes what it
computed to ``OUT_DIR/rank{r}.json``; ``tests/test_beyond_accuracy_adapters.py``
compares it with the functional API on all the data in one process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from processes import parallel_main

SHARES = {2: [[0], [1, 2, 3]], 3: [[0, 1], [], [2, 3]]}
NUM_ITEMS = 12
KS = [2, 5]
NAMES = [
    "coverage",
    "gini",
    "entropy",
    "personalisation",
    "novelty",
    "arp",
    "tail_share",
    "diversity",
]


def item_inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    popularity = torch.randint(1, 30, (NUM_ITEMS,), generator=gen).double()
    return {
        "item_popularity": popularity,
        "tail_items": popularity < 10,
        "item_categories": torch.randint(0, 3, (NUM_ITEMS,), generator=gen),
    }


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Seeded batches of different sizes with ties; the last has item-id targets."""
    gen = torch.Generator().manual_seed(2026)
    out = []
    for i in range(4):
        rows = 2 + 3 * i
        preds = torch.randint(0, 5, (rows, NUM_ITEMS), generator=gen).double()
        if i == 3:
            target = torch.randint(0, NUM_ITEMS, (rows,), generator=gen)
            target = torch.zeros(rows, NUM_ITEMS, dtype=torch.long).scatter_(1, target[:, None], 1)
        else:
            target = torch.randint(0, 2, (rows, NUM_ITEMS), generator=gen)
        out.append((preds, target))
    return out


def single_process() -> dict[str, float]:
    """The reference: the functional API on every batch at once."""
    from ranking_plugins import rank_metrics

    preds = torch.cat([p for p, _ in batches()])
    target = torch.cat([t for _, t in batches()])
    values = rank_metrics(preds, target, NAMES, KS, **item_inputs())
    values.update(rank_metrics(preds, target, ["ndcg"], KS, gain="linear"))
    return {key: float(value) for key, value in values.items()}


def worker(local_rank: int, out_dir: str) -> None:
    import ignite.distributed as idist
    from ignite.engine import Engine
    from torchmetrics import MetricCollection

    from ranking_plugins import ignite as rp_ignite
    from ranking_plugins import torchmetrics as rp_tm

    rank, world_size = idist.get_rank(), idist.get_world_size()
    mine = [batches()[i] for i in SHARES[world_size][rank]]
    report: dict[str, Any] = {"rank": rank, "batches": len(mine)}

    ignite_metric = rp_ignite.RankingMetrics(NAMES, KS, **item_inputs())
    if mine:
        engine = Engine(lambda engine, batch: batch)
        ignite_metric.attach(engine, "beyond")
        report["ignite"] = dict(engine.run(mine).metrics)
    else:
        report["ignite"] = ignite_metric.compute()

    collection = MetricCollection(
        {"ndcg": rp_tm.NDCG(KS), "beyond": rp_tm.RankingMetrics(NAMES, KS, **item_inputs())}
    )
    for preds, target in mine:
        collection.update(preds, target)
    report["torchmetrics"] = {key: float(value) for key, value in collection.compute().items()}
    # coverage alone, its catalogue size given by num_items
    alone = rp_tm.RankingMetrics(["coverage"], KS, num_items=NUM_ITEMS)
    for preds, target in mine:
        alone.update(preds, target)
    report["coverage_alone"] = {key: float(value) for key, value in alone.compute().items()}
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    parallel_main(worker)
