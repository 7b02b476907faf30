"""A drop-in for ir_measures' ``calc_aggregate`` and ``iter_calc``: change the import.

>>> from ranking_plugins.ir_measures import calc_aggregate, iter_calc
>>> qrels = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d1": 1}}
>>> run = {"q1": {"d1": 0.5, "d2": 0.5, "d3": 0.1}, "q9": {"d1": 1.0}}
>>> {str(m): round(v, 4) for m, v in calc_aggregate(["AP", "P@2"], qrels, run).items()}
{'AP': 0.2917, 'P@2': 0.25}
>>> [(m.query_id, m.measure, m.value) for m in iter_calc(["P@2"], qrels, run)]
[('q1', 'P@2', 0.5), ('q2', 'P@2', 0.0)]

Measures are ir_measures' objects (``nDCG@10``, ``P(rel=2)@5``; results keyed by the
objects, as ir_measures keys them) or strings in any spelling
:func:`ranking_plugins.evaluate_run` reads (keyed by the string). Qrels and run in
any form ``evaluate_run`` takes (ir_measures' dicts, DataFrames, iterables of
``Qrel`` / ``ScoredDoc``). Conventions of ir_measures' trec_eval provider
(pytrec_eval): ties broken by document id, descending, scores read as C floats, the
qrels' queries the run lacks counted as retrieving nothing, the run's queries the
qrels lack left out; counts (``NumRet``, ``NumRel``, ``NumRelRet``) summed, the
others averaged. ``docs/runs.rst`` lists what differs.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from ranking_plugins.choices import TIES
from ranking_plugins.runs.evaluation import COMMAND_DEFAULTS, Settings
from ranking_plugins.runs.names import is_count, parse_measures


class Metric(NamedTuple):
    """One query's value of one measure: ir_measures' ``Metric`` (its own class is
    used instead when ir_measures is imported)."""

    query_id: str
    measure: Any
    value: float


def iter_calc(
    measures: Iterable[Any], qrels: Any, run: Any, *, ties: str = "first"
) -> Iterator[Metric]:
    """Each evaluated query's value of each measure, as ir_measures' ``Metric`` records.

    ``ties``: this package's tie policy (``"first"``, the default, is trec_eval's tie
    break; ``"average"`` the expected value over the orders of each tie, ...).
    """
    results, keys, _ = _evaluate(measures, qrels, run, ties)
    record = _metric_class()
    missing = set(results.unretrieved_queries)
    for qid in results.qids:
        for key, measure in keys.items():
            yield record(qid, measure, _value(results, key, qid, missing))


def _value(results: Any, key: str, qid: str, missing: set[str]) -> float:
    """A query's value; ir_measures scores a query the run lacks 0 on every measure (its
    NumRel too: trec_eval's ``-c`` counts its judgments, ir_measures fills in a 0)."""
    return 0.0 if qid in missing else float(results.per_query[key][qid])


def calc_aggregate(
    measures: Iterable[Any], qrels: Any, run: Any, *, ties: str = "first"
) -> dict[Any, float]:
    """``{measure: value over the queries}``: the mean, or the sum of a count."""
    results, keys, counts = _evaluate(measures, qrels, run, ties)
    missing = set(results.unretrieved_queries)
    if not results.qids:
        return dict.fromkeys(keys.values(), float("nan"))
    return {
        measure: (
            math.fsum(_value(results, key, qid, missing) for qid in results.qids)
            if key in counts
            else results.means[key]
        )
        for key, measure in keys.items()
    }


def _evaluate(
    measures: Iterable[Any], qrels: Any, run: Any, ties: str
) -> tuple[Any, dict[str, Any], set[str]]:
    """The results of ``measures``, the key of each (its object, or the string asked),
    and the keys of counts."""
    from ranking_plugins import _validation as V
    from ranking_plugins.runs.python_api import _measure_list, evaluate_specs

    V.check_choice("ties", ties, TIES)
    keys: dict[str, Any] = {}
    specs = []
    for measure in _measure_list(measures):
        for spec in parse_measures([measure]):
            if spec.key not in keys:
                keys[spec.key] = spec.key if isinstance(measure, str) else measure
                specs.append(spec)
    if not specs:
        raise ValueError("`measures` is empty: name at least one measure")
    settings = Settings(
        COMMAND_DEFAULTS.replace(ties=ties),
        trec_eval_layout=True,  # pytrec_eval's: C-float scores, rel leaves nDCG alone
        unjudged_queries="skip",
        unretrieved_queries="count",
    )
    results = evaluate_specs(qrels, run, specs, settings, no_query_ok=True)
    return results, keys, {s.key for s in specs if is_count(s.metric)}


def _metric_class() -> Any:
    """ir_measures' ``Metric`` where ir_measures is imported (a user's isinstance holds),
    else this module's, of the same fields: ir_measures is never imported here."""
    loaded = sys.modules.get("ir_measures")
    return getattr(loaded, "Metric", Metric) if loaded is not None else Metric


__all__ = ["Metric", "calc_aggregate", "iter_calc"]
