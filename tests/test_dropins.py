"""The drop-ins against the libraries they replace, on random collections with ties,
queries in one side only, unjudged documents and negative grades: the same numbers to
1e-12, except the documented difference (docs/runs.rst): trec_eval 9's cut of a recall
level in pytrec_eval (interpolated precision)."""

from __future__ import annotations

import math
import random
import subprocess
import sys
import warnings
from typing import Any

import pytest

from ranking_plugins import ir_measures as rp_ir_measures
from ranking_plugins import pytrec_eval as rp_pytrec_eval
from ranking_plugins.runs.names import PYTREC_EVAL_MEASURES, PYTREC_EVAL_NICKNAMES

pytrec_eval = pytest.importorskip("pytrec_eval")
ir_measures = pytest.importorskip("ir_measures")

LEVELS = [f"{level / 10:.2f}" for level in range(11)]


def collection(seed: int, ties: bool = True) -> tuple[dict, dict]:
    """Qrels and a run of 14 queries: tied scores (``ties``), a query of the run only
    (``q0``), one of the qrels only (``q1``), one the run holds as ``{}`` (``q2``),
    unjudged documents, judged ones not retrieved, grades -1..3. A query whose grades are
    all negative gets one of 0 (pytrec_eval crashes on such a query)."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(14):
        qid, pool = f"q{q}", [f"d{j}" for j in range(rng.randint(3, 30))]
        if q != 1:
            retrieved = [] if q == 2 else rng.sample(pool, rng.randint(1, len(pool)))
            run[qid] = {
                d: rng.choice([0.5, 1.0, 1.5, 2.0]) if ties else rng.random() * 10
                for d in retrieved
            }
        if q != 0:
            judged = rng.sample(pool, rng.randint(1, len(pool)))
            qrels[qid] = {d: rng.choice([-1, 0, 0, 1, 2, 3]) for d in judged}
            if max(qrels[qid].values()) < 0:
                qrels[qid]["zz"] = 0
    return qrels, run


def close(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12


def cuts_agree(level: float, relevant: int) -> bool:
    """Whether trec_eval 10's cut of a recall level (the package's) is trec_eval 9's
    (pytrec_eval's) for a query of ``relevant`` relevant documents."""
    return math.floor(level * relevant + 0.5) == int(level * relevant + 0.9)


def iprec_differs(name: str, relevant: int) -> bool:
    """pytrec_eval's value of ``name`` may differ by the documented cut of recall levels."""
    if name.startswith("iprec_at_recall_"):
        return not cuts_agree(float(name.rsplit("_", 1)[1]), relevant)
    if name == "11pt_avg":
        return not all(cuts_agree(float(level), relevant) for level in LEVELS)
    return False


# --------------------------------------------------------------------------- pytrec_eval


def test_supported_measures_are_pytrec_evals() -> None:
    assert rp_pytrec_eval.supported_measures == set(pytrec_eval.supported_measures)
    for name, members in PYTREC_EVAL_NICKNAMES.items():
        assert members == set(pytrec_eval.supported_nicknames[name]), name
    assert set(pytrec_eval.supported_measures) == PYTREC_EVAL_MEASURES


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("judged_only", [False, True])
def test_relevance_evaluator_gives_pytrec_evals_numbers(
    seed: int, level: int, judged_only: bool
) -> None:
    qrels, run = collection(seed)
    run = {q: docs for q, docs in run.items() if docs}  # pytrec_eval's all_trec crashes on {}
    measures = {"all_trec", "P.3,7", "ndcg_cut_4", "map_cut.2,50"}
    expected = pytrec_eval.RelevanceEvaluator(qrels, measures, level, judged_only).evaluate(run)
    got = rp_pytrec_eval.RelevanceEvaluator(qrels, measures, level, judged_only).evaluate(run)
    assert sorted(got) == sorted(expected)
    assert "q0" not in got and "q1" not in got  # pytrec_eval's queries: in both sides
    compared = differing = 0
    for qid, row in expected.items():
        assert sorted(got[qid]) == sorted(row), qid
        relevant = sum(grade >= level for grade in qrels[qid].values())
        for name, value in row.items():
            if iprec_differs(name, relevant):
                differing += 1
                continue
            compared += 1
            assert close(got[qid][name], value), (qid, name, got[qid][name], value)
    assert compared > 10 * differing  # the documented difference leaves most compared


#: pytrec_eval on ``{}`` queries, in a process of its own and one evaluator per measure:
#: it reads memory it never wrote there (num_rel 0 or R) and crashes, with bpref beside
#: other measures every time, which would take the suite down
_PYTREC_EVAL_OF_EMPTY_QUERIES = """
import json, sys, pytrec_eval
qrels, runs, measures = json.loads(sys.stdin.read())
results = []
for run in runs:
    merged = {}
    for measure in measures:
        for qid, row in pytrec_eval.RelevanceEvaluator(qrels, {measure}).evaluate(run).items():
            merged.setdefault(qid, {}).update(row)
    results.append(merged)
print(json.dumps(results))
"""


def _pytrec_eval_apart(qrels: Any, runs: list[Any], measures: list[str]) -> list[Any]:
    """pytrec_eval's results of ``runs``, from a process of its own (tried three times
    where it crashes; skipped only if it crashes every time)."""
    import json

    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", _PYTREC_EVAL_OF_EMPTY_QUERIES],
            input=json.dumps([qrels, runs, measures]), capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        if done.returncode >= 0:
            assert done.returncode == 0, done.stderr
            return list(json.loads(done.stdout))
    pytest.skip(f"pytrec_eval crashed on a {{}} query three times (signal {-done.returncode})")


@pytest.mark.parametrize("seed", range(2))
def test_a_query_of_no_document_is_evaluated(seed: int) -> None:
    """pytrec_eval evaluates a run's ``{}`` as retrieving nothing (its all_trec crashes on
    one: these measures do not)."""
    qrels, run = collection(seed)
    measures = ["map", "P.3,7", "recip_rank", "ndcg", "bpref", "Rndcg", "infAP", "set_F", "gm_map"]
    (expected,) = _pytrec_eval_apart(qrels, [run], measures)
    got = rp_pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
    assert sorted(got) == sorted(expected) and "q2" in got and "q1" not in got
    for qid, row in expected.items():
        assert got[qid].keys() == row.keys()
        assert all(close(got[qid][m], v) for m, v in row.items()), qid


def test_a_run_of_empty_queries_only() -> None:
    """A run whose every query is ``{}``: each judged one retrieves nothing, as in
    pytrec_eval (it was no query at all)."""
    qrels, _ = collection(1)
    measures = ["map", "P_5", "recip_rank", "ndcg", "num_ret"]
    runs = [{"q3": {}}, {"q3": {}, "q4": {}, "q0": {}}]
    for run, expected in zip(runs, _pytrec_eval_apart(qrels, runs, measures), strict=True):
        got = rp_pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
        assert got == expected and expected.keys() == run.keys() - {"q0"}


def test_switching_by_the_import() -> None:
    """The same code, one import changed: the same dict, key for key."""
    qrels, run = collection(7)

    def code(module: Any) -> dict[str, dict[str, float]]:
        evaluator = module.RelevanceEvaluator(qrels, {"map", "ndcg_cut.10", "P_5", "recip_rank"})
        return evaluator.evaluate(run)

    expected, got = code(pytrec_eval), code(rp_pytrec_eval)
    assert got.keys() == expected.keys()
    for qid in expected:
        assert got[qid].keys() == expected[qid].keys()
        assert all(close(got[qid][m], v) for m, v in expected[qid].items())


def test_compute_aggregated_measure_is_pytrec_evals() -> None:
    """Every measure of all_trec summarised over the queries of an evaluate() as
    pytrec_eval does (sums for num_*, the geometric mean of gm_map's log terms, means),
    and the edge cases: no value, a nan value."""
    qrels, run = collection(5)
    run = {q: docs for q, docs in run.items() if docs}  # pytrec_eval's all_trec crashes on {}
    rows = pytrec_eval.RelevanceEvaluator(qrels, {"all_trec"}).evaluate(run)
    names = next(iter(rows.values())).keys()
    assert {"num_q", "num_ret", "gm_map", "gm_bpref", "map", "runid"} <= names
    for name in names:
        values = [row[name] for row in rows.values()]
        expected = pytrec_eval.compute_aggregated_measure(name, values)
        got = rp_pytrec_eval.compute_aggregated_measure(name, values)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15), name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's mean of nothing
        for name, values in [("map", []), ("num_q", []), ("gm_map", []),
                             ("P_5", [math.nan, 1.0]), ("gm_map", [-1.0, -math.inf])]:  # fmt: skip
            expected = pytrec_eval.compute_aggregated_measure(name, values)
            got = rp_pytrec_eval.compute_aggregated_measure(name, values)
            assert close(got, expected) and type(got) is float, (name, values)


