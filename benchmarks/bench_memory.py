"""Peak memory of the two shapes that used to blow up (issue 11, items 9 and 10).

* ``grouped``: the grouped layout with many one-item queries and one long
  query (``--short`` one-item queries plus one query of ``--long`` items);
  padding every query to the longest one costs queries x longest list.
* ``updates``: the TorchMetrics adapter on grouped batches of ``--per-update``
  queries x ``--candidates`` over ``--updates`` updates (workload 3), each batch
  made just before its update; ``--whole-queries`` ranks each at ``update``,
  whose peak must not grow with the number of updates, while the default
  keeps every entry until ``compute``.
* ``whole``: whole-list metrics (``auc``, ``mean_rank``, ``ndcg`` with
  ``top_k=None``) on dense ``(Q, N)`` float32 scores, which sort whole rows.

Each case runs in a fresh process; the peak extra memory is the process's
high-water mark (``VmHWM``) after the call minus its resident size
(``VmRSS``) just before it, with the inputs already made. One line of JSON
per case::

    .venv/bin/python benchmarks/bench_memory.py grouped --short 20000 --long 20000
    .venv/bin/python benchmarks/bench_memory.py whole --queries 1024 --items 200000
    .venv/bin/python benchmarks/bench_memory.py updates --updates 50 --whole-queries
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch


def _status(key: str) -> int:
    """A ``/proc/self/status`` field in bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _inputs(args: argparse.Namespace) -> tuple[dict, int]:
    generator = torch.Generator().manual_seed(0)
    if args.case == "grouped":
        total = args.short + args.long
        indexes = torch.cat([torch.arange(args.short), torch.full((args.long,), args.short)])
        preds = torch.rand(total, generator=generator)
        target = (torch.rand(total, generator=generator) < 0.3).float()
        call = dict(
            preds=preds, target=target, indexes=indexes, metrics=["mrr", "ndcg", "map"], top_k=10
        )
        return call, preds.nbytes + target.nbytes + indexes.nbytes
    preds = torch.rand(args.queries, args.items, generator=generator)
    target = torch.rand(args.queries, args.items, generator=generator) < 0.01
    call = dict(preds=preds, target=target, metrics=["auc", "mean_rank", "ndcg"], top_k=None)
    return call, preds.nbytes + target.nbytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=["grouped", "whole", "updates"])
    parser.add_argument("--updates", type=int, default=50, help="updates (updates)")
    parser.add_argument("--per-update", type=int, default=200, help="queries per update")
    parser.add_argument("--candidates", type=int, default=100, help="items per query")
    parser.add_argument("--whole-queries", action="store_true", help="whole_queries=True")
    parser.add_argument("--short", type=int, default=20_000, help="one-item queries (grouped)")
    parser.add_argument("--long", type=int, default=20_000, help="items of the long query")
    parser.add_argument("--queries", "-q", type=int, default=1024, help="Q (whole)")
    parser.add_argument("--items", "-n", type=int, default=200_000, help="N (whole)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    if args.case == "updates":
        return _updates(args)

    from ranking_plugins import rank_metrics

    call, input_bytes = _inputs(args)
    before = _status("VmRSS")
    start = time.perf_counter()
    result = rank_metrics(**call)
    seconds = time.perf_counter() - start
    peak = _status("VmHWM") - before
    sizes = (
        {"short": args.short, "long": args.long}
        if args.case == "grouped"
        else {"queries": args.queries, "items": args.items}
    )
    line = {
        "case": args.case,
        **sizes,
        "input_mib": round(input_bytes / 2**20, 1),
        "peak_extra_mib": round(peak / 2**20, 1),
        "seconds": round(seconds, 2),
        "values": {key: round(float(value), 6) for key, value in result.items()},
    }
    print(json.dumps(line))
    return 0


def _updates(args: argparse.Namespace) -> int:
    from ranking_plugins.torchmetrics import RankingMetrics

    generator = torch.Generator().manual_seed(0)
    metric = RankingMetrics(["mrr", "ndcg", "map"], whole_queries=args.whole_queries)
    q, n = args.per_update, args.candidates
    ids = torch.arange(q).repeat_interleave(n)

    def batch(update: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        preds = torch.randn(q * n, generator=generator)
        target = (torch.rand(q * n, generator=generator) < 0.05).long()
        return preds, target, ids + update * q

    metric.update(*batch(0)[:2], indexes=batch(0)[2])  # warm-up: lazy allocations
    metric.reset()
    before = _status("VmRSS")
    start = time.perf_counter()
    for update in range(args.updates):
        preds, target, indexes = batch(update)
        metric.update(preds, target, indexes=indexes)
    result = metric.compute()
    seconds = time.perf_counter() - start
    peak = _status("VmHWM") - before
    line = {
        "case": "updates",
        "updates": args.updates,
        "queries_per_update": q,
        "candidates": n,
        "whole_queries": args.whole_queries,
        "batch_mib": round(q * n * (4 + 8 + 8) / 2**20, 2),
        "peak_extra_mib": round(peak / 2**20, 1),
        "seconds": round(seconds, 2),
        "values": {key: round(float(value), 6) for key, value in result.items()},
    }
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
