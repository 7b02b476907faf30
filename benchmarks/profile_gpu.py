"""Where the time goes on a GPU: per-variant timings and the profiler's top operators.

For workloads 1, 2 and 5 of ``gpu.py`` it times ``rank_metrics`` with the
defaults, with ``validate_args=False`` and with ``ties="first"``, and prints
``torch.profiler``'s operators by device time and the number of kernels
launched per call::

    python benchmarks/profile_gpu.py            # on a CUDA machine
    python benchmarks/profile_gpu.py --device cpu --quick
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
import gpu
import suite

from ranking_plugins import EmbeddingScores, rank_metrics
from ranking_plugins.batch_cache import last_batch


def show(name: str, fn: Callable[[], object], device: torch.device, rows: int) -> None:
    fn()
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    last_batch.clear()
    with profile(activities=activities) as prof:
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
    events = prof.key_averages()
    key = "device_time_total" if device.type == "cuda" else "cpu_time_total"
    kernels = sum(e.count for e in prof.events() if e.device_type.name == "CUDA")
    print(f"\n### {name}: {kernels} device events per call")
    print(events.table(sort_by=key, row_limit=rows, max_name_column_width=60))
    print(events.table(sort_by="cpu_time_total", row_limit=rows, max_name_column_width=60))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=25)
    args = parser.parse_args()
    device = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    q, n = (64, 2000) if args.quick else (1024, 20000)
    preds = [torch.randn(q, n, generator=gen).to(device) for _ in range(3)]
    relevant = torch.rand(q, n, generator=gen).topk(5, dim=1).indices
    target = torch.zeros(q, n).scatter_(1, relevant, 1.0).to(device)
    q2, n2 = (64, 5000) if args.quick else (1024, 100000)
    preds2 = [torch.randn(q2, n2, generator=gen).to(device) for _ in range(3)]
    item2 = torch.randint(n2, (q2,), generator=gen).to(device)
    q5, n5, d5 = (64, 20000, 16) if args.quick else (1024, 1_000_000, 64)
    chunk = 4096 if args.quick else 32768
    query = torch.randn(q5, d5, generator=gen).to(device)
    items = torch.randn(n5, d5, generator=gen).to(device)
    item5 = torch.randint(n5, (q5,), generator=gen).to(device)
    ks = gpu.KS
    variants: dict[str, Callable[[], object]] = {
        "W1 topk": lambda: torch.topk(preds[0], 100),
        "W1 defaults": lambda: rank_metrics(preds[0], target, suite.ALL_METRICS, ks),
        "W1 validate_args=False": lambda: rank_metrics(
            preds[0], target, suite.ALL_METRICS, ks, validate_args=False
        ),
        "W1 ties=first": lambda: rank_metrics(
            preds[0], target, suite.ALL_METRICS, ks, ties="first"
        ),
        "W1 hit_rate+ndcg": lambda: rank_metrics(preds[0], target, ("hit_rate", "ndcg"), ks),
        "W2 defaults": lambda: rank_metrics(preds2[0], item2, suite.NEXT_ITEM_METRICS, ks),
        "W2 validate_args=False": lambda: rank_metrics(
            preds2[0], item2, suite.NEXT_ITEM_METRICS, ks, validate_args=False
        ),
        "W5 floor": lambda: suite.chunked_topk(query, items, 100, chunk),
        "W5 defaults": lambda: rank_metrics(
            EmbeddingScores(query, items, chunk_size=chunk), item5, suite.NEXT_ITEM_METRICS, ks
        ),
        "W5 validate_args=False": lambda: rank_metrics(
            EmbeddingScores(query, items, chunk_size=chunk),
            item5,
            suite.NEXT_ITEM_METRICS,
            ks,
            validate_args=False,
        ),
    }
    # EmbeddingScores reads the target items' scores from calls on the queries that list
    # them, and walks again with whole calls where the device summed those otherwise
    rows_per_call: list[int] = []

    def counted(q: torch.Tensor, chunk_items: torch.Tensor) -> torch.Tensor:
        rows_per_call.append(q.shape[0])
        return q @ chunk_items.T

    rank_metrics(
        EmbeddingScores(query, items, score_fn=counted, chunk_size=chunk), item5, "mrr", 10
    )
    whole = sum(1 for rows in rows_per_call if rows == q5)
    chunks = len(range(0, n5, chunk))
    print(
        f"W5 score_fn calls: {len(rows_per_call) - whole} on fewer queries, {whole} whole "
        f"({chunks} chunks: {whole // chunks} walk(s) of whole calls, "
        "1 where the calls on fewer queries agreed)"
    )
    print("| variant | ms |\n| --- | ---: |")
    for name, fn in variants.items():
        print(f"| {name} | {gpu.timed(device, fn, 5):,.2f} |", flush=True)
    for name in ("W1 defaults", "W1 validate_args=False", "W2 defaults", "W5 defaults"):
        show(name, variants[name], device, args.rows)


if __name__ == "__main__":
    main()
