"""``ranking_plugins.evaluate_run``: every input form gives the command's numbers, to the bit.

The expected numbers come from ``ranking-plugins evaluate --format json`` on
files written here (JSON keeps a float's every bit), from pytrec_eval and from
ranx, never from the API itself; the bad inputs are clear ValueErrors.
"""

from __future__ import annotations

import contextlib
import decimal
import io
import json
import math
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from trec_files import read_qrels, read_run

from ranking_plugins import evaluate_run
from ranking_plugins.cli import main
from ranking_plugins.cli.flags import add_evaluation_arguments
from ranking_plugins.options import OPTION_NAMES
from ranking_plugins.request import RankingRequest
from ranking_plugins.runs.names import trec_eval_name
from ranking_plugins.runs.python_api import COMMAND_OPTIONS

pd = pytest.importorskip("pandas")

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]

MEASURES = ["map", "ndcg@10", "ndcg", "P.5,10", "recall@20", "mrr", "bpref", "Rprec", "success_1"]
#: a result is keyed by the spelling asked; the command's JSON by the package's names
COMMAND_KEYS = {
    "P_5": "precision@5",
    "P_10": "precision@10",
    "Rprec": "r_precision",
    "success_1": "hit_rate@1",
}


def random_case(seed: int, ties: bool = True) -> tuple[Qrels, Run]:
    """A collection with tied scores (``ties``), a query of the run only (``1000``), one of
    the qrels only (``1001``), unjudged documents, judged ones not retrieved, and negative
    grades (trec_eval's "in the pool, not judged"). Query ids are decimal strings."""
    rng = random.Random(seed)
    qrels: Qrels = {}
    run: Run = {}
    for q in range(1000, 1012):
        qid = str(q)
        pool = [f"d{j}" for j in range(rng.randint(3, 30))]
        if q != 1001:
            retrieved = rng.sample(pool, rng.randint(1, len(pool)))
            run[qid] = {
                d: (rng.choice([0.5, 1.0, 1.5, 2.0]) if ties else rng.random() * 10)
                for d in retrieved
            }
        if q != 1000:
            judged = rng.sample(pool, rng.randint(1, len(pool)))
            qrels[qid] = {d: rng.choice([-1, 0, 0, 1, 2, 3]) for d in judged}
    return qrels, run


def write_trec(qrels: Qrels, run: Run, where: Path) -> tuple[Path, Path]:
    qrels_path, run_path = where / "qrels.txt", where / "run.txt"
    qrels_path.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    run_path.write_text(
        "".join(
            f"{q} Q0 {d} {rank} {s!r} tag\n"
            for q, docs in run.items()
            for rank, (d, s) in enumerate(docs.items(), 1)
        )
    )
    return qrels_path, run_path


