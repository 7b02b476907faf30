"""Differential fuzzing of the pytrec_eval drop-in, and of ``evaluate_run`` on bad files.

``test_drop_in_matches_pytrec_eval``: random small qrels and runs (tied scores, scores
equal only as C floats, ints past int64, negative grades, queries in one side only,
lists that -J empties) through :class:`ranking_plugins.pytrec_eval.RelevanceEvaluator` and
the real pytrec_eval, every measure it supports, at a random ``relevance_level`` and
``judged_docs_only_flag``: the same queries, the same keys, the same numbers to 1e-12
(but the documented differences, docs/runs.rst: trec_eval 9's cut of a recall level,
interpolated precision of a list with nothing ranked), per query and aggregated by
``compute_aggregated_measure``. A run's ``{}`` query is left to ``test_dropins.py``
(pytrec_eval in a process of its own): pytrec_eval reads memory it never wrote on one
and crashes now and then, which would take the whole run down.

``test_a_corrupted_file_is_a_value_error``: a good TREC, TSV or JSONL file (plain or
gzipped) with one line broken (a column missing or added, a score that is no number or
NaN, a grade that is not an integer, a line cut short, broken JSON) through
``evaluate_run``, read in small blocks: the documented ``ValueError`` at ``FILE:LINE``,
never another exception.

The number of examples comes from the hypothesis profile (``conftest.py``).
"""

from __future__ import annotations

import gzip
import json
import math
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_dropins import close, iprec_differs

from ranking_plugins import evaluate_run
from ranking_plugins import pytrec_eval as rp_pytrec_eval
from ranking_plugins.runs import reading

pytrec_eval = pytest.importorskip("pytrec_eval")

SETTINGS: dict[str, Any] = {"deadline": None}
QIDS = ("q1", "q2", "10", "q1b")
DOCS = tuple(f"d{i}" for i in range(8))
#: ties, a pair equal only as C floats, negatives, an int past int64 (read as a double)
SCORES = (0.5, 1.0, 1.0 + 1e-12, 2.0, -3.0, 0.0, 7, 2**63, 1e30)


def examples(weight: float) -> int:
    return max(1, round(settings.default.max_examples * weight))


@st.composite
def collections(draw: st.DrawFn) -> tuple[dict, dict]:
    qids = draw(st.lists(st.sampled_from(QIDS), min_size=1, max_size=4, unique=True))
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, Any]] = {}
    for i, qid in enumerate(qids):
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=6, unique=True))
        side = "both" if i == 0 else draw(st.sampled_from(["both", "both", "run", "qrels"]))
        if side != "qrels":
            run[qid] = {}
        if side != "run":
            qrels[qid] = {}
        for doc in docs:
            where = draw(st.sampled_from(["run", "qrels", "both", "both"]))
            if qid in run and where != "qrels":
                run[qid][doc] = draw(st.sampled_from(SCORES))
            if qid in qrels and where != "run":
                qrels[qid][doc] = draw(st.integers(-1, 3))
        if qid in qrels and (not qrels[qid] or max(qrels[qid].values()) < 0):
            # pytrec_eval crashes on a query whose every grade is negative
            qrels[qid][docs[0]] = draw(st.integers(0, 3))
        if qid in run and not run[qid]:  # see the module: no {} query
            run[qid][docs[-1]] = draw(st.sampled_from(SCORES))
    return qrels, run


def _interpolated(name: str) -> bool:
    return name.startswith("iprec_at_recall_") or name == "11pt_avg"


@settings(max_examples=examples(1), **SETTINGS)
@given(case=collections(), level=st.integers(1, 3), judged_only=st.booleans())
def test_drop_in_matches_pytrec_eval(
    case: tuple[dict, dict], level: int, judged_only: bool
) -> None:
    qrels, run = case
    measures = set(pytrec_eval.supported_measures)
    empties = sum(not any(qrels[q].get(d, -1) >= 0 for d in run[q]) for q in run if q in qrels)
    event(f"relevance_level {level}, -J {judged_only}, queries -J empties: {empties}")
    expected = pytrec_eval.RelevanceEvaluator(qrels, measures, level, judged_only).evaluate(run)
    got = rp_pytrec_eval.RelevanceEvaluator(qrels, measures, level, judged_only).evaluate(run)
    what = f"qrels={qrels!r}\nrun={run!r}\nlevel={level} judged_only={judged_only}"
    assert sorted(got) == sorted(expected), what
    names = sorted({name for row in expected.values() for name in row})
    mismatches = []
    for name in names:
        whole = True
        for qid, row in expected.items():
            assert got[qid].keys() == row.keys(), (what, qid)
            relevant = sum(grade >= level for grade in qrels[qid].values())
            ranked = [d for d in run[qid] if not judged_only or qrels[qid].get(d, -1) >= 0]
            if iprec_differs(name, relevant) or (_interpolated(name) and not ranked):
                whole = False  # the documented differences (docs/runs.rst)
                continue
            if not close(got[qid][name], row[name]):
                mismatches.append(
                    f"{name} {qid}: pytrec_eval {row[name]!r}, got {got[qid][name]!r}"
                )
        if whole and expected:
            values = [row[name] for row in expected.values()]
            mine = [got[qid][name] for qid in expected]
            theirs = pytrec_eval.compute_aggregated_measure(name, values)
            ours = rp_pytrec_eval.compute_aggregated_measure(name, mine)
            if not (close(ours, theirs) or math.isclose(ours, theirs, rel_tol=1e-12)):
                mismatches.append(f"{name} aggregated: pytrec_eval {theirs!r}, got {ours!r}")
    assert not mismatches, what + "\n" + "\n".join(mismatches)


