"""Side by side: this package against what a user would run instead, same tensors.

Each workload runs through ``ranking_plugins`` (``rank_metrics`` and the
Ignite and TorchMetrics adapters) and through its peers (Ignite's
``rec_sys`` metrics, ``torchmetrics.retrieval``, the hand-written "topk then
gather" pattern of blog posts), in one process, on the same tensors. Every
time is the median of several runs after a warm-up, timed alternately with
the workload's floor (a bare ``torch.topk``, the least any exact top-k metric
has to do) so that a change of load hits both alike. Peak extra memory is
measured in a fresh subprocess per row (``VmHWM`` minus ``VmRSS`` just before
the call, the high-water mark reset through ``/proc/self/clear_refs``).

Workloads:

1. dense binary ``Q=1024, N=20000``, 5 relevant per row, HitRate/MRR/NDCG/MAP/
   Precision/Recall at k = 1, 5, 10, 20, 50, 100;
2. item-index targets ``Q=1024, N=100000``, one target per row, HR/MRR/NDCG;
3. grouped layout, 10,000 queries x 100 candidates over 50 updates, MRR+NDCG+MAP
   (also fed by a shuffled loader: every query split across updates);
4. graded relevance (0..4) NDCG@10, exponential and linear gain;
5. embeddings ``Q=1024, N=1,000,000, d=64``, HR/MRR/NDCG without the score matrix;
6. files: ``ranking-plugins evaluate`` on a TREC qrels and run of 2,000 queries x
   1,000 documents (2,000,000 run lines), reading included, against pytrec_eval
   (its ``parse_qrel``/``parse_run``, ``RelevanceEvaluator.evaluate``, the means).

    python benchmarks/suite.py                     # every workload, full sizes
    python benchmarks/suite.py --quick             # tiny sizes, a few seconds (CI)
    python benchmarks/suite.py --workload 1 3      # some workloads only
    python benchmarks/suite.py --write-results     # also write benchmarks/RESULTS.md
    python benchmarks/suite.py --check --threads 1 2   # judge the targets at 1 and 2 threads

``--write-results`` after a run of every workload puts it at the top of
RESULTS.md ("Latest full run") and moves the run it replaces into the
"History" section below; after a run of some workloads it replaces only their
sections (and their rows of the targets) in the latest run and keeps the rest.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import itertools
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import ops_per_call

from ranking_plugins import EmbeddingScores, rank_metrics
from ranking_plugins.batch_cache import last_batch

KS = (1, 5, 10, 20, 50, 100)
ALL_METRICS = ("hit_rate", "mrr", "ndcg", "map", "precision", "recall")
NEXT_ITEM_METRICS = ("hit_rate", "mrr", "ndcg")
RESULTS = Path(__file__).with_name("RESULTS.md")
MB = 1024.0 * 1024.0

Fn = Callable[[], object]


# --------------------------------------------------------------------------- sizes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workload",
        "-w",
        type=int,
        nargs="+",
        choices=[1, 2, 3, 4, 5, 6],
        default=[1, 2, 3, 4, 5, 6],
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed runs (median reported)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first")
    parser.add_argument(
        "--tm-queries",
        type=int,
        default=64,
        help="Q at which torchmetrics.retrieval runs on workloads 1, 2 and 4 (too slow at 1024)",
    )
    parser.add_argument("--chunk-size", type=int, default=32768, help="workload 5 chunk size")
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=None,
        help="torch.set_num_threads; several values run every workload at each in turn "
        "(--check then judges the targets at each: `--check --threads 1 2`)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and few repeats: a smoke run for CI"
    )
    parser.add_argument(
        "--write-results", action="store_true", help=f"write the tables to {RESULTS.name}"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit with status 1 if a target is missed"
    )
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time the calling thread's CPU time instead of wall time: steadier on a shared "
        "machine (time spent waiting for a core is not counted); needs --threads 1 (torch "
        "then runs every operation in the calling thread) and not workload 6 (processes)",
    )
    parser.add_argument("--_peak", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    #: the thread counts to run at; ``args.threads`` is the one being run (None: torch's)
    args.thread_counts = args.threads or [None]
    args.threads = args.thread_counts[0]
    if args.cpu_time and (args.thread_counts != [1] or 6 in args.workload):
        parser.error("--cpu-time needs --threads 1 and workloads 1 to 5 only")
    if args.write_results and len(args.thread_counts) > 1:
        parser.error("--write-results takes one --threads value")
    if args.quick:
        args.repeats, args.warmup, args.tm_queries = 2, 1, 8
        args.chunk_size = min(args.chunk_size, 4096)
    args.sizes = QUICK if args.quick else FULL
    return args


FULL = {
    1: {"Q": 1024, "N": 20000, "relevant": 5},
    2: {"Q": 1024, "N": 100000},
    3: {"queries": 10000, "candidates": 100, "updates": 50},
    4: {"Q": 1024, "N": 20000, "graded": 20},
    5: {"Q": 1024, "N": 1_000_000, "d": 64},
    6: {"queries": 2000, "docs": 1000, "judged": 50, "corpus": 1_000_000},
}
QUICK = {
    1: {"Q": 64, "N": 2000, "relevant": 5},
    2: {"Q": 64, "N": 5000},
    3: {"queries": 200, "candidates": 100, "updates": 5},
    4: {"Q": 64, "N": 2000, "graded": 20},
    5: {"Q": 64, "N": 20000, "d": 16},
    6: {"queries": 50, "docs": 100, "judged": 10, "corpus": 10_000},
}


# --------------------------------------------------------------------------- entries


@dataclass
class Entry:
    """One way of computing a workload's metrics.

    ``make`` builds the callable (metric objects, imports) so that a memory
    subprocess builds only the row it measures. ``ours`` rows clear the
    kernel's last-batch cache before every run (see :func:`run_once`).
    """

    name: str
    kind: str  # "floor", "ours" or "peer"
    make: Callable[[], Fn]
    size: str = ""  # set when the row runs at a reduced size
    memory: bool = False
    quick_memory: bool = False
    repeats: int | None = None  # fewer runs for slow peers
    note: str = ""


@dataclass
class Workload:
    number: int
    title: str
    size: str
    preds_bytes: int
    entries: list[Entry]
    note: str = ""


@dataclass
class Row:
    workload: int
    entry: Entry
    ms: float
    floor_ms: float
    peak_bytes: int | None = None
    per_run: list[float] = field(default_factory=list)
    #: a defaults row with a validate_args=False twin: (defaults ms, twin ms), medians
    #: of the two timed alternately in one loop over fresh score tensors
    #: (:func:`pair_with_unchecked`)
    versus_unchecked: tuple[float, float] | None = None

    @property
    def ratio(self) -> float:
        return self.ms / self.floor_ms

    @property
    def unchecked_ratio(self) -> float | None:
        """defaults / validate_args=False, from their alternate runs (None without a twin)."""
        if self.versus_unchecked is None:
            return None
        defaults, unchecked = self.versus_unchecked
        return defaults / unchecked


class Turns:
    """Equal-sized score tensors handed out in turn: no run sees the tensor of the last.

    The package keeps the last batch's ranking; with tensors in turn (and the
    cache cleared, :func:`run_once`) no run can time a cache hit.
    """

    def __init__(self, first: torch.Tensor, gen: torch.Generator, count: int = 3) -> None:
        self.tensors = [first] + [torch.randn(first.shape, generator=gen) for _ in range(count - 1)]
        self.at = 0

    def __call__(self) -> torch.Tensor:
        self.at = (self.at + 1) % len(self.tensors)
        return self.tensors[self.at]


#: the column of rows timed with ``validate_args=False``; rows without it run the defaults
UNCHECKED = ", validate_args=False"
#: the rows of workload 4 given float grades, as Ignite and TorchMetrics users pass them
FLOAT_GRADES = ", float grades"


#: rows of workload 3 whose batches are ranked at ``update`` (each holds whole queries)
WHOLE = ", whole_queries=True"

#: the row of workload 3 fed by a shuffled loader (every query split across updates)
SHUFFLED = ", shuffled updates"


def run_once(entry: Entry, fn: Fn) -> object:
    if entry.kind == "ours":
        # ranking_plugins.request keeps the last batch's rank statistics and
        # reuses them when the very same tensor objects come again; without
        # this every run after the first would time a cache hit.
        last_batch.clear()
    return fn()


# --------------------------------------------------------------------------- peers


def handwritten_dense(preds: torch.Tensor, target: torch.Tensor, ks: tuple[int, ...]) -> dict:
    """HR/MRR/NDCG@k from one topk, as blog posts and LightningModules write it."""
    max_k = max(ks)
    _, top = torch.topk(preds, max_k, dim=1)
    hits = torch.gather(target, 1, top) > 0  # (Q, max_k)
    n_rel = (target > 0).sum(dim=1)
    return _from_hits(hits, n_rel, ks)


def handwritten_ids(preds: torch.Tensor, item: torch.Tensor, ks: tuple[int, ...]) -> dict:
    """Next-item HR/MRR/NDCG@k: compare the topk ids with the target id."""
    max_k = max(ks)
    _, top = torch.topk(preds, max_k, dim=1)
    hits = top == item.unsqueeze(1)
    return _from_hits(hits, torch.ones_like(item), ks)


def _from_hits(hits: torch.Tensor, n_rel: torch.Tensor, ks: tuple[int, ...]) -> dict:
    max_k = hits.shape[1]
    positions = torch.arange(1, max_k + 1, dtype=torch.float32)
    discounts = 1.0 / torch.log2(positions + 1)
    ideal = torch.cumsum(discounts, 0)
    first = torch.where(hits.any(1), hits.int().argmax(1), max_k)
    cum_dcg = torch.cumsum(hits.float() * discounts, 1)
    out = {}
    for k in ks:
        out[f"hit_rate@{k}"] = (first < k).float().mean()
        out[f"mrr@{k}"] = torch.where(first < k, 1.0 / (first + 1), 0.0).mean()
        idcg = ideal[(n_rel.clamp(max=k) - 1).clamp(min=0)]
        out[f"ndcg@{k}"] = (cum_dcg[:, k - 1] / idcg).mean()
    return out


def handwritten_graded(preds: torch.Tensor, grades: torch.Tensor, k: int, gain: str) -> object:
    _, top = torch.topk(preds, k, dim=1)
    got = torch.gather(grades, 1, top).float()
    best = torch.topk(grades, k, dim=1).values.float()
    discounts = 1.0 / torch.log2(torch.arange(2, k + 2, dtype=torch.float32))
    if gain == "exponential":
        got, best = torch.pow(2.0, got) - 1, torch.pow(2.0, best) - 1
    idcg = (best * discounts).sum(1)
    ndcg = (got * discounts).sum(1) / idcg.clamp(min=1e-12)
    return ndcg[idcg > 0].mean()


def chunked_topk(
    query: torch.Tensor, items: torch.Tensor, k: int, chunk: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The embeddings floor: ``query @ chunk.T``, topk per chunk, merged as it goes."""
    best_v = best_i = None
    for start in range(0, items.shape[0], chunk):
        scores = query @ items[start : start + chunk].T
        v, i = torch.topk(scores, min(k, scores.shape[1]), dim=1)
        i = i + start
        if best_v is not None and best_i is not None:
            v, i = torch.cat([best_v, v], 1), torch.cat([best_i, i], 1)
            v, j = torch.topk(v, min(k, v.shape[1]), dim=1)
            i = torch.gather(i, 1, j)
        best_v, best_i = v, i
    assert best_v is not None and best_i is not None
    return best_v, best_i


