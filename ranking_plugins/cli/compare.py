"""``ranking-plugins compare``: paired significance tests between run files.

::

    ranking-plugins compare QRELS RUN_A RUN_B [RUN ...] [-m ndcg@10 ...] [--test t]
        [--baseline RUN_A] [--correction holm] [--alpha 0.05] [--format table|json|csv|latex]

Each run is evaluated as ``ranking-plugins evaluate --per-query`` does
(:func:`ranking_plugins.runs.evaluation.evaluate_file`), then
:func:`ranking_plugins.compare.compare` tests every comparison, query by
query. The queries are matched by id; a query one run has and another lacks
is an error naming it. As in :mod:`ranking_plugins.cli`, torch is imported
once the arguments are parsed.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ranking_plugins.choices import CORRECTIONS, TESTS
from ranking_plugins.cli.flags import (
    PROG,
    add_evaluation_arguments,
    evaluation_settings,
    note_left_out_queries,
    parse_metric_flags,
    write_output,
)
from ranking_plugins.runs.notes import listing

if TYPE_CHECKING:
    from torch import Tensor

    from ranking_plugins.compare import ComparisonReport

#: what ``compare`` tests when no ``-m`` is given
DEFAULT_COMPARE_METRICS = ("ndcg@10",)

_DESCRIPTION = """\
Compare two or more runs on the same qrels with a paired significance test,
query by query: the mean of every run, each difference from the baseline (or
between every pair), its confidence interval, Cohen's d of the differences,
and the p-value before and after a correction for multiple comparisons
(* marks an adjusted p below --alpha).

