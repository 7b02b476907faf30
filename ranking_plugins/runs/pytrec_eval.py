"""A drop-in for pytrec_eval's ``RelevanceEvaluator``: change the import, keep the code.

>>> from ranking_plugins.runs.pytrec_eval import RelevanceEvaluator
>>> qrels = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d1": 1}}
>>> run = {"q1": {"d1": 0.5, "d2": 0.5, "d3": 0.1}, "q2": {"d2": 1.0}, "q9": {"d1": 1.0}}
>>> evaluator = RelevanceEvaluator(qrels, {"map", "P.2"})
>>> {
...     qid: {m: round(v, 4) for m, v in sorted(row.items())}
...     for qid, row in evaluator.evaluate(run).items()
... }
{'q1': {'P_2': 0.5, 'map': 0.5}, 'q2': {'P_2': 0.0, 'map': 0.0}}

Same signature, measure names (:data:`supported_measures`, nicknames such as
``official`` and ``all_trec``, families at trec_eval's default parameters, ``P.5,10``),
result shape and conventions as pytrec_eval: ties broken by document id, descending
(trec_eval's, ``ties="first"`` in trec_eval's layout), scores read as C floats,
``relevance_level`` as trec_eval's ``-l`` (its graded measures ignore it),
``judged_docs_only_flag`` as ``-J``, and only the run's queries that the qrels judge
evaluated, silently. The numbers come from :func:`ranking_plugins.evaluate_run`'s path
(:func:`~ranking_plugins.runs.python_api.evaluate_specs`): nothing is computed here.
``docs/runs.rst`` lists what differs (trec_eval 10's interpolated-precision cut).
:func:`compute_aggregated_measure` is pytrec_eval's summary of a measure over the queries.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ranking_plugins import _validation as validation
from ranking_plugins.choices import TIES
from ranking_plugins.runs.evaluation import COMMAND_DEFAULTS, Settings
from ranking_plugins.runs.inputs import as_records
from ranking_plugins.runs.names import (
    GEOMETRIC_MEANS,
    PYTREC_EVAL_CONSTANTS,
    PYTREC_EVAL_MEASURES,
    PYTREC_EVAL_NICKNAMES,
    MeasureSpec,
    pytrec_eval_measures,
)
from ranking_plugins.runs.reading import Records

#: pytrec_eval's names: its measures and its nicknames (``{nickname: measures}``)
supported_measures = set(PYTREC_EVAL_MEASURES)
supported_nicknames = {name: set(members) for name, members in PYTREC_EVAL_NICKNAMES.items()}


def _no_line() -> Records:
    import torch

    from ranking_plugins.runs.reading import IN_MEMORY, arrow

    none = arrow().array([], arrow().binary())
    return Records("<run>", "run", IN_MEMORY, none, none, torch.zeros(0, dtype=torch.float64))


class RelevanceEvaluator:
    """pytrec_eval's ``RelevanceEvaluator``, evaluated by this package.

    Args:
        query_relevance: ``{query_id: {doc_id: grade}}`` (any form
            :func:`ranking_plugins.evaluate_run` takes: a DataFrame, ir_measures'
            ``Qrel`` records...), read here, as pytrec_eval copies it: changing it
            afterwards changes no result. Queries with no judgment are dropped, as
            pytrec_eval drops them; an empty dict evaluates nothing.
        measures: pytrec_eval's measure names and nicknames (a set or a list).
        relevance_level: trec_eval's ``-l``: the least grade that is relevant (above 0),
            for every measure as in pytrec_eval (nDCG's gains are the grades whatever it is).
        judged_docs_only_flag: trec_eval's ``-J``: unjudged documents leave the ranking.
        ties: this package's tie policy; ``"first"`` (default) is trec_eval's tie break,
            ``"average"`` the expected value over the orders of each tie, ...
    """

    def __init__(
        self,
        query_relevance: Any,
        measures: Iterable[str],
        relevance_level: int = 1,
        judged_docs_only_flag: bool = False,
        *,
        ties: str = "first",
    ) -> None:
        validation.check_choice("ties", ties, TIES)
        validation.check("judged_docs_only_flag", validation.flag_problem(judged_docs_only_flag))
        if isinstance(relevance_level, bool) or not isinstance(relevance_level, (int, float)):
            raise ValueError(f"`relevance_level` must be a number, got {relevance_level!r}")
        if not relevance_level > 0:  # pytrec_eval refuses 0, and a negative level counts none
            raise ValueError(
                f"`relevance_level` must be above 0 (the least relevant grade), "
                f"got {relevance_level!r}"
            )
        specs, self._constants = pytrec_eval_measures(measures)
        # a query's gm_map (gm_bpref) is trec_eval's log term of its map (bpref)
        self._geometric = {
            s.key: GEOMETRIC_MEANS[s.metric] for s in specs if s.metric in GEOMETRIC_MEANS
        }
        self._specs = [s for s in specs if s.metric not in GEOMETRIC_MEANS]
        keys = {s.key for s in self._specs}
        self._hidden = [m for m in dict.fromkeys(self._geometric.values()) if m not in keys]
        self._specs += [MeasureSpec(metric, None, metric) for metric in self._hidden]
        # -l 1 is the package's default (a grade above 0) for pytrec_eval's integer grades:
        # left unset, the measures -l leaves alone need no pass of their own
        level = None if relevance_level == 1 else float(relevance_level)
        self._settings = Settings(
            COMMAND_DEFAULTS.replace(ties=ties, relevance_threshold=level),
            trec_eval_layout=True,  # C-float scores; -l leaves the graded measures alone
            judged_only=judged_docs_only_flag,
            unjudged_queries="skip",
            unretrieved_queries="skip",
        )
        if isinstance(query_relevance, Mapping):
            query_relevance = {q: docs for q, docs in query_relevance.items() if docs}
        # read now, as pytrec_eval copies its qrels: a dict changed afterwards, a DataFrame
        # or an iterator (read once) give every evaluate() the judgments given here
        self._qrels: Records | None = (
            as_records(query_relevance, "qrels")
            if not isinstance(query_relevance, Mapping) or query_relevance
            else None
        )

    def evaluate(self, scores: Any) -> dict[str, dict[str, float]]:
        """``{query_id: {measure: value}}`` for the run's queries that the qrels judge.

        A query of the run with no document (``{}``) is evaluated as retrieving nothing,
        as pytrec_eval does; an empty run gives ``{}``.
        """
        from ranking_plugins.runs.python_api import evaluate_specs

        if not scores or self._qrels is None or (not self._specs and not self._constants):
            return {}
        settings = self._settings
        wanted: set[str] | None = None
        if isinstance(scores, Mapping):
            wanted = {str(qid) for qid in scores}
            if any(not docs for docs in scores.values()):
                # an empty query has no line: counted as retrieving nothing, then kept
                # only where the run names it (a run of such queries only: no line at all)
                settings = replace(settings, unretrieved_queries="count")
                scores = {q: docs for q, docs in scores.items() if docs} or _no_line()
        specs = self._specs or [MeasureSpec("num_ret", None, "num_ret")]
        results = evaluate_specs(self._qrels, scores, specs, settings, no_query_ok=True)
        rows = results.to_dict()
        if wanted is not None:
            rows = {qid: row for qid, row in rows.items() if qid in wanted}
        return {qid: self._row(row) for qid, row in rows.items()}

    def _row(self, row: dict[str, float]) -> dict[str, float]:
        import torch

        from ranking_plugins.totals import geometric_terms

        for key, metric in self._geometric.items():
            value = torch.tensor([row[metric]], dtype=torch.float64)
            row[key] = float(geometric_terms(value)[0])
        for metric in self._hidden:
            del row[metric]
        if not self._specs:
            row.clear()
        row.update({name: PYTREC_EVAL_CONSTANTS[name] for name in self._constants})
        return row


def compute_aggregated_measure(measure: str, values: Iterable[float]) -> float:
    """pytrec_eval's summary of a measure's per-query ``values`` (an ``evaluate()`` row's):
    summed for a name that starts with ``num_`` (``num_q``, ``num_ret``, ...), the
    geometric mean for ``gm_`` (its per-query values are trec_eval's log terms: the
    exponential of their mean), else their mean. No values: 0.0 for a sum, else nan;
    a nan value makes a mean nan, as in pytrec_eval.

    >>> compute_aggregated_measure("map", [0.5, 0.25])
    0.375
    >>> compute_aggregated_measure("num_rel_ret", [3.0, 2.0])
    5.0
    >>> round(compute_aggregated_measure("gm_map", [math.log(0.5), math.log(0.125)]), 12)
    0.25
    """
    if not isinstance(measure, str):
        raise TypeError(f"`measure` must be a measure name (str), got {type(measure).__name__}")
    import torch

    data = torch.tensor(list(values), dtype=torch.float64)
    if data.dim() != 1:
        raise ValueError(f"`values` must be numbers, one per query; got shape {list(data.shape)}")
    if measure.startswith("num_"):
        return float(data.sum())
    mean = data.mean() if len(data) else torch.tensor(math.nan)
    return float(torch.exp(mean) if measure.startswith("gm_") else mean)


__all__ = [
    "RelevanceEvaluator",
    "compute_aggregated_measure",
    "supported_measures",
    "supported_nicknames",
]