# --------------------------------------------------------------------------- bad files

GOOD = {
    ("run", "trec"): lambda q, d, v: f"{q} Q0 {d} 1 {v} tag",
    ("run", "tsv"): lambda q, d, v: f"{q}\t{d}\t{v}",
    ("run", "jsonl"): lambda q, d, v: json.dumps({"query_id": q, "doc_id": d, "score": v}),
    ("qrels", "trec"): lambda q, d, v: f"{q} 0 {d} {v}",
    ("qrels", "tsv"): lambda q, d, v: f"{q}\t{d}\t{v}",
    ("qrels", "jsonl"): lambda q, d, v: json.dumps({"query_id": q, "doc_id": d, "relevance": v}),
}
NOT_NUMBERS = ("abc", "1.2.3", "0x", "--1", "1e", "inf5", "n/a", "1,5")


@st.composite
def broken_lines(draw: st.DrawFn, kind: str, file_format: str, q: str, d: str) -> str:
    """A line of ``kind``'s ``file_format`` that the readers must refuse."""
    good = GOOD[(kind, file_format)]
    if file_format == "jsonl":
        key = "score" if kind == "run" else "relevance"
        how = draw(st.sampled_from(["cut", "missing key", "string value", "not an object"]))
        event(f"bad line: jsonl {how}")
        text = good(q, d, 1)
        if how == "cut":
            return text[: draw(st.integers(1, len(text) - 1))]
        if how == "missing key":
            return json.dumps({"query_id": q, "doc_id": d})
        if how == "string value":
            return json.dumps({"query_id": q, "doc_id": d, key: draw(st.sampled_from(NOT_NUMBERS))})
        return json.dumps([q, d, 1])
    hows = ["column missing", "column added", "not a number", "cut short"]
    hows += ["nan"] if kind == "run" else (["not an integer"] if file_format == "trec" else [])
    how = draw(st.sampled_from(hows))
    event(f"bad line: {file_format} {kind} {how}")
    tokens = good(q, d, 1).split()
    sep = "\t" if file_format == "tsv" else " "
    if how == "column missing":
        del tokens[draw(st.integers(0, len(tokens) - 1))]
    elif how == "column added":
        tokens.insert(draw(st.integers(0, len(tokens))), "extra")
    elif how == "cut short":  # ends before the last column starts
        tokens = tokens[: draw(st.integers(1, len(tokens) - 1))]
        tokens[-1] = tokens[-1][: draw(st.integers(1, len(tokens[-1])))]
    else:
        value = {"nan": "nan", "not an integer": "1.5"}.get(how) or draw(
            st.sampled_from(NOT_NUMBERS)
        )
        tokens[-1 if file_format == "tsv" or kind == "qrels" else 4] = value
    return sep.join(tokens)


@settings(max_examples=examples(1), **SETTINGS)
@given(data=st.data())
def test_a_corrupted_file_is_a_value_error(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["run", "qrels"]), label="broken side")
    file_format = data.draw(st.sampled_from(["trec", "tsv", "jsonl"]), label="format")
    gzipped = data.draw(st.booleans(), label="gzipped")
    n = data.draw(st.integers(1, 120), label="lines")
    pairs = [(f"q{i % 7}", f"d{i}") for i in range(n)]
    values = {
        "run": [round(1.0 / (1 + i), 6) for i in range(n)],
        "qrels": [i % 3 for i in range(n)],
    }
    at = data.draw(st.integers(0, n - 1), label="bad line")
    q, d = pairs[at]
    bad = data.draw(broken_lines(kind, file_format, q, d), label="bad line text")
    chunk = data.draw(st.sampled_from([64, 256, reading.CHUNK_BYTES]), label="block bytes")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for side in ("run", "qrels"):
            lines = [GOOD[(side, file_format)](*pair, v) for pair, v in zip(pairs, values[side])]
            if side == kind:
                lines[at] = bad
            text = "".join(line + "\n" for line in lines).encode()
            path = Path(tmp) / f"{side}.{file_format}{'.gz' if gzipped else ''}"
            path.write_bytes(gzip.compress(text) if gzipped else text)
            paths[side] = path
        with mock.patch.object(reading, "CHUNK_BYTES", chunk), pytest.raises(ValueError) as raised:
            evaluate_run(paths["qrels"], paths["run"], ["map", "ndcg@5", "bpref"],
                         unjudged_queries="skip", qrels_format=file_format,
                         run_format=file_format)  # fmt: skip
    message = str(raised.value)
    assert type(raised.value) is ValueError, message
    assert message.startswith(f"{paths[kind]}:{at + 1}: "), (bad, message)
