"""``aggregation="median"`` against ``"mean"`` on workload 3 (issue 26).

Workload 3 of ``suite.py``: 10,000 queries x 100 candidates over 50 grouped
updates (``indexes``), MRR + NDCG + MAP of the whole list in one
``RankingMetrics``; each timed run is every update then compute (reset before). The mean
keeps running sums, the median every query's values: the target is the
median within 1.3x of the mean. Also the same with ``whole_queries=True`` and
as dense ``(Q, N)`` batches, where the per-query state is all the median adds.
Runs alternate between the two aggregations; the median of the runs is shown.

    python benchmarks/bench_aggregation.py [--repeats 7] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from ranking_plugins.request import _last_batch
from ranking_plugins.torchmetrics import RankingMetrics

METRICS = ("mrr", "ndcg", "map")


def batches(queries: int, candidates: int, updates: int, layout: str) -> list[tuple]:
    """Workload 3's data (suite.py's, seed 0), in ``layout``: grouped or dense."""
    gen = torch.Generator().manual_seed(0)
    preds = torch.randn(queries, candidates, generator=gen)
    target = (torch.rand(queries, candidates, generator=gen) < 0.05).long()
    indexes = torch.arange(queries).unsqueeze(1).expand(queries, candidates)
    per = queries // updates
    out = []
    for i in range(0, queries, per):
        rows = slice(i, i + per)
        if layout == "dense":
            out.append((preds[rows], target[rows], {}))
        else:
            flat = {"indexes": indexes[rows].flatten()}
            out.append((preds[rows].flatten(), target[rows].flatten(), flat))
    return out


def cycle(metric: RankingMetrics, data: list[tuple]) -> Callable[[], object]:
    def run() -> object:
        for preds, target, keywords in data:
            metric.update(preds, target, **keywords)
        return metric.compute()

    return run


def fresh(metrics: list[RankingMetrics]) -> None:
    """Every metric reset and the kernel's last-batch cache cleared, before each timed
    run: no run reuses a ranking or a copy that another run made (as suite.py)."""
    _last_batch.clear()
    for metric in metrics:
        metric.reset()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--updates", type=int, default=50)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'layout':<26} {'mean ms':>9} {'median ms':>10} {'ratio':>6}")
    for layout, whole in (("grouped", False), ("grouped, whole_queries", True), ("dense", False)):
        data = batches(args.queries, args.candidates, args.updates, layout.split(",")[0])
        metrics = {
            aggregation: RankingMetrics(METRICS, whole_queries=whole, aggregation=aggregation)
            for aggregation in ("mean", "median")
        }
        runs = {name: cycle(metric, data) for name, metric in metrics.items()}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for run in runs.values():  # warm-up
            fresh(list(metrics.values()))
            run()
        for _ in range(args.repeats):
            for name, run in runs.items():  # alternated: drift hits both alike
                fresh(list(metrics.values()))
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
        mean, median = (statistics.median(times[name]) * 1000 for name in ("mean", "median"))
        print(f"{layout:<26} {mean:>9.1f} {median:>10.1f} {median / mean:>6.2f}")


if __name__ == "__main__":
    main()