def command(qrels: Path, run: Path, measures: list[str], *flags: str) -> tuple[dict, list[str]]:
    """The command's JSON (every bit of each float) and its notes."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["evaluate", str(qrels), str(run), "--format", "json", "--per-query", *flags]
    for measure in measures:
        argv += ["-m", measure]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    assert status == 0, err.getvalue()
    prefix = "ranking-plugins: note: "
    notes = [line[len(prefix) :] for line in err.getvalue().splitlines() if line.startswith(prefix)]
    return json.loads(out.getvalue()), notes


def same_float(a: float, b: float | None) -> bool:
    """Equal to the bit (None, JSON's NaN, equals NaN)."""
    b = math.nan if b is None else b
    return (math.isnan(a) and math.isnan(b)) or (
        a == b and math.copysign(1, a) == math.copysign(1, b)
    )


def assert_command_numbers(
    results: Any, expected: dict, notes: list[str], keys: dict[str, str] = COMMAND_KEYS
) -> None:
    def command(key: str) -> str:
        return keys.get(key, key)

    assert [command(key) for key in results.measures] == list(expected["metrics"])
    assert results.qids == list(expected["per_query"])
    wrong = [
        (qid, key, value, expected["per_query"][qid][command(key)])
        for qid, row in results.to_dict().items()
        for key, value in row.items()
        if not same_float(value, expected["per_query"][qid][command(key)])
    ]
    wrong += [
        ("mean", key, results.means[key], expected["metrics"][command(key)])
        for key in results.measures
        if not same_float(results.means[key], expected["metrics"][command(key)])
    ]
    wrong += [
        ("stderr", key, results.standard_errors[key], expected["standard_error"][command(key)])
        for key in results.measures
        if not same_float(results.standard_errors[key], expected["standard_error"][command(key)])
    ]
    assert not wrong, wrong[:10]
    assert {command(k): v for k, v in results.counts.items()} == expected["queries_counted"]
    assert results.unjudged_queries == expected["unjudged_queries_skipped"]
    assert results.unretrieved_queries == expected["unretrieved_queries"]
    assert results.notes == notes


# --------------------------------------------------------------------------- input forms


def _rows(side: dict[str, dict[str, Any]]) -> list[tuple[str, str, Any]]:
    return [(q, d, v) for q, docs in side.items() for d, v in docs.items()]


def _frame(side: dict[str, dict[str, Any]], names: tuple[str, str, str]) -> Any:
    return pd.DataFrame(_rows(side), columns=list(names))


def _pandas_ir_measures(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    return (_frame(qrels, ("query_id", "doc_id", "relevance")),
            _frame(run, ("query_id", "doc_id", "score")))  # fmt: skip


def _pandas_ranx(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    names = ("q_id", "doc_id", "score")
    return _frame(qrels, names), _frame(run, names)


def _pandas_int_ids(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    qrels_frame, run_frame = _pandas_ir_measures(qrels, run, where)
    for frame in (qrels_frame, run_frame):
        frame["query_id"] = frame["query_id"].astype("int64")
    return qrels_frame, run_frame


def _pandas_categorical(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    qrels_frame, run_frame = _pandas_ir_measures(qrels, run, where)
    for frame in (qrels_frame, run_frame):
        frame["doc_id"] = frame["doc_id"].astype("category")
    return qrels_frame, run_frame


def _polars(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    pl = pytest.importorskip("polars")
    return tuple(pl.from_pandas(f) for f in _pandas_ir_measures(qrels, run, where))  # type: ignore[return-value]


def _pyarrow(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    pa = pytest.importorskip("pyarrow")
    return tuple(pa.Table.from_pandas(f) for f in _pandas_ranx(qrels, run, where))  # type: ignore[return-value]


def _ranx(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    ranx = pytest.importorskip("ranx")
    return ranx.Qrels(qrels), ranx.Run(run)


def _int_ids(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    return ({int(q): docs for q, docs in qrels.items()},
            {int(q): docs for q, docs in run.items()})  # fmt: skip


def _records(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    ir_measures = pytest.importorskip("ir_measures")
    qrels_records = [ir_measures.Qrel(q, d, g) for q, d, g in _rows(qrels)]
    run_records = (ir_measures.ScoredDoc(q, d, s) for q, d, s in _rows(run))  # a generator
    return qrels_records, run_records


def _tsv(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    q, r = where / "qrels.tsv", where / "run.tsv"
    q.write_text("".join(f"{a}\t{b}\t{c}\n" for a, b, c in _rows(qrels)))
    r.write_text("".join(f"{a}\t{b}\t{c!r}\n" for a, b, c in _rows(run)))
    return q, r


def _jsonl(qrels: Qrels, run: Run, where: Path) -> tuple[Any, Any]:
    q, r = where / "qrels.jsonl", where / "run.jsonl"
    q.write_text("".join(json.dumps({"query_id": a, "doc_id": b, "relevance": c}) + "\n"
                         for a, b, c in _rows(qrels)))  # fmt: skip
    r.write_text("".join(json.dumps({"query_id": a, "doc_id": b, "score": c}) + "\n"
                         for a, b, c in _rows(run)))  # fmt: skip
    return str(q), str(r)


FORMS: dict[str, Callable[[Qrels, Run, Path], tuple[Any, Any]]] = {
    "dict": lambda qrels, run, where: (qrels, run),
    "dict-int-ids": _int_ids,
    "pandas-ir_measures": _pandas_ir_measures,
    "pandas-ranx": _pandas_ranx,
    "pandas-int-ids": _pandas_int_ids,
    "pandas-categorical": _pandas_categorical,
    "polars": _polars,
    "pyarrow": _pyarrow,
    "ranx": _ranx,
    "ir_measures-records": _records,
    "trec-files": lambda qrels, run, where: write_trec(qrels, run, where),
    "tsv-files": _tsv,
    "jsonl-files": _jsonl,
}

#: the API's keywords and the same options as the command's flags
OPTION_CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "defaults": ({}, []),
    "trec_eval-ties": ({"ties": "first"}, ["--ties", "first"]),
    "exponential-l2": (
        {"gain": "exponential", "relevance_threshold": 2},
        ["--gain", "exponential", "-l", "2"],
    ),
    "judged-only-count": (
        {"judged_only": True, "unretrieved_queries": "count"},
        ["-J", "--unretrieved-queries", "count"],
    ),
    "pessimistic-skip": (
        {"ties": "pessimistic", "empty_target_action": "skip"},
        ["--ties", "pessimistic", "--empty-target-action", "skip"],
    ),
}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_form_gives_the_commands_numbers(form, seed, tmp_path):
    qrels, run = random_case(seed)
    files = write_trec(qrels, run, tmp_path)
    expected, notes = command(*files, MEASURES, "--unjudged-queries", "skip")
    qrels_input, run_input = FORMS[form](qrels, run, tmp_path)
    results = evaluate_run(qrels_input, run_input, MEASURES, unjudged_queries="skip")
    assert_command_numbers(results, expected, notes)
    assert len(notes) == 2  # the run-only and the qrels-only query, as data too
    assert results.unjudged_queries == ["1000"] and results.unretrieved_queries == ["1001"]


@pytest.mark.parametrize("case", OPTION_CASES)
@pytest.mark.parametrize("form", ["dict", "pandas-ir_measures"])
def test_options_give_the_commands_numbers(case, form, tmp_path):
    keywords, flags = OPTION_CASES[case]
    qrels, run = random_case(7)
    files = write_trec(qrels, run, tmp_path)
    expected, notes = command(*files, MEASURES, "--unjudged-queries", "skip", *flags)
    qrels_input, run_input = FORMS[form](qrels, run, tmp_path)
    results = evaluate_run(qrels_input, run_input, MEASURES, unjudged_queries="skip", **keywords)
    assert_command_numbers(results, expected, notes)


def test_trec_eval_collection_all_trec(trec_eval_dir):
    """trec_eval's test collection, every trec_eval measure, as dicts and as files."""
    qrels, run = trec_eval_dir / "qrels.test", trec_eval_dir / "results.test"
    for flags, keywords in (([], {}), (["--ties", "first"], {"ties": "first"})):
        expected, notes = command(qrels, run, ["all_trec"], *flags)
        # asked by trec_eval's name, each result is under trec_eval's name (pytrec_eval's
        # keys); the command's JSON under the package's
        keys = {trec_eval_name(*_metric_and_k(key)): key for key in expected["metrics"]}
        for inputs in ((qrels, run), (read_qrels(qrels), read_run(run))):
            results = evaluate_run(*inputs, "all_trec", **keywords)
            assert_command_numbers(results, expected, notes, keys)


def _metric_and_k(key: str) -> tuple[str, int | None]:
    name, _, k = key.partition("@")
    return name, int(k) if k else None


def test_default_measures_are_the_commands(trec_eval_dir):
    qrels, run = trec_eval_dir / "qrels.test", trec_eval_dir / "results.test"
    expected, notes = command(qrels, run, [])
    assert_command_numbers(evaluate_run(read_qrels(qrels), read_run(run)), expected, notes)


def test_option_keywords_are_the_commands_flags():
    """``evaluate_run`` takes as keywords exactly the options the command has flags for."""
    dests: list[str] = []

    def add(*names: str, **kwargs: Any) -> Any:
        action = type("Action", (), {"help": "", "option_strings": names})()
        dests.append(kwargs.get("dest") or names[-1].lstrip("-").replace("-", "_"))
        return action

    add_evaluation_arguments(add)
    assert sorted(COMMAND_OPTIONS) == sorted(d for d in dests if d in OPTION_NAMES)


# --------------------------------------------------------------------------- other libraries


def test_matches_pytrec_eval():
    """trec_eval's tie break (``ties="first"``) against pytrec_eval, per query."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    for seed in range(3):
        qrels, run = random_case(seed)
        both = {q: docs for q, docs in run.items() if q in qrels}
        measures = {"map", "ndcg_cut.10", "P.5", "recip_rank", "bpref", "Rprec", "ndcg"}
        expected = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(both)
        results = evaluate_run(qrels, both, sorted(measures), ties="first")
        ours = results.to_dict()
        # asked in pytrec_eval's spelling, the results come under its keys
        assert sorted(ours) == sorted(expected)
        for qid, row in expected.items():
            assert sorted(ours[qid]) == sorted(row)
            for name, value in row.items():
                assert ours[qid][name] == pytest.approx(value, abs=1e-12), (seed, qid, name)


def test_matches_ranx():
    """ranx's ``evaluate`` on a collection without ties (ranx has no stated tie order),
    per query and mean; ranx takes the queries of both sides."""
    ranx = pytest.importorskip("ranx")
    qrels, run = random_case(3, ties=False)
    common = sorted(set(qrels) & set(run))
    qrels = {q: {d: g for d, g in qrels[q].items() if g > 0} or {"none": 0} for q in common}
    run = {q: run[q] for q in common}
    metrics = ["ndcg@10", "map", "precision@5", "mrr", "recall@20"]
    expected = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), metrics, return_mean=False)
    results = evaluate_run(ranx.Qrels(qrels), ranx.Run(run), metrics)
    for metric in metrics:
        ours = [results.per_query[metric][q] for q in common]
        assert ours == pytest.approx(list(expected[metric]), abs=1e-12), metric
    assert results.mean() == pytest.approx(
        ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), metrics), abs=1e-12
    )


# --------------------------------------------------------------------------- results


def test_results_shapes(trec_eval_dir):
    results = evaluate_run(
        trec_eval_dir / "qrels.test", trec_eval_dir / "results.test", ["map", "P@10"]
    )
    assert results.measures == ["map", "P@10"]  # the spelling asked
    frame = results.to_pandas()
    assert list(frame.columns) == results.measures and list(frame.index) == results.qids
    assert frame.index.name == "query_id"
    assert (
        frame.loc["302", "map"]
        == results.per_query["map"]["302"]
        == results.to_dict()["302"]["map"]
    )
    assert results.mean() == results.means and set(results.means) == set(results.measures)
    assert "queries=3" in repr(results)


# --------------------------------------------------------------------------- bad input

QRELS = {"q1": {"a": 1, "b": 0}, "q2": {"c": 2}}
RUN = {"q1": {"a": 0.5, "b": 0.2}, "q2": {"c": 1.0}}


def test_dataframe_without_the_columns():
    frame = pd.DataFrame({"query": ["q1"], "doc": ["a"], "score": [1.0]})
    with pytest.raises(ValueError) as caught:
        evaluate_run(QRELS, frame)
    text = str(caught.value)
    assert "`run`" in text and "'query', 'doc', 'score'" in text  # the columns found
    assert "query_id" in text and "q_id" in text and "doc_id" in text  # the ones accepted


def test_dataframe_with_two_names_for_one_column():
    frame = pd.DataFrame({"query_id": ["q1"], "q_id": ["q1"], "doc_id": ["a"], "score": [1.0]})
    with pytest.raises(ValueError, match="2 \\(query_id, q_id\\) query id column"):
        evaluate_run(QRELS, frame)


@pytest.mark.parametrize(
    "run",
    [
        {"q1": {"a": math.nan, "b": 0.2}, "q2": {"c": 1.0}},
        pd.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["a", "c"], "score": [0.1, math.nan]}),
    ],
    ids=["dict", "dataframe"],
)
def test_nan_scores(run):
    with pytest.raises(ValueError, match="`run` has 1 NaN scores, the first \\(query 'q"):
        evaluate_run(QRELS, run)


def test_nan_grades():
    with pytest.raises(ValueError, match="`qrels` has 1 grades that are not finite"):
        evaluate_run({"q1": {"a": math.nan}}, RUN)


def test_duplicate_pairs():
    frame = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "a", "c"],
                          "score": [1.0, 2.0, 3.0]})  # fmt: skip
    with pytest.raises(
        ValueError, match="pair more than once, the first \\(query 'q1', document 'a'\\)"
    ):
        evaluate_run(QRELS, frame)
    # an int and a str that spell one id are one id (as in a TREC file): given twice
    with pytest.raises(ValueError, match="`qrels` gives 1 \\(query, document\\) pair more"):
        evaluate_run({"1": {"a": 1}, 1: {"a": 0}}, {"1": {"a": 1.0}})
    with pytest.raises(ValueError, match="`run` gives 1 \\(query, document\\) pair more"):
        evaluate_run({"1": {"a": 1}}, {"1": {"a": 1.0, "b": 0.5}, 1: {"a": 2.0}})


@pytest.mark.parametrize(
    "bad", [1.5, None, ("a",), b"\xff"], ids=["float", "None", "tuple", "bytes"]
)
def test_non_string_ids(bad):
    with pytest.raises(ValueError, match="ids must be strings \\(or integers"):
        evaluate_run(QRELS, {"q1": {bad: 1.0, "a": 0.5}})
    with pytest.raises(ValueError, match="ids must be strings \\(or integers"):
        evaluate_run({bad: {"a": 1}}, RUN)


def test_id_columns_mixing_int_and_str():
    """A pandas ``object`` column (and a polars ``Object`` one) mixing int and str ids is
    their strings: the numbers of the dict of the same ids, and pytrec_eval's of their
    strings."""
    pl = pytest.importorskip("polars")
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {1: {"a": 1, 7: 0}, "q2": {"c": 2, 8: 1}}
    run = {1: {"a": 0.2, 7: 0.9}, "q2": {"c": 0.5, 8: 0.7, "x": 0.1}}

    def frame(side: dict, value: str) -> Any:
        rows = [(q, d, v) for q, docs in side.items() for d, v in docs.items()]
        columns = list(zip(*rows))
        return pd.DataFrame(
            {"query_id": pd.Series(columns[0], dtype=object),
             "doc_id": pd.Series(columns[1], dtype=object), value: list(columns[2])}
        )  # fmt: skip

    def texts(side: dict) -> dict:
        return {str(q): {str(d): v for d, v in docs.items()} for q, docs in side.items()}

    expected = pytrec_eval.RelevanceEvaluator(texts(qrels), {"map", "ndcg"}).evaluate(texts(run))
    frames = (frame(qrels, "relevance"), frame(run, "score"))
    objects = tuple(
        pl.DataFrame([pl.Series(name, f[name].tolist(), dtype=pl.Object if "id" in name else None)
                      for name in f.columns])
        for f in frames
    )  # fmt: skip
    for form, (q, r) in {"dict": (qrels, run), "pandas": frames, "polars": objects}.items():
        got = evaluate_run(q, r, ["map", "ndcg"], ties="first").to_dict()
        assert got.keys() == expected.keys(), form
        for qid, row in expected.items():
            assert got[qid] == pytest.approx(row, abs=1e-12), (form, qid)
    with pytest.raises(ValueError, match="column 'doc_id' cannot be read"):
        evaluate_run(qrels, pd.DataFrame({"query_id": ["q2", "q2"],
                                          "doc_id": pd.Series(["c", 1.5], dtype=object),
                                          "score": [1.0, 2.0]}))  # fmt: skip


def test_float_id_column():
    frame = pd.DataFrame({"query_id": [1.0], "doc_id": ["a"], "score": [1.0]})
    with pytest.raises(ValueError, match="column 'query_id' must hold string or integer ids"):
        evaluate_run(QRELS, frame)


@pytest.mark.parametrize(
    "run", [{}, {"q1": {}}, pd.DataFrame({"query_id": [], "doc_id": [], "score": []}), []],
    ids=["dict", "empty-query", "dataframe", "records"],
)  # fmt: skip
def test_empty_run(run):
    with pytest.raises(ValueError, match="`run` is empty"):
        evaluate_run(QRELS, run)


def test_run_query_not_in_qrels():
    run = {**RUN, "q9": {"a": 1.0}}
    with pytest.raises(
        ValueError, match="1 query of the run is not in the qrels: q9; pass unjudged"
    ):
        evaluate_run(QRELS, run)
    results = evaluate_run(QRELS, run, "map", unjudged_queries="skip")
    assert results.unjudged_queries == ["q9"] and "q9" in results.notes[0]


def test_no_query_in_both():
    with pytest.raises(ValueError, match="no query is both in the run and in the qrels"):
        evaluate_run(QRELS, {"q9": {"a": 1.0}}, unjudged_queries="skip")


def test_bad_records_and_values():
    with pytest.raises(ValueError, match="attributes query_id, doc_id and score"):
        evaluate_run(QRELS, [("q1", "a", 1.0)])
    with pytest.raises(
        ValueError, match="the score of \\(query 'q1', document 'a'\\) is not a number: got str"
    ):
        evaluate_run(QRELS, {"q1": {"a": "high"}})
    with pytest.raises(TypeError, match="`run` must be a path"):
        evaluate_run(QRELS, 3)


def test_scores_and_grades_of_any_numeric_type():
    """A Decimal, a numpy scalar and a 0-d tensor are their float values, as ranx reads
    them; an int past int64 a double, as pytrec_eval reads it."""
    import numpy as np
    import torch

    ranx = pytest.importorskip("ranx")
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {"q1": {"a": 1, "b": 0, "c": 2}, "q2": {"a": 1, "d": 1}}
    run = {"q1": {"a": decimal.Decimal("0.25"), "b": np.float32(0.5), "c": torch.tensor(0.75)},
           "q2": {"a": torch.tensor(2, dtype=torch.int32), "d": np.int64(1)}}  # fmt: skip
    expected = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), ["map", "ndcg@2"], return_mean=False)
    results = evaluate_run(qrels, run, ["map", "ndcg@2"])
    assert results.per_query["map"] == dict(zip(["q1", "q2"], expected["map"].tolist()))
    assert results.per_query["ndcg@2"] == pytest.approx(dict(zip(["q1", "q2"], expected["ndcg@2"])))
    huge = {"q1": {"a": 2**63, "b": -(2**70), "c": 2**64 + 1}, "q2": {"a": 10**30, "d": 2**63}}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"map", "recip_rank"}).evaluate(huge)
    ours = evaluate_run(qrels, huge, ["map", "recip_rank"], ties="first").to_dict()
    assert ours == theirs
    graded = evaluate_run({"q1": {"a": 2**63, "b": decimal.Decimal(0)}}, {"q1": {"a": 1.0}}, "map")
    assert graded.means == {"map": 1.0}


@pytest.mark.parametrize(
    "value,words",
    [(None, "is not a number: got NoneType None"), (10**400, "is too large for a float"),
     ([0.5], "is not a number: got list [0.5]"),
     (decimal.Decimal("sNaN"), "cannot be read as a float")],
    ids=["None", "too-large", "list", "signalling-NaN"],
)  # fmt: skip
def test_a_bad_score_names_its_pair(value, words):
    run = {"q1": {"a": 0.5, "b": value}, "q2": {"c": 1.0}}
    with pytest.raises(
        ValueError, match=re.escape(f"the score of (query 'q1', document 'b') {words}")
    ):
        evaluate_run(QRELS, run)


def test_bad_options_and_measures():
    with pytest.raises(TypeError, match="'tie' \\(did you mean 'ties'\\?\\)"):
        evaluate_run(QRELS, RUN, tie="first")
    with pytest.raises(ValueError, match="`ties` must be one of"):
        evaluate_run(QRELS, RUN, ties="random")
    with pytest.raises(ValueError, match="`unretrieved_queries` must be one of"):
        evaluate_run(QRELS, RUN, unretrieved_queries="yes")
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        evaluate_run(QRELS, RUN, ["map", "nope"])


def test_bad_file_line_is_a_value_error(tmp_path):
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 a 1 0.5 tag\nq1 Q0 b 2 high tag\n")
    with pytest.raises(ValueError, match=r"run\.txt:2: the score is not a number"):
        evaluate_run(QRELS, run)


def test_each_measure_reads_its_own_parameters(trec_eval_dir):
    """A measure's own parameters (ir_measures' ``rel``, ``p``, ``judged_only``) set the
    options for it alone: its values are those of the call with that option, and the
    other measures of the call keep the call's."""
    ir_measures = pytest.importorskip("ir_measures")
    # qrels.test: no negative grade (trec_eval's "in the pool, not judged", judged by
    # ir_measures' Judged: a documented difference)
    qrels, run = trec_eval_dir / "qrels.test", trec_eval_dir / "results.test"
    asked = ["P(rel=2)@10", "P@10", "RBP(p=0.5)", ir_measures.Judged @ 5, "P(judged_only=True)@5"]
    results = evaluate_run(qrels, run, asked)
    assert results.measures == [
        "P(rel=2)@10",
        "P@10",
        "RBP(p=0.5)",
        "Judged@5",
        "P(judged_only=True)@5",
    ]
    alone = {  # qrels.test grades 0 and 1: P(rel=2)@10 is 0 throughout
        "P(rel=2)@10": evaluate_run(qrels, run, "precision@10", relevance_threshold=2),
        "P@10": evaluate_run(qrels, run, "precision@10"),
        "RBP(p=0.5)": evaluate_run(qrels, run, "rbp", rbp_persistence=0.5),
        "P(judged_only=True)@5": evaluate_run(qrels, run, "precision@5", judged_only=True),
    }
    for key, single in alone.items():
        assert results.per_query[key] == single.per_query[single.measures[0]], key
    assert results.per_query["P(rel=2)@10"] != results.per_query["P@10"]
    expected = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.Judged @ 5],
                list(ir_measures.read_trec_qrels(str(qrels))), list(ir_measures.read_trec_run(str(run))))}  # fmt: skip
    assert results.per_query["Judged@5"] == pytest.approx(expected, abs=1e-12)


def test_evaluate_builds_one_request_for_whole_list_and_at_k_pairs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # whole-list and @k measures in one request, ranked once: not two requests
    # sharing a ranking by hand
    made: list[RankingRequest] = []
    real = RankingRequest.create.__func__  # type: ignore[attr-defined]

    def counting(cls, *args, **keywords):  # type: ignore[no-untyped-def]
        made.append(real(cls, *args, **keywords))
        return made[-1]

    monkeypatch.setattr(RankingRequest, "create", classmethod(counting))
    qrels = {"q1": {"a": 1, "b": 0, "c": 2}, "q2": {"a": 0, "d": 1}}
    run = {"q1": {"a": 0.9, "b": 0.5, "c": 0.1}, "q2": {"a": 0.3, "d": 0.2, "e": 0.1}}
    results = evaluate_run(qrels, run, ["map", "ndcg@2", "P@1", "gm_map"])
    assert len(made) == 1
    assert [(m.name, k) for m, k in made[0].pairs or ()] == [
        ("map", None),
        ("ndcg", 2),
        ("precision", 1),
    ]
    assert set(results.to_dict()["q1"]) >= {"map", "ndcg@2"}
