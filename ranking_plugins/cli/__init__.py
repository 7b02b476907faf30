"""The ``ranking-plugins`` command: evaluate a run file against qrels.

::

    ranking-plugins evaluate QRELS RUN [-m ndcg@10 -m mrr ...] [--ties first] [--per-query]
    ranking-plugins compare QRELS RUN_A RUN_B [RUN ...] [--test t] [--baseline RUN_A]
    python -m ranking_plugins evaluate QRELS RUN ...

This module parses the arguments and prints; ``compare`` (paired significance
tests) is :mod:`ranking_plugins.cli.compare`, and what both share (the
evaluation flags, the notes, the output file) :mod:`ranking_plugins.cli.flags`.
The work is the library's, :mod:`ranking_plugins.runs`: the files are read
(TREC, TSV or JSONL, gzip too), joined into dense parts of whole queries, and
evaluated by the package's kernel; no metric is computed here. Metric names
(``-m ndcg@10``, trec_eval's ``-m P.5,10`` and ``-m all_trec``) are read by
:func:`ranking_plugins.runs.names.parse_metrics`.

torch is imported once the arguments are parsed, never for ``--help`` or a
usage error.

Exit status: 0 on success, 1 for a problem in an input file (the message
says ``FILE:LINE: what was wrong``), 2 for a command-line usage error.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ranking_plugins.choices import DEFAULT_METRICS
from ranking_plugins.cli.compare import add_compare_parser, run_compare
from ranking_plugins.cli.flags import (
    PROG,
    add_evaluation_arguments,
    evaluation_settings,
    note_left_out_queries,
    parse_metric_flags,
    write_output,
)

if TYPE_CHECKING:
    from ranking_plugins.options import Options
    from ranking_plugins.runs.evaluation import Results
    from ranking_plugins.runs.joining import Collection


def sample_path(name: str) -> Path:
    """Path of a sample file shipped with the package: ``"sample.qrels"`` or ``"sample.run"``.

    >>> sample_path("sample.qrels").name
    'sample.qrels'
    """
    return Path(str(resources.files("ranking_plugins") / "data" / name))


# --------------------------------------------------------------------------- output


def _fixed_point(value: float, decimals: int) -> str:
    return "-" if math.isnan(value) else f"{value:.{decimals}f}"


def format_table(results: Results, per_query: bool) -> str:
    """The summary (metric, mean, standard error, queries counted), after per-query rows."""
    lines: list[str] = []
    if per_query:
        width = max([5, *map(len, results.qids)])
        columns = [max(len(key), 6) for key in results.keys]
        header = "query".ljust(width) + "".join(
            f"  {key:>{w}}" for key, w in zip(results.keys, columns, strict=True)
        )
        lines.append(header)
        values = {key: results.per_query[key].tolist() for key in results.keys}
        for row, qid in enumerate(results.qids):
            lines.append(
                qid.ljust(width)
                + "".join(
                    f"  {_fixed_point(values[key][row], 4):>{w}}"
                    for key, w in zip(results.keys, columns, strict=True)
                )
            )
        lines.append(
            "all".ljust(width)
            + "".join(
                f"  {_fixed_point(results.mean[key], 4):>{w}}"
                for key, w in zip(results.keys, columns, strict=True)
            )
        )
        lines.append("")
    width = max([6, *map(len, results.keys)])
    lines.append(f"{'metric':<{width}}  {'mean':>6}  {'stderr':>6}  {'queries':>7}")
    for key in results.keys:
        lines.append(
            f"{key:<{width}}  {_fixed_point(results.mean[key], 4):>6}  "
            f"{_fixed_point(results.standard_error[key], 4):>6}  {results.counted[key]:>7}"
        )
    return "\n".join(lines) + "\n"


def _json_number(value: float) -> float | None:
    return None if math.isnan(value) else value


def format_json(results: Results, per_query: bool, collection: Collection, options: Options) -> str:
    """Means, standard errors, counts, and per-query values with ``--per-query`` (NaN → null)."""
    document: dict[str, object] = {
        "metrics": {key: _json_number(results.mean[key]) for key in results.keys},
        "standard_error": {key: _json_number(results.standard_error[key]) for key in results.keys},
        "queries_counted": {key: results.counted[key] for key in results.keys},
        "num_queries": len(results.qids),
        "unjudged_queries_skipped": collection.unjudged,
        "unretrieved_queries": collection.unretrieved,
        "options": {f.name: getattr(options, f.name) for f in dataclasses.fields(options)},
    }
    if per_query:
        values = {key: results.per_query[key].tolist() for key in results.keys}
        document["per_query"] = {
            qid: {key: _json_number(values[key][row]) for key in results.keys}
            for row, qid in enumerate(results.qids)
        }
    return json.dumps(document, indent=2) + "\n"


def format_csv(results: Results, per_query: bool) -> str:
    """``query,<keys>``; a row per query with ``--per-query``, then the ``all`` row (means)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["query", *results.keys])

    def cell(value: float) -> str:
        return "" if math.isnan(value) else repr(value)

    if per_query:
        values = {key: results.per_query[key].tolist() for key in results.keys}
        for row, qid in enumerate(results.qids):
            writer.writerow([qid, *(cell(values[key][row]) for key in results.keys)])
    writer.writerow(["all", *(cell(results.mean[key]) for key in results.keys)])
    return buffer.getvalue()


