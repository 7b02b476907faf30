"""ranx's metric names: those that are not the package's, its ``-lN`` relevance level,
and those of another definition than the package's of that name (refused), read by
:func:`ranx_measure`.

>>> spec = ranx_measure("ndcg_burges@10")
>>> spec.metric, spec.k, spec.options
('ndcg', 10, {'gain': 'exponential'})
>>> ranx_measure("ndcg@10-l2").options
{'relevance_threshold': 2.0}
"""

from __future__ import annotations

import re
from typing import Any

from ranking_plugins.metrics import METRICS
from ranking_plugins.runs.names.spec import MeasureSpec, cutoff, metric_pairs

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


def ranx_measure(token: str) -> MeasureSpec | None:
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
        k = cutoff(k_text, token) if at else None
        if k is not None and not METRICS[metric].at_k:
            raise ValueError(f"ranx's {name} takes no cutoff @k (got {token!r})")
    else:
        pairs = metric_pairs(base)
        if len(pairs) != 1:
            raise ValueError(f"{token!r}: ranx's -l level is read on one measure, got {base!r}")
        (metric, k), fixed = pairs[0], ()
    options = dict(fixed)
    if level is not None:
        options["relevance_threshold"] = level
    return MeasureSpec(metric, k, token, tuple(options.items()))