def test_relevance_level_as_docs_runs_says() -> None:
    """docs/runs.rst: evaluate_run's ``relevance_threshold=2`` is pytrec_eval's
    ``relevance_level=2`` but for nDCG's family, evaluated without it; the drop-in's
    ``relevance_level`` is pytrec_eval's for every measure."""
    from ranking_plugins import evaluate_run

    qrels, run = collection(6)
    run = {q: docs for q, docs in run.items() if docs}
    leveled = ["map", "P_5", "recall_10", "recip_rank", "bpref", "Rprec", "num_rel_ret"]
    graded = ["ndcg", "ndcg_cut_10"]
    expected = pytrec_eval.RelevanceEvaluator(qrels, {*leveled, *graded}, 2).evaluate(run)
    common: dict[str, Any] = {"ties": "first", "unjudged_queries": "skip"}
    ours = evaluate_run(qrels, run, leveled, relevance_threshold=2, **common).to_dict()
    ours_graded = evaluate_run(qrels, run, graded, **common).to_dict()
    drop_in = rp_pytrec_eval.RelevanceEvaluator(qrels, {*leveled, *graded}, 2).evaluate(run)
    assert ours.keys() == ours_graded.keys() == drop_in.keys() == expected.keys()
    for qid, row in expected.items():
        for name, value in row.items():
            got = (ours if name in leveled else ours_graded)[qid][name]
            assert close(got, value) and close(drop_in[qid][name], value), (qid, name)
    thresholded = evaluate_run(qrels, run, graded, relevance_threshold=2, **common).to_dict()
    assert any(not close(thresholded[q]["ndcg"], expected[q]["ndcg"]) for q in expected)
    for level in (0, -1, 0.0):
        with pytest.raises(ValueError, match="`relevance_level` must be above 0"):
            rp_pytrec_eval.RelevanceEvaluator(qrels, {"map"}, level)


