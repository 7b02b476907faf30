"""Measure spellings (``runs/names``' ``parse_measures``) against ir_measures itself.

Every measure ir_measures registers is either read here (and then computed on a random
collection by both, per query) or refused with an error naming the ones read.
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest

from ranking_plugins import evaluate_run
from ranking_plugins.options import Options
from ranking_plugins.runs.evaluation import Settings, evaluate_file
from ranking_plugins.runs.names import (
    IR_MEASURES,
    IR_MEASURES_REFUSED,
    MeasureSpec,
    parse_measures,
    parse_metrics,
)
from ranking_plugins.runs.reading import read_records

ir_measures = pytest.importorskip("ir_measures")

#: spellings of every measure read here, with its parameters, as ir_measures writes them
SPELLINGS = [
    "AP", "AP@5", "AP(rel=2)", "MAP@10", "AP(judged_only=True)@10",
    "Bpref", "BPref(rel=2)", "infAP", "infAP(rel=2)",
    "IPrec@0.0", "IPrec@0.3", "IPrec(rel=2)@0.5", "IPrec@1.0",
    "Judged@5", "Judged@10",
    "nDCG", "nDCG@10", "NDCG@5", "nDCG(dcg='exp-log2')@10", "nDCG(judged_only=True)@10",
    "NumRel", "NumRet", "NumRet(rel=2)", "NumRelRet",
    "P@5", "P(rel=2)@10", "Precision@3", "P(judged_only=True)@5",
    "R@5", "R(rel=2)@10", "Recall@20",
    "Rprec", "RPrec(rel=2)",
    "RR", "RR@5", "MRR@10", "RR(rel=2)",
    "SetP", "SetP(rel=2)", "SetP(relative=True)", "SetRelP", "SetR", "SetF", "SetAP",
    "Success@1", "Success@5", "Success(rel=2)@10",
]  # fmt: skip
#: gdeval (ir_measures' exponential-gain nDCG) prints 5 decimals: half a unit of the last
TOLERANCE = {"nDCG(dcg='exp-log2')@10": 5e-6 + 1e-12}
#: read here but with no ir_measures provider installed to compute them (cwl_eval's RBP)
NO_PROVIDER = {"RBP"}
#: the diversity measures (pyndeval's): compared on subtopic qrels in
#: tests/test_diversity_pyndeval.py, which this collection has none of
DIVERSITY = {"alpha_nDCG", "α_nDCG", "alpha_DCG", "α_DCG", "ERR_IA", "nERR_IA", "NRBP",
             "nNRBP", "P_IA", "AP_IA", "MAP_IA", "StRecall"}  # fmt: skip
#: spellings no installed ir_measures provider computes: parsed, not compared
UNCOMPUTED = ["RBP", "RBP(p=0.9)@10", "NumRel(rel=2)"]


def _collection(tmp_path: Path, seed: int) -> tuple[Path, Path, list, list]:
    """Random qrels (grades 0..3, a query without relevant documents) and a run with
    distinct scores (ties are the tie policies' business, not the names')."""
    rng = random.Random(seed)
    qrels, run = [], []
    for q in range(12):
        qid = str(100 + q)  # gdeval reads numeric topics only
        docs = [f"d{d}" for d in rng.sample(range(60), 40)]
        for doc in docs[:25]:
            grade = 0 if q == 3 else rng.choice([0, 0, 1, 2, 3])
            qrels.append(ir_measures.Qrel(qid, doc, grade))
        retrieved = rng.sample(docs, rng.randint(5, 30))
        scores = rng.sample(range(1, 10_000), len(retrieved))
        run += [ir_measures.ScoredDoc(qid, d, s / 7.0) for d, s in zip(retrieved, scores)]
    qrels_path, run_path = tmp_path / "qrels", tmp_path / "run"
    qrels_path.write_text("".join(f"{r.query_id} 0 {r.doc_id} {r.relevance}\n" for r in qrels))
    run_path.write_text("".join(f"{r.query_id} Q0 {r.doc_id} 0 {r.score!r} run\n" for r in run))
    return qrels_path, run_path, qrels, run


def _package(spec: MeasureSpec, qrels_path: Path, run_path: Path) -> dict[str, float]:
    """The package's per-query values of one spec, from the files."""
    settings = Settings(options=Options(**spec.options), judged_only=spec.judged_only)
    qrels = read_records(str(qrels_path), "qrels")
    results, _ = evaluate_file(qrels, str(run_path), [(spec.metric, spec.k)], settings)
    key = results.keys[0]
    return dict(zip(results.qids, results.per_query[key].tolist(), strict=True))