def ignite_cycle(*metrics: object) -> Callable[[tuple], object]:
    """reset, update, compute of Ignite metrics (ours or Ignite's own)."""

    def call(output: tuple) -> object:
        results = []
        for metric in metrics:
            metric.reset()  # type: ignore[attr-defined]
            metric.update(output)  # type: ignore[attr-defined]
            results.append(metric.compute())  # type: ignore[attr-defined]
        return results

    return call


def tm_cycle(metric: object, batches: list[tuple]) -> object:
    """reset, one update per batch, compute of a TorchMetrics metric or collection."""
    metric.reset()  # type: ignore[attr-defined]
    for batch in batches:
        metric.update(*batch[:2], **batch[2])  # type: ignore[attr-defined]
    return metric.compute()  # type: ignore[attr-defined]


def retrieval_collection(specs: list[tuple[str, int | None]], **kwargs: object) -> object:
    """torchmetrics.retrieval: one object per metric per k, in a MetricCollection."""
    from torchmetrics import MetricCollection
    from torchmetrics import retrieval as R

    classes = {
        "hit_rate": R.RetrievalHitRate,
        "mrr": R.RetrievalMRR,
        "ndcg": R.RetrievalNormalizedDCG,
        "map": R.RetrievalMAP,
        "precision": R.RetrievalPrecision,
        "recall": R.RetrievalRecall,
    }
    return MetricCollection(
        {
            f"{name}_{k}": classes[name](top_k=k, **kwargs)  # type: ignore[arg-type]
            for name, k in specs
        }
    )


def flat(preds: torch.Tensor, target: torch.Tensor) -> tuple:
    """TorchMetrics' retrieval input for a (Q, N) batch: flat preds, target, indexes."""
    q, n = preds.shape
    indexes = torch.arange(q).repeat_interleave(n)
    return (preds.flatten(), target.flatten(), {"indexes": indexes})


# --------------------------------------------------------------------------- workloads


