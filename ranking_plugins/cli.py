"""The ``ranking-plugins`` command: evaluate a run file against qrels.

::

    ranking-plugins evaluate QRELS RUN [-m ndcg@10 -m mrr ...] [--ties first] [--per-query]
    ranking-plugins compare QRELS RUN_A RUN_B [RUN ...] [--test t] [--baseline RUN_A]
    python -m ranking_plugins evaluate QRELS RUN ...

``compare`` (paired significance tests) lives in :mod:`ranking_plugins.compare_command`.

The files are read by :mod:`ranking_plugins.trec_files` (TREC, TSV or JSONL,
gzip too), joined into dense parts of whole queries, and evaluated by the package's
kernel (:class:`ranking_plugins.request.RankingRequest`, the object behind
:func:`ranking_plugins.rank_metrics`); no metric is computed here. Means and
standard errors come from :class:`ranking_plugins.totals.Totals`.

Exit status: 0 on success, 1 for a problem in an input file (the message
says ``FILE:LINE: what was wrong``), 2 for a command-line usage error.

>>> from ranking_plugins.cli import parse_metrics
>>> parse_metrics(["ndcg@10", "mrr", "precision@5,10", "P_20"])
[('ndcg', 10), ('mrr', None), ('precision', 5), ('precision', 10), ('precision', 20)]
>>> parse_metrics(["P.5,10", "set_P", "binG"])
[('precision', 5), ('precision', 10), ('precision', None), ('bin_g', None)]

trec_eval's spellings (``-m P.5,10``, ``-m all_trec``) and its output layout
(``--format trec_eval``) are in :mod:`ranking_plugins.trec_eval_names`.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import torch
from torch import Tensor

from ranking_plugins import _validation as V
from ranking_plugins.compare_command import add_compare_parser, run_compare
from ranking_plugins.kernel import TIES, recall_level_cut
from ranking_plugins.metrics import (
    METRICS,
    EmptyQueryError,
    Evaluation,
    PerQuery,
    result_key,
)
from ranking_plugins.options import OPTION_NAMES, Options
from ranking_plugins.request import RankingRequest, gain_threshold_problem
from ranking_plugins.totals import Totals, geometric_mean
from ranking_plugins.trec_eval_names import (
    ALL_TREC,
    GEOMETRIC_MEANS,
    LEVEL_FAMILIES,
    TREC_EVAL_MEASURES,
    format_trec_eval,
    is_count,
    trec_eval_measures,
    trec_eval_name,
)
from ranking_plugins.trec_files import (
    FORMATS,
    Collection,
    FileFormatError,
    MissingExtraError,
    Records,
    WholeRunNeeded,
    collections,
    read_batches,
    read_records,
)
from ranking_plugins.trec_relstring import (
    RELSTRING,
    RELSTRING_LENGTH,
    relstring_length,
    relstrings,
)

PROG = "ranking-plugins"
#: what ``evaluate`` reports when no ``-m`` is given
DEFAULT_METRICS = ("ndcg@10", "mrr", "map", "precision@10", "recall@100")

#: Other tools' names for the package's metrics, trec_eval's (``P_10``,
#: ``recip_rank``, ``ndcg_cut_10``, ...) and ir_measures' (``P@10``, ``RR``,
#: ``nDCG@10``, ...). ``map_cut`` and ``ndcg_cut`` alone are trec_eval's, at its
#: default cutoffs (:func:`~ranking_plugins.trec_eval_names.trec_eval_measures`).
ALIASES = {
    "P": "precision",
    "R": "recall",
    "success": "hit_rate",
    "Success": "hit_rate",
    "recip_rank": "mrr",
    "RR": "mrr",
    "AP": "map",
    "map_cut": "map",
    "nDCG": "ndcg",
    "ndcg_cut": "ndcg",
    "Rprec": "r_precision",
    "relative_P": "relative_precision",
    "binG": "bin_g",
}
_TREC_EVAL_NAME = re.compile(r"^(P|recall|success|map_cut|ndcg_cut|relative_P)_(\d+)$")


class UsageError(ValueError):
    """A bad command-line value; reported by argparse (exit status 2)."""


def sample_path(name: str) -> Path:
    """Path of a sample file shipped with the package: ``"sample.qrels"`` or ``"sample.run"``.

    >>> sample_path("sample.qrels").name
    'sample.qrels'
    """
    return Path(str(resources.files("ranking_plugins") / "data" / name))


# --------------------------------------------------------------------------- metrics


def parse_metrics(values: Sequence[str]) -> list[tuple[str, int | None]]:
    """``-m`` values to ``(metric, k)`` pairs, in the order asked, without repeats.

    ``name`` (whole list), ``name@k`` or ``name@k1,k2``; several may share one
    value, separated by commas (``ndcg@10,mrr``). ``k`` is None for the whole
    list. trec_eval and ir_measures names are accepted (see :data:`ALIASES`).
    """
    wanted: list[tuple[str, int | None]] = []
    last: str | None = None  # metric a bare ``,k`` continues
    for value in values:
        for token in value.split(","):
            token = token.strip()
            if not token:
                raise UsageError(f"empty metric name in {value!r}")
            pairs: list[tuple[str, int | None]]
            if token.isdigit() and last is not None:
                pairs = [(last, _cutoff(token, last))]
            else:
                pairs = _one_metric(token)
                last = pairs[0][0] if pairs[0][1] is not None else None
            for pair in pairs:
                if pair not in wanted:
                    wanted.append(pair)
    return wanted


def _one_metric(token: str) -> list[tuple[str, int | None]]:
    name = token.partition(".")[0]
    trec_eval_only = name in TREC_EVAL_MEASURES or name in (ALL_TREC, *LEVEL_FAMILIES)
    if "." in token or (trec_eval_only and name not in METRICS):
        # trec_eval's spelling: ``P.5``, ``set_P``, ``P`` (its default cutoffs), ``all_trec``
        try:
            pairs = trec_eval_measures(token)
        except ValueError as error:
            raise UsageError(str(error)) from None
        if pairs is not None:
            return pairs
    found = _TREC_EVAL_NAME.match(token)
    if found:
        name, ks = found.group(1), [found.group(2)]
    elif "@" in token:
        name, _, k = token.partition("@")
        ks = [k]
    else:
        name, ks = token, []
    metric = _metric_name(name, token)
    if ks and not METRICS[metric].at_k:
        raise UsageError(f"{metric!r} takes no cutoff @k (got {token!r})")
    if not ks:
        return [(metric, None)]
    return [(metric, _cutoff(k, token)) for k in ks]


def _metric_name(name: str, token: str) -> str:
    if name in METRICS:
        return name
    if name in ALIASES:
        return ALIASES[name]
    if name.lower() in METRICS:
        return name.lower()
    raise UsageError(
        f"unknown metric {name!r} (in {token!r}); the metrics are {', '.join(METRICS)} "
        "(as name, name@k or name@k1,k2; trec_eval names such as P_10 and "
        "ndcg_cut_10 also work)"
    )


def _cutoff(text: str, token: str) -> int:
    # top_k's rule (a positive int), on the digits of the token
    if not text.isdigit() or V.top_k_problem(int(text)) is not None:
        raise UsageError(f"the cutoff in {token!r} must be a positive integer, got {text!r}")
    return int(text)


# --------------------------------------------------------------------------- evaluation


#: the command's defaults where they differ from the package's: trec_eval's RBP
#: persistence (the gain is the package's, trec_eval's linear one)
COMMAND_DEFAULTS = Options(rbp_persistence=0.9)


@dataclass(frozen=True)
class Results:
    """Per-query values, means, standard errors and counts, one entry per result key."""

    qids: list[str]
    keys: list[str]
    per_query: dict[str, Tensor]  # (Q,) float64, NaN where a query was left out
    mean: dict[str, float]
    standard_error: dict[str, float]
    counted: dict[str, int]


def evaluate(
    joined: Collection | Iterable[Collection],
    wanted: Sequence[tuple[str, int | None]],
    options: Options,
    qrels_path: str = "qrels",
    judged_only: bool = False,
) -> Results:
    """Evaluate a joined collection, or its parts of whole queries, with the kernel.

    ``rank_metrics`` takes one ``top_k`` for all its metrics, so the whole-list
    metrics are one request and the @k metrics another (with every k asked
    for); each part is ranked once, by the first, and both read that ranking.
    Per-query values follow the query names, sorted as strings.

    A run document absent from the qrels is unjudged, any document of the
    qrels judged (grade 0 included; a negative grade is trec_eval's "in the
    pool, not judged"): the measures of judged items read the collection's
    ``judged``. ``judged_only``: trec_eval's ``-J``.
    """
    parts = [joined] if isinstance(joined, Collection) else joined
    parts = (_judged_only(part) for part in parts) if judged_only else parts
    keys = result_keys(wanted)
    # a geometric mean (trec_eval's gm_map) aggregates its metric's per-query values
    computed = [(GEOMETRIC_MEANS.get(name, name), k) for name, k in wanted]
    computed_keys = list(dict.fromkeys(result_key(METRICS[name], k) for name, k in computed))
    whole = list(dict.fromkeys(name for name, k in computed if k is None))
    at_k = list(dict.fromkeys(name for name, k in computed if k is not None))
    ks = sorted({k for _, k in computed if k is not None})
    groups = [(whole, None), (at_k, ks)]
    requests = [RankingRequest.create(names, top_k, options) for names, top_k in groups if names]
    first = requests[0]
    judgments = any(request.judgments for request in requests)
    results: dict[str, list[PerQuery]] = {key: [] for key in computed_keys}
    qids: list[str] = []
    for part in parts:
        if not part.qids:
            continue
        inputs = (part.preds, part.target)
        # read only by the measures of judged items: the others never pay for it
        judged = part.judged if judgments else None
        try:
            ranked = first.rank(*inputs, mask=part.mask, judged=judged)
            for request in requests:
                if request.reads(first.ranking_key, first.depth):
                    evaluation = request.read(ranked)
                else:
                    evaluation = request.evaluate(*inputs, mask=part.mask, judged=judged)
                for key in request.keys:
                    if key in results:
                        results[key].append(evaluation.results[key])
        except EmptyQueryError as error:
            # the kernel knows the query by its row; the user knows it by its id
            named = EmptyQueryError(error.metric, error.query, part.qids[error.query])
            raise FileFormatError(qrels_path, None, str(named)) from None
        except ValueError as error:
            raise FileFormatError(qrels_path, None, str(error)) from None
        qids.extend(part.qids)
    # the parts' queries in name order, then summed once: the means of the whole run
    order = torch.tensor(sorted(range(len(qids)), key=qids.__getitem__), dtype=torch.int64)
    merged = {
        key: PerQuery(
            torch.cat([r.values for r in rows] or [torch.zeros(0, dtype=torch.float64)])[order],
            torch.cat([r.counted for r in rows] or [torch.zeros(0, dtype=torch.bool)])[order],
        )
        for key, rows in results.items()
    }
    totals = Totals.of(
        Evaluation(merged, torch.zeros(len(qids))), tuple(computed_keys), weighted=False
    )
    per_query = {key: merged[key].values for key in computed_keys}
    mean = dict(zip(computed_keys, totals.mean().tolist(), strict=True))
    standard_error = dict(zip(computed_keys, totals.standard_error().tolist(), strict=True))
    counted = dict(zip(computed_keys, map(int, totals.weight.tolist()), strict=True))
    for name, metric in GEOMETRIC_MEANS.items():
        if name in keys:
            values = per_query[metric]
            per_query[name] = torch.full_like(values, math.nan)  # a summary: none per query
            mean[name] = geometric_mean(values)
            standard_error[name] = math.nan
            counted[name] = int((~values.isnan()).sum())
    return Results(
        [qids[i] for i in order.tolist()], keys, per_query, mean, standard_error, counted
    )


def result_keys(wanted: Sequence[tuple[str, int | None]]) -> list[str]:
    """The keys of ``wanted``'s results (``ndcg@10``; a geometric mean by its name)."""
    return [name if name in GEOMETRIC_MEANS else result_key(METRICS[name], k) for name, k in wanted]


def _judged_only(part: Collection) -> Collection:
    """trec_eval's ``-J``: the run's unjudged documents leave the ranking (masked).

    Unjudged: absent from the qrels, or there with a negative grade (in the pool,
    not judged); trec_eval keeps the grades >= 0. Masked rather than dropped, so
    that a query whose every retrieved document is unjudged is still evaluated,
    with nothing retrieved (as trec_eval does).
    """
    return replace(part, mask=part.mask & (part.target >= 0))


# --------------------------------------------------------------------------- output


def _number(value: float, decimals: int) -> str:
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
                    f"  {_number(values[key][row], 4):>{w}}"
                    for key, w in zip(results.keys, columns, strict=True)
                )
            )
        lines.append(
            "all".ljust(width)
            + "".join(
                f"  {_number(results.mean[key], 4):>{w}}"
                for key, w in zip(results.keys, columns, strict=True)
            )
        )
        lines.append("")
    width = max([6, *map(len, results.keys)])
    lines.append(f"{'metric':<{width}}  {'mean':>6}  {'stderr':>6}  {'queries':>7}")
    for key in results.keys:
        lines.append(
            f"{key:<{width}}  {_number(results.mean[key], 4):>6}  "
            f"{_number(results.standard_error[key], 4):>6}  {results.counted[key]:>7}"
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
        "options": {name: getattr(options, name) for name in OPTION_NAMES},
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

_EVALUATE_EPILOG = f"""\
metrics: {", ".join(METRICS)}.
  -m ndcg@10 -m mrr -m precision@5,10   (no @k: the whole ranked list)
  trec_eval / ir_measures names work too: P_10, recall_100, success_1,
  recip_rank, map_cut_10, ndcg_cut_10, Rprec; P@10, R@100, nDCG@10, RR, AP.
  trec_eval's own: -m P.5,10 (a family with cutoffs), -m P (its default cutoffs),
  set_P, set_F, binG, rbp, relative_P, num_rel_ret, ..., and -m all_trec (every
  trec_eval measure computed here); with --format trec_eval -q the output is
  trec_eval's own layout.
  default: {" ".join("-m " + m for m in DEFAULT_METRICS)}

exit status: 0 success, 1 a problem in an input file (FILE:LINE: what was
wrong), 2 a usage error.

example:
  ranking-plugins evaluate qrels.txt run.txt -m ndcg@10 -m map --ties first
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=_DESCRIPTION)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    evaluate_parser = commands.add_parser(
        "evaluate",
        help="evaluate a run file against qrels (trec_eval-compatible)",
        description=_EVALUATE_DESCRIPTION,
        epilog=_EVALUATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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


def add_evaluation_arguments(
    add: Callable[..., argparse.Action], notes: Mapping[str, str] | None = None
) -> None:
    """The options that say how a run is evaluated, defined once for ``evaluate`` and
    ``compare`` (:func:`evaluation_options` reads them). ``notes``: words added to an
    option's help, by its long name."""
    actions = [
        add(
            "--ties",
            choices=TIES,
            default=None,
            help="what equal scores mean (default: average, the expected value over every "
            "order of each tie group); 'first' is trec_eval's tie break (document id, "
            "descending)",
        ),
        add(
            "--gain",
            choices=V.GAINS,
            default=COMMAND_DEFAULTS.gain,
            help="nDCG gain of a grade g: linear g (default, trec_eval's) or exponential 2^g - 1",
        ),
        add(
            "-l",
            "--relevance-threshold",
            type=float,
            default=None,
            metavar="GRADE",
            help="grades at or above GRADE are relevant (default: above 0); trec_eval -l. "
            "A document the qrels do not judge is never relevant, whatever GRADE (trec_eval "
            "gives it grade -1, so its -l -1 would count it)",
        ),
        add(
            "--empty-target-action",
            choices=V.EMPTY_TARGET_ACTIONS,
            default=COMMAND_DEFAULTS.empty_target_action,
            help="a query without relevant documents counts as 0 (neg, default, as trec_eval), "
            "1 (pos), is left out of the means (skip), or is an error",
        ),
        add(
            "--ap-denominator",
            choices=V.AP_DENOMINATORS,
            default=COMMAND_DEFAULTS.ap_denominator,
            help="map@k divides by R (relevant, default, trec_eval's map_cut) or min(k, R)",
        ),
        add(
            "--rbp-persistence",
            type=float,
            default=COMMAND_DEFAULTS.rbp_persistence,
            metavar="P",
            help="RBP's persistence p in (0, 1) (default: 0.9, trec_eval's; ir_measures uses 0.8)",
        ),
        add(
            "--unjudged-queries",
            choices=("error", "skip"),
            default="error",
            help="a query in the run but not in the qrels is an error (default) or is "
            "left out with a note on stderr",
        ),
        add(
            "-c",
            dest="unretrieved_queries",
            action="store_const",
            const="count",
            default="skip",
            help="trec_eval -c: the same as --unretrieved-queries count",
        ),
        add(
            "--unretrieved-queries",
            choices=("skip", "count"),
            default="skip",
            help="a query in the qrels but not in the run is left out with a note on stderr "
            "(skip, default, as trec_eval) or counted with nothing retrieved (count, "
            "trec_eval -c)",
        ),
        add(
            "-J",
            "--judged-only",
            action="store_true",
            help="trec_eval -J: judged documents only (condensed lists: a retrieved document "
            "absent from the qrels, or there with a negative grade, is removed from the run "
            "before evaluation)",
        ),
        *(
            add(
                f"--{kind}-format",
                choices=FORMATS,
                default="auto",
                help=f"format of the {kind} file{'s' if kind == 'run' else ''} (default: auto, "
                "from the extension .tsv/.jsonl, else from the first line)",
            )
            for kind in ("qrels", "run")
        ),
    ]
    for action in actions:
        action.help = f"{action.help}{(notes or {}).get(action.option_strings[-1], '')}"


def evaluation_options(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    wanted: Sequence[tuple[str, int | None]],
) -> Options:
    """The kernel's options from the values of :func:`add_evaluation_arguments`, each
    checked (a bad one is a usage error); ``args.ties`` is settled on the way (trec_eval's
    tie break with ``--format trec_eval``)."""
    if args.ties is None:  # trec_eval's own layout comes with its tie break
        args.ties = "first" if args.format == "trec_eval" else COMMAND_DEFAULTS.ties
    try:
        # every option that has a flag, by its name (the flags' dests are the names)
        options = COMMAND_DEFAULTS.replace(
            **{name: getattr(args, name) for name in OPTION_NAMES if hasattr(args, name)}
        )
    except V.ArgumentError as error:  # the library's rule, said with the flag's name
        parser.error(f"--{error.argument.replace('_', '-')} {error.problem}")
    threshold = options.relevance_threshold
    for name, _ in wanted:
        name = GEOMETRIC_MEANS.get(name, name)
        problem = (
            None if _unleveled(args, name) else gain_threshold_problem(METRICS[name], threshold)
        )
        if problem is not None:  # RankingRequest.create's refusal, as a usage error
            parser.error(f"-l {threshold:g}: {problem}")
    return options


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
    parser = getattr(args, "command_parser", parser)
    args.metric, relstring_name, relstring_size = _relstring_request(parser, args)
    try:
        wanted = parse_metrics(args.metric or list(DEFAULT_METRICS))
    except UsageError as error:
        parser.error(f"-m/--metric: {error}")
    options = evaluation_options(parser, args, wanted)
    unleveled_options = options.replace(relevance_threshold=None)
    try:
        with torch_threads(1):  # see torch_threads
            qrels = read_records(args.qrels, "qrels", args.qrels_format, stderr)
            # those -l leaves alone (trec_eval's layout) in a pass of their own, without it;
            # Rndcg in another, where a query with no grade at the level has no relevant
            # document (trec_eval's Rndcg is 0 when its num_rel, counted at -l, is 0)
            level = args.relevance_threshold
            unleveled = [w for w in wanted if _unleveled(args, w[0])]
            leveled = [w for w in wanted if not _unleveled(args, w[0])]
            if _empty_lists_read(args, wanted):
                leveled += _EMPTY_LIST_COUNTS  # not printed: read by _empty_list_nans
            passes = [
                (leveled, options, None),
                ([w for w in unleveled if not _counts_at_level(w[0])], unleveled_options, None),
                ([w for w in unleveled if _counts_at_level(w[0])], unleveled_options, level),
            ]
            results: Results | None = None
            for measures, measure_options, relevant_at in (p for p in passes if p[0]):
                done, collection = evaluate_run(
                    args, qrels, args.run, measures, measure_options, stderr, relevant_at
                )
                if results is None:
                    note_left_out_queries(collection, args, stderr)
                    results = done
                    if not results.qids:
                        nothing = "no query is both in the run and in the qrels"
                        raise FileFormatError(args.run, None, nothing)
                    continue
                for field in ("per_query", "mean", "standard_error", "counted"):
                    getattr(results, field).update(getattr(done, field))
            assert results is not None  # wanted is never empty
            results = replace(results, keys=result_keys(wanted))
            if _empty_lists_read(args, wanted):
                _empty_list_nans(results, wanted)
            strings = None
            if relstring_size is not None and args.format == "trec_eval" and args.per_query:
                run = read_records(args.run, "run", args.run_format, stderr)
                strings = (relstring_name, relstrings(qrels, run, results.qids, relstring_size))
    except (FileFormatError, MissingExtraError) as error:
        stderr.write(f"{PROG}: error: {error}\n")
        return 1
    if args.format == "json":
        text = format_json(results, args.per_query, collection, options)
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
    if args.output is None:
        try:
            stdout.write(text)
            stdout.flush()
        except BrokenPipeError:
            # the reader went away (``| head``): no traceback, and none at exit
            # when Python flushes the real stdout once more
            if stdout is sys.stdout:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as error:
        stderr.write(f"{PROG}: error: {args.output}: cannot write: {error.strerror or error}\n")
        return 1
    return 0


# -- trec_eval's relstring (issue 13): a string per query, not a metric ------------------


def _relstring_request(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[list[str] | None, str, int | None]:
    """``-m`` without its ``relstring[.N]`` values; the name trec_eval prints and N, if asked.

    ``-m all_trec`` asks for it (N = 10) with ``--format trec_eval -q``; asked by
    name, it needs that layout (it is a string, printed per query only).
    """
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


def _unleveled(args: argparse.Namespace, name: str) -> bool:
    """Whether ``name`` is evaluated without ``-l``: trec_eval's layout with a level, where
    trec_eval's -l leaves its graded measures alone."""
    leveled_layout = args.format == "trec_eval" and args.relevance_threshold is not None
    return leveled_layout and METRICS[GEOMETRIC_MEANS.get(name, name)].trec_eval_graded


#: the counts (trec_eval's num_ret, and num_rel at -l) that :func:`_empty_list_nans` reads
_EMPTY_LIST_COUNTS = [("num_ret", None), ("num_rel", None)]


def _recall_levels(name: str) -> tuple[float, ...]:
    """The recall levels a measure of interpolated precision reads (none for the others)."""
    return METRICS[GEOMETRIC_MEANS.get(name, name)].recall_levels


def _counts_at_level(name: str) -> bool:
    return METRICS[GEOMETRIC_MEANS.get(name, name)].trec_eval_counts_at_level


def _empty_lists_read(args: argparse.Namespace, wanted: Sequence[tuple[str, int | None]]) -> bool:
    """Whether trec_eval's layout may print interpolated precision of an empty list: only
    -J empties a list (without it trec_eval ranks -c's stand-in document)."""
    reads = any(_recall_levels(name) for name, _ in wanted)
    return args.format == "trec_eval" and args.judged_only and reads


def _empty_list_nans(results: Results, wanted: Sequence[tuple[str, int | None]]) -> None:
    """trec_eval's interpolated precision of a query left with no ranked document is
    0 / 0, nan, at the recall levels whose cutoff is 0 hits, and so is 11pt_avg, their
    mean (m_iprec_at_recall.c, m_11pt_avg.c: precision num_rel_ret / num_ret at the
    levels no relevant document reaches); the mean over the queries is nan too."""
    empty = results.per_query["num_ret"] == 0
    relevant = results.per_query["num_rel"].unsqueeze(1)
    for (name, _), key in zip(wanted, results.keys, strict=True):
        levels = _recall_levels(name)
        if not levels:
            continue
        at = torch.tensor(levels, dtype=torch.float64)
        nan = empty & (recall_level_cut(at, relevant) == 0).any(dim=1)
        if bool(nan.any()):
            results.per_query[key] = torch.where(nan, math.nan, results.per_query[key])
            results.mean[key] = math.nan


def evaluate_run(
    args: argparse.Namespace,
    qrels: Records,
    run_path: str,
    wanted: Sequence[tuple[str, int | None]],
    options: Options,
    stderr: TextIO,
    relevant_at: float | None = None,
) -> tuple[Results, Collection]:
    """A run file read, joined and evaluated in parts of whole queries, as the values of
    :func:`add_evaluation_arguments` say; and its last part.

    ``relevant_at``: a query without a judged grade at or above it has no relevant
    document (trec_eval's Rndcg under ``-l``, whose gains ignore the level), and one
    with such a grade but none above 0 (``-l`` <= 0) is nan, trec_eval's 0 / 0.
    """
    join: dict[str, Any] = {
        "trec_eval_order": args.ties == "first",
        # trec_eval holds a score as a C float: read so wherever the command reproduces
        # trec_eval (its layout, its tie break); elsewhere float64's precision stays
        "float32_scores": args.ties == "first" or args.format == "trec_eval",
        "relevance_threshold": join_threshold(wanted, args.relevance_threshold),
        "unjudged": args.unjudged_queries,
        "unretrieved": args.unretrieved_queries,
    }
    last: list[Collection] = []

    def evaluated(run: Records | Iterable[Records]) -> Results:
        parts: Iterable[Collection] = _keep_last(collections(qrels, run, **join), last)
        undefined: list[str] = []
        if relevant_at is not None:
            parts = (_relevant_at(part, relevant_at, undefined) for part in parts)
        results = evaluate(parts, wanted, options, args.qrels, args.judged_only)
        if undefined:
            nan_qids = set(undefined)
            rows = torch.tensor([qid in nan_qids for qid in results.qids])
            for key in results.keys:
                results.per_query[key] = torch.where(rows, math.nan, results.per_query[key])
                results.mean[key] = math.nan
        return results

    try:
        with contextlib.closing(read_batches(run_path, "run", args.run_format, stderr)) as batches:
            results = evaluated(batches)
    except WholeRunNeeded:  # a query's lines are apart: the run is read whole
        results = evaluated(read_records(run_path, "run", args.run_format, stderr))
    return results, last[-1]


def _relevant_at(part: Collection, level: float, undefined: list[str]) -> Collection:
    """``part`` with no relevant document in the queries without a judged grade at or
    above ``level`` (their positive grades set to 0; padding and unjudged are -inf).

    The queries with such a grade but none above 0 join ``undefined``: m_Rndcg.c counts
    their relevant documents (num_rel > 0), but with no positive gain it averages no
    ndcg, 0 / 0.
    """
    reaches = (part.target >= level).any(dim=1)
    no_gain = (reaches & ~(part.target > 0).any(dim=1)).tolist()
    undefined.extend(qid for qid, flag in zip(part.qids, no_gain, strict=True) if flag)
    below = ~reaches.unsqueeze(1)
    return replace(part, target=torch.where(below, part.target.clamp(max=0), part.target))


def join_threshold(
    wanted: Sequence[tuple[str, int | None]], threshold: float | None
) -> float | None:
    """The threshold the join adds unretrieved judged documents at or above, as masked items.

    ``threshold`` itself (the unretrieved documents that count in R or the ideal
    DCG), or −∞ when a measure of judged items is asked: bpref counts every
    judged non-relevant document of the query (N), retrieved or not.
    """
    judgments = any(METRICS[GEOMETRIC_MEANS.get(name, name)].judgments for name, _ in wanted)
    return -math.inf if judgments else threshold


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to ``count`` for a while, then as they were.

    The command ranks parts of about 100k items: each of the kernel's many
    small operations would wake and join a team of threads, which costs more
    than it gives, and on a shared machine spinning threads slowed a run ten
    times (``benchmarks/RESULTS.md``, issue 16).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _keep_last(parts: Iterable[Collection], last: list[Collection]) -> Iterator[Collection]:
    """``parts``, keeping the latest in ``last`` (the last part lists the left-out queries)."""
    for part in parts:
        last[:] = [part]
        yield part


def note_left_out_queries(
    collection: Collection, args: argparse.Namespace, stderr: TextIO, run: str = "the run"
) -> None:
    """Say on stderr which queries were left out or counted empty: never silently."""

    def listing(qids: list[str]) -> str:
        shown = ", ".join(qids[:10])
        return shown + (f", ... ({len(qids) - 10} more)" if len(qids) > 10 else "")

    def queries(n: int) -> str:
        return f"{n} {'query' if n == 1 else 'queries'}"

    if collection.unjudged:
        stderr.write(
            f"{PROG}: note: {queries(len(collection.unjudged))} of {run} "
            f"{'is' if len(collection.unjudged) == 1 else 'are'} not in the qrels and "
            f"{'was' if len(collection.unjudged) == 1 else 'were'} left out: "
            f"{listing(collection.unjudged)}\n"
        )
    if collection.unretrieved:
        if args.unretrieved_queries == "count":
            what = "counted as retrieving nothing"
        else:
            what = "left out (--unretrieved-queries count counts them as retrieving nothing)"
        stderr.write(
            f"{PROG}: note: {queries(len(collection.unretrieved))} of the qrels "
            f"{'has' if len(collection.unretrieved) == 1 else 'have'} no line in {run}, "
            f"{what}: {listing(collection.unretrieved)}\n"
        )


__all__ = [
    "ALIASES",
    "DEFAULT_METRICS",
    "Results",
    "build_parser",
    "evaluate",
    "format_csv",
    "format_json",
    "format_table",
    "main",
    "parse_metrics",
    "sample_path",
]