# --------------------------------------------------------------------------- command line

_DESCRIPTION = "Exact ranking metrics (ranking_plugins) from the command line."

_EVALUATE_DESCRIPTION = """\
Evaluate a run (scored results) against qrels (relevance judgments), the way
trec_eval does, with the ranking_plugins kernel: exact under ties, every
metric and cutoff from one ranking.

Files: TREC (qrels "qid iter docno grade", run "qid Q0 docno rank score runid";
the rank column is ignored, documents are ordered by score), TSV ("qid docno
grade|score", an optional header line), or JSONL (one object per line with
"query_id", "doc_id" and "relevance" or "score"). A .gz file is read through
gzip. Judged relevant documents the run does not retrieve count in R and in
the ideal DCG.

Queries are reported by their ids; an id that is not UTF-8 is printed with
\\xNN for each byte that does not decode (and \\\\ for a backslash).

To reproduce trec_eval: --ties first (trec_eval breaks ties by document id,
descending); -l N for trec_eval -l N (but trec_eval's nDCG ignores -l, so
leave -l out for ndcg); --unretrieved-queries count for trec_eval -c.
"""

_EVALUATE_EPILOG = """\
metrics: {metrics}.
  -m ndcg@10 -m mrr -m precision@5,10   (no @k: the whole ranked list)
  trec_eval / ir_measures names work too: P_10, recall_100, success_1,
  recip_rank, map_cut_10, ndcg_cut_10, Rprec; P@10, R@100, nDCG@10, RR, AP.
  trec_eval's own: -m P.5,10 (a family with cutoffs), -m P (its default cutoffs),
  set_P, set_F, binG, rbp, relative_P, num_rel_ret, ..., and -m all_trec (every
  trec_eval measure computed here); with --format trec_eval -q the output is
  trec_eval's own layout.
  default: {defaults}

exit status: 0 success, 1 a problem in an input file (FILE:LINE: what was
wrong), 2 a usage error.

example:
  ranking-plugins evaluate qrels.txt run.txt -m ndcg@10 -m map --ties first
"""


def _evaluate_epilog() -> str:
    from ranking_plugins.metrics import METRICS  # torch: for this help page only

    defaults = " ".join("-m " + m for m in DEFAULT_METRICS)
    return _EVALUATE_EPILOG.format(metrics=", ".join(METRICS), defaults=defaults)