def test_tie_policies_as_an_option() -> None:
    qrels, run = collection(3)
    first = rp_pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
    average = rp_pytrec_eval.RelevanceEvaluator(qrels, {"map"}, ties="average").evaluate(run)
    assert first.keys() == average.keys()
    assert any(not close(first[q]["map"], average[q]["map"]) for q in first)
    untied = collection(3, ties=False)
    a = rp_pytrec_eval.RelevanceEvaluator(untied[0], {"map"}, ties="average").evaluate(untied[1])
    b = pytrec_eval.RelevanceEvaluator(untied[0], {"map"}).evaluate(untied[1])
    assert all(close(a[q]["map"], b[q]["map"]) for q in b)


def test_scores_are_read_as_c_floats() -> None:
    """Two scores equal as C floats tie in trec_eval: broken by document id, descending."""
    qrels = {"q": {"a": 1, "b": 0}}
    run = {"q": {"a": 1.0 + 1e-12, "b": 1.0}}
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)
    got = rp_pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)
    assert got == expected == {"q": {"recip_rank": 0.5}}


def test_empty_and_disjoint_runs_give_no_query() -> None:
    evaluator = rp_pytrec_eval.RelevanceEvaluator({"q1": {"d": 1}, "q2": {}}, {"map"})
    assert (
        evaluator.evaluate({})
        == pytrec_eval.RelevanceEvaluator({"q1": {"d": 1}}, {"map"}).evaluate({})
        == {}
    )
    assert evaluator.evaluate({"q9": {"d": 1.0}}) == {}
    assert evaluator.evaluate({"q2": {"d": 1.0}}) == {}  # a query of no judgment is dropped


def test_the_qrels_are_read_at_construction() -> None:
    """pytrec_eval copies the qrels: a dict changed after the evaluator is made changes
    no result of either."""
    run = {"q1": {"d1": 0.5, "d2": 1.0}}
    evaluators = []
    for module in (pytrec_eval, rp_pytrec_eval):
        qrels = {"q1": {"d1": 1, "d2": 0}}
        evaluators.append(module.RelevanceEvaluator(qrels, {"map", "P_1"}))
        qrels["q1"]["d2"] = 1  # d2, ranked first, made relevant; and a query added
        qrels["q2"] = {"d1": 1}
    expected, got = (e.evaluate({**run, "q2": {"d1": 1.0}}) for e in evaluators)
    assert got == expected == {"q1": {"map": 0.5, "P_1": 0.0}}