def workload_1(args: argparse.Namespace) -> Workload:
    s = args.sizes[1]
    q, n = s["Q"], s["N"]
    gen = torch.Generator().manual_seed(args.seed)
    preds = torch.randn(q, n, generator=gen)
    relevant = torch.rand(q, n, generator=gen).topk(s["relevant"], dim=1).indices
    target = torch.zeros(q, n).scatter_(1, relevant, 1.0)
    ks, mets = KS, ALL_METRICS
    tq = min(args.tm_queries, q)
    small = (preds[:tq].contiguous(), target[:tq].contiguous())
    turn = Turns(preds, gen)

    def ours_fn(validate: bool = True) -> Fn:
        return lambda: rank_metrics(turn(), target, mets, ks, validate_args=validate)

    def ours_small() -> Fn:
        return lambda: rank_metrics(*small, mets, ks)

    # one bool copy for both bool rows, made here: a copy made (and freed) by each row
    # would change the allocator's state between the rows (glibc raises its mmap and
    # trim thresholds when it frees a block that large; see issue 17 in RESULTS.md)
    target_bool = target.bool()

    def ours_bool(validate: bool = True) -> Fn:
        return lambda: rank_metrics(turn(), target_bool, mets, ks, validate_args=validate)

    def ours_ignite() -> Fn:
        from ranking_plugins.ignite import RankingMetrics

        cycle = ignite_cycle(RankingMetrics(mets, top_k=list(ks)))
        return lambda: cycle((turn(), target))

    def ours_tm() -> Fn:
        from ranking_plugins.torchmetrics import RankingMetrics

        metric = RankingMetrics(mets, top_k=list(ks))
        return lambda: tm_cycle(metric, [(turn(), target, {})])

    def ignite_pair() -> Fn:
        from ignite.metrics.rec_sys import NDCG, HitRate

        cycle = ignite_cycle(HitRate(top_k=list(ks)), NDCG(top_k=list(ks)))
        return lambda: cycle((preds, target))

    def retrieval() -> Fn:
        metric = retrieval_collection([(m, k) for m in mets for k in ks])
        batch = flat(*small)
        return lambda: tm_cycle(metric, [batch])

    return Workload(
        1,
        "dense binary, 6 metrics x 6 ks",
        f"Q={q}, N={n}, {s['relevant']} relevant/row, float32 0/1 target",
        preds.nelement() * preds.element_size(),
        [
            Entry("torch.topk(preds, 100)", "floor", lambda: lambda: torch.topk(turn(), 100)),
            Entry("rank_metrics", "ours", ours_fn, memory=True, quick_memory=True),
            Entry("rank_metrics" + UNCHECKED, "ours", lambda: ours_fn(False)),
            Entry(
                "rank_metrics, bool target",
                "ours",
                ours_bool,
                note="target.bool() made outside the timing",
            ),
            Entry("rank_metrics, bool target" + UNCHECKED, "ours", lambda: ours_bool(False)),
            Entry("ranking_plugins.ignite.RankingMetrics", "ours", ours_ignite, memory=True),
            Entry("ranking_plugins.torchmetrics.RankingMetrics", "ours", ours_tm, memory=True),
            Entry(
                "ignite rec_sys HitRate + NDCG",
                "peer",
                ignite_pair,
                memory=True,
                note="2 of the 6 metrics",
            ),
            Entry(
                "hand-written topk + gather",
                "peer",
                lambda: lambda: handwritten_dense(preds, target, ks),
                memory=True,
                note="HR/MRR/NDCG only",
            ),
            Entry(
                "torch.topk(preds, 100)",
                "floor",
                lambda: lambda: torch.topk(small[0], 100),
                size=f"Q={tq}",
            ),
            Entry("rank_metrics", "ours", ours_small, size=f"Q={tq}"),
            Entry(
                "torchmetrics.retrieval (36 objects)",
                "peer",
                retrieval,
                size=f"Q={tq}",
                repeats=3,
                note="MetricCollection, grouped layout; indexes built outside the timing",
            ),
        ],
    )


