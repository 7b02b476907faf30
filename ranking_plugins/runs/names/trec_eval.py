"""trec_eval's measure names, their cutoffs and its output layout.

:data:`TREC_EVAL_MEASURES` is every measure and family of ``trec_eval -m
all_trec`` that the package computes, in the order trec_eval prints them.
:func:`trec_eval_measures` reads trec_eval's spellings as trec_eval does: a
measure (``set_P``, ``binG``), a family at its default cutoffs (``P``,
``relative_P``), a family with cutoffs (``P.5,10``, ``ndcg_cut.10``) or
``all_trec``; :func:`trec_eval_name` is the way back. :func:`format_trec_eval`
prints trec_eval's own layout (``measure<TAB>query<TAB>value``, 4 decimals,
counts as integers, the ``all`` lines last, counts summed there) so that the
two outputs can be diffed.

>>> trec_eval_measures("P.5,10")
[('precision', 5), ('precision', 10)]
>>> trec_eval_measures("set_P")
[('precision', None)]
>>> trec_eval_name("relative_precision", 20), trec_eval_name("bin_g", None)
('relative_P_20', 'binG')
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ranking_plugins.metrics import (
    METRICS,
    R_MULTIPLE_METRICS,
    RECALL_LEVEL_METRICS,
    result_key,
)

#: trec_eval's default cutoffs of the families that take one
DEFAULT_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)


@dataclass(frozen=True)
class TrecEvalMeasure:
    """A trec_eval measure or family: the package's metric, and its cutoffs if it takes any."""

    metric: str
    cutoffs: tuple[int, ...] | None = None  # None: read on the whole list
    #: trec_eval prints it as an integer, and its "all" line is the sum over the queries
    count: bool = False


#: trec_eval's names, in the order ``trec_eval -m all_trec`` prints them
TREC_EVAL_MEASURES: dict[str, TrecEvalMeasure] = {
    "num_ret": TrecEvalMeasure("num_ret", count=True),
    "num_rel": TrecEvalMeasure("num_rel", count=True),
    "num_rel_ret": TrecEvalMeasure("num_rel_ret", count=True),
    "map": TrecEvalMeasure("map"),
    "gm_map": TrecEvalMeasure("gm_map"),
    "Rprec": TrecEvalMeasure("r_precision"),
    "bpref": TrecEvalMeasure("bpref"),  # judged measures
    "recip_rank": TrecEvalMeasure("mrr"),
    **{name: TrecEvalMeasure(name) for name in RECALL_LEVEL_METRICS},
    "P": TrecEvalMeasure("precision", DEFAULT_CUTOFFS),
    "recall": TrecEvalMeasure("recall", DEFAULT_CUTOFFS),
    "infAP": TrecEvalMeasure("infap"),  # judged measures
    "gm_bpref": TrecEvalMeasure("gm_bpref"),
    **{name: TrecEvalMeasure(name) for name in R_MULTIPLE_METRICS},
    "utility": TrecEvalMeasure("utility"),
    "11pt_avg": TrecEvalMeasure("11pt_avg"),
    "binG": TrecEvalMeasure("bin_g"),
    "G": TrecEvalMeasure("g"),
    "ndcg": TrecEvalMeasure("ndcg"),
    "ndcg_rel": TrecEvalMeasure("ndcg_rel"),
    "Rndcg": TrecEvalMeasure("rndcg"),
    "ndcg_cut": TrecEvalMeasure("ndcg", DEFAULT_CUTOFFS),
    "map_cut": TrecEvalMeasure("map", DEFAULT_CUTOFFS),
    "relative_P": TrecEvalMeasure("relative_precision", DEFAULT_CUTOFFS),
    "success": TrecEvalMeasure("hit_rate", (1, 5, 10)),
    "set_P": TrecEvalMeasure("precision"),
    "set_relative_P": TrecEvalMeasure("relative_precision"),
    "set_recall": TrecEvalMeasure("recall"),
    "set_map": TrecEvalMeasure("set_map"),
    "set_F": TrecEvalMeasure("f1"),
    "num_nonrel_judged_ret": TrecEvalMeasure("num_nonrel_judged_ret", count=True),
    "rbp": TrecEvalMeasure("rbp"),
    # judged measures
    "rbp_resid": TrecEvalMeasure("rbp_resid"),
    "unj": TrecEvalMeasure("unj", (5, 10, 20)),
}

