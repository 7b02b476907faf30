"""ranking_plugins.pyg beside torch_geometric's own ``LinkPred*`` metrics, on PyG's input.

    .venv/bin/python benchmarks/bench_pyg.py            # Q=16384 in 8 updates, k=100
    .venv/bin/python benchmarks/bench_pyg.py --quick    # smoke run

Every metric gets PyG's input: ranked ``pred_index_mat`` ``(batch_size, k)``
(each row distinct items, best first) and ``edge_label_index`` ``(2, E)`` with
weights (some <= 0, which both sides drop), over ``--updates`` updates then
one ``compute``, a fresh metric object each time. The two sides are timed
alternately in one process, median of ``--repeats`` after ``--warmup``; each
row also says whether the two values agree (within 1e-5 relative, PyG
computes in float32). Single thread by default (``--threads``), steadier on a
shared machine; ``--check`` exits 1 when a row is slower than PyG's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

import ranking_plugins.pyg as R

try:
    import torch_geometric.metrics as G
except ImportError as error:  # pragma: no cover - the benchmark needs PyG
    raise SystemExit("bench_pyg.py needs torch_geometric: pip install torch_geometric") from error


@dataclass(frozen=True)
class Workload:
    """The updates: (pred_index_mat, edge_label_index, edge_label_weight) each."""

    updates: list[tuple[Tensor, Tensor, Tensor]]
    num_items: int
    category: Tensor
    popularity: Tensor


def make_workload(args: argparse.Namespace) -> Workload:
    gen = torch.Generator().manual_seed(args.seed)
    n, k = args.items, args.k
    updates = []
    per_update = args.queries // args.updates
    for _ in range(args.updates):
        # distinct items per row: the top k of random scores
        ranked = torch.rand(per_update, n, generator=gen).topk(k, dim=1).indices
        count = per_update * args.edges
        rows = torch.randint(0, per_update, (count,), generator=gen)
        # half of the ground truth among the listed items, half anywhere
        listed = ranked[rows, torch.randint(0, k, (count,), generator=gen)]
        anywhere = torch.randint(0, n, (count,), generator=gen)
        cols = torch.where(torch.rand(count, generator=gen) < 0.5, listed, anywhere)
        keys = torch.unique(rows * n + cols)
        weight = torch.rand(keys.shape, generator=gen) * 4 - 0.5
        updates.append((ranked, torch.stack([keys // n, keys % n]), weight))
    category = torch.randint(0, 20, (n,), generator=gen)
    popularity = torch.randint(1, 1000, (n,), generator=gen)
    return Workload(updates, n, category, popularity)


def entries(args: argparse.Namespace, work: Workload) -> dict[str, Callable[[Any], Any]]:
    """name -> (the library -> a fresh metric or collection)."""
    k, n = args.k, work.num_items
    rows: dict[str, Callable[[Any], Any]] = {
        name: (lambda lib, name=name: getattr(lib, "LinkPred" + name)(k))
        for name in ("Precision", "Recall", "F1", "MAP", "NDCG", "MRR", "HitRatio")
    }
    rows["NDCG weighted"] = lambda lib: lib.LinkPredNDCG(k, weighted=True)
    rows["Coverage"] = lambda lib: lib.LinkPredCoverage(k, num_dst_nodes=n)
    rows["Diversity"] = lambda lib: lib.LinkPredDiversity(k, category=work.category)
    rows["AveragePopularity"] = lambda lib: lib.LinkPredAveragePopularity(
        k, popularity=work.popularity
    )
    # PyG visits every pair: its default bound on the examples, on both sides
    rows["Personalization"] = lambda lib: lib.LinkPredPersonalization(
        k, max_src_nodes=args.personalization_examples
    )
    rows["Collection (7 accuracy)"] = lambda lib: lib.LinkPredMetricCollection(
        [
            lib.LinkPredPrecision(k),
            lib.LinkPredRecall(k // 2),
            lib.LinkPredF1(k),
            lib.LinkPredMAP(k),
            lib.LinkPredNDCG(k),
            lib.LinkPredNDCG(k, weighted=True),
            lib.LinkPredMRR(k),
            lib.LinkPredHitRatio(k // 10),
        ]
    )
    return rows


def run(make: Callable[[Any], Any], lib: Any, work: Workload) -> tuple[float, Any]:
    metric = make(lib)
    start = time.perf_counter()
    for pred, index, weight in work.updates:
        metric.update(pred, index, weight)
    value = metric.compute()
    return time.perf_counter() - start, value


def agree(mine: Any, theirs: Any) -> bool:
    if isinstance(theirs, dict):
        return list(mine) == list(theirs) and all(agree(mine[k], theirs[k]) for k in theirs)
    return abs(float(mine) - float(theirs)) <= 1e-5 * max(1.0, abs(float(theirs)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", "-q", type=int, default=16384, help="examples, all updates")
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--items", "-n", type=int, default=50_000)
    parser.add_argument("-k", type=int, default=100, help="the width of pred_index_mat and k")
    parser.add_argument("--edges", type=int, default=10, help="ground-truth edges per example")
    parser.add_argument("--personalization-examples", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="+", help="rows whose name starts so")
    parser.add_argument("--quick", action="store_true", help="Q=512 in 2 updates, k=20")
    parser.add_argument("--check", action="store_true", help="exit 1 if a row is slower than PyG")
    args = parser.parse_args()
    if args.quick:
        args.queries, args.updates, args.items, args.k = 512, 2, 2000, 20
        args.repeats, args.warmup, args.personalization_examples = 2, 1, 128
    torch.set_num_threads(args.threads)
    work = make_workload(args)
    print(
        f"Q={args.queries} in {args.updates} updates, N={args.items}, k={args.k}, "
        f"~{args.edges} edges/example, threads={torch.get_num_threads()}, "
        f"median of {args.repeats}"
    )
    print(f"| {'metric':24s} | {'PyG s':>9s} | {'ours s':>9s} | {'ours/PyG':>8s} | equal |")
    print(f"| {'-' * 24} | {'-' * 9} | {'-' * 9} | {'-' * 8} | ----- |")
    missed = []
    for name, make in entries(args, work).items():
        if args.only and not any(name.startswith(prefix) for prefix in args.only):
            continue
        theirs: list[float] = []
        mine: list[float] = []
        equal = True
        for turn in range(args.warmup + args.repeats):
            t_theirs, v_theirs = run(make, G, work)
            t_mine, v_mine = run(make, R, work)
            equal &= agree(v_mine, v_theirs)
            if turn >= args.warmup:
                theirs.append(t_theirs)
                mine.append(t_mine)
        a, b = statistics.median(theirs), statistics.median(mine)
        if b > a:
            missed.append(name)
        shown = "yes" if equal else "NO"
        print(f"| {name:24s} | {a:9.4f} | {b:9.4f} | {b / a:8.2f} | {shown:5s} |")
    print(f"slower than PyG: {', '.join(missed) if missed else 'none'}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