class _Parser(argparse.ArgumentParser):
    """A parser whose epilog may be written when its help is printed (``epilog_of``): the
    metric table lists the metrics, and importing it imports torch."""

    epilog_of: Callable[[], str] | None = None

    def format_help(self) -> str:
        if self.epilog_of is not None:
            self.epilog = self.epilog_of()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=_DESCRIPTION)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    evaluate_parser = commands.add_parser(
        "evaluate",
        help="evaluate a run file against qrels (trec_eval-compatible)",
        description=_EVALUATE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    evaluate_parser.epilog_of = _evaluate_epilog
    # usage errors found after parsing are reported with this parser's usage line
    evaluate_parser.set_defaults(command_parser=evaluate_parser)
    add = evaluate_parser.add_argument
    add("qrels", metavar="QRELS", help="relevance judgments: TREC, TSV or JSONL (.gz too)")
    add("run", metavar="RUN", help="scored results: TREC, TSV or JSONL (.gz too)")
    add(
        "-m",
        "--metric",
        action="append",
        default=None,
        metavar="NAME[@K[,K...]]",
        help=f"a metric to report; repeat for more (default: {' '.join(DEFAULT_METRICS)})",
    )
    add_evaluation_arguments(
        add, {"--ties": "; first with --format trec_eval (trec_eval's own layout)"}
    )
    add(
        "-q",
        "--per-query",
        action="store_true",
        help="also print every query's values (queries sorted as strings)",
    )
    add(
        "--format",
        choices=("table", "json", "csv", "trec_eval"),
        default="table",
        help="output format (default: table, 4 decimals; json and csv: full precision; "
        "trec_eval: trec_eval's own layout, measures by trec_eval's names, to diff with it)",
    )
    add("-o", "--output", metavar="FILE", default=None, help="write to FILE instead of stdout")
    add_compare_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (argparse exits 2 on usage errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "compare":
        return run_compare(parser, args, sys.stdout, sys.stderr)
    return run_evaluate(parser, args, sys.stdout, sys.stderr)


def run_evaluate(
    parser: argparse.ArgumentParser, args: argparse.Namespace, stdout: TextIO, stderr: TextIO
) -> int:
    """``evaluate`` with parsed arguments, writing to the given streams; returns the exit status."""
    # the library (and torch) once the arguments are parsed: --help and usage errors go without
    from ranking_plugins.runs.evaluation import evaluate_file, read_qrels, torch_threads
    from ranking_plugins.runs.names import format_trec_eval, is_count, trec_eval_name
    from ranking_plugins.runs.reading import FileFormatError, MissingExtraError, read_records
    from ranking_plugins.runs.relstring import relstrings

    parser = getattr(args, "command_parser", parser)
    args.metric, relstring_name, relstring_size = _relstring_request(parser, args)
    wanted = parse_metric_flags(parser, args.metric or list(DEFAULT_METRICS))
    settings = evaluation_settings(parser, args, wanted)
    try:
        with torch_threads(1):  # see torch_threads
            # with a diversity measure, the qrels' second column is the subtopic (ndeval's)
            qrels, subtopics = read_qrels(args.qrels, args.qrels_format, wanted, stderr)
            results, collection = evaluate_file(
                qrels, args.run, wanted, settings, stderr, subtopics
            )
            note_left_out_queries(collection, args, stderr)
            if not results.qids:
                nothing = "no query is both in the run and in the qrels"
                raise FileFormatError(args.run, None, nothing)
            strings = None
            if relstring_size is not None and args.format == "trec_eval" and args.per_query:
                run = read_records(args.run, "run", args.run_format, stderr)
                strings = (relstring_name, relstrings(qrels, run, results.qids, relstring_size))
    except (FileFormatError, MissingExtraError) as error:
        stderr.write(f"{PROG}: error: {error}\n")
        return 1
    if args.format == "json":
        text = format_json(results, args.per_query, collection, settings.options)
    elif args.format == "csv":
        text = format_csv(results, args.per_query)
    elif args.format == "trec_eval":
        rows = [
            (
                trec_eval_name(name, k),
                key,
                is_count(name),
                results.per_query[key].tolist(),
                results.mean[key],
            )
            for (name, k), key in zip(wanted, results.keys, strict=True)
        ]
        text = format_trec_eval(rows, results.qids, args.per_query, strings)
    else:
        text = format_table(results, args.per_query)
    return write_output(text, args.output, stdout, stderr)


# -- trec_eval's relstring: a string per query, not a metric ------------------


def _relstring_request(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[list[str] | None, str, int | None]:
    """``-m`` without its ``relstring[.N]`` values; the name trec_eval prints and N, if asked.

    ``-m all_trec`` asks for it (N = 10) with ``--format trec_eval -q``; asked by
    name, it needs that layout (it is a string, printed per query only).
    """
    from ranking_plugins.runs.names import ALL_TREC  # torch: see run_evaluate
    from ranking_plugins.runs.relstring import RELSTRING, RELSTRING_LENGTH, relstring_length

    if args.metric is None:
        return None, RELSTRING, None
    kept: list[str] = []
    name, size = RELSTRING, None
    for value in args.metric:
        try:
            length = relstring_length(value.strip())
        except ValueError as error:
            parser.error(f"-m/--metric: {error}")
        if length is None:
            kept.append(value)
            continue
        if args.format != "trec_eval" or not args.per_query:
            parser.error(
                f"-m {value}: trec_eval's relstring is a string per query, printed with "
                "--format trec_eval -q only"
            )
        name, size = (f"{RELSTRING}_{length}" if "." in value else RELSTRING), length
    if not kept and size is not None:
        parser.error(f"-m {RELSTRING}: ask for a measure beside it (e.g. -m all_trec)")
    asks_all = any(ALL_TREC in (t.strip() for t in value.split(",")) for value in kept)
    if size is None and asks_all and args.format == "trec_eval" and args.per_query:
        size = RELSTRING_LENGTH
    return kept, name, size


__all__ = [
    "DEFAULT_METRICS",
    "build_parser",
    "format_csv",
    "format_json",
    "format_table",
    "main",
    "run_evaluate",
    "sample_path",
]