def _iprec_cuts_agree(measure: object, qid: str, qrels: list) -> bool:
    """Whether trec_eval 10's cut of a recall level, round(level · R), which the package
    follows, is pytrec_eval's (trec_eval 9.0.8's int(level · R + 0.9)) for this query."""
    if measure.NAME != "IPrec":  # type: ignore[attr-defined]
        return True
    level = measure["recall"]  # type: ignore[index]
    relevant = sum(r.query_id == qid and r.relevance >= measure["rel"] for r in qrels)  # type: ignore[index]
    return math.floor(level * relevant + 0.5) == int(level * relevant + 0.9)


def test_iprec_cuts_agree_on_enough_queries(tmp_path: Path) -> None:
    """The comparison of IPrec above is not empty: most queries' cuts agree."""
    *_, qrels, _ = _collection(tmp_path, 0)
    measure = ir_measures.parse_measure("IPrec@0.3")
    agree = [_iprec_cuts_agree(measure, str(100 + q), qrels) for q in range(12)]
    assert 6 <= sum(agree) < 12


def test_every_registered_measure_is_read_or_refused() -> None:
    """A new ir_measures measure (or one dropped) fails here until it is classified."""
    registered = set(ir_measures.measures.registry)
    assert registered == set(IR_MEASURES) | set(IR_MEASURES_REFUSED)
    assert set(IR_MEASURES).isdisjoint(IR_MEASURES_REFUSED)


def test_every_read_measure_is_spelled_here() -> None:
    spelled = {s.partition("(")[0].partition("@")[0] for s in SPELLINGS}
    assert spelled | NO_PROVIDER | DIVERSITY == set(IR_MEASURES)


@pytest.mark.parametrize("seed", [0, 1])
def test_each_spelling_computes_ir_measures_values(tmp_path: Path, seed: int) -> None:
    qrels_path, run_path, qrels, run = _collection(tmp_path, seed)
    for spelling in SPELLINGS:
        measure = ir_measures.parse_measure(spelling)
        expected = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}
        for given in (spelling, measure):  # the string and the object alike
            (spec,) = parse_measures([given])
            got = _package(spec, qrels_path, run_path)
            assert set(got) == set(expected), spelling
            for qid, value in expected.items():
                if not _iprec_cuts_agree(measure, qid, qrels):
                    continue
                assert math.isclose(
                    got[qid], value, rel_tol=1e-9, abs_tol=TOLERANCE.get(spelling, 1e-9)
                ), (
                    spelling,
                    qid,
                    got[qid],
                    value,
                )


def test_the_uncomputed_spellings_have_no_provider() -> None:
    """Were a provider installed, they would move to SPELLINGS (and be compared)."""
    for spelling in UNCOMPUTED:
        with pytest.raises(ValueError, match="Unsupported measures"):
            ir_measures.calc_aggregate([ir_measures.parse_measure(spelling)], [], [])
    assert [(s.metric, s.k, s.options) for s in parse_measures(UNCOMPUTED)] == [
        ("rbp", None, {"rbp_persistence": 0.8}),  # ir_measures' p not written
        ("rbp", 10, {"rbp_persistence": 0.9}),
        ("num_rel", None, {"relevance_threshold": 2.0}),
    ]


def test_the_parameters_are_carried_per_measure() -> None:
    specs = parse_measures(["P(rel=2)@10", "P@10", "RBP(p=0.9)", "nDCG(dcg='exp-log2')@5"])
    assert [(s.metric, s.k, s.options) for s in specs] == [
        ("precision", 10, {"relevance_threshold": 2.0}),
        ("precision", 10, {}),
        ("rbp", None, {"rbp_persistence": 0.9}),
        ("ndcg", 5, {"gain": "exponential"}),
    ]
    (judged,) = parse_measures([ir_measures.nDCG(judged_only=True) @ 10])
    assert judged.judged_only and judged.key == "nDCG(judged_only=True)@10"


