"""Differential fuzzing of the ir_measures drop-in against the real ir_measures, per
provider, and of ranx's metric names against the real ranx.

Random small qrels and runs, with tied scores (and scores tied only as C floats),
qrels queries given as ``{}``, run queries given as ``{}``, empty runs, negative
grades and unjudged documents: ``iter_calc`` and ``calc_aggregate`` must give
ir_measures' values to 1e-12 for the measures of each provider its default pipeline
routes to (pytrec_eval's, MS MARCO's ``RR@k``, the judged provider's ``Judged@k``),
alone and mixed (ir_measures then fills in a 0 for the first provider's queries).
Left out: ``IPrec`` (trec_eval 9's cut of a recall level, documented in
``docs/runs.rst``). ranx's names must give ``ranx.evaluate``'s values on untied runs
(ranx orders a tie by numpy's unstable sort of hashed ids).

The number of examples comes from the hypothesis profile (``conftest.py``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ranking_plugins import evaluate_run
from ranking_plugins import ir_measures as rp_ir_measures

ir_measures = pytest.importorskip("ir_measures")

DOCS = [f"d{i}" for i in range(6)]
QUERIES = [f"q{i}" for i in range(4)]
# 1.0 and 1.0 + 1e-9 are one score as C floats (pytrec_eval's) and two as float64
SCORES = [0.5, 1.0, 1.0 + 1e-9, 1.5, 2.0]


def _measures() -> dict[str, list[Any]]:
    m = ir_measures
    return {
        "pytrec_eval": [
            m.AP, m.AP @ 3, m.nDCG @ 3, m.nDCG, m.P @ 2, m.P(rel=2) @ 3, m.R @ 3, m.RR,
            m.RR(rel=2), m.Rprec, m.Bpref, m.NumRet, m.NumRet(rel=1), m.NumRel, m.SetF,
            m.SetP, m.SetR, m.Success @ 2, m.infAP, m.SetAP, m.nDCG(judged_only=True) @ 3,
        ],
        "msmarco": [m.RR @ 1, m.RR @ 3, m.RR @ 10, m.RR(rel=2) @ 5],
        "judged": [m.Judged @ 1, m.Judged @ 3, m.Judged @ 10],
    }  # fmt: skip


@st.composite
def collections(draw: st.DrawFn) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    qrels: dict[str, dict[str, int]] = {}
    for qid in draw(st.lists(st.sampled_from(QUERIES), min_size=1, max_size=4, unique=True)):
        docs = draw(st.lists(st.sampled_from(DOCS), max_size=5, unique=True))
        grades = {d: draw(st.integers(-1, 2)) for d in docs}
        if grades and max(grades.values()) < 0:  # pytrec_eval crashes on such a query
            grades[docs[0]] = 0
        qrels[qid] = grades
    run: dict[str, dict[str, float]] = {}
    for qid in draw(st.lists(st.sampled_from(QUERIES), max_size=4, unique=True)):
        docs = draw(st.lists(st.sampled_from(DOCS), max_size=6, unique=True))
        run[qid] = {d: draw(st.sampled_from(SCORES)) for d in docs}
    return qrels, run


def close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12


def _compare(measures: list[Any], qrels: dict, run: dict) -> None:
    try:
        expected_rows = list(ir_measures.iter_calc(measures, qrels, run))
        expected_means = ir_measures.calc_aggregate(measures, qrels, run)
    except ZeroDivisionError:
        # ir_measures' Judged@k divides by 0 on a query the run holds as {}: the drop-in
        # gives a number (0) there
        event("ir_measures divides by zero")
        got = rp_ir_measures.calc_aggregate(measures, qrels, run)
        assert all(isinstance(value, float) for value in got.values())
        return
    expected = {(m.query_id, m.measure): m.value for m in expected_rows}
    got_rows = {
        (m.query_id, m.measure): m.value for m in rp_ir_measures.iter_calc(measures, qrels, run)
    }
    assert got_rows.keys() == expected.keys()
    for key, value in expected.items():
        assert close(got_rows[key], value), (key, got_rows[key], value)
    means = rp_ir_measures.calc_aggregate(measures, qrels, run)
    assert means.keys() == expected_means.keys()
    for measure, value in expected_means.items():
        assert close(means[measure], value), (measure, means[measure], value)


@settings(deadline=None)
@given(
    collections(),
    st.sampled_from(["pytrec_eval", "msmarco", "judged", "mixed"]),
    st.data(),
)
def test_the_drop_in_gives_ir_measures_values_per_provider(
    collection: tuple[dict, dict], provider: str, data: st.DataObject
) -> None:
    qrels, run = collection
    if data.draw(st.integers(0, 9)) == 0:
        run = {}  # an empty run: ir_measures scores every query 0
    pools = _measures()
    if provider == "mixed":
        pool = [m for measures in pools.values() for m in measures]
    else:
        pool = pools[provider]
    measures = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4, unique=True))
    event(f"provider: {provider}")
    _compare(measures, qrels, run)


# --------------------------------------------------------------------------- ranx's names

RANX_NAMES = [
    "hits", "hit_rate@3", "precision@3", "recall@3", "f1@3", "r-precision", "mrr", "mrr@3",
    "map", "map@3", "ndcg@3", "ndcg_burges@3", "dcg@3", "dcg_burges@3", "ndcg", "precision",
    "precision@3-l2", "ndcg@3-l2", "map-l2", "mrr-l2", "hits-l2", "ndcg_burges@3-l2",
]  # fmt: skip


@st.composite
def untied_collections(
    draw: st.DrawFn,
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """ranx's inputs: every query in both sides, one relevant document at least, no tie."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for qid in draw(st.lists(st.sampled_from(QUERIES), min_size=1, max_size=4, unique=True)):
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=5, unique=True))
        qrels[qid] = {d: draw(st.integers(0, 3)) for d in docs}
        qrels[qid][docs[0]] = draw(st.integers(1, 3))
        ranked = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=6, unique=True))
        scores = draw(st.permutations(range(len(ranked))))
        run[qid] = {d: float(s) + 0.5 for d, s in zip(ranked, scores, strict=True)}
    return qrels, run


@settings(deadline=None, max_examples=max(1, settings.default.max_examples // 4))
@given(
    untied_collections(), st.lists(st.sampled_from(RANX_NAMES), min_size=1, max_size=3, unique=True)
)
def test_ranx_names_give_ranx_values(collection: tuple[dict, dict], names: list[str]) -> None:
    ranx = pytest.importorskip("ranx")
    qrels, run = collection
    ranx_run = ranx.Run(run)
    theirs = ranx.evaluate(ranx.Qrels(qrels), ranx_run, names, return_mean=False)
    theirs = theirs if isinstance(theirs, dict) else {names[0]: theirs}
    ours = evaluate_run(qrels, run, names)
    for name in names:
        expected = dict(zip(ranx_run.get_query_ids(), map(float, theirs[name]), strict=True))
        for qid, value in expected.items():
            assert close(ours.per_query[name][qid], value), (
                name,
                qid,
                ours.per_query[name][qid],
                value,
            )
