"""``ranking-plugins evaluate -m all_trec`` against pytrec_eval on workload 6's files.

The files are those of ``benchmarks/suite.py`` workload 6 (2,000 queries x
1,000 documents, 50 judgments per query, grades 0..2). Both sides read the
files and compute the trec_eval measures the package computes
(:data:`ranking_plugins.runs.names.TREC_EVAL_MEASURES` at trec_eval's
default cutoffs); pytrec_eval is asked for the same measure names, less the
three its trec_eval lacks (rbp, rbp_resid, unj). The
command runs in-process with ``--format trec_eval -q`` (trec_eval's tie
break). Each time is the median of ``--repeats`` runs, the two sides timed
in turn.

    python benchmarks/bench_all_trec.py            # full size
    python benchmarks/bench_all_trec.py --quick    # tiny files, a few seconds (CI)
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite import write_trec_files

from ranking_plugins.cli import main
from ranking_plugins.runs.names import TREC_EVAL_MEASURES

FULL = {"queries": 2000, "docs": 1000, "judged": 50, "corpus": 1_000_000}
QUICK = {"queries": 50, "docs": 100, "judged": 10, "corpus": 10_000}


def ours(qrels: Path, run: Path) -> str:
    out = io.StringIO()
    stdout, sys.stdout = sys.stdout, out
    try:
        status = main(
            ["evaluate", str(qrels), str(run), "-m", "all_trec", "--format", "trec_eval", "-q"]
        )
    finally:
        sys.stdout = stdout
    assert status == 0
    return out.getvalue()


def peer(qrels: Path, run: Path) -> dict[str, dict[str, float]]:
    import pytrec_eval

    with open(qrels) as f:
        judgments = pytrec_eval.parse_qrel(f)
    with open(run) as f:
        results = pytrec_eval.parse_run(f)
    # pytrec_eval's older trec_eval has no rbp, rbp_resid, unj: it is asked the others
    measures = set(TREC_EVAL_MEASURES) - {"rbp", "rbp_resid", "unj"}
    evaluator = pytrec_eval.RelevanceEvaluator(judgments, measures)
    return evaluator.evaluate(results)


def main_(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny files (CI smoke run)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    repeats = 1 if args.quick else args.repeats
    with tempfile.TemporaryDirectory(prefix="ranking-plugins-all-trec-") as directory:
        qrels, run = write_trec_files(Path(directory), sizes, seed=0)
        times: dict[str, list[float]] = {"ranking-plugins -m all_trec": [], "pytrec_eval": []}
        for _ in range(repeats):
            for name, fn in (("ranking-plugins -m all_trec", ours), ("pytrec_eval", peer)):
                start = time.perf_counter()
                fn(qrels, run)
                times[name].append(time.perf_counter() - start)
        lines = sizes["queries"] * sizes["docs"]
        print(f"{sizes['queries']} queries x {sizes['docs']} documents = {lines:,} run lines")
        base = statistics.median(times["pytrec_eval"])
        for name, values in times.items():
            median = statistics.median(values)
            print(f"{name:<30} {median:8.2f} s   {median / base:5.2f}x pytrec_eval")


if __name__ == "__main__":
    main_()
