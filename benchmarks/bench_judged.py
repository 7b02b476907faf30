"""The cost of issue 13's judged items for the metrics that do not read them, and their own.

Times ``rank_metrics`` on the tensors of ``suite.py``'s workloads 1, 2 and 4,
and a grouped batch like workload 3's (its defaults, and
``validate_args=False``), score tensors used in turn (the last-batch cache
never serves), in one process per source tree, the trees
alternated round by round, so that two trees (the branch before the change and
after it) are compared as ratios measured in one run::

    python benchmarks/bench_judged.py --tree /path/to/before --tree . --rounds 3

With one tree it also times the judged measures (bpref, unj@k, ...) beside
map on workload 1's tensors, with and without a ``judged`` mask, and infAP
under ``ties="first"`` and ``"average"`` on one tie group of 100,100 items
(10^7 terms of its exact sum under "average").

``--ops`` counts the torch operations each row runs instead of timing it
(``TorchDispatchMode``): a count that load cannot blur. Equal counts in both
trees mean the change adds no tensor work to those rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

KS = (1, 5, 10, 20, 50, 100)
W1_METRICS = ("hit_rate", "mrr", "precision", "recall", "f1", "map", "ndcg")


def _rows(quick: bool, judged_rows: bool) -> dict[str, Callable[[], object]]:
    import torch

    from ranking_plugins import rank_metrics

    torch.set_num_threads(1)
    q, n = (64, 2000) if quick else (1024, 20000)
    gen = torch.Generator().manual_seed(0)
    scores = [torch.randn(q, n, generator=gen) for _ in range(3)]
    turn = iter(range(10**9))

    def fresh() -> torch.Tensor:
        return scores[next(turn) % len(scores)]

    relevant = torch.rand(q, n, generator=gen).topk(5, dim=1).indices
    target = torch.zeros(q, n).scatter_(1, relevant, 1.0)
    item = torch.randint(n, (q,), generator=gen)
    graded = torch.rand(q, n, generator=gen).topk(20, dim=1).indices
    grades = torch.zeros(q, n, dtype=torch.long).scatter_(
        1, graded, torch.randint(1, 5, graded.shape, generator=gen)
    )
    grouped_indexes = torch.arange(q).repeat_interleave(100)  # W3-like: 100 candidates each
    rows: dict[str, Callable[[], object]] = {}
    for validate in (True, False):
        tag = "" if validate else ", validate_args=False"
        rows[f"W1 rank_metrics{tag}"] = lambda v=validate: rank_metrics(
            fresh(), target, W1_METRICS, KS, validate_args=v
        )
        rows[f"W1 bool target{tag}"] = lambda v=validate: rank_metrics(
            fresh(), target.bool(), W1_METRICS, KS, validate_args=v
        )
        rows[f"W2 rank_metrics{tag}"] = lambda v=validate: rank_metrics(
            fresh(), item, ("hit_rate", "mrr", "ndcg"), KS, validate_args=v
        )
        rows[f"W3 grouped rank_metrics{tag}"] = lambda v=validate: rank_metrics(
            fresh()[:, :100].flatten(),
            target[:, :100].flatten(),
            ("mrr", "ndcg", "map"),
            KS,
            indexes=grouped_indexes,
            validate_args=v,
        )
        for gain in ("exponential", "linear"):
            rows[f"W4 ndcg@10 {gain}{tag}"] = lambda v=validate, g=gain: rank_metrics(
                fresh(), grades, "ndcg", 10, gain=g, validate_args=v
            )
    if judged_rows:
        judged = torch.rand(q, n, generator=gen) < 0.3
        judged |= target.bool()
        rows["W1 map, whole lists"] = lambda: rank_metrics(fresh(), target, "map", None)
        rows["W1 bpref (every item judged)"] = lambda: rank_metrics(fresh(), target, "bpref", None)
        rows["W1 bpref, judged mask"] = lambda: rank_metrics(
            fresh(), target, "bpref", None, judged=judged
        )
        rows["W1 unj@10, judged mask"] = lambda: rank_metrics(
            fresh(), target, "unj", 10, judged=judged
        )
        # infAP under "average": one query, one tie group of m = 100 relevant or judged
        # items and z = 10^5 others (10^7 terms of tie_orders.expected_infap_terms)
        size = 100 + 10**5
        tied = [torch.zeros(1, size) for _ in range(3)]
        tied_turn = iter(range(10**9))
        tied_grades = torch.zeros(1, size, dtype=torch.long)
        tied_grades[0, :50] = 1
        tied_grades[0, 100:10100] = -1  # pooled, not judged
        tied_judged = torch.zeros(1, size, dtype=torch.bool)
        tied_judged[0, :10100] = True
        for ties in ("first", "average"):
            rows[f"infap, 1 group of {size} (10^7 terms), {ties}"] = lambda t=ties: rank_metrics(
                tied[next(tied_turn) % 3], tied_grades, "infap", None, judged=tied_judged, ties=t
            )
    return rows


def _count_ops(fn: Callable[[], object]) -> int:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            Counter.calls += 1
            return func(*args, **(kwargs or {}))

    with Counter():
        fn()
    return Counter.calls


def _inner(args: argparse.Namespace) -> None:
    rows = _rows(args.quick, args.judged_rows)
    result: dict[str, float] = {}
    if args.ops:
        print(json.dumps({name: _count_ops(fn) for name, fn in rows.items()}))
        return
    for name, fn in rows.items():
        fn()  # warm up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        result[name] = statistics.median(times)
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], help="a source tree (repeat)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the trees")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per row (median)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--ops", action="store_true", help="count torch operations, not time")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--judged-rows", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        _inner(args)
        return
    trees = args.tree or ["."]
    judged_rows = len(trees) == 1
    found: dict[str, dict[str, list[float]]] = {tree: {} for tree in trees}
    for _ in range(args.rounds):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
            command = [sys.executable, __file__, "--inner", "--repeats", str(args.repeats)]
            command += ["--quick"] if args.quick else []
            command += ["--ops"] if args.ops else []
            command += ["--judged-rows"] if judged_rows else []
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            for name, seconds in json.loads(out.stdout).items():
                found[tree].setdefault(name, []).append(seconds)
    names = list(found[trees[0]])
    header = "row".ljust(40) + "".join(
        f"{os.path.basename(os.path.abspath(t))[:12]:>14}" for t in trees
    )
    print(header + ("   ratio (last / first)" if len(trees) > 1 else ""))
    unit, scale = ("ops", 1) if args.ops else ("ms", 1000)
    for name in names:
        best = [min(found[tree][name]) for tree in trees]
        line = name.ljust(40) + "".join(f"{b * scale:>11.1f}{unit}" for b in best)
        if len(trees) > 1:
            line += f"   {best[-1] / best[0]:.3f}"
        print(line)


if __name__ == "__main__":
    main()
