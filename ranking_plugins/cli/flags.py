"""What the two commands, ``evaluate`` and ``compare``, share: the flags that say how a
run is evaluated and their reading, the metric names asked, the notes on stderr and
the output written.

Nothing here imports torch at import time: the parser (``--help``, usage
errors) is built from :mod:`ranking_plugins.choices`; the functions that
evaluate import the library (:mod:`ranking_plugins.runs`) when they run.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ranking_plugins.choices import (
    AP_DENOMINATORS,
    EMPTY_TARGET_ACTIONS,
    FILE_FORMATS,
    GAINS,
    TIES,
    UNJUDGED_QUERIES,
    UNRETRIEVED_QUERIES,
)
from ranking_plugins.runs.notes import left_out_notes

if TYPE_CHECKING:
    from ranking_plugins.runs.evaluation import Settings
    from ranking_plugins.runs.joining import Collection

PROG = "ranking-plugins"


#: the options that say how a run is evaluated, as (names, argparse keywords):
#: defined once for ``evaluate`` and ``compare`` (:func:`evaluation_settings` reads them)
EVALUATION_FLAGS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (
        ("--ties",),
        dict(
            choices=TIES,
            default=None,
            help="what equal scores mean (default: average, the expected value over every "
            "order of each tie group); 'first' is trec_eval's tie break (document id, "
            "descending)",
        ),
    ),
    (
        ("--gain",),
        dict(
            choices=GAINS,
            default=None,
            help="nDCG gain of a grade g: linear g (default, trec_eval's) or exponential 2^g - 1",
        ),
    ),
    (
        (
            "-l",
            "--relevance-threshold",
        ),
        dict(
            type=float,
            default=None,
            metavar="GRADE",
            help="grades at or above GRADE are relevant (default: above 0); trec_eval -l. "
            "A document the qrels do not judge is never relevant, whatever GRADE (trec_eval "
            "gives it grade -1, so its -l -1 would count it)",
        ),
    ),
    (
        ("--empty-target-action",),
        dict(
            choices=EMPTY_TARGET_ACTIONS,
            default=None,
            help="a query without relevant documents counts as 0 (neg, default, as trec_eval), "
            "1 (pos), is left out of the means (skip), or is an error",
        ),
    ),
    (
        ("--ap-denominator",),
        dict(
            choices=AP_DENOMINATORS,
            default=None,
            help="map@k divides by R (relevant, default, trec_eval's map_cut) or min(k, R)",
        ),
    ),
    (
        ("--rbp-persistence",),
        dict(
            type=float,
            default=None,
            metavar="P",
            help="RBP's persistence p in (0, 1) (default: 0.9, trec_eval's; ir_measures uses 0.8)",
        ),
    ),
    (
        ("--unjudged-queries",),
        dict(
            choices=UNJUDGED_QUERIES,
            default="error",
            help="a query in the run but not in the qrels is an error (default) or is "
            "left out with a note on stderr",
        ),
    ),
    (
        ("-c",),
        dict(
            dest="unretrieved_queries",
            action="store_const",
            const="count",
            default="skip",
            help="trec_eval -c: the same as --unretrieved-queries count",
        ),
    ),
    (
        ("--unretrieved-queries",),
        dict(
            choices=UNRETRIEVED_QUERIES,
            default="skip",
            help="a query in the qrels but not in the run is left out with a note on stderr "
            "(skip, default, as trec_eval) or counted with nothing retrieved (count, "
            "trec_eval -c)",
        ),
    ),
    (
        (
            "-J",
            "--judged-only",
        ),
        dict(
            action="store_true",
            help="trec_eval -J: judged documents only (condensed lists: a retrieved document "
            "absent from the qrels, or there with a negative grade, is removed from the run "
            "before evaluation)",
        ),
    ),
    *(
        (
            (f"--{kind}-format",),
            dict(
                choices=FILE_FORMATS,
                default="auto",
                help=f"format of the {kind} file{'s' if kind == 'run' else ''} (default: auto, "
                "from the extension .tsv/.jsonl, else from the first line)",
            ),
        )
        for kind in ("qrels", "run")
    ),
)


def add_evaluation_arguments(
    add: Callable[..., argparse.Action], notes: Mapping[str, str] | None = None
) -> None:
    """Add :data:`EVALUATION_FLAGS` through ``add`` (a parser's or a group's
    ``add_argument``); ``notes``: words added to an option's help, by its long name."""
    for names, keywords in EVALUATION_FLAGS:
        action = add(*names, **keywords)
        action.help = f"{action.help}{(notes or {}).get(action.option_strings[-1], '')}"