def workload_2(args: argparse.Namespace) -> Workload:
    s = args.sizes[2]
    q, n = s["Q"], s["N"]
    gen = torch.Generator().manual_seed(args.seed)
    preds = torch.randn(q, n, generator=gen)
    item = torch.randint(n, (q,), generator=gen)
    ks, mets = KS, NEXT_ITEM_METRICS
    tq = min(max(1, args.tm_queries // 4), q)  # N is 5x workload 1's
    small = (preds[:tq].contiguous(), item[:tq].contiguous())

    def dense(p: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(p).scatter_(1, i.unsqueeze(1), 1.0)

    turn = Turns(preds, gen)

    def ours_fn(validate: bool = True) -> Fn:
        return lambda: rank_metrics(turn(), item, mets, ks, validate_args=validate)

    def ours_small() -> Fn:
        return lambda: rank_metrics(*small, mets, ks)

    def ours_ignite() -> Fn:
        from ranking_plugins.ignite import RankingMetrics

        cycle = ignite_cycle(RankingMetrics(mets, top_k=list(ks)))
        return lambda: cycle((turn(), item))

    def ours_tm() -> Fn:
        from ranking_plugins.torchmetrics import RankingMetrics

        metric = RankingMetrics(mets, top_k=list(ks))
        return lambda: tm_cycle(metric, [(turn(), item, {})])

    def ignite_pair() -> Fn:
        from ignite.metrics.rec_sys import NDCG, HitRate

        cycle = ignite_cycle(HitRate(top_k=list(ks)), NDCG(top_k=list(ks)))
        return lambda: cycle((preds, dense(preds, item)))

    def retrieval() -> Fn:
        metric = retrieval_collection([(m, k) for m in mets for k in ks])
        p, i = small
        indexes = flat(p, p)[2]
        return lambda: tm_cycle(metric, [(p.flatten(), dense(p, i).flatten(), indexes)])

    return Workload(
        2,
        "item-index targets, HR/MRR/NDCG x 6 ks",
        f"Q={q}, N={n}, one target id per row",
        preds.nelement() * preds.element_size(),
        [
            Entry("torch.topk(preds, 100)", "floor", lambda: lambda: torch.topk(turn(), 100)),
            Entry("rank_metrics", "ours", ours_fn, memory=True),
            Entry("rank_metrics" + UNCHECKED, "ours", lambda: ours_fn(False)),
            Entry("ranking_plugins.ignite.RankingMetrics", "ours", ours_ignite, memory=True),
            Entry("ranking_plugins.torchmetrics.RankingMetrics", "ours", ours_tm, memory=True),
            Entry(
                "ignite rec_sys HitRate + NDCG",
                "peer",
                ignite_pair,
                memory=True,
                repeats=3,
                note="dense (Q, N) target built inside the timing",
            ),
            Entry(
                "hand-written topk + compare ids",
                "peer",
                lambda: lambda: handwritten_ids(preds, item, ks),
                memory=True,
            ),
            Entry(
                "torch.topk(preds, 100)",
                "floor",
                lambda: lambda: torch.topk(small[0], 100),
                size=f"Q={tq}",
            ),
            Entry("rank_metrics", "ours", ours_small, size=f"Q={tq}"),
            Entry(
                "torchmetrics.retrieval (18 objects)",
                "peer",
                retrieval,
                size=f"Q={tq}",
                repeats=3,
                note="dense target built inside the timing",
            ),
        ],
        note="Peers that need a dense (Q, N) target build it inside their timed call: "
        "a user of them has to.",
    )


def workload_3(args: argparse.Namespace) -> Workload:
    s = args.sizes[3]
    nq, nc, nu = s["queries"], s["candidates"], s["updates"]
    gen = torch.Generator().manual_seed(args.seed)
    preds = torch.randn(nq, nc, generator=gen)
    target = (torch.rand(nq, nc, generator=gen) < 0.05).long()
    indexes = torch.arange(nq).unsqueeze(1).expand(nq, nc)
    per = nq // nu
    batches = [
        (
            preds[i : i + per].flatten(),
            target[i : i + per].flatten(),
            {"indexes": indexes[i : i + per].flatten()},
        )
        for i in range(0, nq, per)
    ]
    # a shuffled validation loader: each update holds random (query, item) pairs, so
    # every query is split across updates (grouped at compute)
    order = torch.randperm(nq * nc, generator=gen)
    flat_preds, flat_target = preds.flatten()[order], target.flatten()[order]
    flat_indexes = indexes.flatten()[order]
    size = nq * nc // nu
    shuffled = [
        (
            flat_preds[i : i + size],
            flat_target[i : i + size],
            {"indexes": flat_indexes[i : i + size]},
        )
        for i in range(0, nq * nc, size)
    ]
    mets = ("mrr", "ndcg", "map")

    def ours_one(whole_queries: bool = False, loader: list[tuple] = batches) -> Fn:
        from ranking_plugins.torchmetrics import RankingMetrics

        metric = RankingMetrics(mets, whole_queries=whole_queries)
        return lambda: tm_cycle(metric, loader)

    def ours_collection(whole_queries: bool = False) -> Fn:
        from torchmetrics import MetricCollection

        from ranking_plugins.torchmetrics import MAP, MRR, NDCG

        metric = MetricCollection(
            {
                "mrr": MRR(whole_queries=whole_queries),
                "ndcg": NDCG(whole_queries=whole_queries),
                "map": MAP(whole_queries=whole_queries),
            }
        )
        return lambda: tm_cycle(metric, batches)

    def retrieval() -> Fn:
        metric = retrieval_collection([(m, None) for m in mets])
        return lambda: tm_cycle(metric, batches)

    return Workload(
        3,
        "grouped layout, MRR + NDCG + MAP, whole list",
        f"{nq} queries x {nc} candidates over {nu} updates, ~5% relevant",
        preds.nelement() * preds.element_size(),
        [
            Entry(
                "torch.sort of every query's candidates",
                "floor",
                lambda: lambda: torch.sort(preds, dim=1, descending=True),
            ),
            Entry("ranking_plugins.torchmetrics.RankingMetrics", "ours", ours_one, memory=True),
            Entry(
                "MetricCollection(ranking_plugins MRR, NDCG, MAP)",
                "ours",
                ours_collection,
                memory=True,
            ),
            Entry(
                "ranking_plugins.torchmetrics.RankingMetrics" + SHUFFLED,
                "ours",
                lambda: ours_one(loader=shuffled),
                memory=True,
            ),
            Entry(
                "ranking_plugins.torchmetrics.RankingMetrics" + WHOLE,
                "ours",
                lambda: ours_one(True),
                memory=True,
            ),
            Entry(
                "MetricCollection(ranking_plugins MRR, NDCG, MAP)" + WHOLE,
                "ours",
                lambda: ours_collection(True),
                memory=True,
            ),
            Entry(
                "torchmetrics.retrieval MRR + NDCG + MAP",
                "peer",
                retrieval,
                repeats=3,
                note="MetricCollection",
            ),
        ],
        note="Each timed run is reset, every update, compute. The floor sorts the "
        "same scores as a dense (queries, candidates) matrix.",
    )


def workload_4(args: argparse.Namespace) -> Workload:
    s = args.sizes[4]
    q, n = s["Q"], s["N"]
    gen = torch.Generator().manual_seed(args.seed)
    preds = torch.randn(q, n, generator=gen)
    graded = torch.rand(q, n, generator=gen).topk(s["graded"], dim=1).indices
    levels = torch.randint(1, 5, graded.shape, generator=gen)
    grades = torch.zeros(q, n, dtype=torch.long).scatter_(1, graded, levels)
    float_grades = grades.float()
    tq = min(args.tm_queries, q)
    small = (preds[:tq].contiguous(), grades[:tq].contiguous())
    turn = Turns(preds, gen)
    entries = [Entry("torch.topk(preds, 10)", "floor", lambda: lambda: torch.topk(turn(), 10))]
    for gain, ignite_gain in (("exponential", "exp_rank"), ("linear", "linear_rank")):

        def ours(gain: str = gain, validate: bool = True) -> Fn:
            return lambda: rank_metrics(
                turn(), grades, "ndcg", 10, gain=gain, validate_args=validate
            )

        def ours_unchecked(gain: str = gain) -> Fn:
            return ours(gain, False)

        def ignite_ndcg(ignite_gain: str = ignite_gain) -> Fn:
            from ignite.metrics.rec_sys import NDCG

            cycle = ignite_cycle(NDCG(top_k=[10], gain_function=ignite_gain))
            return lambda: cycle((preds, grades))

        def hand(gain: str = gain) -> Fn:
            return lambda: handwritten_graded(preds, grades, 10, gain)

        def ours_float(gain: str = gain) -> Fn:
            return lambda: rank_metrics(turn(), float_grades, "ndcg", 10, gain=gain)

        def hand_float(gain: str = gain) -> Fn:
            return lambda: handwritten_graded(preds, float_grades, 10, gain)

        entries += [
            Entry(f"rank_metrics, {gain} gain", "ours", ours),
            Entry(f"rank_metrics, {gain} gain" + UNCHECKED, "ours", ours_unchecked),
            Entry(f"ignite rec_sys NDCG, {ignite_gain}", "peer", ignite_ndcg),
            Entry(f"hand-written topk + gather, {gain}", "peer", hand),
            Entry(f"rank_metrics, {gain} gain" + FLOAT_GRADES, "ours", ours_float),
            Entry(f"hand-written topk + gather, {gain}" + FLOAT_GRADES, "peer", hand_float),
        ]

    def ours_small() -> Fn:
        return lambda: rank_metrics(*small, "ndcg", 10, gain="linear")

    def retrieval() -> Fn:
        metric = retrieval_collection([("ndcg", 10)])
        batch = flat(*small)
        return lambda: tm_cycle(metric, [batch])

    entries += [
        Entry(
            "torch.topk(preds, 10)",
            "floor",
            lambda: lambda: torch.topk(small[0], 10),
            size=f"Q={tq}",
        ),
        Entry("rank_metrics, linear gain", "ours", ours_small, size=f"Q={tq}"),
        Entry(
            "torchmetrics.retrieval NDCG (linear)",
            "peer",
            retrieval,
            size=f"Q={tq}",
            repeats=3,
            note="linear gain only",
        ),
    ]
    return Workload(
        4,
        "graded relevance 0..4, NDCG@10",
        f"Q={q}, N={n}, {s['graded']} graded items/row (grades 1..4), the rest 0",
        preds.nelement() * preds.element_size(),
        entries,
        note="Ratios to peers pair rows of the same gain.",
    )


def workload_5(args: argparse.Namespace) -> Workload:
    s = args.sizes[5]
    q, n, d = s["Q"], s["N"], s["d"]
    gen = torch.Generator().manual_seed(args.seed)
    query = torch.randn(q, d, generator=gen)
    items = torch.randn(n, d, generator=gen)
    item = torch.randint(n, (q,), generator=gen)
    chunk = args.chunk_size
    ks, mets = KS, NEXT_ITEM_METRICS

    def ours() -> Fn:
        return lambda: rank_metrics(
            EmbeddingScores(query, items, chunk_size=chunk),
            item,
            mets,
            ks,
            validate_args=False,
        )

    return Workload(
        5,
        "embeddings, HR/MRR/NDCG x 6 ks, no score matrix",
        f"Q={q}, N={n}, d={d}, chunk_size={chunk}, one target id per row",
        q * n * 4,  # the score matrix that is never built
        [
            Entry(
                "chunked q @ chunk.T + topk(100) merged",
                "floor",
                lambda: lambda: chunked_topk(query, items, 100, chunk),
                memory=True,
                repeats=3,
            ),
            Entry(
                "rank_metrics(EmbeddingScores)",
                "ours",
                ours,
                memory=True,
                quick_memory=True,
                repeats=3,
            ),
        ],
        note="'x preds' for memory here is a multiple of the full (Q, N) float32 score "
        f"matrix ({q * n * 4 / MB:.0f} MB), which neither row builds.",
    )


#: workload 6: the measures asked of both tools (trec_eval names for pytrec_eval)
FILE_METRICS = ("ndcg@10", "mrr", "map", "precision@10", "recall@100")
PYTREC_MEASURES = {"ndcg_cut.10", "recip_rank", "map", "P.10", "recall.100"}


#: workload 6's temporary directories, removed when the process ends
_TEMP_DIRS: list[tempfile.TemporaryDirectory[str]] = []


def write_trec_files(directory: Path, s: dict[str, int], seed: int) -> tuple[Path, Path]:
    """A TREC run (``docs`` lines per query, 6 decimals, docs drawn from a corpus so
    that they repeat across queries, as in MS MARCO runs) and its qrels (``judged``
    per query, half of them retrieved, grades 0..2)."""
    import random

    rng = random.Random(seed)
    run_lines: list[str] = []
    qrels_lines: list[str] = []
    for q in range(s["queries"]):
        docs = rng.sample(range(s["corpus"]), s["docs"])
        scores = sorted((rng.uniform(0.0, 30.0) for _ in docs), reverse=True)
        run_lines.extend(
            f"{q + 1} Q0 D{d:07d} {rank} {score:.6f} bench\n"
            for rank, (d, score) in enumerate(zip(docs, scores, strict=True), 1)
        )
        half = s["judged"] // 2
        judged = set(rng.sample(docs, half))
        while len(judged) < s["judged"]:
            judged.add(rng.randrange(s["corpus"]))
        qrels_lines.extend(f"{q + 1} 0 D{d:07d} {rng.randrange(3)}\n" for d in sorted(judged))
    qrels, run = directory / "bench.qrels", directory / "bench.run"
    qrels.write_text("".join(qrels_lines))
    run.write_text("".join(run_lines))
    return qrels, run


def evaluate_files(qrels: Path, run: Path, *extra: str) -> str:
    """``ranking-plugins evaluate`` in this process; returns what it prints."""
    import io

    from ranking_plugins.cli import main

    out = io.StringIO()
    metrics = [a for m in FILE_METRICS for a in ("-m", m)]
    stdout, sys.stdout = sys.stdout, out
    try:
        status = main(["evaluate", str(qrels), str(run), *metrics, "--format", "json", *extra])
    finally:
        sys.stdout = stdout
    assert status == 0
    return out.getvalue()


def pytrec_eval_files(qrels: Path, run: Path) -> dict[str, float]:
    import pytrec_eval

    with open(qrels) as f:
        judgments = pytrec_eval.parse_qrel(f)
    with open(run) as f:
        results = pytrec_eval.parse_run(f)
    per_query = pytrec_eval.RelevanceEvaluator(judgments, PYTREC_MEASURES).evaluate(results)
    names = next(iter(per_query.values()))
    return {m: statistics.fmean(v[m] for v in per_query.values()) for m in names}


def workload_6(args: argparse.Namespace) -> Workload:
    s = args.sizes[6]
    # the files live as long as this process (the closures below keep the directory)
    directory = tempfile.TemporaryDirectory(prefix="ranking-plugins-bench-")
    _TEMP_DIRS.append(directory)
    qrels, run = write_trec_files(Path(directory.name), s, args.seed)
    lines = s["queries"] * s["docs"]

    def floor() -> Fn:
        return lambda: (qrels.read_bytes().split(), run.read_bytes().split())

    def ours(*extra: str) -> Callable[[], Fn]:
        return lambda: lambda: evaluate_files(qrels, run, *extra)

    def peer() -> Fn:
        return lambda: pytrec_eval_files(qrels, run)

    return Workload(
        6,
        "files: ranking-plugins evaluate vs pytrec_eval, reading included",
        f"{s['queries']} queries x {s['docs']} documents = {lines:,} TREC run lines "
        f"({run.stat().st_size / MB:.0f} MB), {s['judged']} judgments per query; "
        "NDCG@10, MRR, MAP, P@10, recall@100",
        run.stat().st_size,
        [
            Entry("read + split both files", "floor", floor, repeats=3),
            Entry(
                "ranking-plugins evaluate",
                "ours",
                ours(),
                repeats=3,
                note="ties=average: no sort by document id",
            ),
            Entry(
                "ranking-plugins evaluate --ties first",
                "ours",
                ours("--ties", "first"),
                repeats=3,
                note="trec_eval's tie break",
            ),
            Entry("pytrec_eval parse + evaluate + mean", "peer", peer, repeats=3),
        ],
        note="Both rows of this package run the command in-process (`main([...])`, "
        "JSON output); the floor is `bytes.split()` of both files. The command "
        "reads with pyarrow (the cli extra), so its time is mostly the join and "
        "the kernel's ranking of whole lists; pytrec_eval's is a Python split and "
        "`float()` per line. No peak memory is measured here (a fresh process's "
        "second run reuses the first's freed memory): `benchmarks/bench_files.py` "
        "measures each tool as a whole process, peak RSS included.",
    )


WORKLOADS = {
    1: workload_1,
    2: workload_2,
    3: workload_3,
    4: workload_4,
    5: workload_5,
    6: workload_6,
}


# --------------------------------------------------------------------------- measuring


def paired_ms(
    entry: Entry,
    fn: Fn,
    floor: Entry,
    floor_fn: Fn,
    repeats: int,
    warmup: int,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float, list[float]]:
    """Median ms of ``fn`` and of the floor, timed alternately, after a warm-up.

    ``clock``: wall time, or the calling thread's CPU time (``--cpu-time``).
    """

    def timed(e: Entry, f: Fn) -> float:
        if e.kind == "ours":
            last_batch.clear()  # see run_once: never time a cache hit
        start = clock()
        f()
        return clock() - start

    for _ in range(warmup):
        run_once(entry, fn)
        run_once(floor, floor_fn)
    times, floor_times = [], []
    for _ in range(repeats):
        floor_times.append(timed(floor, floor_fn))
        times.append(timed(entry, fn))
    return (
        1000.0 * statistics.median(times),
        1000.0 * statistics.median(floor_times),
        [1000.0 * t for t in times],
    )


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        match = re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.MULTILINE)
    assert match is not None
    return int(match.group(1)) * 1024


def peak_child(args: argparse.Namespace) -> int:
    """In the subprocess: peak extra bytes of one run of one entry."""
    number, name = args._peak.split(":", 1)
    workload = WORKLOADS[int(number)](args)
    entry = next(e for e in workload.entries if f"{e.name}|{e.size}" == name)
    fn = entry.make()
    run_once(entry, fn)  # warm-up: imports, thread pools, lazy initialisation
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    before = _status("VmRSS")
    result = run_once(entry, fn)
    peak = _status("VmHWM") - before
    del result
    print(json.dumps({"peak_bytes": peak}))
    return 0


def measure_peak(args: argparse.Namespace, number: int, entry: Entry) -> int | None:
    command = [sys.executable, __file__, "--_peak", f"{number}:{entry.name}|{entry.size}"]
    command += ["--seed", str(args.seed), "--chunk-size", str(args.chunk_size)]
    command += ["--tm-queries", str(args.tm_queries)]
    if args.quick:
        command.append("--quick")
    if args.threads is not None:
        command += ["--threads", str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"  peak memory of {entry.name!r} failed:\n{done.stderr}", file=sys.stderr)
        return None
    return int(json.loads(done.stdout.strip().splitlines()[-1])["peak_bytes"])


def run_workload(args: argparse.Namespace, number: int) -> tuple[Workload, list[Row]]:
    workload = WORKLOADS[number](args)
    floors = {e.size: (e, e.make()) for e in workload.entries if e.kind == "floor"}
    rows = []
    for entry in workload.entries:
        started = time.perf_counter()
        fn = entry.make()
        repeats = min(args.repeats, entry.repeats or args.repeats)
        # rows at a reduced size are timed against the floor at that size
        floor, floor_fn = floors.get(entry.size, floors[""])
        clock = time.thread_time if args.cpu_time else time.perf_counter
        if entry is floor:
            ms, _, per_run = paired_ms(entry, fn, floor, lambda: None, repeats, args.warmup, clock)
            floor_ms = ms
        else:
            ms, floor_ms, per_run = paired_ms(
                entry, fn, floor, floor_fn, repeats, args.warmup, clock
            )
        row = Row(number, entry, ms, floor_ms, per_run=per_run)
        wanted = entry.quick_memory if args.quick else entry.memory
        if wanted and not args.no_memory:
            row.peak_bytes = measure_peak(args, number, entry)
        rows.append(row)
        took = time.perf_counter() - started
        print(f"  {entry.name} {entry.size}: {took:.1f} s", file=sys.stderr, flush=True)
        del fn
        gc.collect()
    pair_with_unchecked(args, rows)
    return workload, rows


def pair_with_unchecked(args: argparse.Namespace, rows: list[Row]) -> None:
    """Time each defaults row and its ``validate_args=False`` twin alternately.

    Each row's 'x floor' comes from runs beside the floor, and the floor's own
    median moves between rows (load, the allocator's state), so two rows' ratios
    can differ by several percent while their milliseconds agree. The judgement
    "defaults within 5% of validate_args=False" takes the two in one loop
    instead (:func:`paired_ms`, the twin in the floor's place, twice the rows'
    runs), both over the workload's fresh score tensors in turn; the table keeps
    each row's ratio to the floor.
    """
    clock = time.thread_time if args.cpu_time else time.perf_counter
    for row in rows:
        entry = row.entry
        if entry.kind != "ours" or UNCHECKED in entry.name:
            continue
        twin = find(rows, entry.name + UNCHECKED, entry.size)
        if twin is None:
            continue
        started = time.perf_counter()
        fn, twin_fn = entry.make(), twin.entry.make()
        # twice the rows' runs: a 5% judgement needs steadier medians than a ratio does
        repeats = 2 * min(args.repeats, entry.repeats or args.repeats)
        ms, twin_ms, _ = paired_ms(entry, fn, twin.entry, twin_fn, repeats, args.warmup, clock)
        row.versus_unchecked = (ms, twin_ms)
        took = time.perf_counter() - started
        print(f"  {entry.name} vs{UNCHECKED}: {took:.1f} s", file=sys.stderr, flush=True)
        del fn, twin_fn
        gc.collect()


# --------------------------------------------------------------------------- report


def machine() -> dict[str, str]:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            found = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.MULTILINE)
        if found:
            cpu = found.group(1).strip()
    except OSError:
        pass
    load = os.getloadavg()
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "torch": torch.__version__,
        "threads": str(torch.get_num_threads()),
        "python": platform.python_version(),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "load": ", ".join(f"{x:.2f}" for x in load),
        "busy": str(load[0] > 1.0),
    }


