"""pytrec_eval's measure names and nicknames, as its ``RelevanceEvaluator`` reads them."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ranking_plugins.runs.names.spec import MeasureSpec
from ranking_plugins.runs.names.trec_eval import trec_eval_measures, trec_eval_name

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