def evaluation_settings(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    wanted: Sequence[tuple[str, int | None]],
) -> Settings:
    """The settings of :func:`~ranking_plugins.runs.evaluation.evaluate_file` from the values of
    :func:`add_evaluation_arguments`, each checked (a bad one is a usage error); ``args.ties``
    is settled on the way (trec_eval's tie break with ``--format trec_eval``). A flag left out
    keeps the command's default (:data:`~ranking_plugins.runs.evaluation.COMMAND_DEFAULTS`)."""
    # the library (and torch) once the arguments are parsed: --help and usage errors go without
    from ranking_plugins import _validation as validation
    from ranking_plugins.metrics import METRICS
    from ranking_plugins.options import OPTION_NAMES
    from ranking_plugins.request import gain_threshold_problem
    from ranking_plugins.runs.evaluation import COMMAND_DEFAULTS, Settings, unleveled
    from ranking_plugins.runs.names import GEOMETRIC_MEANS

    layout = args.format == "trec_eval"
    if args.ties is None:  # trec_eval's own layout comes with its tie break
        args.ties = "first" if layout else COMMAND_DEFAULTS.ties
    # only the options these flags set: compare's --alpha is its significance level, not
    # the diversity measures' alpha
    flags = {name for names, _ in EVALUATION_FLAGS for name in names}
    flagged = [name for name in OPTION_NAMES if f"--{name.replace('_', '-')}" in flags]
    given = {name: getattr(args, name, None) for name in flagged}
    try:
        # every option that has a flag, by its name (the flags' dests are the names)
        options = COMMAND_DEFAULTS.replace(
            **{name: value for name, value in given.items() if value is not None}
        )
    except validation.ArgumentError as error:  # the library's rule, said with the flag's name
        parser.error(f"--{error.argument.replace('_', '-')} {error.problem}")
    threshold = options.relevance_threshold
    for name, _ in wanted:
        name = GEOMETRIC_MEANS.get(name, name)
        problem = (
            None
            if unleveled(name, layout, threshold)
            else gain_threshold_problem(METRICS[name], threshold)
        )
        if problem is not None:  # RankingRequest.create's refusal, as a usage error
            parser.error(f"-l {threshold:g}: {problem}")
    return Settings(
        options,
        trec_eval_layout=layout,
        judged_only=args.judged_only,
        unjudged_queries=args.unjudged_queries,
        unretrieved_queries=args.unretrieved_queries,
        run_format=args.run_format,
    )


def parse_metric_flags(
    parser: argparse.ArgumentParser, values: Sequence[str]
) -> list[tuple[str, int | None]]:
    """``-m`` values as ``(metric, k)`` pairs
    (:func:`~ranking_plugins.runs.names.parse_metrics`); a bad one is a usage error."""
    from ranking_plugins.runs.names import parse_metrics  # torch: see evaluation_settings

    try:
        return parse_metrics(values)
    except ValueError as error:
        parser.error(f"-m/--metric: {error}")


def note_left_out_queries(
    collection: Collection, args: argparse.Namespace, stderr: TextIO, run: str = "the run"
) -> None:
    """Say on stderr which queries were left out or counted empty: never silently."""
    counted = args.unretrieved_queries == "count"
    for note in left_out_notes(collection.unjudged, collection.unretrieved, counted, run):
        stderr.write(f"{PROG}: note: {note}\n")


def write_output(text: str, output: str | None, stdout: TextIO, stderr: TextIO) -> int:
    """``text`` to the file ``output`` (-o), else to ``stdout``; returns the exit status."""
    if output is None:
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
        Path(output).write_text(text, encoding="utf-8")
    except OSError as error:
        stderr.write(f"{PROG}: error: {output}: cannot write: {error.strerror or error}\n")
        return 1
    return 0


__all__ = [
    "PROG",
    "add_evaluation_arguments",
    "evaluation_settings",
    "note_left_out_queries",
    "parse_metric_flags",
    "write_output",
]
