"""Metric names: the package's, trec_eval's, ir_measures', ranx's and pytrec_eval's.

:func:`parse_metrics` reads what ``-m`` takes: ``name``, ``name@k``,
``name@k1,k2``, other tools' names
(:data:`~ranking_plugins.runs.names.spec.ALIASES`, ``P_10``) and trec_eval's
spellings as trec_eval does (:mod:`ranking_plugins.runs.names.trec_eval`,
which also prints trec_eval's output layout), as ``(metric, k)`` pairs.

>>> parse_metrics(["ndcg@10", "mrr", "precision@5,10", "P_20"])
[('ndcg', 10), ('mrr', None), ('precision', 5), ('precision', 10), ('precision', 20)]
>>> parse_metrics(["P.5,10", "set_P", "binG"])
[('precision', 5), ('precision', 10), ('precision', None), ('bin_g', None)]

:func:`parse_measures` is the Python API's reading of the same names plus
ir_measures' (strings or its measure objects) and ranx's, each with its own
cutoff and parameters (:class:`~ranking_plugins.runs.names.spec.MeasureSpec`);
``parse_metrics`` is its view for ``-m``.

>>> [(m.metric, m.k, m.options, m.key) for m in parse_measures(["P(rel=2)@10", "ndcg_cut.5"])]
[('precision', 10, {'relevance_threshold': 2.0}, 'P(rel=2)@10'), ('ndcg', 5, {}, 'ndcg_cut_5')]

Each spelling's names live in a module of their own, all of whose public names
this package re-exports: :mod:`~ranking_plugins.runs.names.spec` (the record
and the package's own names), :mod:`~ranking_plugins.runs.names.trec_eval`,
:mod:`~ranking_plugins.runs.names.pytrec_eval`,
:mod:`~ranking_plugins.runs.names.ir_measures` and
:mod:`~ranking_plugins.runs.names.ranx`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ranking_plugins.metrics import METRICS
from ranking_plugins.options import Options
from ranking_plugins.runs.names.ir_measures import (
    IR_MEASURES,
    IR_MEASURES_REFUSED,
    IrMeasure,
    ir_measure,
    ir_measures_token,
)
from ranking_plugins.runs.names.pytrec_eval import (
    PYTREC_EVAL_CONSTANTS,
    PYTREC_EVAL_MEASURES,
    PYTREC_EVAL_NICKNAMES,
    pytrec_eval_measures,
)
from ranking_plugins.runs.names.ranx import RANX_NAMES, RANX_REFUSED, ranx_measure
from ranking_plugins.runs.names.spec import ALIASES, MeasureSpec, cutoff, metric_pairs
from ranking_plugins.runs.names.trec_eval import (
    ALL_TREC,
    DEFAULT_CUTOFFS,
    GEOMETRIC_MEANS,
    TREC_EVAL_MEASURES,
    TrecEvalMeasure,
    format_trec_eval,
    is_count,
    trec_eval_measures,
    trec_eval_name,
)

#: the options of the diversity measures, set by no flag of the command (its ``--alpha`` is
#: ``compare``'s significance level)
UNFLAGGED_OPTIONS = ("alpha", "beta")


def parse_metrics(values: Sequence[str]) -> list[tuple[str, int | None]]:
    """``-m`` values to ``(metric, k)`` pairs, in the order asked, without repeats.

    ``name`` (whole list), ``name@k`` or ``name@k1,k2``; several may share one
    value, separated by commas (``ndcg@10,mrr``). ``k`` is None for the whole
    list. trec_eval and ir_measures names are accepted (:func:`parse_measures`);
    a measure's own parameters (``P(rel=2)@10``) are not: the command sets them
    for every measure with its flags.
    """
    # no flag sets alpha or beta: the command reads the package's defaults, so a measure
    # that names them (ir_measures writes NRBP's as alpha=0.5, beta=0.5) asks nothing more
    unflagged = {name: getattr(Options(), name) for name in UNFLAGGED_OPTIONS}
    wanted: list[tuple[str, int | None]] = []
    for spec in parse_measures(list(values)):
        items = [(n, v) for n, v in spec.option_items if n not in unflagged or unflagged[n] != v]
        if any(name in unflagged for name, _ in items):
            asked = ", ".join(f"{name}={value!r}" for name, value in items)
            fixed = ", ".join(f"{name}={value!r}" for name, value in unflagged.items())
            raise ValueError(
                f"{spec.key!r} sets {asked} for itself; the command evaluates the diversity "
                f"measures at {fixed} (evaluate_run takes others)"
            )
        if items or spec.judged_only:
            own = [f"{name}={value!r}" for name, value in items]
            own += ["judged_only=True"] if spec.judged_only else []
            raise ValueError(
                f"{spec.key!r} sets {', '.join(own)} for itself, which the Python API "
                "reads; the command sets the options for every measure with its flags "
                "(--relevance-threshold, --rbp-persistence, --gain, --judged-only): ask for "
                f"{spec.metric} with them"
            )
        if (spec.metric, spec.k) not in wanted:
            wanted.append((spec.metric, spec.k))
    return wanted


def parse_measures(measures: str | object | Iterable[str | object]) -> list[MeasureSpec]:
    """Measures in any spelling to :class:`~ranking_plugins.runs.names.spec.MeasureSpec`
    records, in the order asked.

    Each measure is a string or an ir_measures measure object (``ir_measures.nDCG@10``,
    read from its ``NAME`` and ``params``; ir_measures need not be installed for
    strings). A string holds one or several, separated by commas outside
    parentheses, in any of three spellings:

    * this package's: ``ndcg@10``, ``precision@5,10``, ``mrr``
      (:data:`~ranking_plugins.runs.names.spec.ALIASES` too);
    * trec_eval's: ``ndcg_cut_10``, ``P.5,10``, ``P`` (its default cutoffs),
      ``set_P``, ``all_trec`` (see :func:`parse_metrics`);
    * ir_measures': ``nDCG@10``, ``P(rel=2)@10``, ``AP``, ``RR@10``, ``R@100``,
      ``RBP(p=0.8)``, ``IPrec@0.5``, ...
      (:data:`~ranking_plugins.runs.names.ir_measures.IR_MEASURES`). A parameter
      that is an option here sets it for that measure only (``rel``: relevance_threshold,
      ``p``: rbp_persistence, ``dcg``: gain, ``judged_only``); ``p`` not written is
      ir_measures' 0.8 whatever the call's options, and the others not written
      follow the call's options, whose defaults are ir_measures' (the linear
      gain, grades above 0 relevant). ir_measures' measures this
      package does not compute (``ERR``: gdeval's, ...), and
      parameter values it cannot honour (``gains``, ``SetF(beta=2)``), are a
      ValueError naming the ones it computes.

    ``key``, the name a result is shown under, is the measure as it was asked:
    ``str(measure)`` for an ir_measures object (what ir_measures keys its
    results by), the token as written for a string naming one measure
    (``"nDCG@10"``, ``"ndcg@10"``, ``"P_10"``), and trec_eval's name of each
    (``P_5``, ``P_10``: pytrec_eval's keys) for a trec_eval token naming several
    or written with a dot; ``ndcg@5,10`` continues the last token's spelling
    (``ndcg@5``, ``ndcg@10``). A key asked twice is kept once; two spellings of
    one measure keep both keys. An empty list gives an empty list.
    """
    if isinstance(measures, str) or _isir_measure(measures):
        measures = [measures]
    if not isinstance(measures, Iterable):
        raise TypeError(
            "`measures` must be a measure name (str), an ir_measures measure or an "
            f"iterable of them, got {type(measures).__name__}"
        )
    specs: list[MeasureSpec] = []
    for measure in measures:
        if isinstance(measure, str):
            found = _string_measures(measure)
        elif _isir_measure(measure):
            key = str(measure)
            found = [ir_measure(str(getattr(measure, "NAME", "")), _params(measure), key, key)]
        else:
            raise TypeError(
                "`measures`: each measure must be a name (str) or an ir_measures measure, "
                f"got {type(measure).__name__} {measure!r}"
            )
        specs.extend(spec for spec in found if spec.key not in {s.key for s in specs})
    return specs


def _isir_measure(value: object) -> bool:
    """Whether ``value`` looks like an ir_measures measure (duck-typed: no import)."""
    return isinstance(getattr(value, "NAME", None), str) and isinstance(
        getattr(value, "params", None), dict
    )


def _params(measure: object) -> dict[str, object]:
    params: dict[str, object] = dict(getattr(measure, "params", {}))
    return params


def _tokens(value: str) -> list[str]:
    """``value`` split at the commas outside brackets (``nDCG(gains={0:0,1:1})`` is one)."""
    tokens, depth, current = [], 0, ""
    for char in value:
        depth += (char in "([{") - (char in ")]}")
        if char == "," and depth == 0:
            tokens.append(current)
            current = ""
        else:
            current += char
    tokens.append(current)
    return [token.strip() for token in tokens]


def _string_measures(value: str) -> list[MeasureSpec]:
    specs: list[MeasureSpec] = []
    last: MeasureSpec | None = None  # the measure a bare ``,k`` continues
    for token in _tokens(value):
        if not token:
            raise ValueError(f"empty metric name in {value!r}")
        if token.isdigit() and last is not None:
            k = cutoff(token, last.metric)
            found = [replace(last, k=k, key=re.sub(r"(?<=[@_.])\d+$", token, last.key))]
        else:
            found = _one_token(token)
        last = found[-1] if found[-1].k is not None else None
        specs.extend(found)
    return specs


def _one_token(token: str) -> list[MeasureSpec]:
    found = ranx_measure(token) or ir_measures_token(token)
    if found is not None:
        return [found]
    pairs = metric_pairs(token)
    if len(pairs) == 1 and "." not in token:
        return [MeasureSpec(pairs[0][0], pairs[0][1], token)]
    return [MeasureSpec(metric, k, trec_eval_name(metric, k)) for metric, k in pairs]


def is_diversity(metric: str) -> bool:
    """Whether a measure reads subtopic judgments (alpha_ndcg, err_ia, ...; a summary of
    the command, gm_map, is no metric of the table)."""
    found = METRICS.get(metric)
    return found is not None and found.intents


__all__ = [
    "ALIASES",
    "ALL_TREC",
    "DEFAULT_CUTOFFS",
    "GEOMETRIC_MEANS",
    "IR_MEASURES",
    "IR_MEASURES_REFUSED",
    "PYTREC_EVAL_CONSTANTS",
    "PYTREC_EVAL_MEASURES",
    "PYTREC_EVAL_NICKNAMES",
    "RANX_NAMES",
    "RANX_REFUSED",
    "TREC_EVAL_MEASURES",
    "IrMeasure",
    "MeasureSpec",
    "TrecEvalMeasure",
    "format_trec_eval",
    "is_count",
    "parse_measures",
    "parse_metrics",
    "pytrec_eval_measures",
    "trec_eval_measures",
    "trec_eval_name",
]