Tests: t (Student's paired t-test, the default, as ranx.compare), wilcoxon
(signed-rank), randomization (Fisher's, with --permutations sign flips, all
2^n of them when that is not more), bootstrap (paired, --resamples). The t
test gives a t interval, the others a bootstrap percentile interval.

Every run is evaluated as `evaluate` does (same options and defaults).
"""

_EPILOG = """\
exit status: 0 success, 1 a problem in an input file (FILE:LINE: what was
wrong) or runs that do not cover the same queries, 2 a usage error.

example:
  ranking-plugins compare qrels.txt bm25.run dense.run -m ndcg@10 -m mrr --test randomization
"""


def add_compare_parser(commands: Any) -> argparse.ArgumentParser:
    """Register the ``compare`` subcommand on ``build_parser``'s subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "compare",
        help="paired significance tests between two or more runs",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(command_parser=parser)
    add = parser.add_argument
    add("qrels", metavar="QRELS", help="relevance judgments: TREC, TSV or JSONL (.gz too)")
    add("runs", metavar="RUN", nargs="+", help="two or more runs: TREC, TSV or JSONL (.gz too)")
    add(
        "-m",
        "--metric",
        action="append",
        default=None,
        metavar="NAME[@K[,K...]]",
        help="a metric to compare, as for `evaluate`; repeat for more (default: "
        f"{' '.join(DEFAULT_COMPARE_METRICS)})",
    )
    add("--test", choices=TESTS, default="t", help="the paired test (default: t)")
    add("--alpha", type=float, default=0.05, help="significance level (default: 0.05)")
    add(
        "--baseline",
        metavar="RUN",
        default=None,
        help="compare every other run with this one (a RUN as given, or its file name); "
        "default: every pair",
    )
    add(
        "--correction",
        choices=CORRECTIONS,
        default="holm",
        help="correction for multiple comparisons, per metric (default: holm)",
    )
    add("--confidence", type=float, default=0.95, help="interval level (default: 0.95)")
    add("--permutations", type=int, default=10_000, help="randomization test sign flips")
    add("--resamples", type=int, default=10_000, help="bootstrap resamples")
    add("--seed", type=int, default=0, help="seed of the flips and resamples (default: 0)")
    add_evaluation_arguments(
        add,
        {
            "--empty-target-action": "; with skip, a query without relevant documents is "
            "left out of every run's values",
            "--unretrieved-queries": "; with skip, runs that retrieve nothing for different "
            "queries cannot be compared (an error names the queries): count them instead",
        },
    )
    add(
        "--format",
        choices=("table", "json", "csv", "latex"),
        default="table",
        help="output format (default: table; latex: a booktabs table as ranx exports)",
    )
    add("-o", "--output", metavar="FILE", default=None, help="write to FILE instead of stdout")
    return parser


def run_names(paths: list[str]) -> list[str]:
    """A run's name: its file name, or the path as given where file names repeat.

    >>> run_names(["a/bm25.run", "b/dense.run"])
    ['bm25.run', 'dense.run']
    >>> run_names(["a/x.run", "b/x.run"])
    ['a/x.run', 'b/x.run']
    """
    names = [Path(p).name for p in paths]
    return names if len(set(names)) == len(names) else list(paths)


def run_compare(
    parser: argparse.ArgumentParser, args: argparse.Namespace, stdout: TextIO, stderr: TextIO
) -> int:
    """``compare`` with parsed arguments, writing to the given streams; returns the exit status."""
    # the library (and torch) once the arguments are parsed: --help and usage errors go without
    from ranking_plugins import _validation as validation
    from ranking_plugins.compare import compare
    from ranking_plugins.runs.evaluation import evaluate_file, read_qrels, torch_threads
    from ranking_plugins.runs.names import GEOMETRIC_MEANS
    from ranking_plugins.runs.reading import FileFormatError, MissingExtraError

    parser = getattr(args, "command_parser", parser)
    wanted = parse_metric_flags(parser, args.metric or list(DEFAULT_COMPARE_METRICS))
    for name, _ in wanted:
        if name in GEOMETRIC_MEANS:  # a summary, it has no per-query values
            parser.error(
                f"-m/--metric: {name} is an aggregation (a geometric mean of "
                f"{GEOMETRIC_MEANS[name]}), not a per-query measure; compare tests per-query "
                f"differences: ask {GEOMETRIC_MEANS[name]}"
            )
    if len(args.runs) < 2:
        parser.error(f"compare needs at least 2 runs, got {len(args.runs)}")
    # compare()'s rules on these arguments, said with the flags' names
    for flag, value in (("--alpha", args.alpha), ("--confidence", args.confidence)):
        if (problem := validation.unit_interval_problem(value)) is not None:
            parser.error(f"{flag} {problem.text}")
    for flag, count in (("--permutations", args.permutations), ("--resamples", args.resamples)):
        if (problem := validation.positive_int_problem(count)) is not None:
            parser.error(f"{flag} {problem.text}")
    names = run_names(args.runs)
    baseline = None
    if args.baseline is not None:
        matches = [n for n, p in zip(names, args.runs, strict=True) if args.baseline in (n, p)]
        if len(matches) != 1:
            parser.error(f"--baseline must name one of the runs {names}, got {args.baseline!r}")
        baseline = matches[0]
    settings = evaluation_settings(parser, args, wanted)
    systems: dict[str, dict[str, Tensor]] = {}
    query_ids: dict[str, list[str]] = {}
    try:
        with torch_threads(1):
            qrels, subtopics = read_qrels(args.qrels, args.qrels_format, wanted, stderr)
            for name, path in zip(names, args.runs, strict=True):
                results, last = evaluate_file(qrels, path, wanted, settings, stderr, subtopics)
                note_left_out_queries(last, args, stderr, f"run {name}")
                if not results.qids:
                    nothing = "no query is both in the run and in the qrels"
                    raise FileFormatError(path, None, nothing)
                systems[name] = {key: results.per_query[key] for key in results.keys}
                query_ids[name] = list(results.qids)
        report = compare(
            systems,
            query_ids=query_ids,
            test=args.test,
            baseline=baseline,
            alpha=args.alpha,
            correction=args.correction,
            confidence=args.confidence,
            permutations=args.permutations,
            resamples=args.resamples,
            seed=args.seed,
        )
    except (FileFormatError, MissingExtraError) as error:
        stderr.write(f"{PROG}: error: {error}\n")
        return 1
    except ValueError as error:
        hint = (
            " (--unretrieved-queries count counts a query a run retrieves nothing for)"
            if "same queries" in str(error) and args.unretrieved_queries == "skip"
            else ""
        )
        stderr.write(f"{PROG}: error: {error}{hint}\n")
        return 1
    if report.dropped_queries:
        stderr.write(
            f"{PROG}: note: {len(report.dropped_queries)} queries without a value "
            f"(--empty-target-action skip) were left out of every run: "
            f"{listing(report.dropped_queries)}\n"
        )
    return write_output(format_report(report, args.format), args.output, stdout, stderr)


def format_report(report: ComparisonReport, output_format: str) -> str:
    if output_format == "json":
        return report.to_json()
    if output_format == "csv":
        return report.to_csv()
    if output_format == "latex":
        return report.to_latex()
    return report.to_table()


__all__ = ["DEFAULT_COMPARE_METRICS", "add_compare_parser", "format_report", "run_compare"]