def test_an_int_score_of_any_size_is_a_double() -> None:
    """pytrec_eval reads an int score past int64 as a double (and a grade past it ends in
    its SystemError: here a double too)."""
    qrels = {"q1": {"a": 1, "b": 0, "c": 2}, "q2": {"a": 1, "d": 0}}
    run = {"q1": {"a": 2**63, "b": -(2**70), "c": 2**64 + 1}, "q2": {"a": 10**30, "d": 2**200}}
    measures = {"map", "recip_rank", "ndcg"}
    expected = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    got = rp_pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    assert got == expected


def test_dataframes_and_records_as_qrels() -> None:
    """A pandas or polars DataFrame and an iterator of ir_measures' ``Qrel`` records give
    the dict's numbers (pytrec_eval's), at every evaluate() (an iterator is read once)."""
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    qrels, run = collection(4)
    measures = {"map", "ndcg_cut_5", "P_3", "bpref"}
    expected = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    rows = [(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "relevance"])
    forms = {
        "pandas": frame,
        "polars": pl.from_pandas(frame),
        "records": iter([ir_measures.Qrel(*row) for row in rows]),
    }
    for form, value in forms.items():
        evaluator = rp_pytrec_eval.RelevanceEvaluator(value, measures)
        for _ in range(2):
            got = evaluator.evaluate(run)
            assert got.keys() == expected.keys(), form
            for qid, row in expected.items():
                assert all(close(got[qid][m], v) for m, v in row.items()), (form, qid)