def test_keys_follow_the_spelling_asked() -> None:
    asked = ["ndcg@5,10", "nDCG@10", "ndcg_cut_10", "P.5,10", "AP", ir_measures.RR @ 10]
    assert [s.key for s in parse_measures(asked)] == [
        "ndcg@5",
        "ndcg@10",
        "nDCG@10",
        "ndcg_cut_10",
        "P_5",
        "P_10",
        "AP",
        "RR@10",
    ]
    # a key asked twice is one result
    assert [s.key for s in parse_measures(["map", "map", "AP", "AP"])] == ["map", "AP"]


@pytest.mark.parametrize("name", sorted(IR_MEASURES_REFUSED))
def test_the_measures_not_read_are_refused_naming_those_read(name: str) -> None:
    with pytest.raises(ValueError, match=f"ir_measures' {name} .*it computes AP, MAP"):
        parse_measures([f"{name}@10"])


def test_err_is_refused_with_the_reason() -> None:
    """ir_measures' ERR is gdeval's (R over 2^4); the package's err divides by the query's
    largest grade: another number, so the ir_measures spelling is refused, never mapped."""
    with pytest.raises(ValueError, match=r"gdeval's.*asked as err@k"):
        parse_measures(["ERR@20"])
    assert parse_measures(["err@20"])[0].metric == "err"


@pytest.mark.parametrize(
    ("spelling", "message"),
    [
        ("IPrec@0.25", "recall levels 0.0, 0.1"),
        ("IPrec", "needs a recall level"),
        ("nDCG(gains={0:0,1:3})@10", "custom gains"),
        ("nDCG(dcg='log10')@10", "dcg must be one of"),
        ("SetF(beta=2)", "beta=1"),
        ("P(foo=1)@5", "parameter 'foo' is not read here .*rel, judged_only"),
        ("Bpref@10", "takes no cutoff"),
        ("P(rel='2')@5", "rel must be a number"),
        ("P(rel=2", "unknown metric"),
        ("P(2)@5", "cannot read the parameters"),
        ("foo(x=1)", "unknown measure 'foo'.*its own metrics are"),
        ("P@0", "positive integer"),
    ],
)
def test_bad_spellings_are_clear_errors(spelling: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_measures([spelling])


def test_not_a_measure_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="`measures`: each measure must be"):
        parse_measures([10])  # type: ignore[list-item]


def test_the_command_refuses_per_measure_parameters() -> None:
    """``-m P(rel=2)@10`` would be read at the command's -l, silently: refused."""
    assert parse_metrics(["P@10", "nDCG@5,10", "ndcg_cut.5"]) == [
        ("precision", 10),
        ("ndcg", 5),
        ("ndcg", 10),
    ]
    with pytest.raises(ValueError, match="--relevance-threshold"):
        parse_metrics(["P(rel=2)@10"])


@pytest.mark.parametrize(
    "name, message",
    [("hits@10", "ranx's hits@k counts"), ("rbp.95", "ranx's rbp.p sums"), ("P-l2", "one measure")],
)
def test_ranx_names_of_another_definition_are_refused(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_measures([name])


def test_ranx_names_give_ranx_values() -> None:
    """ranx's names that are not the package's, on a run without ties (ranx's tie order is
    numpy's unstable sort); tests/test_fuzz_ir_measures.py draws the others."""
    ranx = pytest.importorskip("ranx")
    qrels = {"q1": {"a": 2, "b": 0, "c": 1}, "q2": {"a": 1, "d": 3}}
    run = {"q1": {"a": 0.2, "b": 0.9, "c": 0.5, "e": 0.4}, "q2": {"d": 0.1, "a": 0.3, "b": 0.8}}
    names = ["r-precision", "ndcg_burges@3", "dcg_burges@2", "hits", "ndcg@2-l2", "map-l2"]
    theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), names, return_mean=False)
    ours = evaluate_run(qrels, run, names)
    for name in names:
        for qid, value in zip(ranx.Run(run).get_query_ids(), theirs[name], strict=True):
            assert ours.per_query[name][qid] == pytest.approx(float(value), abs=1e-12), name