def fmt_ms(ms: float) -> str:
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.2f}" if ms < 10 else f"{ms:.1f}"


def speedups(workload: Workload, rows: list[Row]) -> list[tuple[Row, Row, float]]:
    """(ours, peer, peer's x floor / ours' x floor) for every pair at the same size.

    In workload 4 only rows of the same gain and grades' dtype are paired.
    """
    out = []
    for ours in (r for r in rows if r.entry.kind == "ours" and UNCHECKED not in r.entry.name):
        for peer in (r for r in rows if r.entry.kind == "peer"):
            if ours.entry.size != peer.entry.size:
                continue
            if workload.number == 4 and not _same_gain(ours.entry.name, peer.entry.name):
                continue
            # each ratio to the floor comes from runs interleaved with the floor, so
            # their quotient is steadier on a loaded machine than peer.ms / ours.ms
            out.append((ours, peer, peer.ratio / ours.ratio))
    return out


def _same_gain(a: str, b: str) -> bool:
    def gain(name: str) -> tuple[str, bool]:
        return ("exp" if "exp" in name else "linear"), FLOAT_GRADES in name

    return gain(a) == gain(b)


def workload_table(workload: Workload, rows: list[Row]) -> list[str]:
    lines = [
        f"### {workload.number}. {workload.title}",
        "",
        f"{workload.size}.",
        "",
        "| row | kind | size | ms | x floor | peak extra MB | x preds | note |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        e = row.entry
        peak = mult = ""
        if row.peak_bytes is not None:
            peak = f"{row.peak_bytes / MB:,.0f}"
            mult = f"{row.peak_bytes / workload.preds_bytes:.2f}"
        lines.append(
            f"| {e.name} | {e.kind} | {e.size or 'full'} | {fmt_ms(row.ms)} | "
            f"{row.ratio:.2f} | {peak} | {mult} | {e.note} |"
        )
    twins = [row for row in rows if row.versus_unchecked is not None]
    if twins:
        lines += [
            "",
            "Defaults against validate_args=False, the two timed alternately in one loop "
            "(medians of twice the rows' runs):",
            "",
            "| row | defaults ms | validate_args=False ms | defaults / False |",
            "| --- | ---: | ---: | ---: |",
        ]
        for row in twins:
            assert row.versus_unchecked is not None and row.unchecked_ratio is not None
            defaults, unchecked = row.versus_unchecked
            lines.append(
                f"| {row.entry.name} | {fmt_ms(defaults)} | {fmt_ms(unchecked)} | "
                f"{row.unchecked_ratio:.3f} |"
            )
    pairs = speedups(workload, rows)
    if pairs:
        lines += ["", "| ours | peer | size | peer / ours |", "| --- | --- | --- | ---: |"]
        for ours, peer, factor in pairs:
            lines.append(
                f"| {ours.entry.name} | {peer.entry.name} | {ours.entry.size or 'full'} | "
                f"{factor:,.1f}x |"
            )
    if workload.note:
        lines += ["", workload.note]
    return [*lines, ""]


@dataclass
class Target:
    text: str
    value: float
    limit: float
    at_most: bool  # value <= limit passes; else value >= limit passes

    @property
    def ok(self) -> bool:
        return self.value <= self.limit if self.at_most else self.value >= self.limit

    def verdict(self) -> str:
        if self.ok:
            return "PASS"
        by = self.value / self.limit if self.at_most else self.limit / self.value
        return f"MISS by {by:.2f}x"


def find(rows: list[Row], name: str, size: str = "") -> Row | None:
    return next((r for r in rows if r.entry.name == name and r.entry.size == size), None)


def targets(results: dict[int, tuple[Workload, list[Row]]]) -> list[Target]:
    out: list[Target] = []
    ours_names = (
        "rank_metrics",
        "ranking_plugins.ignite.RankingMetrics",
        "ranking_plugins.torchmetrics.RankingMetrics",
    )
    for number, limit in ((1, 1.5), (2, 1.0)):
        if number not in results:
            continue
        workload, rows = results[number]
        # issue 17: W1 <= 1.5x torch.topk, its bool target <= 1.3x; W2 <= 1.0x;
        # issue 27: W1's rank_metrics <= 1.4x (at 1 and at 2 threads)
        limits = {name: limit for name in ours_names} | {"rank_metrics, bool target": 1.3}
        if number == 1:
            limits["rank_metrics"] = 1.4
        for name, row_limit in limits.items():
            row = find(rows, name)
            if row:
                out.append(Target(f"W{number} {name} / floor", row.ratio, row_limit, True))
        for name in ours_names:
            row = find(rows, name)
            if row and row.peak_bytes is not None:
                mult = row.peak_bytes / workload.preds_bytes
                out.append(Target(f"W{number} {name} peak extra / preds", mult, 1.0, True))
    for number in (1, 2, 4):
        # the defaults (validate_args=True) within 5% of validate_args=False, the two
        # timed alternately in one loop (pair_with_unchecked)
        for row in results.get(number, (None, []))[1]:
            if row.unchecked_ratio is not None:
                out.append(
                    Target(
                        f"W{number} {row.entry.name}: defaults / validate_args=False",
                        row.unchecked_ratio,
                        1.05,
                        True,
                    )
                )
    if 1 in results:
        workload, rows = results[1]
        ignite_pair = find(rows, "ignite rec_sys HitRate + NDCG")
        for name in (
            "ranking_plugins.ignite.RankingMetrics",
            "rank_metrics",
            "rank_metrics, bool target",
        ):
            row = find(rows, name)
            if row and ignite_pair:
                factor = ignite_pair.ratio / row.ratio
                out.append(Target(f"W1 Ignite pair / {name}", factor, 20.0, False))
        for ours, peer, factor in speedups(workload, rows):
            if peer.entry.name.startswith("torchmetrics.retrieval"):
                out.append(
                    Target(
                        f"W1 torchmetrics.retrieval / {ours.entry.name} ({ours.entry.size})",
                        factor,
                        1000.0,
                        False,
                    )
                )
    if 3 in results:
        workload, rows = results[3]
        for suffix in ("", WHOLE):
            # a MetricCollection of three metrics costs what one RankingMetrics costs
            one = find(rows, "ranking_plugins.torchmetrics.RankingMetrics" + suffix)
            many = find(rows, "MetricCollection(ranking_plugins MRR, NDCG, MAP)" + suffix)
            if one and many:
                text = f"W3 MetricCollection / RankingMetrics{suffix}"
                out.append(Target(text, many.ratio / one.ratio, 1.05, True))
        for ours, _peer, factor in speedups(workload, rows):
            out.append(
                Target(f"W3 torchmetrics.retrieval / {ours.entry.name}", factor, 1000.0, False)
            )
        # issue 27: the default <= 3x the sort of every query; whole_queries=True (constant
        # memory) no slower than the default (5% for the noise of two rows' ratios)
        default = find(rows, "ranking_plugins.torchmetrics.RankingMetrics")
        whole = find(rows, "ranking_plugins.torchmetrics.RankingMetrics" + WHOLE)
        if default:
            out.append(Target("W3 RankingMetrics / floor", default.ratio, 3.0, True))
        shuffled = find(rows, "ranking_plugins.torchmetrics.RankingMetrics" + SHUFFLED)
        if shuffled:
            # queries split across updates are grouped at compute: one stable sort of ids
            text = f"W3 RankingMetrics{SHUFFLED} / floor"
            out.append(Target(text, shuffled.ratio, 6.0, True))
        if default and whole:
            text = f"W3 RankingMetrics{WHOLE} / RankingMetrics"
            out.append(Target(text, whole.ratio / default.ratio, 1.05, True))
    if 4 in results:
        workload, rows = results[4]
        for gain, grades in itertools.product(("exponential", "linear"), ("", FLOAT_GRADES)):
            # issue 27: NDCG@10 <= 1.8x topk(10), and faster than the hand-written code;
            # issue 36: with float grades too
            row = find(rows, f"rank_metrics, {gain} gain{grades}")
            hand = find(rows, f"hand-written topk + gather, {gain}{grades}")
            if row:
                text = f"W4 rank_metrics, {gain} gain{grades} / floor"
                out.append(Target(text, row.ratio, 1.8, True))
            if row and hand:
                text = f"W4 hand-written topk + gather, {gain}{grades} / rank_metrics{grades}"
                out.append(Target(text, hand.ratio / row.ratio, 1.0, False))
    if 5 in results:
        workload, rows = results[5]
        row = find(rows, "rank_metrics(EmbeddingScores)")
        if row:
            out.append(
                # issue 27 (was 1.3x)
                Target("W5 rank_metrics(EmbeddingScores) / chunked floor", row.ratio, 1.2, True)
            )
            if row.peak_bytes is not None:
                out.append(
                    Target(
                        "W5 rank_metrics(EmbeddingScores) peak extra GB",
                        row.peak_bytes / 1024**3,
                        1.0,
                        True,
                    )
                )
            floor = find(rows, workload.entries[0].name)
            if floor and floor.peak_bytes and row.peak_bytes is not None:
                out.append(
                    Target(
                        "W5 peak extra / chunked floor's peak extra",
                        row.peak_bytes / floor.peak_bytes,
                        1.3,
                        True,
                    )
                )
    if 6 in results:
        workload, rows = results[6]
        for ours, _peer, factor in speedups(workload, rows):
            out.append(Target(f"W6 pytrec_eval / {ours.entry.name}", factor, 1.0, False))
    return out


def target_table(found: list[Target]) -> list[str]:
    lines = ["| target | measured | limit | verdict |", "| --- | ---: | ---: | --- |"]
    for t in found:
        limit = f"{'<=' if t.at_most else '>='} {t.limit:g}"
        lines.append(f"| {t.text} | {t.value:,.2f} | {limit} | {t.verdict()} |")
    return lines


def report(
    args: argparse.Namespace, results: dict[int, tuple[Workload, list[Row]]]
) -> tuple[list[str], list[Target]]:
    m = machine()
    lines = [
        f"Machine: {m['cpu']}, {m['cores']} cores, torch {m['torch']} (CPU), "
        f"{m['threads']} threads, Python {m['python']}, {m['date']}, "
        f"load average {m['load']}.",
        "",
        f"Medians of {args.repeats} runs (3 for rows marked slow) after {args.warmup} "
        + (
            "warm-up, CPU time of the calling thread (--cpu-time), each timed"
            if args.cpu_time
            else "warm-up, each timed"
        )
        + " alternately with its workload's floor; 'x floor' is the "
        "ratio of the two medians, and 'peer / ours' is the quotient of the two rows' "
        "'x floor' (steadier than a quotient of their ms when the load changes between "
        "rows). 'defaults / False' (and the targets' 'defaults / validate_args=False') "
        "is the quotient of a defaults row and its validate_args=False twin timed "
        "alternately with each other in a loop of their own (twice as many runs). "
        "Peak extra memory: one run in a fresh subprocess, "
        "VmHWM minus VmRSS just before the call. Every run of this package clears the "
        "kernel's last-batch cache first (no cache hits are timed).",
        "",
    ]
    if m["busy"] == "True":
        lines += [
            "**The machine was shared with other jobs (load average above 1): the "
            "times are noisy.**",
            "",
        ]
    if args.quick:
        lines += ["`--quick`: tiny sizes; a smoke run, the ratios mean little.", ""]
    for workload, rows in results.values():
        lines += workload_table(workload, rows)
    found = targets(results)
    if found:
        lines += ["### Targets", "", *target_table(found), ""]
    context = ceilings(results)
    if context:
        lines += [
            "The most any exact method can gain over a peer is the peer's time over the "
            "floor's (the floor only sorts or ranks the scores):",
            "",
            *context,
            "",
        ]
    return lines, found


def ceilings(results: dict[int, tuple[Workload, list[Row]]]) -> list[str]:
    out = []
    for number, (_workload, rows) in results.items():
        floors = {r.entry.size: r for r in rows if r.entry.kind == "floor"}
        for row in rows:
            if row.entry.kind != "peer" or row.entry.name.startswith("hand-written"):
                continue
            floor = floors.get(row.entry.size, floors.get(""))
            if floor is not None and number in (1, 3):
                out.append(
                    f"- W{number} {row.entry.name} ({row.entry.size or 'full'}): "
                    f"{row.ratio:,.0f}x its floor ({floor.entry.name})"
                )
    return out


def write_results(
    args: argparse.Namespace, results: dict[int, tuple[Workload, list[Row]]], lines: list[str]
) -> None:
    """Write RESULTS.md: all of it after a run of every workload; otherwise replace only
    the sections (and target rows) of the workloads that ran and keep the rest."""
    if set(results) == set(WORKLOADS) or not RESULTS.exists():
        old = RESULTS.read_text() if RESULTS.exists() else ""
        RESULTS.write_text(new_full_run(old, lines, machine()["date"]))
        return
    RESULTS.write_text(merge_results(RESULTS.read_text(), args, results))


OPS_SECTION = "### ATen operations per call (benchmarks/ops_per_call.py)"
OPS_NOTE = (
    "Counted with a TorchDispatchMode on the CPU, one call on fresh tensors after a warm-up, "
    "default arguments; on an accelerator each is at least one launch. The targets are "
    "for the accelerator paths (`host_reads.ACCELERATOR_PATHS_ON_CPU = True`)."
)
LATEST = "## Latest full run"
HISTORY = "## History"
HISTORY_NOTE = (
    "Older measurements, each as it was written: a later one may overturn "
    "an earlier one's figures (the issue sections say which commit and load they had)."
)


def split_history(text: str) -> tuple[str, str]:
    """RESULTS.md as (its latest full run, with the title; its History section, or "")."""
    at = text.find("\n" + HISTORY + "\n")
    return (text, "") if at < 0 else (text[: at + 1], text[at + 1 :])


def new_full_run(old: str, lines: list[str], date: str) -> str:
    """RESULTS.md opening with a full run's ``lines``; the run it replaces (its
    workload sections as ``####`` headings) goes first into the History below."""
    latest, history = split_history(old)
    # the text after the latest run's heading (after the title, in a file without one)
    body = latest.split("\n" + LATEST, 1)[1] if ("\n" + LATEST) in latest else latest
    folded: list[str] = []
    if body.strip():
        run_date = re.search(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", body)
        folded = [f"### The full run of {run_date.group(0) if run_date else 'before'}", ""]
        for line in body.split("\n", 1)[1].strip("\n").splitlines():
            folded.append("#" + line if line.startswith("### ") else line)
        folded.append("")
    kept = history.split("\n", 1)[1].lstrip("\n") if history else ""
    if kept.startswith(HISTORY_NOTE):
        kept = kept[len(HISTORY_NOTE) :].lstrip("\n")
    out = ["# Benchmark results", "", f"{LATEST} ({date})", "", *lines]
    if folded or kept:
        out += ["", HISTORY, "", HISTORY_NOTE, "", *folded, kept.rstrip("\n")]
    return "\n".join(out).rstrip("\n") + "\n"


_SECTION = re.compile(r"^### (\d+)\. ")


def merge_results(
    old: str, args: argparse.Namespace, results: dict[int, tuple[Workload, list[Row]]]
) -> str:
    """``old`` RESULTS.md with the sections of the workloads in ``results`` replaced
    (in its latest full run; its History is kept as it is)."""
    old, history = split_history(old)
    preamble: list[str] = []
    sections: list[list[str]] = []
    for line in old.splitlines():
        if line.startswith("### "):
            sections.append([line])
        elif sections:
            sections[-1].append(line)
        else:
            preamble.append(line)
    numbered: dict[int, list[str]] = {}
    others: list[list[str]] = []
    for section in sections:
        found = _SECTION.match(section[0])
        if found:
            numbered[int(found.group(1))] = section
        else:
            others.append(section)
    m = machine()
    measured = (
        f"Measured on its own: {m['cpu']}, {m['cores']} cores, torch {m['torch']}, "
        f"{m['threads']} threads, {m['date']}, load average {m['load']}."
    )
    for number, (workload, rows) in results.items():
        table = workload_table(workload, rows)
        numbered[number] = [*table[:4], measured, "", *table[4:]]
    ran = tuple(f"W{n} " for n in results)
    new_targets = target_table(targets(results))[2:]
    new_ceilings = ceilings(results)
    if new_targets and not any(s[0] == "### Targets" for s in others):
        others.insert(0, ["### Targets", "", *target_table([])[:2], ""])
    for section in others:
        if section[0] != "### Targets":
            continue
        kept = [
            line
            for line in section
            if not (line.startswith("| ") and line[2:].startswith(ran))
            and not (line.startswith("- ") and line[2:].startswith(ran))
        ]
        rows_end = max(i for i, line in enumerate(kept) if line.startswith("|")) + 1
        kept[rows_end:rows_end] = new_targets
        bullets = [i for i, line in enumerate(kept) if line.startswith("- W")]
        at = bullets[-1] + 1 if bullets else len(kept)
        kept[at:at] = new_ceilings
        section[:] = kept
    out = list(preamble)
    for number in sorted(numbered):
        out += numbered[number]
    for section in others:
        out += section
    return "\n".join(out).rstrip("\n") + "\n" + ("\n" + history if history else "")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args._peak:
        if args.threads is not None:
            torch.set_num_threads(args.threads)
        return peak_child(args)
    judged: list[tuple[int | None, Target]] = []
    # operations per call: the same at every thread count, counted once
    ops_lines, ops_missed = ops_per_call.table(args.quick)
    for threads in args.thread_counts:
        args.threads = threads
        if threads is not None:
            torch.set_num_threads(threads)
        results: dict[int, tuple[Workload, list[Row]]] = {}
        for number in args.workload:
            print(f"workload {number} ({threads or 'default'} threads) ...", file=sys.stderr)
            results[number] = run_workload(args, number)
        lines, found = report(args, results)
        lines += [OPS_SECTION, "", OPS_NOTE, "", *ops_lines, ""]
        if len(args.thread_counts) > 1:
            print(f"## {threads} threads\n")
        print("\n".join(lines))
        judged += [(threads, t) for t in found]
        if args.write_results:
            write_results(args, results, lines)
            print(f"wrote {RESULTS}", file=sys.stderr)
    if args.check:
        missed = [(threads, t) for threads, t in judged if not t.ok]
        for threads, t in missed:
            print(
                f"MISS ({threads or 'default'} threads): {t.text}: {t.value:,.2f} "
                f"(limit {'<=' if t.at_most else '>='} {t.limit:g})",
                file=sys.stderr,
            )
        for miss in ops_missed:
            print(f"MISS (operations per call): {miss}", file=sys.stderr)
        met = len(judged) - len(missed) + len(ops_lines) - 2 - len(ops_missed)
        total = len(judged) + len(ops_lines) - 2
        print(f"--check: {met} of {total} targets met", file=sys.stderr)
        return 1 if missed or ops_missed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