@pytest.mark.parametrize(
    "measures,message",
    [({"foo"}, "unsupported measure 'foo'"), ({"P.x"}, "unsupported measure"),
     ({"prefs"}, "unsupported measure 'prefs'"), ({"ndcg.5"}, "takes no cutoff")],
)  # fmt: skip
def test_unknown_measures_are_value_errors(measures: set[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rp_pytrec_eval.RelevanceEvaluator({"q": {"d": 1}}, measures)


def test_a_string_of_measures_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="iterable of pytrec_eval measure names"):
        rp_pytrec_eval.RelevanceEvaluator({"q": {"d": 1}}, "map")


# --------------------------------------------------------------------------- ir_measures


def _ir_measures_list() -> list[Any]:
    m = ir_measures
    return [
        m.nDCG @ 10, m.nDCG, m.AP, m.AP @ 5, m.P @ 5, m.P(rel=2) @ 10, m.Bpref, m.infAP,
        m.IPrec @ 0.5, m.SetF, m.SetP, m.SetR, m.NumRet(rel=1), m.NumRet, m.NumRel,
        m.R @ 5, m.RR, m.RR(rel=2), m.Rprec, m.Success @ 5, m.SetAP,
    ]  # fmt: skip


# ir_measures groups the measures of one call into pytrec_eval invocations by
# their parameters, in an order that can vary from run to run: a judged_only
# measure beside the others may then give another invocation's numbers (seen
# once in a dozen runs), so it is asked in a call of its own
@pytest.mark.parametrize(
    "seed,judged_only", [(0, False), (1, False), (2, False), (0, True), (1, True)]
)
def test_iter_calc_and_calc_aggregate_give_ir_measures_numbers(
    seed: int, judged_only: bool
) -> None:
    qrels, run = collection(seed)
    run = {q: d for q, d in run.items() if d}  # ir_measures reads no empty query
    measures = [ir_measures.nDCG(judged_only=True) @ 10] if judged_only else _ir_measures_list()
    expected = {
        (m.query_id, m.measure): m.value for m in ir_measures.iter_calc(measures, qrels, run)
    }
    got = {(m.query_id, m.measure): m.value for m in rp_ir_measures.iter_calc(measures, qrels, run)}
    assert got.keys() == expected.keys()  # keyed by the measure objects
    skipped = 0
    for (qid, measure), value in expected.items():
        relevant = sum(g >= 1 for g in qrels[qid].values())
        if measure.NAME == "IPrec" and not cuts_agree(0.5, relevant):
            skipped += 1
            continue
        assert close(got[qid, measure], value), (qid, measure, got[qid, measure], value)
    assert skipped < len(qrels) // 2
    means = ir_measures.calc_aggregate(measures, qrels, run)
    ours = rp_ir_measures.calc_aggregate(measures, qrels, run)
    assert ours.keys() == means.keys()
    for measure, value in means.items():
        if measure.NAME != "IPrec":
            assert close(ours[measure], value), (measure, ours[measure], value)


def test_judged_matches_on_tied_runs_and_negative_grades() -> None:
    """ir_measures' Judged provider breaks ties by document id ascending, and counts a
    negative grade as judged: so does the drop-in."""
    qrels, run = collection(4)
    run = {q: d for q, d in run.items() if d}
    measures = [ir_measures.Judged @ 5, ir_measures.Judged @ 10]
    expected = ir_measures.calc_aggregate(measures, qrels, run)
    got = rp_ir_measures.calc_aggregate(measures, qrels, run)
    assert all(close(got[m], v) for m, v in expected.items())


@pytest.mark.parametrize("relevant, expected", [("a", 1.0), ("b", 0.5)])
def test_rr_at_k_breaks_ties_as_msmarco(relevant: str, expected: float) -> None:
    """ir_measures computes RR@k with MS MARCO's script: ties by document id ascending."""
    qrels, run = {"q": {relevant: 1}}, {"q": {"a": 1.0, "b": 1.0}}
    theirs = ir_measures.calc_aggregate([ir_measures.RR @ 10], qrels, run)
    ours = rp_ir_measures.calc_aggregate([ir_measures.RR @ 10], qrels, run)
    assert theirs[ir_measures.RR @ 10] == expected == ours[ir_measures.RR @ 10]


def test_rr_at_k_reads_scores_as_float64() -> None:
    """MS MARCO's scores are Python floats: 1 + 1e-9 beats 1 (as C floats they would tie,
    and ``a`` would come first by its id)."""
    qrels, run = {"q": {"a": 1}}, {"q": {"a": 1.0, "b": 1.0 + 1e-9}}
    measures = [ir_measures.RR @ 10, ir_measures.RR]
    theirs = ir_measures.calc_aggregate(measures, qrels, run)
    assert (
        rp_ir_measures.calc_aggregate(measures, qrels, run)
        == theirs
        == {ir_measures.RR @ 10: 0.5, ir_measures.RR: 0.5}
    )


def test_a_qrels_query_given_empty_scores_zero() -> None:
    """ir_measures' pytrec_eval provider counts a qrels query given as {} (0 on every
    measure); its msmarco provider, alone, does not."""
    qrels, run = {"q": {"a": 1}, "q2": {}}, {"q": {"a": 1.0}, "q2": {"a": 1.0}}
    for measures in ([ir_measures.AP, ir_measures.NumRet], [ir_measures.RR @ 10],
                     [ir_measures.AP, ir_measures.RR @ 10]):  # fmt: skip
        theirs = ir_measures.calc_aggregate(measures, qrels, run)
        assert rp_ir_measures.calc_aggregate(measures, qrels, run) == theirs
        rows = {
            (m.query_id, m.measure): m.value for m in ir_measures.iter_calc(measures, qrels, run)
        }
        ours = rp_ir_measures.iter_calc(measures, qrels, run)
        assert {(m.query_id, m.measure): m.value for m in ours} == rows
    assert rp_ir_measures.calc_aggregate([ir_measures.AP], qrels, run)[ir_measures.AP] == 0.5


@pytest.mark.parametrize("run", [{}, {"q": {}}])
def test_an_empty_run_scores_every_query_zero(run: dict) -> None:
    qrels = {"q": {"a": 1}, "q2": {"b": 2}}
    measures = [ir_measures.AP, ir_measures.nDCG @ 10, ir_measures.RR @ 10, ir_measures.NumRet]
    theirs = ir_measures.calc_aggregate(measures, qrels, run)
    assert rp_ir_measures.calc_aggregate(measures, qrels, run) == theirs
    assert set(theirs.values()) == {0.0}


def test_ir_measures_readme_runs_with_the_import_changed(tmp_path: Any) -> None:
    """ir_measures' README: its records and readers, from the drop-in."""
    from ranking_plugins.ir_measures import Qrel, ScoredDoc, read_trec_qrels, read_trec_run

    qrels_text = "q1 0 d1 1\nq1 0 d2 0\n\nq2 0 d1 2\n"
    run_text = "q1 Q0 d1 1 1.5 r\nq1 Q0 d2 2 1.5 r\nq2 Q0 d3 1 0.5 r\n"
    (tmp_path / "qrels").write_text(qrels_text)
    (tmp_path / "run").write_text(run_text)
    for source in (qrels_text, str(tmp_path / "qrels")):
        assert list(read_trec_qrels(source)) == list(ir_measures.read_trec_qrels(source))
    with open(tmp_path / "qrels") as ours_file, open(tmp_path / "qrels") as theirs_file:
        assert list(read_trec_qrels(ours_file)) == list(ir_measures.read_trec_qrels(theirs_file))
    assert list(read_trec_run(run_text)) == list(ir_measures.read_trec_run(run_text))
    measures = [ir_measures.AP, ir_measures.nDCG @ 10, ir_measures.P(rel=2) @ 10]
    ours = rp_ir_measures.calc_aggregate(
        measures, read_trec_qrels(str(tmp_path / "qrels")), read_trec_run(str(tmp_path / "run"))
    )
    theirs = ir_measures.calc_aggregate(
        measures, ir_measures.read_trec_qrels(str(tmp_path / "qrels")),
        ir_measures.read_trec_run(str(tmp_path / "run")),
    )  # fmt: skip
    assert ours == pytest.approx(theirs, abs=1e-12)
    records = [Qrel("q1", "d1", 1)], [ScoredDoc("q1", "d1", 1.0), ScoredDoc("q1", "d2", 2.0)]
    assert rp_ir_measures.calc_aggregate([ir_measures.RR], *records) == {ir_measures.RR: 0.5}
    with pytest.raises(ValueError, match="qrels line 1: expected 4 fields"):
        list(read_trec_qrels("q1 d1 1\n"))


def test_the_same_code_with_records_and_dataframes() -> None:
    """ir_measures' own input forms (Qrel / ScoredDoc records, DataFrames), one import changed."""
    pd = pytest.importorskip("pandas")
    qrels, run = collection(5)
    qrel_records = [ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    frame = pd.DataFrame(
        [(q, d, s) for q, docs in run.items() for d, s in docs.items()],
        columns=["query_id", "doc_id", "score"],
    )
    measures = [ir_measures.nDCG @ 10, ir_measures.AP, ir_measures.P @ 5]
    expected = ir_measures.calc_aggregate(measures, qrel_records, frame)
    got = rp_ir_measures.calc_aggregate(measures, qrel_records, frame)
    assert all(close(got[m], v) for m, v in expected.items())
    record = next(iter(rp_ir_measures.iter_calc(measures, qrel_records, frame)))
    assert isinstance(record, ir_measures.Metric)  # ir_measures' own record, when imported


def test_strings_are_keyed_as_asked() -> None:
    qrels, run = collection(6)
    got = rp_ir_measures.calc_aggregate(["nDCG@10", "AP"], qrels, run)
    expected = ir_measures.calc_aggregate([ir_measures.nDCG @ 10, ir_measures.AP], qrels, run)
    assert list(got) == ["nDCG@10", "AP"]
    assert close(got["nDCG@10"], expected[ir_measures.nDCG @ 10])


def test_tie_policies_as_an_option_ir_measures() -> None:
    qrels, run = collection(3)
    first = rp_ir_measures.calc_aggregate([ir_measures.AP], qrels, run)
    average = rp_ir_measures.calc_aggregate([ir_measures.AP], qrels, run, ties="average")
    assert not close(first[ir_measures.AP], average[ir_measures.AP])
    with pytest.raises(ValueError, match="ties"):
        rp_ir_measures.calc_aggregate([ir_measures.AP], qrels, run, ties="random")


def test_refused_measure_names_those_computed() -> None:
    with pytest.raises(ValueError, match="of ir_measures' measures it computes"):
        rp_ir_measures.calc_aggregate([ir_measures.ERR @ 10], {"q": {"d": 1}}, {"q": {"d": 1.0}})


# --------------------------------------------------------------------------- import weight


def test_drop_ins_import_no_heavy_module() -> None:
    """Importing the drop-ins pulls in neither the libraries they replace nor pandas."""
    code = (
        "import sys, ranking_plugins.pytrec_eval, ranking_plugins.ir_measures\n"
        "print(sorted(m for m in ('pytrec_eval', 'ir_measures', 'pandas', 'pytrec_eval_ext')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
