"""A measure as the Python API asks it (:class:`MeasureSpec`), and the package's own names.

The package's spelling is ``name``, ``name@k`` or ``name@k1,k2`` of
:data:`~ranking_plugins.metrics.METRICS`, with other tools' names for the same
metrics (:data:`ALIASES`, trec_eval's ``P_10``); :func:`metric_pairs` reads one
token of it (a name between commas), trec_eval's spellings included, to
``(metric, k)`` pairs.

>>> metric_pairs("ndcg@10"), metric_pairs("P_20"), metric_pairs("RR")
([('ndcg', 10)], [('precision', 20)], [('mrr', None)])
>>> metric_pairs("P.5,10")
[('precision', 5), ('precision', 10)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ranking_plugins import _validation as validation
from ranking_plugins.metrics import METRICS
from ranking_plugins.runs.names.trec_eval import (
    ALL_TREC,
    LEVEL_FAMILIES,
    TREC_EVAL_MEASURES,
    trec_eval_measures,
)


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
    ``-J``); an evaluator that cannot must refuse it. ``key``: see
    :func:`~ranking_plugins.runs.names.parse_measures`.
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


#: Other tools' names for the package's metrics, trec_eval's (``P_10``,
#: ``recip_rank``, ``ndcg_cut_10``, ...) and ir_measures' (``P@10``, ``RR``,
#: ``nDCG@10``, ...). ``map_cut`` and ``ndcg_cut`` alone are trec_eval's, at its
#: default cutoffs (:func:`~ranking_plugins.runs.names.trec_eval.trec_eval_measures`).
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


def metric_pairs(token: str) -> list[tuple[str, int | None]]:
    """``(metric, k)`` pairs of one token in the package's or trec_eval's spelling.

    An unknown name, or a cutoff on a metric that takes none, is a ValueError.
    """
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
    return [(metric, cutoff(k, token)) for k in ks]


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


def cutoff(text: str, token: str) -> int:
    """The cutoff ``text`` of ``token`` as an int: top_k's rule (a positive int), on its digits."""
    if not text.isdigit() or validation.top_k_problem(int(text)) is not None:
        raise ValueError(f"the cutoff in {token!r} must be a positive integer, got {text!r}")
    return int(text)
