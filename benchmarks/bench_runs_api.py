"""``ranking_plugins.evaluate_run`` on in-memory qrels and runs, against pytrec_eval and ranx.

Workload 6's collection (``suite.py``: 2,000 queries x 1,000 documents, 60
judgments per query, half of them retrieved, grades 0..2) built in memory as
pytrec_eval's dicts, and the same run as pandas and polars DataFrames
(ir_measures' columns), then, in this process, each timed (the median of
``--repeats``) from the same objects to the means of NDCG@10, MRR, MAP, P@10
and recall@100:

* ``evaluate_run(qrels, run)`` from the dicts, and from each DataFrame;
* ``pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)``, then the means;
* ranx's ``evaluate(Qrels(qrels), Run(run), metrics)`` (the objects built from the
  dicts included), and ``evaluate`` alone on objects built before; numba
  compiles on the first call, which is made (untimed) first.

The means are compared with pytrec_eval's (``ties="first"`` is its tie break;
the default, the expected value over a tie's orders, differs where scores tie).

    python benchmarks/bench_runs_api.py            # W6: 2,000 x 1,000
    python benchmarks/bench_runs_api.py --quick    # 200 x 100, seconds (CI)
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

METRICS = ["ndcg@10", "mrr", "map", "precision@10", "recall@100"]
PYTREC_EVAL = {"ndcg_cut.10": "ndcg@10", "recip_rank": "mrr", "map": "map", "P.10": "precision@10",
               "recall.100": "recall@100"}  # fmt: skip
PYTREC_KEYS = {"ndcg_cut_10": "ndcg@10", "recip_rank": "mrr", "map": "map", "P_10": "precision@10",
               "recall_100": "recall@100"}  # fmt: skip


def collection(queries: int, docs: int, judged: int, corpus: int, seed: int) -> tuple[dict, dict]:
    """Workload 6's qrels and run (``suite.write_trec_files``) as pytrec_eval's dicts."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        documents = rng.sample(range(corpus), docs)
        scores = sorted((round(rng.uniform(0.0, 30.0), 6) for _ in documents), reverse=True)
        run[str(q + 1)] = {f"D{d:07d}": s for d, s in zip(documents, scores, strict=True)}
        chosen = set(rng.sample(documents, judged // 2))
        while len(chosen) < judged:
            chosen.add(rng.randrange(corpus))
        qrels[str(q + 1)] = {f"D{d:07d}": rng.randrange(3) for d in sorted(chosen)}
    return qrels, run


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--judged", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="200 x 100, 20 judged, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.queries, args.docs, args.judged, args.repeats = 200, 100, 20, 1

    import pandas as pd

    from ranking_plugins import evaluate_run

    qrels, run = collection(args.queries, args.docs, args.judged, 1_000_000, args.seed)
    rows = [(q, d, s) for q, documents in run.items() for d, s in documents.items()]
    judgments = [(q, d, g) for q, documents in qrels.items() for d, g in documents.items()]
    run_pandas = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
    qrels_pandas = pd.DataFrame(judgments, columns=["query_id", "doc_id", "relevance"])
    entries: list[tuple[str, Callable[[], dict[str, float]]]] = [
        ("evaluate_run(dicts)", lambda: evaluate_run(qrels, run, METRICS).means),
        ("evaluate_run(dicts, ties='first')",
         lambda: evaluate_run(qrels, run, METRICS, ties="first").means),
        ("evaluate_run(pandas)", lambda: evaluate_run(qrels_pandas, run_pandas, METRICS).means),
    ]  # fmt: skip
    try:
        import polars as pl

        run_polars, qrels_polars = pl.from_pandas(run_pandas), pl.from_pandas(qrels_pandas)
        entries.append(
            ("evaluate_run(polars)", lambda: evaluate_run(qrels_polars, run_polars, METRICS).means)
        )
    except ImportError:
        pass
    try:
        import pytrec_eval

        def pytrec() -> dict[str, float]:
            per_query = pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC_EVAL)).evaluate(run)
            return {
                PYTREC_KEYS[m]: statistics.fmean(v[m] for v in per_query.values())
                for m in PYTREC_KEYS
            }

        entries.append(("pytrec_eval RelevanceEvaluator(...).evaluate(run)", pytrec))
    except ImportError:
        pass
    try:
        import ranx

        ranx.evaluate(ranx.Qrels({"q": {"d": 1}}), ranx.Run({"q": {"d": 1.0}}), METRICS)  # numba
        built = ranx.Qrels(qrels), ranx.Run(run)

        def ranx_evaluate() -> dict[str, float]:
            return {m: float(v) for m, v in ranx.evaluate(*built, METRICS).items()}

        entries.append(
            ("ranx Qrels(dict), Run(dict), evaluate",
             lambda: {m: float(v) for m, v in
                      ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), METRICS).items()})
        )  # fmt: skip
        entries.append(("ranx evaluate (Qrels, Run built before)", ranx_evaluate))
    except ImportError:
        pass

    size = f"{args.queries:,} queries x {args.docs:,} documents, {args.judged} judged per query"
    print(f"{size}; median of {args.repeats}; {', '.join(METRICS)}\n")
    print(f"| {'what':<52} | {'seconds':>8} | {'max |mean - pytrec_eval|':>24} |")
    print(f"| {'-' * 52} | {'-' * 8}:| {'-' * 24}:|")
    results = [(name, *timed(fn, args.repeats)) for name, fn in entries]
    reference = next((out for name, _, out in results if name.startswith("pytrec_eval")), None)
    for name, seconds, out in results:
        gap = "" if reference is None else f"{max(abs(out[m] - reference[m]) for m in METRICS):.2e}"
        print(f"| {name:<52} | {seconds:>8.3f} | {gap:>24} |")


if __name__ == "__main__":
    main()
