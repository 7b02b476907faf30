"""What the beyond-accuracy metrics (issue 14) add to an accuracy call.

    .venv/bin/python benchmarks/bench_beyond_accuracy.py            # Q=1024, N=100000
    .venv/bin/python benchmarks/bench_beyond_accuracy.py --quick    # smoke run (CI)

One ``rank_metrics`` call with HR and NDCG at ks (10, 50, 100) is timed beside
the same call that also asks coverage, gini, novelty and personalisation (and,
reported apart, diversity with d=64 item features), and beside the floor, a
bare ``torch.topk(preds, 100)``. Every call gets the next of several fresh
score tensors in turn (the package keeps the last batch's ranking), and the
entries are timed alternately, median of ``--repeats``. The target: the
exposure metrics add at most 0.25 x the floor to the accuracy call
(``--check`` exits 1 when they do not). Default arguments throughout
(``validate_args=True``, ``ties="average"``), as users call it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch

from ranking_plugins import rank_metrics
from ranking_plugins.batch_cache import last_batch

ACCURACY = ["hit_rate", "ndcg"]
EXPOSURE = ["coverage", "gini", "novelty", "personalisation"]
KS = [10, 50, 100]
TARGET = 0.25


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", "-q", type=int, default=1024)
    parser.add_argument("--items", "-n", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=64, help="d of the diversity features")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--tensors", type=int, default=3, help="fresh score tensors, in turn")
    parser.add_argument("--ties", default="average")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="Q=64, N=2000, 2 repeats")
    parser.add_argument("--check", action="store_true", help=f"exit 1 above {TARGET} x floor")
    args = parser.parse_args()
    if args.quick:
        args.queries, args.items, args.repeats, args.warmup = 64, 2000, 2, 1
    if args.threads:
        torch.set_num_threads(args.threads)

    gen = torch.Generator().manual_seed(0)
    q, n = args.queries, args.items
    scores = [torch.rand(q, n, generator=gen) for _ in range(args.tensors)]
    target = torch.randint(0, n, (q, 5), generator=gen)  # five relevant items per query
    # a popularity with a long tail (Zipf-like), every item seen at least once
    popularity = (1e5 / torch.arange(1, n + 1, dtype=torch.float64)).floor() + 1
    features = torch.randn(n, args.features, generator=gen)
    turn = iter(range(10**9))

    def fresh() -> torch.Tensor:
        return scores[next(turn) % len(scores)]

    options = {"ties": args.ties}
    entries: dict[str, Callable[[], object]] = {
        "floor: torch.topk(preds, 100)": lambda: torch.topk(fresh(), 100),
        "accuracy: hit_rate, ndcg": lambda: rank_metrics(fresh(), target, ACCURACY, KS, **options),
        "+ coverage, gini, novelty, personalisation": lambda: rank_metrics(
            fresh(), target, ACCURACY + EXPOSURE, KS, item_popularity=popularity, **options
        ),
        f"+ those and diversity (d={args.features})": lambda: rank_metrics(
            fresh(),
            target,
            [*ACCURACY, *EXPOSURE, "diversity"],
            KS,
            item_popularity=popularity,
            item_features=features,
            **options,
        ),
    }
    for _ in range(args.warmup):
        for fn in entries.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in entries}
    for _ in range(args.repeats):
        for name, fn in entries.items():  # alternately: load changes hit every entry alike
            last_batch.clear()
            start = time.perf_counter()
            fn()
            times[name].append(1000 * (time.perf_counter() - start))
    ms = {name: statistics.median(t) for name, t in times.items()}
    floor, accuracy = list(ms.values())[:2]
    print(
        f"Q={q} N={n} ks={tuple(KS)} ties={args.ties} threads={torch.get_num_threads()} "
        f"repeats={args.repeats} load={os.getloadavg()[0]:.2f}"
    )
    print(f"| {'entry':<46} | {'ms':>9} | {'x floor':>7} | {'added / floor':>13} |")
    print(f"| {'-' * 46} | {'-' * 9} | {'-' * 7} | {'-' * 13} |")
    for name, value in ms.items():
        baseline = name.startswith(("floor", "accuracy"))
        added = "" if baseline else f"{(value - accuracy) / floor:.3f}"
        print(f"| {name:<46} | {value:9.1f} | {value / floor:7.2f} | {added:>13} |")
    added = (ms["+ coverage, gini, novelty, personalisation"] - accuracy) / floor
    verdict = "meets" if added <= TARGET else "MISSES"
    print(f"exposure metrics add {added:.3f} x floor: {verdict} the target {TARGET} x floor")
    return 1 if args.check and added > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