#: trec_eval's geometric means: the aggregation (``totals.geometric_mean``) of a metric's
#: per-query values, printed in the "all" line only
GEOMETRIC_MEANS = {"gm_map": "map", "gm_bpref": "bpref"}

#: what ``-m all_trec`` asks for
ALL_TREC = "all_trec"
#: the families of trec_eval's ``iprec_at_recall_*`` and ``Rprec_mult_*`` measures, at
#: its default levels and multiples only
IPREC = "iprec_at_recall"
RPREC_MULT = "Rprec_mult"
LEVEL_FAMILIES = (IPREC, RPREC_MULT)


def trec_eval_measures(token: str) -> list[tuple[str, int | None]] | None:
    """``(metric, k)`` pairs of a trec_eval spelling, or None when ``token`` is not one.

    A family with cutoffs is read at trec_eval's defaults unless ``.k1,k2``
    follows its name; a cutoff that is not a positive integer is a ValueError.
    """
    name, dot, params = token.partition(".")
    if name == ALL_TREC and not dot:
        return [pair for measure in TREC_EVAL_MEASURES.values() for pair in _pairs(measure)]
    if name in LEVEL_FAMILIES:
        if dot:
            raise ValueError(
                f"{token!r}: only trec_eval's default levels of {name} are computed (-m {name})"
            )
        return [(m, None) for m in TREC_EVAL_MEASURES if m.startswith(name + "_")]
    measure = TREC_EVAL_MEASURES.get(name)
    if measure is None:
        return None
    if not dot:
        return _pairs(measure)
    if measure.cutoffs is None:
        raise ValueError(f"trec_eval's {name!r} takes no cutoff (got {token!r})")
    ks = params.split(",")
    if not all(k.isdigit() and int(k) > 0 for k in ks):
        raise ValueError(f"the cutoffs in {token!r} must be positive integers")
    return [(measure.metric, int(k)) for k in ks]


def _pairs(measure: TrecEvalMeasure) -> list[tuple[str, int | None]]:
    if measure.cutoffs is None:
        return [(measure.metric, None)]
    return [(measure.metric, k) for k in measure.cutoffs]


def trec_eval_name(metric: str, k: int | None) -> str:
    """trec_eval's name of a result (the package's key where trec_eval has none)."""
    for name, measure in TREC_EVAL_MEASURES.items():
        if measure.metric != metric:
            continue
        if k is None and measure.cutoffs is None:
            return name
        if k is not None and measure.cutoffs is not None:
            return f"{name}_{k}"
    return result_key(METRICS[metric], k)


def is_count(metric: str) -> bool:
    """Whether trec_eval prints the metric as an integer count, summed in its "all" line."""
    return any(m.metric == metric and m.count for m in TREC_EVAL_MEASURES.values())


def format_trec_eval(
    rows: list[tuple[str, str, bool, list[float], float]],
    qids: list[str],
    per_query: bool,
    strings: tuple[str, Mapping[str, str]] | None = None,
) -> str:
    """trec_eval's layout: ``name<TAB>query<TAB>value`` per query (with -q), then ``all``.

    ``rows``: (trec_eval name, package key, is a count, per-query values, mean) in
    the order to print. Counts print as integers and their ``all`` is the sum.
    ``strings``: trec_eval's relstring (its printed name, each query's string),
    printed per query where trec_eval prints it (after the ``P_k`` lines).
    """

    def value(number: float, count: bool) -> str:
        if math.isnan(number):
            return "nan"
        return str(round(number)) if count else f"{number:.4f}"

    lines: list[str] = []
    # relstring: after the last P_k line, as trec_eval's all_trec order has it
    names = [row[0] for row in rows if row[0] not in GEOMETRIC_MEANS]
    precisions = [n for n in names if n.startswith("P_")]
    after_strings = precisions[-1] if precisions else (names[-1] if names else None)
    if per_query:
        for row, qid in enumerate(qids):
            for name, _, count, values, _ in rows:
                if name in GEOMETRIC_MEANS:  # trec_eval prints those in the "all" line only
                    continue
                lines.append(f"{name:<22}\t{qid}\t{value(values[row], count)}")
                if strings is not None and name == after_strings:
                    lines.append(f"{strings[0]:<22}\t{qid}\t'{strings[1][qid]}'")
    lines.append(f"{'num_q':<22}\tall\t{len(qids)}")
    for name, _, count, values, mean in rows:
        summary = math.fsum(v for v in values if not math.isnan(v)) if count else mean
        lines.append(f"{name:<22}\tall\t{value(summary, count)}")
    return "\n".join(lines) + "\n"
