"""Exact metrics over an item catalogue sharded across processes (2 CPU processes, gloo).

    python examples/sharded_catalogue.py

Each process holds one shard of the item table (items [0, 600) and
[600, 1000)) and its own users; it describes its scores with
``ShardedEmbeddingScores`` and updates a TorchMetrics ``RankingMetrics``
(accuracy, and coverage and novelty, whose item popularity every process is
given for the whole catalogue). Only query embeddings, ids, counts and each
top k's candidates cross processes, never the table. The
synchronised values are those of one process holding the whole table and
every user (``EmbeddingScores``), which the script prints beside them.
"""

from __future__ import annotations

import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ranking_plugins import EmbeddingScores, ShardedEmbeddingScores, rank_metrics
from ranking_plugins.torchmetrics import RankingMetrics

NUM_ITEMS, WIDTH = 1000, 8
SHARDS = [(0, 600), (600, 400)]  # (item_offset, shard size) of each process
USERS = [30, 20]  # users evaluated by each process
METRICS, TOP_K = ["hit_rate", "mrr", "ndcg", "coverage", "novelty"], [10, 100]


def problem() -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """The same seeded data in every process: item table, users and targets per process,
    and every item's popularity."""
    g = torch.Generator().manual_seed(0)
    # small integers: exact dot products, and ties (across shards too)
    items = torch.randint(-2, 3, (NUM_ITEMS, WIDTH), generator=g).double()
    users = [torch.randint(-2, 3, (n, WIDTH), generator=g).double() for n in USERS]
    # each user's target: the best item by a noisy version of the model's scores
    noisy = [u @ items.T + 3 * torch.randn(len(u), NUM_ITEMS, generator=g) for u in users]
    targets = [scores.argmax(dim=1) for scores in noisy]
    popularity = torch.randint(1, 100, (NUM_ITEMS,), generator=g).double()
    return items, users, targets, popularity


def evaluate(rank: int, world: int, port: int) -> None:
    dist.init_process_group("gloo", f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    items, users, targets, popularity = problem()
    offset, size = SHARDS[rank]
    item_shard = items[offset : offset + size]  # all this process holds of the table

    metric = RankingMetrics(METRICS, top_k=TOP_K, item_popularity=popularity)
    scores = ShardedEmbeddingScores(
        users[rank], item_shard, item_offset=offset, catalogue_size=NUM_ITEMS
    )
    metric.update(scores, targets[rank])
    sharded = metric.compute()  # synchronised: every process gets the same values
    if rank == 0:
        whole = EmbeddingScores(torch.cat(users), items)  # one process, the whole table
        single = rank_metrics(whole, torch.cat(targets), METRICS, TOP_K, item_popularity=popularity)
        for key in single:
            print(
                f"{key:<14} sharded {float(sharded[key]):.6f}  one process {float(single[key]):.6f}"
            )
        same = all(abs(float(sharded[k]) - float(single[k])) < 1e-12 for k in single)
        print("the same to 1e-12:", same)
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    mp.spawn(evaluate, args=(len(SHARDS), free_port()), nprocs=len(SHARDS))
