"""Metric names: the package's, trec_eval's and ir_measures', as ``(metric, k)`` pairs.

:func:`parse_metrics` reads what ``-m`` takes: ``name``, ``name@k``,
``name@k1,k2``, other tools' names (:data:`ALIASES`, ``P_10``) and trec_eval's
spellings as trec_eval does: a measure (``set_P``,
``binG``), a family at its default cutoffs (``P``, ``relative_P``), a family
with cutoffs (``P.5,10``, ``ndcg_cut.10``) or ``all_trec`` (every measure
of :data:`TREC_EVAL_MEASURES` that the package computes, at trec_eval's
default cutoffs). :func:`format_trec_eval` prints trec_eval's own layout
(``measure<TAB>query<TAB>value``, 4 decimals, counts as integers, the
``all`` lines last, counts summed there) so that the two outputs can be diffed.

>>> parse_metrics(["ndcg@10", "mrr", "precision@5,10", "P_20"])
[('ndcg', 10), ('mrr', None), ('precision', 5), ('precision', 10), ('precision', 20)]
>>> parse_metrics(["P.5,10", "set_P", "binG"])
[('precision', 5), ('precision', 10), ('precision', None), ('bin_g', None)]
>>> trec_eval_measures("P.5,10")
[('precision', 5), ('precision', 10)]
>>> trec_eval_measures("set_P")
[('precision', None)]
>>> trec_eval_name("relative_precision", 20), trec_eval_name("bin_g", None)
('relative_P_20', 'binG')

:func:`parse_measures` is the Python API's reading of the same names plus
ir_measures' (strings or its measure objects), each with its own cutoff and
parameters (:class:`MeasureSpec`); ``parse_metrics`` is its view for ``-m``.

>>> [(m.metric, m.k, m.options, m.key) for m in parse_measures(["P(rel=2)@10", "ndcg_cut.5"])]
[('precision', 10, {'relevance_threshold': 2.0}, 'P(rel=2)@10'), ('ndcg', 5, {}, 'ndcg_cut_5')]
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ranking_plugins import _validation as validation
from ranking_plugins.metrics import (
    METRICS,
    R_MULTIPLE_METRICS,
    RECALL_LEVEL_METRICS,
    RECALL_LEVELS,
    result_key,
)
from ranking_plugins.options import Options

#: the options of the diversity measures, set by no flag of the command (its ``--alpha`` is
#: ``compare``'s significance level)
UNFLAGGED_OPTIONS = ("alpha", "beta")

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

#: Other tools' names for the package's metrics, trec_eval's (``P_10``,
#: ``recip_rank``, ``ndcg_cut_10``, ...) and ir_measures' (``P@10``, ``RR``,
#: ``nDCG@10``, ...). ``map_cut`` and ``ndcg_cut`` alone are trec_eval's, at its
#: default cutoffs (:func:`trec_eval_measures`).
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


@dataclass(frozen=True)
class MeasureSpec:
    """One measure asked of the Python API: a metric at one cutoff, with the options its
    own parameters set, and the key its result is shown under.

    ``metric``: a name of :data:`~ranking_plugins.metrics.METRICS`; ``k``: the cutoff
    (None: the whole list). ``option_items``: the
    :class:`~ranking_plugins.options.Options` fields the measure's parameters set
    (``P(rel=2)@10``: ``relevance_threshold=2.0``), for this measure only, over the
    call's options; read as the dict :attr:`options`. ``judged_only``: read the list
    without its unjudged documents (ir_measures' ``judged_only=True``, trec_eval's
    ``-J``); an evaluator that cannot must refuse it. ``key``: see :func:`parse_measures`.
    """

    metric: str
    k: int | None
    key: str
    option_items: tuple[tuple[str, Any], ...] = ()
    judged_only: bool = False

    @property
    def options(self) -> dict[str, Any]:
        """The :class:`~ranking_plugins.options.Options` overrides of this measure."""
        return dict(self.option_items)


def parse_measures(measures: str | object | Iterable[str | object]) -> list[MeasureSpec]:
    """Measures in any spelling to :class:`MeasureSpec` records, in the order asked.

    Each measure is a string or an ir_measures measure object (``ir_measures.nDCG@10``,
    read from its ``NAME`` and ``params``; ir_measures need not be installed for
    strings). A string holds one or several, separated by commas outside
    parentheses, in any of three spellings:

    * this package's: ``ndcg@10``, ``precision@5,10``, ``mrr`` (:data:`ALIASES` too);
    * trec_eval's: ``ndcg_cut_10``, ``P.5,10``, ``P`` (its default cutoffs),
      ``set_P``, ``all_trec`` (see :func:`parse_metrics`);
    * ir_measures': ``nDCG@10``, ``P(rel=2)@10``, ``AP``, ``RR@10``, ``R@100``,
      ``RBP(p=0.8)``, ``IPrec@0.5``, ... (:data:`IR_MEASURES`). A parameter that
      is an option here sets it for that measure only (``rel``: relevance_threshold,
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
    if isinstance(measures, str) or _is_ir_measure(measures):
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
        elif _is_ir_measure(measure):
            key = str(measure)
            found = [_ir_measure(str(getattr(measure, "NAME", "")), _params(measure), key, key)]
        else:
            raise TypeError(
                "`measures`: each measure must be a name (str) or an ir_measures measure, "
                f"got {type(measure).__name__} {measure!r}"
            )
        specs.extend(spec for spec in found if spec.key not in {s.key for s in specs})
    return specs


def _is_ir_measure(value: object) -> bool:
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


#: an ir_measures spelling: ``Name``, ``Name(params)``, ``Name@at``, ``Name(params)@at``
_IR_SPELLING = re.compile(r"([^\W\d]\w*)(?:\((.*)\))?(?:@(.+))?")


def _string_measures(value: str) -> list[MeasureSpec]:
    specs: list[MeasureSpec] = []
    last: MeasureSpec | None = None  # the measure a bare ``,k`` continues
    for token in _tokens(value):
        if not token:
            raise ValueError(f"empty metric name in {value!r}")
        if token.isdigit() and last is not None:
            k = _cutoff(token, last.metric)
            found = [replace(last, k=k, key=re.sub(r"(?<=[@_.])\d+$", token, last.key))]
        else:
            found = _one_token(token)
        last = found[-1] if found[-1].k is not None else None
        specs.extend(found)
    return specs


def _one_token(token: str) -> list[MeasureSpec]:
    ranx = _ranx_measure(token)
    if ranx is not None:
        return [ranx]
    ir = _IR_SPELLING.fullmatch(token)
    if ir and (
        ir.group(2) is not None
        or (ir.group(1) in IR_MEASURES_NAMES and ir.group(1) not in TREC_EVAL_MEASURES)
    ):
        name, params_text, at = ir.groups()
        params = _ir_params(params_text, token) if params_text is not None else {}
        if at is not None:
            params[IR_MEASURES[name].at if name in IR_MEASURES else "cutoff"] = at
        return [_ir_measure(name, params, token, token)]
    pairs = _pairs_of_token(token)
    if len(pairs) == 1 and "." not in token:
        return [MeasureSpec(pairs[0][0], pairs[0][1], token)]
    return [MeasureSpec(metric, k, trec_eval_name(metric, k)) for metric, k in pairs]


#: ranx's metric names that are not the package's (its others are: ``hit_rate``,
#: ``precision``, ``recall``, ``f1``, ``mrr``, ``map``, ``ndcg``, ``dcg``, each ``@k``),
#: as the package's metric and the options that make it ranx's; ``tests/test_measure_names.py``
#: and ``tests/test_fuzz_ir_measures.py`` check each against ``ranx.evaluate``
RANX_NAMES: dict[str, tuple[str, tuple[tuple[str, Any], ...]]] = {
    "r-precision": ("r_precision", ()),
    "ndcg_burges": ("ndcg", (("gain", "exponential"),)),
    "dcg_burges": ("dcg", (("gain", "exponential"),)),
    "hits": ("num_rel_ret", ()),  # on the whole list only: see RANX_REFUSED
}
#: ranx's metrics of another definition than the package's of that name: refused, and why
RANX_REFUSED = {
    "hits@k": "ranx's hits@k counts the relevant documents in the top k, which this "
    "package does not compute at a cutoff: it is precision@k times k (hits alone, on the "
    "whole list, is num_rel_ret)",
    "rbp": "ranx's rbp.p sums each retrieved document's grade as it is, weighted "
    "p^(rank - 1); this package's rbp (trec_eval's) divides each grade by the query's "
    "largest, another number on graded qrels: ask for RBP(p=0.95), or rbp with "
    "rbp_persistence=0.95, for that one",
}
#: ranx's relevance level: ``ndcg@10-l2`` (grades of 2 and more relevant)
_RANX_LEVEL = re.compile(r"(.+)-l(\d+)")


def _ranx_measure(token: str) -> MeasureSpec | None:
    """The spec of one of ranx's names (:data:`RANX_NAMES`, a name with ranx's ``-lN``
    level), or None for a token of another spelling."""
    base, level = token, None
    found = _RANX_LEVEL.fullmatch(token)
    if found is not None:
        base, level = found.group(1), float(found.group(2))
    name, at, k_text = base.partition("@")
    if name.partition(".")[0] == "rbp" and ("." in name or level is not None):
        raise ValueError(f"{token!r}: {RANX_REFUSED['rbp']}")
    if name == "hits" and at:
        raise ValueError(f"{token!r}: {RANX_REFUSED['hits@k']}")
    entry = RANX_NAMES.get(name)
    if entry is None and level is None:
        return None
    if entry is not None:
        metric, fixed = entry
        k = _cutoff(k_text, token) if at else None
        if k is not None and not METRICS[metric].at_k:
            raise ValueError(f"ranx's {name} takes no cutoff @k (got {token!r})")
    else:
        pairs = _pairs_of_token(base)
        if len(pairs) != 1:
            raise ValueError(f"{token!r}: ranx's -l level is read on one measure, got {base!r}")
        (metric, k), fixed = pairs[0], ()
    options = dict(fixed)
    if level is not None:
        options["relevance_threshold"] = level
    return MeasureSpec(metric, k, token, tuple(options.items()))


def _ir_params(text: str, token: str) -> dict[str, object]:
    """``rel=2, p=0.8`` (Python literals, as ir_measures writes them) to a dict."""
    try:
        call = ast.parse(f"f({text})", mode="eval").body
        if not isinstance(call, ast.Call) or call.args:
            raise ValueError("parameters are name=value")
        return {str(kw.arg): ast.literal_eval(kw.value) for kw in call.keywords}
    except (SyntaxError, ValueError) as error:
        raise ValueError(
            f"cannot read the parameters of {token!r} (name=value, separated by commas): {error}"
        ) from None


@dataclass(frozen=True)
class IrMeasure:
    """How this package computes one of ir_measures' measures."""

    metric: str  # the package's metric
    params: tuple[str, ...] = ()  # the parameters read, besides the cutoff
    at_k: bool = False  # takes ``@cutoff``
    at: str = "cutoff"  # what ``@`` sets (IPrec's is the recall level)
    #: options that make the package's metric ir_measures' measure, whatever the call's
    fixed: tuple[tuple[str, Any], ...] = ()


_REL, _JUDGED = "rel", "judged_only"
#: ir_measures' measures (their registered names, aliases included) that this package
#: computes; ``tests/test_measure_names.py`` checks each against ir_measures' values
IR_MEASURES: dict[str, IrMeasure] = {
    **dict.fromkeys(("AP", "MAP"), IrMeasure("map", (_REL, _JUDGED), at_k=True)),
    **dict.fromkeys(("Bpref", "BPref"), IrMeasure("bpref", (_REL,))),
    "infAP": IrMeasure("infap", (_REL,)),
    "IPrec": IrMeasure("iprec_at_recall", (_REL, _JUDGED), at="recall"),
    # ir_measures' Judged@k divides by min(k, list length), as adaptive_k does
    "Judged": IrMeasure("judged", at_k=True, fixed=(("adaptive_k", True),)),
    **dict.fromkeys(("nDCG", "NDCG"), IrMeasure("ndcg", ("dcg", "gains", _JUDGED), at_k=True)),
    "NumRel": IrMeasure("num_rel", (_REL,)),
    "NumRet": IrMeasure("num_ret", (_REL,)),  # with rel: NumRelRet
    "NumRelRet": IrMeasure("num_rel_ret", (_REL,)),
    **dict.fromkeys(("P", "Precision"), IrMeasure("precision", (_REL, _JUDGED), at_k=True)),
    **dict.fromkeys(("R", "Recall"), IrMeasure("recall", (_REL, _JUDGED), at_k=True)),
    # its p not written is ir_measures' 0.8, whatever the call's (the command's is 0.9)
    "RBP": IrMeasure("rbp", ("p",), at_k=True, fixed=(("rbp_persistence", 0.8),)),
    **dict.fromkeys(("Rprec", "RPrec"), IrMeasure("r_precision", (_REL, _JUDGED))),
    **dict.fromkeys(("RR", "MRR"), IrMeasure("mrr", (_REL, _JUDGED), at_k=True)),
    "SetP": IrMeasure("precision", (_REL, "relative", _JUDGED)),
    "SetRelP": IrMeasure("relative_precision", (_REL, "relative", _JUDGED)),
    "SetR": IrMeasure("recall", (_REL,)),
    "SetF": IrMeasure("f1", (_REL, "beta", _JUDGED)),
    "SetAP": IrMeasure("set_map", (_REL, _JUDGED)),
    "Success": IrMeasure("hit_rate", (_REL, _JUDGED), at_k=True),
    # the diversity measures (pyndeval's in ir_measures); alpha and beta not written are
    # ir_measures' 0.5 whatever the call's options
    **{
        name: IrMeasure(metric, params, at_k=at_k, fixed=(("alpha", 0.5), ("beta", 0.5)))
        for names, metric, params, at_k in (
            (("alpha_nDCG", "α_nDCG"), "alpha_ndcg", ("alpha", _REL, _JUDGED), True),
            (("alpha_DCG", "α_DCG"), "alpha_dcg", ("alpha", _REL, _JUDGED), True),
            (("ERR_IA",), "err_ia", (_REL, _JUDGED), True),
            (("nERR_IA",), "nerr_ia", (_REL, _JUDGED), True),
            (("NRBP",), "nrbp", ("alpha", "beta", _REL), False),
            (("nNRBP",), "nnrbp", ("alpha", "beta", _REL), False),
            (("P_IA",), "p_ia", (_REL, _JUDGED), True),
            (("AP_IA", "MAP_IA"), "ap_ia", (_REL, _JUDGED), False),
            (("StRecall",), "subtopic_recall", (_REL,), True),
        )
        for name in names
    },
}
#: ir_measures' measures this package does not compute, and why where it has a near one
IR_MEASURES_REFUSED: dict[str, str] = {
    "ERR": "ir_measures' ERR is gdeval's, R = (2^g - 1) / 2^4 for every query; this "
    "package's err@k (R = (2^g - 1) / 2^g_max, g_max the query's largest grade) is "
    "another measure, asked as err@k",
    **dict.fromkeys(
        (
            "Accuracy", "BPM", "Compat", "INST", "INSQ", "NERR8", "NERR9", "NERR10",
            "NERR11", "NumQ", "SDCG",
        ),
        "",
    ),
}  # fmt: skip
IR_MEASURES_NAMES = frozenset(IR_MEASURES) | frozenset(IR_MEASURES_REFUSED)
#: ir_measures' ``nDCG(dcg=...)`` values and this package's gain of each
_DCG_GAINS = {"log2": "linear", "exp-log2": "exponential"}


def _ir_measure(name: str, params: dict[str, object], key: str, token: str) -> MeasureSpec:
    """The spec of ir_measures' measure ``name`` with ``params`` (ir_measures' own)."""
    entry = IR_MEASURES.get(name)
    if entry is None:
        why = IR_MEASURES_REFUSED.get(name)
        what = f"ir_measures' {name}" if why is not None else f"unknown measure {name!r}"
        raise ValueError(
            f"{what} (in {token!r}) is not computed by this package"
            + (f" ({why})" if why else "")
            + f"; of ir_measures' measures it computes {', '.join(IR_MEASURES)}"
            + ("" if why is not None else f"; its own metrics are {', '.join(METRICS)}")
        )
    params = dict(params)
    metric, k = entry.metric, None
    options: dict[str, Any] = dict(entry.fixed)
    judged_only = False
    at = params.pop(entry.at, None)
    if at is not None:
        if entry.at == "recall":
            metric = _recall_level(at, token)
        elif not entry.at_k:
            raise ValueError(f"{token!r}: ir_measures' {name} takes no cutoff @k")
        else:
            k = _cutoff(str(at), token) if not isinstance(at, bool) else _cutoff("", token)
    elif entry.at == "recall":
        raise ValueError(f"{token!r}: IPrec needs a recall level, e.g. IPrec@0.5")
    for param, value in params.items():
        if param not in entry.params:
            accepted = ", ".join(entry.params) or "none"
            raise ValueError(
                f"{token!r}: ir_measures' {name} parameter {param!r} is not read here "
                f"(the parameters read: {accepted})"
            )
        if param == _REL:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{token!r}: rel must be a number, got {value!r}")
            options["relevance_threshold"] = float(value)
            if metric == "num_ret":  # ir_measures' NumRelRet is NumRet(rel=1)
                metric = "num_rel_ret"
        elif param == _JUDGED:
            judged_only = _flag_param(value, param, token)
        elif param == "p":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{token!r}: p must be a number in (0, 1), got {value!r}")
            options["rbp_persistence"] = float(value)
        elif param == "dcg":
            if value not in _DCG_GAINS:
                raise ValueError(
                    f"{token!r}: dcg must be one of {list(_DCG_GAINS)} (the linear and the "
                    f"exponential gain), got {value!r}"
                )
            options["gain"] = _DCG_GAINS[str(value)]
        elif param == "relative":
            if _flag_param(value, param, token):
                metric = "relative_precision"
            elif metric == "relative_precision":
                metric = "precision"
        elif param in ("alpha", "beta") and entry.metric != "f1":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{token!r}: {param} must be a number, got {value!r}")
            options[param] = float(value)
        elif param == "beta":
            if value != 1:
                raise ValueError(f"{token!r}: only SetF's beta=1 (F1) is computed, got {value!r}")
        else:  # gains: a custom grade-to-gain mapping
            raise ValueError(
                f"{token!r}: custom gains are not computed; the gains are linear or "
                "exponential (dcg='log2' or dcg='exp-log2')"
            )
    return MeasureSpec(metric, k, key, tuple(options.items()), judged_only)


def _flag_param(value: object, param: str, token: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{token!r}: {param} must be True or False, got {value!r}")
    return value


def _recall_level(value: object, token: str) -> str:
    """IPrec's recall level to the metric of that level (trec_eval's 11 levels only)."""
    try:
        level = float(str(value))
    except ValueError:
        level = math.nan
    levels = zip(RECALL_LEVELS, RECALL_LEVEL_METRICS, strict=True)
    names = {round(level_, 2): name for level_, name in levels}
    if (
        not math.isfinite(level)
        or round(level, 2) not in names
        or abs(level - round(level, 2)) > 1e-9
    ):
        raise ValueError(
            f"{token!r}: IPrec is computed at trec_eval's recall levels "
            f"{', '.join(str(r) for r in RECALL_LEVELS)}, got {value!r}"
        )
    return names[round(level, 2)]


def _pairs_of_token(token: str) -> list[tuple[str, int | None]]:
    name = token.partition(".")[0]
    trec_eval_only = name in TREC_EVAL_MEASURES or name in (ALL_TREC, *LEVEL_FAMILIES)
    if "." in token or (trec_eval_only and name not in METRICS):
        # trec_eval's spelling: ``P.5``, ``set_P``, ``P`` (its default cutoffs), ``all_trec``
        pairs = trec_eval_measures(token)
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
        raise ValueError(f"{metric!r} takes no cutoff @k (got {token!r})")
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
    raise ValueError(
        f"unknown metric {name!r} (in {token!r}); the metrics are {', '.join(METRICS)} "
        "(as name, name@k or name@k1,k2; trec_eval names such as P_10 and "
        "ndcg_cut_10, and ir_measures' such as nDCG@10 and P(rel=2)@10, also work)"
    )


def _cutoff(text: str, token: str) -> int:
    # top_k's rule (a positive int), on the digits of the token
    if not text.isdigit() or validation.top_k_problem(int(text)) is not None:
        raise ValueError(f"the cutoff in {token!r} must be a positive integer, got {text!r}")
    return int(text)


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


def is_diversity(metric: str) -> bool:
    """Whether a measure reads subtopic judgments (alpha_ndcg, err_ia, ...; a summary of
    the command, gm_map, is no metric of the table)."""
    found = METRICS.get(metric)
    return found is not None and found.intents


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


#: pytrec_eval's ``supported_measures`` (trec_eval 9.0's measures, as pytrec_eval-terrier
#: lists them); ``tests/test_dropins.py`` checks them against pytrec_eval's
PYTREC_EVAL_MEASURES = frozenset(
    (
        "11pt_avg", "G", "P", "Rndcg", "Rprec", "Rprec_mult", "binG", "bpref", "gm_bpref",
        "gm_map", "infAP", "iprec_at_recall", "map", "map_cut", "ndcg", "ndcg_cut",
        "ndcg_rel", "num_nonrel_judged_ret", "num_q", "num_rel", "num_rel_ret", "num_ret",
        "recall", "recip_rank", "relative_P", "relstring", "runid", "set_F", "set_P",
        "set_map", "set_recall", "set_relative_P", "success", "utility",
    )
)  # fmt: skip
#: pytrec_eval's values of the measures that are no measure of a query: a constant each
PYTREC_EVAL_CONSTANTS = {"num_q": 1.0, "runid": 0.0, "relstring": 0.0}
_OFFICIAL = (
    "num_ret", "num_rel_ret", "iprec_at_recall", "bpref", "gm_map", "runid", "P",
    "num_rel", "num_q", "recip_rank", "Rprec", "map",
)  # fmt: skip
_SET = (
    "num_ret", "num_rel_ret", "runid", "set_relative_P", "set_F", "num_rel",
    "set_recall", "num_q", "set_P", "utility", "set_map",
)  # fmt: skip
#: pytrec_eval's ``supported_nicknames`` that this package computes (its ``all_trec`` is
#: trec_eval 9.0's, without trec_eval 10's rbp and unj); its preference measures are not
PYTREC_EVAL_NICKNAMES: dict[str, frozenset[str]] = {
    "official": frozenset(_OFFICIAL),
    "set": frozenset(_SET),
    "all_trec": PYTREC_EVAL_MEASURES,
}
#: pytrec_eval's spelling of a measure with parameters: ``P.5``, ``P_5``, ``P.5,10``
_PYTREC_EVAL_PARAMS = re.compile(r"(.+?)[._]([0-9]+(?:\.[0-9]+)?(?:,[0-9]+(?:\.[0-9]+)?)*)")


def pytrec_eval_measures(measures: Iterable[str]) -> tuple[list[MeasureSpec], list[str]]:
    """pytrec_eval's measure names, as its ``RelevanceEvaluator`` reads them, to specs
    keyed by its result keys (``P_5``, ``ndcg_cut_10``, ``iprec_at_recall_0.00``), and the
    names of :data:`PYTREC_EVAL_CONSTANTS` asked.

    A nickname (:data:`PYTREC_EVAL_NICKNAMES`) stands for its measures; a measure
    alone is read at trec_eval's default parameters, ``name.p1,p2`` or ``name_p1,p2``
    at those; the parameters of one measure asked several times are merged (pytrec_eval
    reads ``{"P.5", "P_10"}`` as ``P.5,10``). A name pytrec_eval does not know, or one
    of its preference measures, is a ValueError.
    """
    if isinstance(measures, str) or not isinstance(measures, Iterable):
        raise TypeError(
            "`measures` must be an iterable of pytrec_eval measure names (a set or a list "
            f"of str), got {type(measures).__name__}"
        )
    asked: dict[str, set[str]] = {}
    for measure in measures:
        if not isinstance(measure, str):
            raise TypeError(f"`measures`: each measure must be a str, got {measure!r}")
        names = sorted(PYTREC_EVAL_NICKNAMES.get(measure, (measure,)))
        for name in names:
            if name in PYTREC_EVAL_MEASURES:
                asked.setdefault(name, set())
                continue
            found = _PYTREC_EVAL_PARAMS.fullmatch(name)
            if found is None or found.group(1) not in PYTREC_EVAL_MEASURES:
                raise ValueError(
                    f"unsupported measure {name!r}: pytrec_eval's measures are "
                    f"{', '.join(sorted(PYTREC_EVAL_MEASURES))} (name, name.p1,p2 or "
                    f"name_p1,p2) and its nicknames {', '.join(PYTREC_EVAL_NICKNAMES)}"
                )
            asked.setdefault(found.group(1), set()).update(found.group(2).split(","))
    specs: list[MeasureSpec] = []
    constants: list[str] = []
    for name, params in asked.items():
        if name in PYTREC_EVAL_CONSTANTS:
            constants.append(name)
            continue
        cut = sorted(params, key=float)
        # trec_eval's reading, not the package's: pytrec_eval's ``recall`` is recall_5, ...
        pairs = trec_eval_measures(f"{name}.{','.join(cut)}" if cut else name)
        assert pairs is not None  # a name of PYTREC_EVAL_MEASURES is trec_eval's
        specs.extend(MeasureSpec(metric, k, trec_eval_name(metric, k)) for metric, k in pairs)
    return specs, constants


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
