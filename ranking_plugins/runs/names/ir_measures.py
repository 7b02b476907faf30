"""ir_measures' measure names, with their parameters, as this package computes them.

:data:`IR_MEASURES` holds each measure computed (its registered names, aliases
included) as an :class:`IrMeasure`, :data:`IR_MEASURES_REFUSED` those not
computed; :func:`ir_measures_token` reads one token of ir_measures' spelling
(``nDCG@10``, ``P(rel=2)@10``, ``RBP(p=0.8)``) and :func:`ir_measure` one
measure given as a name and ir_measures' parameters (as its measure objects
hold them).

>>> spec = ir_measures_token("P(rel=2)@10")
>>> spec.metric, spec.k, spec.options
('precision', 10, {'relevance_threshold': 2.0})
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any

from ranking_plugins.metrics import METRICS, RECALL_LEVEL_METRICS, RECALL_LEVELS
from ranking_plugins.runs.names.spec import MeasureSpec, cutoff
from ranking_plugins.runs.names.trec_eval import TREC_EVAL_MEASURES


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

#: an ir_measures spelling: ``Name``, ``Name(params)``, ``Name@at``, ``Name(params)@at``
_IR_SPELLING = re.compile(r"([^\W\d]\w*)(?:\((.*)\))?(?:@(.+))?")


def ir_measures_token(token: str) -> MeasureSpec | None:
    """The spec of one token in ir_measures' spelling, or None for another spelling.

    A bare name that trec_eval also has (``P``, ``Rprec``) is trec_eval's; with
    parameters or a name of ir_measures only (``nDCG``, ``AP``) it is ir_measures'.
    """
    ir = _IR_SPELLING.fullmatch(token)
    if not ir or (
        ir.group(2) is None
        and (ir.group(1) not in IR_MEASURES_NAMES or ir.group(1) in TREC_EVAL_MEASURES)
    ):
        return None
    name, params_text, at = ir.groups()
    params = _ir_params(params_text, token) if params_text is not None else {}
    if at is not None:
        params[IR_MEASURES[name].at if name in IR_MEASURES else "cutoff"] = at
    return ir_measure(name, params, token, token)


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


def ir_measure(name: str, params: dict[str, object], key: str, token: str) -> MeasureSpec:
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
            k = cutoff(str(at), token) if not isinstance(at, bool) else cutoff("", token)
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
