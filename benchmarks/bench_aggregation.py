"""``aggregation="median"`` against ``"mean"``, and the curves, on workload 3 (issue 26).

Workload 3 of ``suite.py``: 10,000 queries x 100 candidates over 50 grouped
updates (``indexes``), MRR + NDCG + MAP of the whole list in one
``RankingMetrics``; each timed run is every update then compute (reset before), on
fresh tensors (copies made before each run, so no run meets a batch object another
run saw). The mean keeps running sums, the median every query's values: the target
is the median within 1.3x of the mean. Also the same with ``whole_queries=True`` and
as dense ``(Q, N)`` batches, where the per-query state is all the median adds.

Then the curves: ``RetrievalPrecisionRecallCurve(max_k=100)`` against
``RankingMetrics(["precision", "recall"], top_k=range(1, 101))`` (the same values),
grouped and dense; the target is the curve within 1.3x.
Runs alternate between the two sides; the median of the runs is shown.

With ``--cache``, instead: a ``MetricCollection`` of ``MRR``, ``NDCG``, ``MAP``
(``top_k=10``) on the same data, with and without the package's one cache
(``ranking_plugins.batch_cache.last_batch``, its look-ups answering nothing), dense
and grouped: the measurement behind that cache.

    python benchmarks/bench_aggregation.py [--repeats 7] [--threads 1] [--cache]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from ranking_plugins.batch_cache import last_batch
from ranking_plugins.torchmetrics import (
    BaseRankingMetric,
    RankingMetrics,
    RetrievalPrecisionRecallCurve,
)

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


def copies(data: list[tuple]) -> list[tuple]:
    """Fresh tensors of every batch (made before a timed run, not timed)."""
    return [
        (preds.clone(), target.clone(), {k: v.clone() for k, v in keywords.items()})
        for preds, target, keywords in data
    ]


def timed(metric: BaseRankingMetric, data: list[tuple]) -> float:
    """Seconds for every update then compute, on fresh copies of ``data``."""
    batches = copies(data)
    start = time.perf_counter()
    for preds, target, keywords in batches:
        metric.update(preds, target, **keywords)
    metric.compute()
    return time.perf_counter() - start


def fresh(metrics: list[BaseRankingMetric]) -> None:
    """Every metric reset and the last-batch cache cleared, before each timed
    run: no run reuses a ranking or a copy that another run made (as suite.py)."""
    last_batch.clear()
    for metric in metrics:
        metric.reset()


def compare(
    label: str, sides: dict[str, BaseRankingMetric], data: list[tuple], repeats: int
) -> None:
    """One row: the two sides' medians (ms) and the first over the second."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for metric in sides.values():  # warm-up
        fresh(list(sides.values()))
        timed(metric, data)
    for _ in range(repeats):
        for name, metric in sides.items():  # alternated: drift hits both alike
            fresh(list(sides.values()))
            times[name].append(timed(metric, data))
    first, second = (statistics.median(times[name]) * 1000 for name in sides)
    print(f"{label:<26} {first:>9.1f} {second:>10.1f} {first / second:>6.2f}")


def cache_rows(args: argparse.Namespace) -> None:
    """A collection's update-then-compute time with the cache and without it."""
    from torchmetrics import MetricCollection

    from ranking_plugins.torchmetrics import MAP, MRR, NDCG

    def run(data: list[tuple], cached: bool) -> float:
        for name in ("lookup", "held"):  # the cache's look-ups
            if cached:
                last_batch.__dict__.pop(name, None)
            else:
                setattr(last_batch, name, lambda *_, **__: None)
        last_batch.clear()
        collection = MetricCollection({"mrr": MRR(10), "ndcg": NDCG(10), "map": MAP(10)})
        batches = copies(data)
        start = time.perf_counter()
        for preds, target, keywords in batches:
            collection.update(preds, target, **keywords)
        collection.compute()
        return time.perf_counter() - start

    print(f"{'MRR+NDCG+MAP collection':<26} {'cache ms':>9} {'none ms':>10} {'ratio':>6}")
    for layout in ("dense", "grouped"):
        data = batches(args.queries, args.candidates, args.updates, layout)
        times: dict[bool, list[float]] = {True: [], False: []}
        for cached in (True, False):  # warm-up
            run(data, cached)
        for _ in range(args.repeats):
            for cached in (True, False):
                times[cached].append(run(data, cached))
        with_cache, without = (statistics.median(times[c]) * 1000 for c in (True, False))
        print(f"{layout:<26} {with_cache:>9.1f} {without:>10.1f} {without / with_cache:>6.2f}")
    for name in ("lookup", "held"):  # the look-ups back
        last_batch.__dict__.pop(name, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--updates", type=int, default=50)
    parser.add_argument("--cache", action="store_true", help="the cache's measurement instead")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.cache:
        cache_rows(args)
        return
    print(f"{'layout':<26} {'median ms':>9} {'mean ms':>10} {'ratio':>6}")
    for layout, whole in (("grouped", False), ("grouped, whole_queries", True), ("dense", False)):
        data = batches(args.queries, args.candidates, args.updates, layout.split(",")[0])
        sides: dict[str, BaseRankingMetric] = {
            aggregation: RankingMetrics(METRICS, whole_queries=whole, aggregation=aggregation)
            for aggregation in ("median", "mean")
        }
        compare(layout, sides, data, args.repeats)
    print(f"\n{'curves, max_k=100':<26} {'curve ms':>9} {'P+R@1..100':>10} {'ratio':>6}")
    for layout in ("grouped", "dense"):
        data = batches(args.queries, args.candidates, args.updates, layout)
        sides = {
            "curve": RetrievalPrecisionRecallCurve(max_k=100),
            "metrics": RankingMetrics(["precision", "recall"], top_k=range(1, 101)),
        }
        compare(layout, sides, data, args.repeats)


if __name__ == "__main__":
    main()
