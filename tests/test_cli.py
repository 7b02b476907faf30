"""The ``ranking-plugins evaluate`` command against trec_eval, pytrec_eval and rank_metrics.

Expected numbers come from trec_eval's printed outputs (``out.test.aq``,
``out.test.aql``), from pytrec_eval on the same files, or from
``rank_metrics`` on tensors built here by the tests' own reader
(``tests/trec_files.py``), never from the command itself.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import NamedTuple

import pytest
import torch
from trec_files import (
    CASES,
    FAMILIES,
    PYTREC_EVAL_MEASURES,
    TOL_PRINTED,
    UNTHRESHOLDED,
    read_qrels,
    read_run,
    read_trec_eval_output,
    to_tensors,
)

from ranking_plugins import rank_metrics
from ranking_plugins.cli import (
    DEFAULT_METRICS,
    build_parser,
    main,
    run_evaluate,
    sample_path,
)
from ranking_plugins.runs import evaluation, joining, reading
from ranking_plugins.runs.names import parse_metrics

TOL_EXACT = 1e-9  # against pytrec_eval's doubles


class Outcome(NamedTuple):
    """What a run of the command returned and printed (unpacks as a tuple too)."""

    status: int
    out: str
    err: str

    def json(self) -> dict:
        assert self.status == 0, self.err
        return json.loads(self.out)


def run_cli(*argv: object) -> Outcome:
    """``main(argv)`` in this process, with stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([str(a) for a in argv])
        except SystemExit as done:
            status = done.code if isinstance(done.code, int) else 1
    return Outcome(status, out.getvalue(), err.getvalue())


def measures_of(out_all: dict[str, str]) -> list[str]:
    """trec_eval measures of FAMILIES printed in an output file."""
    found = []
    for name in out_all:
        family = re.sub(r"_\d+$", "", name)
        if (name in FAMILIES and not FAMILIES[name][1]) or (
            family in FAMILIES and FAMILIES[family][1] and family != name
        ):
            found.append(name)
    return sorted(found)


def key_of(measure: str) -> str:
    """The command's result key for a trec_eval measure name (the test's own mapping)."""
    if measure in FAMILIES:
        return FAMILIES[measure][0]
    family, k = measure.rsplit("_", 1)
    return f"{FAMILIES[family][0]}@{k}"


def metric_args(measures: list[str]) -> list[str]:
    return [arg for m in measures for arg in ("-m", m)]


# --------------------------------------------------------------------------- trec_eval


@pytest.mark.parametrize("case", list(CASES))
def test_reproduces_trec_eval_output(trec_eval_dir: Path, case: str) -> None:
    qrels_file, out_file, level = CASES[case]
    expected = read_trec_eval_output(trec_eval_dir / out_file)
    measures = measures_of(expected["all"])
    assert len(measures) > 30
    qrels, run = trec_eval_dir / qrels_file, trec_eval_dir / "results.test"
    base = [
        "evaluate",
        qrels,
        run,
        "--ties",
        "first",
        "--per-query",
        "--format",
        "json",
    ]
    thresholded = [m for m in measures if re.sub(r"_\d+$", "", m) not in UNTHRESHOLDED]
    graded = [m for m in measures if m not in thresholded]
    results = {}
    level_args = [] if level is None else ["-l", str(level)]
    for group, extra in ((thresholded, level_args), (graded, [])):
        document = run_cli(*base, *extra, *metric_args(group)).json()
        for m in group:
            results[m] = document, key_of(m)
    qids = sorted(q for q in expected if q != "all")
    mismatches = []
    for measure, (document, key) in results.items():
        assert document["num_queries"] == int(expected["all"]["num_q"])
        for qid in qids:
            got = document["per_query"][qid][key]
            if not abs(got - float(expected[qid][measure])) <= TOL_PRINTED:
                mismatches.append(f"{measure} {qid}: trec_eval {expected[qid][measure]}, got {got}")
        got = document["metrics"][key]
        if not abs(got - float(expected["all"][measure])) <= TOL_PRINTED:
            mismatches.append(f"{measure} all: trec_eval {expected['all'][measure]}, got {got}")
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("case", list(CASES))
def test_matches_pytrec_eval_at_full_precision(trec_eval_dir: Path, case: str) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels_file, _, level = CASES[case]
    qrels_path, run_path = trec_eval_dir / qrels_file, trec_eval_dir / "results.test"
    with open(qrels_path) as f:
        qrels = pytrec_eval.parse_qrel(f)
    with open(run_path) as f:
        run = pytrec_eval.parse_run(f)
    reference = pytrec_eval.RelevanceEvaluator(
        qrels, PYTREC_EVAL_MEASURES, relevance_level=level or 1
    ).evaluate(run)
    measures = sorted(next(iter(reference.values())))
    thresholded = [m for m in measures if re.sub(r"_\d+$", "", m) not in UNTHRESHOLDED]
    graded = [m for m in measures if m not in thresholded]
    level_args = [] if level is None else ["-l", str(level)]
    mismatches = []
    for group, extra in ((thresholded, level_args), (graded, [])):
        document = run_cli(
            "evaluate", qrels_path, run_path, "--ties", "first", "--per-query", "--format",
            "json", *extra, *metric_args(group),
        ).json()  # fmt: skip
        for measure in group:
            for qid, values in reference.items():
                got = document["per_query"][qid][key_of(measure)]
                if not abs(got - values[measure]) <= TOL_EXACT:
                    mismatches.append(
                        f"{measure} {qid}: pytrec_eval {values[measure]!r}, got {got!r}"
                    )
    assert not mismatches, "\n".join(mismatches)


def test_python_dash_m_reproduces_trec_eval(trec_eval_dir: Path) -> None:
    expected = read_trec_eval_output(trec_eval_dir / "out.test.aq")
    done = subprocess.run(
        [
            sys.executable, "-m", "ranking_plugins", "evaluate",
            str(trec_eval_dir / "qrels.test"), str(trec_eval_dir / "results.test"),
            "--ties", "first", "-m", "map", "-m", "ndcg_cut_10", "-m", "P_5", "--format", "csv",
        ],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    header, all_row = done.stdout.strip().splitlines()
    assert header == "query,map,ndcg@10,precision@5"
    row = dict(zip(header.split(","), all_row.split(",")))
    assert row["query"] == "all"
    for measure, key in (("map", "map"), ("ndcg_cut_10", "ndcg@10"), ("P_5", "precision@5")):
        assert abs(float(row[key]) - float(expected["all"][measure])) <= TOL_PRINTED


def _script() -> str | None:
    beside = Path(sys.executable).parent / "ranking-plugins"
    return str(beside) if beside.exists() else shutil.which("ranking-plugins")


def test_console_script_reproduces_trec_eval(trec_eval_dir: Path) -> None:
    script = _script()
    if script is None:
        pytest.skip("the ranking-plugins script is not installed (pip install -e .)")
    expected = read_trec_eval_output(trec_eval_dir / "out.test.aql")
    done = subprocess.run(
        [
            script, "evaluate", str(trec_eval_dir / "qrels.rel_level"),
            str(trec_eval_dir / "results.test"), "--ties", "first", "-l", "2",
            "-m", "recip_rank", "-m", "Rprec", "--per-query", "--format", "json",
        ],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    for qid, values in document["per_query"].items():
        assert abs(values["mrr"] - float(expected[qid]["recip_rank"])) <= TOL_PRINTED
        assert abs(values["r_precision"] - float(expected[qid]["Rprec"])) <= TOL_PRINTED


# --------------------------------------------------------------------------- formats


def write_formats(
    qrels_path: Path, run_path: Path, directory: Path
) -> dict[str, tuple[Path, Path]]:
    """The collection rewritten as TSV, JSONL (with alias keys in the run) and gzip."""
    qrels, run = read_qrels(qrels_path), read_run(run_path)
    # scores as written in the TREC file: the same text parses to the same double
    score_text = {}
    for line in run_path.read_text().splitlines():
        qid, _, docno, _, score, _ = line.split()
        score_text[qid, docno] = score
    files = {}
    tsv_q, tsv_r = directory / "qrels.tsv", directory / "run.tsv"
    tsv_q.write_text("".join(f"{q}\t{d}\t{g}\n" for q in qrels for d, g in qrels[q].items()))
    tsv_r.write_text(
        "query_id\tdoc_id\tscore\n"  # a header line, as DataFrame.to_csv writes
        + "".join(f"{q}\t{d}\t{score_text[q, d]}\n" for q in run for d in run[q])
    )
    files["tsv"] = (tsv_q, tsv_r)
    jq, jr = directory / "qrels.jsonl", directory / "run.jsonl"
    jq.write_text(
        "".join(
            json.dumps({"query_id": q, "doc_id": d, "relevance": g}) + "\n"
            for q in qrels
            for d, g in qrels[q].items()
        )
    )
    jr.write_text(
        "".join(
            json.dumps({"qid": q, "docno": d, "score": s}) + "\n"
            for q in run
            for d, s in run[q].items()
        )
    )
    files["jsonl"] = (jq, jr)
    gz_q, gz_r = directory / "qrels.test.gz", directory / "results.test.gz"
    gz_q.write_bytes(gzip.compress(qrels_path.read_bytes()))
    gz_r.write_bytes(gzip.compress(run_path.read_bytes()))
    files["gz"] = (gz_q, gz_r)
    return files


COMPARED = ["-m", "ndcg@10,100", "-m", "map", "-m", "recall@1000", "-m", "mrr", "-m", "r_precision"]


@pytest.mark.parametrize(("ties", "chunk"), [("first", None), ("average", None), ("first", 97)])
def test_tsv_jsonl_and_gzip_give_the_same_numbers(
    trec_eval_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ties: str,
    chunk: int | None,
) -> None:
    qrels, run = trec_eval_dir / "qrels.test", trec_eval_dir / "results.test"
    common = ["--ties", ties, "--per-query", "--format", "json", *COMPARED]
    reference = run_cli("evaluate", qrels, run, *common).json()
    if chunk is not None:  # many chunks: the TSV header, gzip and JSON lines across them
        monkeypatch.setattr(reading, "CHUNK_BYTES", chunk)
    files = write_formats(qrels, run, tmp_path)
    for name, (q, r) in files.items():
        assert run_cli("evaluate", q, r, *common).json() == reference, name
    # mixed formats, and formats named rather than guessed
    mixed = run_cli("evaluate", files["jsonl"][0], files["tsv"][1], *common).json()
    assert mixed == reference
    renamed = tmp_path / "run.txt"
    shutil.copy(files["jsonl"][1], renamed)
    named = run_cli("evaluate", qrels, renamed, "--run-format", "jsonl", *common).json()
    assert named == reference


def test_whitespace_variants_and_chunk_boundaries(
    trec_eval_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spaces, tabs, CRLF, blank lines and tiny chunks: the same numbers."""
    qrels, run = trec_eval_dir / "qrels.test", trec_eval_dir / "results.test"
    common = ["--ties", "first", "--per-query", "--format", "json", *COMPARED]
    reference = run_cli("evaluate", qrels, run, *common).json()
    lines = [line.split() for line in run.read_text().splitlines()]
    variants = {
        "spaces": "".join(" ".join(t) + "\n" for t in lines),
        "tabs": "".join("\t".join(t) + "\n" for t in lines),
        "crlf": "".join(" ".join(t) + "\r\n" for t in lines),
        "blank lines, runs of blanks, no final newline": "\n".join(
            ("  " + "   ".join(t) + "\n" if i % 7 == 0 else " ".join(t))
            for i, t in enumerate(lines)
        ),
    }
    for chunk in (reading.CHUNK_BYTES, 97):
        monkeypatch.setattr(reading, "CHUNK_BYTES", chunk)
        for name, text in variants.items():
            path = tmp_path / "run.trec"
            path.write_text(text)
            assert run_cli("evaluate", qrels, path, *common).json() == reference, (name, chunk)


def test_rank_ordered_and_interleaved_queries(trec_eval_dir: Path, tmp_path: Path) -> None:
    """A run in rank order, or one that does not keep a query's lines together, is read the same."""
    qrels, run = trec_eval_dir / "qrels.test", trec_eval_dir / "results.test"
    common = ["--ties", "first", "--per-query", "--format", "json", *COMPARED]
    reference = run_cli("evaluate", qrels, run, *common).json()
    lines = run.read_text().splitlines(keepends=True)
    # in rank order (each query's lines by score, descending), as most runs are written
    ranked = tmp_path / "ranked.run"
    ranked.write_text(
        "".join(sorted(lines, key=lambda line: (line.split()[0], -float(line.split()[4]))))
    )
    assert run_cli("evaluate", qrels, ranked, *common).json() == reference
    random.Random(0).shuffle(lines)
    shuffled = tmp_path / "shuffled.run"
    shuffled.write_text("".join(lines))
    assert run_cli("evaluate", qrels, shuffled, *common).json() == reference
    # a repeated document is still found when the query's lines are apart
    lines.append(lines[0])
    shuffled.write_text("".join(lines))
    outcome = run_cli("evaluate", qrels, shuffled)
    assert outcome.status == 1
    assert f"{shuffled}:{len(lines)}:" in outcome.err
    assert "listed twice" in outcome.err


# --------------------------------------------------------------------------- ties


def sample_tensors(qids: list[str] | None = None):
    return to_tensors(
        read_qrels(sample_path("sample.qrels")), read_run(sample_path("sample.run")), qids
    )


@pytest.mark.parametrize("ties", ["first", "average", "pessimistic", "optimistic"])
def test_ties_match_rank_metrics_on_tensors(ties: str) -> None:
    qids, preds, target, mask = sample_tensors()
    metrics = ("ndcg", "map", "mrr", "precision", "recall", "hit_rate")
    ks = [1, 2, 3, 5]
    expected = {}
    for top_k in (ks, None):
        expected.update(
            rank_metrics(
                preds, target, metrics, top_k, mask=mask, ties=ties, gain="linear",
                reduction="none",
            )
        )  # fmt: skip
    args = [f"{m}@1,2,3,5" for m in metrics] + list(metrics)
    document = run_cli(
        "evaluate", sample_path("sample.qrels"), sample_path("sample.run"), "--ties", ties,
        "--per-query", "--format", "json", *metric_args(args),
    ).json()  # fmt: skip
    assert list(document["per_query"]) == qids
    for key, values in expected.items():
        got = [document["per_query"][q][key] for q in qids]
        assert got == pytest.approx(values.tolist(), abs=1e-12), key


def test_sample_files_have_a_tie_that_matters() -> None:
    first = run_cli("evaluate", sample_path("sample.qrels"), sample_path("sample.run"),
                    "--ties", "first", "--format", "json").json()  # fmt: skip
    average = run_cli("evaluate", sample_path("sample.qrels"), sample_path("sample.run"),
                      "--format", "json").json()  # fmt: skip
    assert first["metrics"] != average["metrics"]
    assert first["options"]["ties"] == "first" and average["options"]["ties"] == "average"
    # and a judged relevant document that the run does not retrieve
    _, _, target, mask = sample_tensors()
    assert bool(((target > 0) & ~mask).any())


def test_sample_files_reproduce_pytrec_eval_with_ties_first() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    with open(sample_path("sample.qrels")) as f:
        qrels = pytrec_eval.parse_qrel(f)
    with open(sample_path("sample.run")) as f:
        run = pytrec_eval.parse_run(f)
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.3", "map", "P.2"}).evaluate(run)
    document = run_cli(
        "evaluate", sample_path("sample.qrels"), sample_path("sample.run"), "--ties", "first",
        "-m", "ndcg@3,map,precision@2", "--per-query", "--format", "json",
    ).json()  # fmt: skip
    for qid, values in reference.items():
        got = document["per_query"][qid]
        assert got["ndcg@3"] == pytest.approx(values["ndcg_cut_3"], abs=TOL_EXACT)
        assert got["map"] == pytest.approx(values["map"], abs=TOL_EXACT)
        assert got["precision@2"] == pytest.approx(values["P_2"], abs=TOL_EXACT)


# --------------------------------------------------------------------------- errors


def bad_run(tmp_path: Path, body: str, name: str = "bad.run") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


GOOD_QRELS = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 2\nq2 0 d1 1\n"
GOOD_RUN = "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq2 Q0 d1 1 1.0 r\n"

ERRORS = {
    # id: (which file, its text, line, words the message must contain)
    "short line": ("run", "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d3 3 1.0\n", 3,
                   ["expected 6 columns", "got 5"]),
    "long line": ("run", "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r extra\n", 2,
                  ["expected 6 columns", "got 7"]),
    "non-numeric score": ("run", "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 high r\n", 2,
                          ["score is not a number", "'high'"]),
    "NaN score": ("run", "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d3 3 nan r\n", 3,
                  ["score is NaN"]),
    "duplicate run document": ("run", "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d3 3 1.0 r\n"
                               "q1 Q0 d2 4 0.5 r\n", 4, ["'d2'", "twice", "'q1'", "line 2"]),
    "non-integer grade": ("qrels", "q1 0 d1 1\nq1 0 d2 0.5\n", 2,
                          ["grade is not an integer", "'0.5'"]),
    "qrels short line": ("qrels", "q1 0 d1 1\nq1 d2 0\n", 2, ["expected 4 columns", "got 3"]),
    "duplicate judgment": ("qrels", "q1 0 d1 1\nq1 0 d2 0\nq1 0 d1 2\n", 3,
                           ["'d1'", "twice", "line 1"]),
    "invalid JSON": ("run.jsonl", '{"query_id": "q1", "doc_id": "d1", "score": 1}\n{"query_id": "q1",\n',
                     2, ["invalid JSON"]),
    "missing JSON key": ("run.jsonl", '{"query_id": "q1", "doc_id": "d1", "score": 1}\n'
                         '{"query_id": "q1", "doc_id": "d2"}\n', 2, ["missing key 'score'"]),
    "JSON score not a number": ("run.jsonl", '{"query_id": "q1", "doc_id": "d1", "score": "x"}\n',
                                1, ["'score' must be a number"]),
    "TSV bad score": ("run.tsv", "q1\td1\t3.0\nq1\td2\tn/a\n", 2, ["score is not a number"]),
    "TSV bad score after a header": ("run.tsv", "query_id\tdoc_id\tscore\nq1\td1\t3.0\nq1\td2\tn/a\n",
                                     3, ["score is not a number"]),
    "TSV header only at the top": ("run.tsv", "q1\td1\t3.0\nquery_id\tdoc_id\tscore\n", 2,
                                   ["score is not a number", "'score'"]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ERRORS))
def test_file_errors_name_file_line_and_problem(tmp_path: Path, case: str) -> None:
    which, text, line, words = ERRORS[case]
    qrels = bad_run(tmp_path, GOOD_QRELS, "good.qrels")
    run = bad_run(tmp_path, GOOD_RUN, "good.run")
    if which == "qrels":
        qrels = bad_run(tmp_path, text, "bad.qrels")
        bad = qrels
    else:
        run = bad_run(tmp_path, text, "bad.run" if which == "run" else f"bad.{which.split('.')[1]}")
        bad = run
    outcome = run_cli("evaluate", qrels, run)
    assert outcome.status == 1
    assert outcome.out == ""
    assert outcome.err.startswith(f"ranking-plugins: error: {bad}:{line}: "), outcome.err
    for word in words:
        assert word in outcome.err, (word, outcome.err)
    assert "Traceback" not in outcome.err


def test_error_past_the_first_chunk_has_the_right_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "CHUNK_BYTES", 64)
    lines = [f"q1 Q0 d{i} {i} {100 - i}.5 r\n" for i in range(1, 60)]
    lines[40] = "q1 Q0 d41 41 oops r\n"
    qrels = bad_run(tmp_path, GOOD_QRELS, "good.qrels")
    run = bad_run(tmp_path, "".join(lines))
    outcome = run_cli("evaluate", qrels, run)
    assert outcome.status == 1
    assert f"{run}:41: the score is not a number (got 'oops')" in outcome.err


def write_run_with_a_bad_line(directory: Path, bad: str, gzipped: bool) -> tuple[Path, Path]:
    """A run of 40,000 lines (about 1 MB: 16 blocks of 64 KiB) with ``bad`` at line 24,001:
    the reader thread is blocks ahead when the caller meets it, with more left to read."""
    qrels, run = write_big_run(directory, 40_000, queries=400)
    lines = run.read_text().splitlines(keepends=True)
    lines[24_000] = bad + "\n"
    if gzipped:
        run = directory / "big.run.gz"
        with gzip.open(run, "wt") as handle:
            handle.writelines(lines)
    else:
        run.write_text("".join(lines))
    return qrels, run


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
def test_a_bad_line_leaves_no_reader_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gzipped: bool
) -> None:
    """After the error, the pyarrow reader and its file are closed and the reader thread is
    joined: nothing is left suspended in the frames the exception keeps (a reader alive at
    exit aborted the process, "terminate called without an active exception")."""
    import gc
    import types

    from ranking_plugins import evaluate_run

    monkeypatch.setattr(reading, "CHUNK_BYTES", 1 << 16)
    qrels, run = write_run_with_a_bad_line(tmp_path, "q9 Q0 dX 1 nan r", gzipped)
    threads = threading.active_count()
    with pytest.raises(ValueError, match=r":24001: the score is NaN") as raised:
        evaluate_run(qrels, run, ["map"])
    assert raised.value is not None  # kept, as a caller keeps it
    left = [
        o.__qualname__
        for o in gc.get_objects()
        if type(o) is types.GeneratorType  # isinstance would touch torch's deprecated names
        and o.gi_frame is not None
        and o.gi_frame.f_globals.get("__name__") == reading.__name__
    ]
    assert left == []
    assert threading.active_count() == threads


#: a process that reads the run with 64 KiB blocks, then ``evaluate_run`` or the command
BAD_RUN_SCRIPT = """
import sys
from ranking_plugins.runs import reading
reading.CHUNK_BYTES = 1 << 16
if sys.argv[1] == "api":
    from ranking_plugins import evaluate_run
    try:
        evaluate_run(sys.argv[2], sys.argv[3], ["map", "ndcg@10"])
    except ValueError as error:
        print(error, file=sys.stderr)
        sys.exit(1)
else:
    from ranking_plugins.cli import main
    sys.exit(main(["evaluate", *sys.argv[2:]]))
"""


def test_a_bad_line_exits_1_without_an_abort(tmp_path: Path) -> None:
    """evaluate_run's ValueError and the command's exit 1, never SIGABRT at exit: a plain
    and a gzipped run, each through both, in processes run side by side."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    processes = []
    for gzipped, bad in ((False, "q9 Q0 dX 1 nan r"), (True, "q9 Q0 dX 1 high r")):
        directory = tmp_path / str(gzipped)
        directory.mkdir()
        qrels, run = write_run_with_a_bad_line(directory, bad, gzipped)
        for entry in ("api", "command"):
            command = [sys.executable, "-c", BAD_RUN_SCRIPT, entry, str(qrels), str(run)]
            processes.append((entry, run, subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                cwd=root,
            )))  # fmt: skip
    for entry, run, process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 1, (entry, run, process.returncode, err[-2000:])
        assert "terminate called" not in err and f"{run}:24001: the score " in err, err


def test_empty_and_unreadable_files(tmp_path: Path) -> None:
    qrels = bad_run(tmp_path, GOOD_QRELS, "good.qrels")
    empty = bad_run(tmp_path, "", "empty.run")
    outcome = run_cli("evaluate", qrels, empty)
    assert outcome.status == 1 and f"{empty}: " in outcome.err and "empty" in outcome.err
    blank = bad_run(tmp_path, "\n  \n", "blank.run")
    outcome = run_cli("evaluate", qrels, blank, "--run-format", "trec")
    assert outcome.status == 1 and f"{blank}: " in outcome.err and "empty" in outcome.err
    missing = tmp_path / "missing.run"
    outcome = run_cli("evaluate", qrels, missing)
    assert outcome.status == 1
    assert f"{missing}: cannot read the file" in outcome.err
    assert "Traceback" not in outcome.err
    directory = run_cli("evaluate", tmp_path, missing)
    assert directory.status == 1 and f"{tmp_path}: cannot read the file" in directory.err
    broken_gz = bad_run(tmp_path, "not gzip", "run.gz")
    outcome = run_cli("evaluate", qrels, broken_gz, "--run-format", "trec")
    assert outcome.status == 1 and f"{broken_gz}: cannot read the file" in outcome.err


def test_unknown_first_line_format(tmp_path: Path) -> None:
    qrels = bad_run(tmp_path, GOOD_QRELS, "good.qrels")
    run = bad_run(tmp_path, "\nq1 Q0 d1 1 3.0\n", "odd.run")
    outcome = run_cli("evaluate", qrels, run)
    assert outcome.status == 1
    assert f"{run}:2: cannot tell the format" in outcome.err and "--run-format" in outcome.err


# --------------------------------------------------------------------------- missing queries


def test_query_in_run_but_not_in_qrels(tmp_path: Path) -> None:
    qrels = bad_run(tmp_path, GOOD_QRELS, "good.qrels")
    run = bad_run(tmp_path, GOOD_RUN + "q9 Q0 d1 1 5.0 r\nq8 Q0 d1 1 5.0 r\n")
    outcome = run_cli("evaluate", qrels, run)
    assert outcome.status == 1
    assert f"{run}:4: query 'q9' is in the run but not in the qrels" in outcome.err
    assert "2 such queries" in outcome.err and "--unjudged-queries skip" in outcome.err

    skipped = run_cli("evaluate", qrels, run, "--unjudged-queries", "skip", "--format", "json",
                      "--per-query")  # fmt: skip
    assert skipped.status == 0
    assert "2 queries of the run are not in the qrels and were left out: q8, q9" in skipped.err
    plain = run_cli("evaluate", qrels, bad_run(tmp_path, GOOD_RUN, "plain.run"), "--format",
                    "json", "--per-query")  # fmt: skip
    document = skipped.json()
    assert document["unjudged_queries_skipped"] == ["q8", "q9"]
    del document["unjudged_queries_skipped"]
    expected = plain.json()
    del expected["unjudged_queries_skipped"]
    assert document == expected


def test_query_in_qrels_but_not_in_run(trec_eval_dir: Path, tmp_path: Path) -> None:
    """Left out with a note by default; ``count`` is trec_eval -c: nothing retrieved."""
    qrels, run = read_qrels(trec_eval_dir / "qrels.test"), trec_eval_dir / "results.test"
    qrels_path = tmp_path / "qrels"
    extra = {"999": {"DOC-A": 1, "DOC-B": 2, "DOC-C": 0}, "998": {"DOC-A": 0}}
    qrels_path.write_text(
        "".join(
            f"{q} 0 {d} {g}\n" for q, docs in {**qrels, **extra}.items() for d, g in docs.items()
        )
    )
    args = ["--ties", "first", "--per-query", "--format", "json", *COMPARED]
    skipped = run_cli("evaluate", qrels_path, run, *args)
    assert skipped.status == 0
    assert "2 queries of the qrels have no line in the run, left out" in skipped.err
    assert "998, 999" in skipped.err and "--unretrieved-queries count" in skipped.err
    assert skipped.json()["num_queries"] == 3

    counted = run_cli("evaluate", qrels_path, run, "--unretrieved-queries", "count", *args)
    assert counted.status == 0 and "counted as retrieving nothing: 998, 999" in counted.err
    document = counted.json()
    assert document["num_queries"] == 5
    # expectation: rank_metrics on tensors where the two queries retrieve nothing
    qids, preds, target, mask = to_tensors(
        {**qrels, **extra}, read_run(run), ["301", "302", "303", "998", "999"]
    )
    assert not mask[3:].any()
    for top_k in ([10, 100, 1000], None):
        expected = rank_metrics(
            preds, target, ("ndcg", "map", "recall", "mrr", "r_precision"), top_k, mask=mask,
            ties="first", gain="linear", reduction="none",
        )  # fmt: skip
        for key, values in expected.items():
            if key not in document["metrics"]:
                continue
            got = [document["per_query"][q][key] for q in qids]
            assert got == pytest.approx(values.tolist(), abs=1e-12), key
            assert document["metrics"][key] == pytest.approx(float(values.mean()), abs=1e-12)
    assert document["per_query"]["999"]["recall@1000"] == 0.0


def test_empty_target_action(tmp_path: Path) -> None:
    qrels = bad_run(tmp_path, GOOD_QRELS + "q3 0 d1 0\n", "good.qrels")
    run = bad_run(tmp_path, GOOD_RUN + "q3 Q0 d1 1 1.0 r\n")
    neg = run_cli("evaluate", qrels, run, "-m", "mrr", "--format", "json", "--per-query").json()
    assert neg["per_query"]["q3"]["mrr"] == 0.0 and neg["queries_counted"]["mrr"] == 3
    skip = run_cli("evaluate", qrels, run, "-m", "mrr", "--format", "json", "--per-query",
                   "--empty-target-action", "skip").json()  # fmt: skip
    assert skip["per_query"]["q3"]["mrr"] is None and skip["queries_counted"]["mrr"] == 2
    error = run_cli("evaluate", qrels, run, "-m", "mrr", "--empty-target-action", "error")
    assert error.status == 1 and "query 'q3'" in error.err and str(qrels) in error.err


# --------------------------------------------------------------------------- output


def test_table_json_and_csv_agree(trec_eval_dir: Path) -> None:
    files = (trec_eval_dir / "qrels.test", trec_eval_dir / "results.test")
    table = run_cli("evaluate", *files, "--per-query")
    assert table.status == 0 and table.err == ""
    document = run_cli("evaluate", *files, "--per-query", "--format", "json").json()
    keys = list(document["metrics"])
    assert keys == [key_of_default(m) for m in DEFAULT_METRICS]
    summary = {}
    for line in table.out.split("\n\n")[1].splitlines()[1:]:
        key, mean, stderr, count = line.split()
        summary[key] = (float(mean), float(stderr), int(count))
    assert list(summary) == keys
    for key in keys:
        mean, stderr, count = summary[key]
        assert mean == pytest.approx(document["metrics"][key], abs=5e-5)
        assert stderr == pytest.approx(document["standard_error"][key], abs=5e-5)
        assert count == document["queries_counted"][key] == 3
        values = [document["per_query"][q][key] for q in ("301", "302", "303")]
        expected_se = torch.tensor(values, dtype=torch.float64).std() / math.sqrt(3)
        assert document["standard_error"][key] == pytest.approx(float(expected_se), abs=1e-12)
    rows = table.out.split("\n\n")[0].splitlines()
    assert rows[0].split() == ["query", *keys]
    assert [r.split()[0] for r in rows[1:]] == ["301", "302", "303", "all"]

    csv_text = run_cli("evaluate", *files, "--per-query", "--format", "csv").out
    lines = [line.split(",") for line in csv_text.strip().splitlines()]
    assert lines[0] == ["query", *keys]
    assert [line[0] for line in lines[1:]] == ["301", "302", "303", "all"]
    for column, key in enumerate(keys, 1):
        per_query = [float(line[column]) for line in lines[1:4]]
        assert sum(per_query) / 3 == pytest.approx(float(lines[4][column]), abs=1e-15)
        assert float(lines[4][column]) == document["metrics"][key]  # full precision
    only_all = run_cli("evaluate", *files, "--format", "csv").out.strip().splitlines()
    assert [line.split(",")[0] for line in only_all] == ["query", "all"]


def key_of_default(metric: str) -> str:
    return metric  # the defaults are written in the command's own key form


def test_output_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    outcome = run_cli("evaluate", sample_path("sample.qrels"), sample_path("sample.run"),
                      "--format", "json", "-o", target)  # fmt: skip
    assert outcome.status == 0 and outcome.out == ""
    assert json.loads(target.read_text())["num_queries"] == 4


# --------------------------------------------------------------------------- usage


def test_metric_arguments() -> None:
    assert parse_metrics(["ndcg@10", "mrr", "precision@5,10"]) == [
        ("ndcg", 10), ("mrr", None), ("precision", 5), ("precision", 10),
    ]  # fmt: skip
    assert parse_metrics(["ndcg@10,mrr", "ndcg@10"]) == [("ndcg", 10), ("mrr", None)]
    trec_eval_and_ir_measures = ["P_10", "recall_100", "success_1", "recip_rank", "map_cut_5",
                                 "ndcg_cut_20", "Rprec", "nDCG@10", "RR", "AP"]  # fmt: skip
    expected = [("precision", 10), ("recall", 100), ("hit_rate", 1), ("mrr", None), ("map", 5),
                ("ndcg", 20), ("r_precision", None), ("ndcg", 10), ("map", None)]  # fmt: skip
    assert parse_metrics(trec_eval_and_ir_measures) == expected  # RR repeats recip_rank


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("ndgc@10", ["unknown metric 'ndgc' (in 'ndgc@10')", "hit_rate, mrr, precision"]),
        ("r_precision@5", ["takes no cutoff"]),
        ("ndcg@0", ["positive integer"]),
        ("ndcg@x", ["positive integer"]),
        ("ndcg@10,mrr@x", ["positive integer"]),
        ("ndcg@10,,mrr", ["empty metric name"]),
    ],
)
def test_bad_metric_is_a_usage_error(value: str, words: list[str]) -> None:
    outcome = run_cli(
        "evaluate", sample_path("sample.qrels"), sample_path("sample.run"), "-m", value
    )
    assert outcome.status == 2
    assert outcome.err.splitlines()[-1].startswith("ranking-plugins evaluate: error: -m/--metric")
    for word in words:
        assert word in outcome.err


def test_usage_errors_exit_2() -> None:
    assert run_cli().status == 2
    assert run_cli("evaluate", sample_path("sample.qrels")).status == 2
    outcome = run_cli("evaluate", "a", "b", "--ties", "random")
    assert outcome.status == 2 and "invalid choice: 'random'" in outcome.err
    outcome = run_cli("evaluate", "a", "b", "-l", "nan")
    assert outcome.status == 2 and "relevance-threshold" in outcome.err


def test_help() -> None:
    top = run_cli("--help")
    assert top.status == 0 and "evaluate" in top.out
    sub = run_cli("evaluate", "--help")
    assert sub.status == 0
    for option in (
        "--ties",
        "--gain",
        "--relevance-threshold",
        "--per-query",
        "--format",
        "--unjudged-queries",
        "--unretrieved-queries",
        "--qrels-format",
        "--run-format",
        "--empty-target-action",
        "--ap-denominator",
        "--output",
    ):
        assert option in sub.out, option  # fmt: skip
    assert "trec_eval" in sub.out and "ndcg_cut_10" in sub.out


def test_help_through_both_entry_points() -> None:
    done = subprocess.run([sys.executable, "-m", "ranking_plugins", "--help"],
                          capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert done.returncode == 0 and "evaluate" in done.stdout
    assert done.stdout.startswith("usage: ranking-plugins")
    script = _script()
    if script is None:
        pytest.skip("the ranking-plugins script is not installed (pip install -e .)")
    done = subprocess.run([script, "evaluate", "--help"], capture_output=True, text=True,
                          check=False, timeout=300)  # fmt: skip
    assert done.returncode == 0 and "--ties" in done.stdout


def test_sample_files_evaluate_quietly() -> None:
    assert sample_path("sample.qrels").is_file() and sample_path("sample.run").is_file()
    outcome = run_cli("evaluate", sample_path("sample.qrels"), sample_path("sample.run"))
    assert outcome.status == 0 and outcome.err == ""
    assert outcome.out.splitlines()[0].split() == ["metric", "mean", "stderr", "queries"]


# --------------------------------------------------------------------------- progress


def write_big_run(directory: Path, lines: int, queries: int = 1000) -> tuple[Path, Path]:
    per_query = lines // queries + 1
    run = directory / "big.run"
    run.write_text(
        "".join(
            f"q{i // per_query} Q0 d{i} {i % per_query + 1} {(i * 7919) % 100003 / 7.0:.6f} r\n"
            for i in range(lines)
        )
    )
    qrels = directory / "big.qrels"
    qrels.write_text("".join(f"q{q} 0 d{q * per_query + 3} 1\n" for q in range(queries)))
    return qrels, run


def collect(fd: int, into: list[bytes]) -> None:
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the terminal's other end was closed
            return
        if not data:
            return
        into.append(data)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_on_a_terminal_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pty  # noqa: F401  (the platform has pseudo-terminals)

    qrels, run = write_big_run(tmp_path, 100_000, queries=100)
    # a small file standing for a large one: a bar from 1 MiB, updated every 64 KiB
    monkeypatch.setattr(reading, "PROGRESS_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(reading, "CHUNK_BYTES", 1 << 16)
    parser = build_parser()
    args = parser.parse_args(["evaluate", str(qrels), str(run), "-m", "mrr"])

    def on_terminal() -> tuple[int, str]:
        master, slave = os.openpty()
        received: list[bytes] = []
        reader = threading.Thread(target=collect, args=(master, received))
        reader.start()
        with os.fdopen(slave, "w") as terminal:
            assert terminal.isatty()
            status = run_evaluate(parser, args, io.StringIO(), terminal)
        reader.join(timeout=30)
        os.close(master)
        return status, b"".join(received).decode()

    status, shown = on_terminal()
    assert status == 0
    # tqdm's bar over the bytes of the run (the qrels is under the size for a bar)
    assert re.search(r"reading big\.run: +\d+%\|", shown), shown
    assert "big.qrels" not in shown
    assert shown.endswith("\r"), "the progress line is cleared at the end"

    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as pipe:
        status = run_evaluate(parser, args, io.StringIO(), pipe)
    with os.fdopen(read_end) as pipe_reader:
        assert pipe_reader.read() == ""
    assert status == 0

    monkeypatch.setattr(reading, "PROGRESS_MIN_BYTES", run.stat().st_size + 1)
    status, shown = on_terminal()
    assert status == 0 and shown == "", "no bar for a small file"


# ------------------------------------------------ query ids that are not UTF-8 (issue 11, item 13)

#: q\xff and q\xfe (Latin-1 bytes, not UTF-8) both decoded to "q\ufffd" with errors="replace"
NON_UTF8_QRELS = (
    b"q\xff 0 d1 1\nq\xff 0 d2 0\nq\xfe 0 d1 0\nq\xfe 0 d2 1\nq1 0 d1 1\n"
    b"caf\xe9\\x 0 d1 0\ncaf\xe9\\x 0 d2 1\ncaf\xe9\\x 0 d3 1\n"
)
NON_UTF8_RUN = (
    b"q\xff Q0 d1 1 2.0 r\nq\xff Q0 d2 2 1.0 r\nq\xfe Q0 d1 1 2.0 r\nq\xfe Q0 d2 2 1.0 r\n"
    b"q1 Q0 d1 1 1.0 r\ncaf\xe9\\x Q0 d1 1 3.0 r\ncaf\xe9\\x Q0 d2 2 2.0 r\n"
    b"caf\xe9\\x Q0 d3 3 1.0 r\n"
)
#: the name each query is reported by, and its mrr and precision@2
NON_UTF8_EXPECTED = {
    "caf\\xe9\\\\x": (0.5, 0.5),
    "q1": (1.0, 0.5),
    "q\\xfe": (0.5, 0.5),
    "q\\xff": (1.0, 0.5),
}


def _non_utf8_files(tmp_path: Path) -> tuple[Path, Path]:
    qrels, run = tmp_path / "latin1.qrels", tmp_path / "latin1.run"
    qrels.write_bytes(NON_UTF8_QRELS)
    run.write_bytes(NON_UTF8_RUN)
    return qrels, run


def test_query_ids_that_are_not_utf8_stay_distinct_in_json(tmp_path: Path) -> None:
    files = _non_utf8_files(tmp_path)
    document = run_cli("evaluate", *files, "-m", "mrr,precision@2", "--per-query",
                       "--format", "json").json()  # fmt: skip
    assert document["num_queries"] == 4
    assert sorted(document["per_query"]) == sorted(NON_UTF8_EXPECTED)
    for name, (mrr, precision) in NON_UTF8_EXPECTED.items():
        assert document["per_query"][name] == {"mrr": mrr, "precision@2": precision}
    assert document["metrics"]["mrr"] == pytest.approx(0.75, abs=1e-15)


def test_query_ids_that_are_not_utf8_stay_distinct_in_the_table(tmp_path: Path) -> None:
    files = _non_utf8_files(tmp_path)
    table = run_cli("evaluate", *files, "-m", "mrr,precision@2", "--per-query")
    assert table.status == 0, table.err
    rows = table.out.split("\n\n")[0].splitlines()
    assert rows[0].split() == ["query", "mrr", "precision@2"]
    got = {row.split()[0]: tuple(map(float, row.split()[1:])) for row in rows[1:-1]}
    assert got == NON_UTF8_EXPECTED
    assert rows[-1].split()[0] == "all"


def test_query_ids_that_are_not_utf8_stay_distinct_in_csv(tmp_path: Path) -> None:
    files = _non_utf8_files(tmp_path)
    out = tmp_path / "out.csv"
    outcome = run_cli("evaluate", *files, "-m", "mrr,precision@2", "--per-query",
                      "--format", "csv", "-o", out)  # fmt: skip
    assert outcome.status == 0, outcome.err
    lines = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert lines[0] == ["query", "mrr", "precision@2"]
    got = {line[0]: (float(line[1]), float(line[2])) for line in lines[1:-1]}
    assert got == NON_UTF8_EXPECTED
    assert lines[-1][0] == "all"


def test_query_ids_that_are_not_utf8_in_the_notes(tmp_path: Path) -> None:
    qrels, run = _non_utf8_files(tmp_path)
    qrels.write_bytes(NON_UTF8_QRELS + b"q\xfd 0 d1 1\n")
    run.write_bytes(NON_UTF8_RUN + b"q\xfc Q0 d1 1 1.0 r\n")
    outcome = run_cli("evaluate", qrels, run, "-m", "mrr", "--unjudged-queries", "skip")
    assert outcome.status == 0
    assert "not in the qrels and was left out: q\\xfc\n" in outcome.err
    assert "no line in the run, left out (" in outcome.err and "): q\\xfd\n" in outcome.err


def test_a_utf8_query_id_that_spells_an_escape_of_another_is_an_error(tmp_path: Path) -> None:
    qrels, run = _non_utf8_files(tmp_path)
    qrels.write_bytes(NON_UTF8_QRELS + b"q\\xff 0 d1 1\n")
    run.write_bytes(NON_UTF8_RUN + b"q\\xff Q0 d1 1 1.0 r\n")
    outcome = run_cli("evaluate", qrels, run, "-m", "mrr", "--format", "json")
    assert outcome.status == 1
    assert "b'q\\xff' and b'q\\\\xff'" in outcome.err or "b'q\\\\xff' and b'q\\xff'" in outcome.err
    assert "rename one of them" in outcome.err


# ------------------------------------------ relevance thresholds <= 0 (issue 11, item 3)

THRESHOLD_MEASURES = {
    "P.1,3,5,10",
    "recall.1,3,5,10",
    "success.1,5,10",
    "map_cut.3,10",
    "recip_rank",
    "map",
    "Rprec",
}


def _threshold_collection(
    seed: int,
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Qrels with grades -2..2 and runs retrieving unjudged documents too."""
    rng = random.Random(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(12):
        docs = [f"d{j:02d}" for j in range(15)]
        judged = rng.sample(docs, rng.randint(1, 10))
        qrels[f"q{q}"] = {d: rng.choice([-2, -1, 0, 0, 1, 2]) for d in judged}
        retrieved = rng.sample(docs, rng.randint(1, 12))
        scores = rng.sample(range(1000), len(retrieved))  # distinct: no ties
        run[f"q{q}"] = {d: s / 8 for d, s in zip(retrieved, scores)}
    # a query retrieving only unjudged documents, its judged ones grade 0 or below
    qrels["q0"] = {"d00": 0, "d01": -1, "d02": -2}
    run["q0"] = {"d10": 3.0, "d11": 2.0, "d12": 1.0}
    return qrels, run


def _write_trec(tmp_path: Path, qrels: dict, run: dict) -> tuple[Path, Path]:
    qrels_path, run_path = tmp_path / "t.qrels", tmp_path / "t.run"
    qrels_path.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    run_path.write_text(
        "".join(
            f"{q} Q0 {d} {rank} {s} r\n"
            for q, docs in run.items()
            for rank, (d, s) in enumerate(sorted(docs.items(), key=lambda x: -x[1]), 1)
        )
    )
    return qrels_path, run_path


@pytest.mark.parametrize("level", [0, -1, 1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_thresholds_at_or_below_zero_match_pytrec_eval(
    tmp_path: Path, level: int, seed: int
) -> None:
    """``-l 0`` and ``-l -1``: judged grades at or above the level are relevant, unjudged never.

    pytrec_eval refuses a relevance_level <= 0, so the reference is trec_eval
    at level 1 on the qrels with every grade raised by 1 - level: a judged
    grade g >= level exactly when g + 1 - level >= 1, and a document absent
    from the qrels stays unjudged (never relevant), as SPEC section 4 says.
    Grades left below 0 are written 0 (judged, not relevant): pytrec_eval
    crashes on some qrels with grades of -2 or less.
    """
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = _threshold_collection(seed)
    shifted = {q: {d: max(g + 1 - level, 0) for d, g in docs.items()} for q, docs in qrels.items()}
    reference = pytrec_eval.RelevanceEvaluator(shifted, THRESHOLD_MEASURES, 1).evaluate(run)
    measures = sorted(next(iter(reference.values())))
    document = run_cli("evaluate", *_write_trec(tmp_path, qrels, run), "-l", level,
                       "--ties", "first", "--per-query", "--format", "json",
                       *metric_args(measures)).json()  # fmt: skip
    mismatches = [
        f"{measure} {qid}: pytrec_eval {values[measure]!r}, got "
        f"{document['per_query'][qid][key_of(measure)]!r}"
        for measure in measures
        for qid, values in reference.items()
        if not abs(document["per_query"][qid][key_of(measure)] - values[measure]) <= TOL_EXACT
    ]
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("level", ["0", "-1", "-2.5"])
def test_a_counted_query_with_nothing_relevant_stays_empty_below_zero(
    tmp_path: Path, level: str
) -> None:
    # q9 is judged (grade -3) but retrieves nothing: with --unretrieved-queries count
    # it is one masked placeholder item, which must not become relevant under -l <= 0
    qrels = bad_run(tmp_path, GOOD_QRELS + "q9 0 d1 -3\n", "t.qrels")
    run = bad_run(tmp_path, GOOD_RUN, "t.run")
    base = ["evaluate", qrels, run, "-m", "mrr,recall@5", "--unretrieved-queries", "count",
            "--per-query", "--format", "json", "-l", level]  # fmt: skip
    skip = run_cli(*base, "--empty-target-action", "skip").json()
    assert skip["per_query"]["q9"] == {"mrr": None, "recall@5": None}
    assert skip["queries_counted"] == {"mrr": 2, "recall@5": 2}
    pos = run_cli(*base, "--empty-target-action", "pos").json()
    assert pos["per_query"]["q9"] == {"mrr": 1.0, "recall@5": 1.0}
    # an unjudged retrieved document is no more relevant than the placeholder
    unjudged = bad_run(tmp_path, GOOD_RUN + "q9 Q0 d7 1 5.0 r\n", "u.run")
    document = run_cli(*base[:2], unjudged, *base[3:], "--empty-target-action", "skip").json()
    assert document["per_query"]["q9"] == {"mrr": None, "recall@5": None}


# ------------------------------------------ columnar reading in parts (issue 16)


def _parts_collection(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """40 queries, tied scores, an unjudged query, judged queries the run lacks."""
    rng = random.Random(16)
    qrels_lines, run_lines = [], []
    for q in range(40):
        docs = [f"d{j:03d}" for j in rng.sample(range(300), 30)]
        if q != 7:  # q7 is not judged
            qrels_lines += [f"q{q} 0 {d} {rng.choice([0, 1, 2])}\n" for d in docs[::3]]
            qrels_lines += [f"q{q} 0 x{j} 1\n" for j in range(2)]  # judged, never retrieved
        if q < 36:  # q36..q39 are judged but not retrieved
            scores = [rng.choice([1.0, 2.0, 3.5, 4.25]) for _ in docs]  # many ties
            run_lines += [f"q{q} Q0 {d} 1 {s} r\n" for d, s in zip(docs, scores)]
    qrels, run = tmp_path / "parts.qrels", tmp_path / "parts.run"
    qrels.write_text("".join(qrels_lines))
    run.write_text("".join(run_lines))
    return qrels, run, run_lines


@pytest.mark.parametrize("part_slots", [20, 100])
@pytest.mark.parametrize("ties", ["first", "average"])
def test_parts_of_whole_queries_give_the_numbers_of_the_whole_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ties: str, part_slots: int
) -> None:
    qrels, run, lines = _parts_collection(tmp_path)
    lines = lines[:90] + lines[110:]  # q3 retrieves 10 documents, the others 30: padded rows
    run.write_text("".join(lines))
    args = ["--ties", ties, "--per-query", "--format", "json", "--unjudged-queries", "skip",
            "--unretrieved-queries", "count", *COMPARED]  # fmt: skip
    whole = run_cli("evaluate", qrels, run, *args)
    assert whole.status == 0, whole.err
    # the reference: the tests' own reader and rank_metrics on dense tensors
    judged = {q: d for q, d in read_qrels(qrels).items()}
    qids, preds, target, mask = to_tensors(judged, read_run(run), sorted(judged))
    expected = rank_metrics(preds, target, ("mrr", "map"), None, mask=mask, ties=ties, gain="linear",
                            reduction="none")  # fmt: skip
    document = whole.json()
    for key, values in expected.items():
        got = [document["per_query"][q][key] for q in qids]
        assert got == pytest.approx(values.tolist(), abs=1e-12), key
    # blocks of 1 KiB, parts of 100 slots (20: each query longer than a part, alone in
    # one): a query's lines span blocks, and parts are many
    monkeypatch.setattr(reading, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(joining, "PART_LINES", part_slots)
    batches = list(reading.read_batches(str(run), "run"))
    assert len(batches) > 5
    parts = list(
        joining.collections(
            reading.read_records(str(qrels), "qrels"), batches, unjudged="skip",
            unretrieved="count", trec_eval_order=ties == "first",
        )
    )  # fmt: skip
    assert len(parts) > 5 and parts[-1].unjudged == ["q7"]
    assert any(part.preds.shape[0] > 1 for part in parts[:-1]) == (part_slots > 30)
    assert parts[-1].unretrieved == ["q36", "q37", "q38", "q39"]
    in_parts = run_cli("evaluate", qrels, run, *args)
    assert in_parts.json() == document and in_parts.err == whole.err
    # a run whose queries are interleaved is read whole instead, with the same numbers
    random.Random(0).shuffle(lines)
    run.write_text("".join(lines))
    assert run_cli("evaluate", qrels, run, *args).json() == document


def test_a_query_of_many_blocks_is_joined_once_with_the_whole_runs_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query whose lines fill whole blocks is held until it ends (not joined again with
    each block: that was quadratic in its length), and its row is the whole run's."""
    qrels, run, lines = _parts_collection(tmp_path)
    rng = random.Random(3)
    long = [f"q5 Q0 e{j} 1 {rng.choice([1.0, 2.0])} r\n" for j in range(600)]  # 20 blocks
    lines = lines[:165] + long + lines[165:]  # q5's 30 lines, then 600 more
    run.write_text("".join(lines))
    qrels.write_text(qrels.read_text() + "".join(f"q5 0 e{j} 2\n" for j in range(0, 600, 7)))
    judged = reading.read_records(str(qrels), "qrels")
    join = {"unjudged": "skip", "trec_eval_order": True}
    whole = list(joining.collections(judged, reading.read_records(str(run), "run"), **join))
    monkeypatch.setattr(reading, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(joining, "PART_LINES", 100)
    went_on: list[bool] = []
    goes_on = joining._goes_on
    monkeypatch.setattr(joining, "_goes_on", lambda *a: went_on.append(goes_on(*a)) or went_on[-1])
    parts = list(joining.collections(judged, reading.read_batches(str(run), "run"), **join))
    assert sum(went_on) >= 10  # the blocks inside q5 were held, not joined
    rows = {
        qid: (part.preds[r][part.mask[r]].tolist(), part.target[r][part.mask[r]].tolist(),
              sorted(part.target[r][~part.mask[r] & part.judged[r]].tolist()))
        for part in parts for r, qid in enumerate(part.qids)
    }  # fmt: skip
    expected = {
        qid: (part.preds[r][part.mask[r]].tolist(), part.target[r][part.mask[r]].tolist(),
              sorted(part.target[r][~part.mask[r] & part.judged[r]].tolist()))
        for part in whole for r, qid in enumerate(part.qids)
    }  # fmt: skip
    assert len(rows["q5"][0]) == 630 and rows == expected


@pytest.mark.parametrize("prefix", ["", "document-", "a-document-id-longer-than-32-bytes-"])
def test_a_repeated_document_in_a_later_part_names_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    """Ids of up to 8 bytes, hashed (up to 32) and encoded by pyarrow: the same message;
    and the thread that reads ahead has ended when the command returns."""
    qrels, run, lines = _parts_collection(tmp_path)
    lines.insert(900, lines[895])  # in q30's lines, 5 lines apart
    run.write_text("".join(lines).replace(" d", f" {prefix}d"))
    monkeypatch.setattr(reading, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(joining, "PART_LINES", 100)
    threads = threading.active_count()
    outcome = run_cli("evaluate", qrels, run, "--unjudged-queries", "skip")
    assert outcome.status == 1 and threading.active_count() == threads
    assert f"{run}:901: document" in outcome.err and "first at line 896" in outcome.err


def test_two_ids_of_one_hash_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids of more than 8 bytes are sorted and looked up by a hash of their bytes: two
    distinct ids of one hash in a query are not a repeated document, and each keeps its
    judgment; two equal ids still are one (a hash of the length alone makes them meet)."""
    pa = pytest.importorskip("pyarrow")
    monkeypatch.setattr(joining, "_hashed", lambda words, lengths: lengths.astype("uint64"))
    ids = [b"abcdefgh-first", b"abcdefgh-other"]
    keys = [joining._document_keys(pa.array([i], pa.binary()), pa.array([], pa.binary()), False)
            for i in ids]  # fmt: skip
    assert keys[0][0].tolist() == keys[1][0].tolist() and not keys[0][2]  # one hash, not unique

    def records(kind: str, docnos: list[bytes], values: list[float]) -> reading.Records:
        qids = pa.array([b"q"] * len(docnos), pa.binary())
        return reading.Records(kind, kind, reading.IN_MEMORY, qids, pa.array(docnos, pa.binary()),
                               torch.tensor(values, dtype=torch.float64))  # fmt: skip

    qrels = records("qrels", [ids[1], b"x" * 12], [2.0, 1.0])
    run = records("run", [b"y" * 12, ids[0], ids[1]], [3.0, 2.0, 1.0])
    (part,) = [p for p in joining.collections(qrels, run) if p.qids]
    assert part.target[0].tolist() == [-math.inf, -math.inf, 2.0, 1.0]  # ids[1] judged 2
    assert part.judged[0].tolist() == [False, False, True, True]
    assert part.mask[0].tolist() == [True, True, True, False]
    twice = records("run", [b"y" * 12, ids[0], ids[1], ids[0]], [3.0, 2.0, 1.0, 0.5])
    with pytest.raises(reading.FileFormatError, match="lists a document twice"):
        list(joining.collections(qrels, twice))
    # the qrels: two ids of one key are two documents; one id twice is judged twice
    both = records("qrels", [ids[1], b"x" * 12, ids[0]], [2.0, 1.0, 1.0])
    (part,) = [p for p in joining.collections(both, run) if p.qids]
    assert part.target[0].tolist() == [-math.inf, 1.0, 2.0, 1.0]
    with pytest.raises(reading.FileFormatError, match="judges a document twice"):
        list(joining.collections(records("qrels", [ids[1], b"x" * 12, ids[1]], [2, 1, 1]), run))


@pytest.mark.parametrize("docno", ["d1", "a-document-id-of-30-bytes-d1"])
def test_a_document_judged_twice_names_its_line(tmp_path: Path, docno: str) -> None:
    qrels, run = tmp_path / "q", tmp_path / "r"
    qrels.write_text(f"1 0 {docno} 1\n1 0 d2 0\n2 0 {docno} 1\n1 0 {docno} 2\n")
    run.write_text(f"1 Q0 {docno} 1 2.0 r\n2 Q0 {docno} 1 2.0 r\n")
    outcome = run_cli("evaluate", qrels, run)
    assert outcome.status == 1 and f"{qrels}:4: document" in outcome.err


def test_realistic_long_ids_meet_on_no_hash_key() -> None:
    """ClueWeb09's ids, alike in all but a few bytes, get a key each, so that a part is
    joined once by its hash keys, not again by pyarrow's codes (a hash folding the words
    by xor and multiply alone gave ``clueweb09-en0004-61-00551`` and ``...en0008-61-00511``
    one key, and most parts of such a run took the slow path)."""
    pa = pytest.importorskip("pyarrow")
    docnos = [f"clueweb09-en{a:04d}-{b:02d}-{c:05d}".encode()
              for a in (4, 8) for b in range(100) for c in range(1000)]  # fmt: skip
    docnos += [f"msmarco_doc_{a:02d}_{b}".encode() for a in range(10) for b in range(0, 99999, 97)]
    ids = pa.array(docnos, pa.binary())
    _, retrieved, unique = joining._document_keys(ids.slice(0, 0), ids, False)
    assert not unique and len(set(retrieved.tolist())) == len(docnos)


@pytest.mark.parametrize("ids", ["short", "long"])
def test_the_join_is_a_dict_join_for_ids_alike_in_their_first_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ids: str
) -> None:
    """Each run line's grade is the qrels' for its (query, document), as a dict of bytes
    says, for ids of exactly 8 bytes (one word each, ``short``) and, with ids of 9 to 40
    bytes (hashed, ``long``), for ids equal in their first 8 bytes, of non-ASCII bytes,
    and of 8 and 9 bytes that extend each other, over parts of several queries."""
    rng = random.Random(1)
    names = [b"doc-%04d" % i for i in range(40)]
    names += [f"dóc-{i:03d}".encode() for i in range(20)]  # 8 bytes, "ó" is two
    names += [b"\xff\xfe%06d" % i for i in range(20)]  # not UTF-8
    if ids == "long":
        names += [n + suffix for n in names[:30] for suffix in (b"x", b"-0", b"\xc3\xa9" * 16)]
        names += [b"clueweb09-en0004-61-00551", b"clueweb09-en0008-61-00511"]
    assert all(len(n) == 8 for n in names) if ids == "short" else min(map(len, names)) == 8
    run_lines, qrels_lines, grades = [], [], {}
    for q in range(12):
        retrieved = rng.sample(names, rng.randrange(1, len(names) // 2))
        for rank, doc in enumerate(retrieved):
            run_lines.append(b"q%d Q0 %s %d %d run\n" % (q, doc, rank + 1, 100 - rank))
        for doc in rng.sample(names, 25):
            grades[(b"q%d" % q, doc)] = rng.randrange(3)
            qrels_lines.append(b"q%d 0 %s %d\n" % (q, doc, grades[(b"q%d" % q, doc)]))
    (tmp_path / "r").write_bytes(b"".join(run_lines))
    (tmp_path / "q").write_bytes(b"".join(qrels_lines))
    monkeypatch.setattr(joining, "PART_LINES", 64)  # parts of a few queries
    qrels = reading.read_records(str(tmp_path / "q"), "qrels")
    parts = list(joining.collections(qrels, reading.read_records(str(tmp_path / "r"), "run")))
    assert len(parts) > 3
    rows = {
        qid: (part.target[r][part.mask[r]].tolist(),
              sorted(part.target[r][~part.mask[r] & part.judged[r]].tolist()))
        for part in parts for r, qid in enumerate(part.qids)
    }  # fmt: skip
    expected: dict[str, tuple[list[float], list[float]]] = {}
    for line in run_lines:
        qid, _, doc = line.split()[:3]
        expected.setdefault(qid.decode(), ([], []))[0].append(
            float(grades.get((qid, doc), -math.inf))
        )
    for (qid, doc), grade in grades.items():
        retrieved = any(line.split()[0] == qid and line.split()[2] == doc for line in run_lines)
        if not retrieved and grade > 0:
            expected[qid.decode()][1].append(float(grade))
    assert rows == {q: (found, sorted(added)) for q, (found, added) in expected.items()}


def test_mixed_whitespace_is_read_by_the_exact_reader(tmp_path: Path) -> None:
    qrels, run, lines = _parts_collection(tmp_path)
    reference = run_cli("evaluate", qrels, run, "--unjudged-queries", "skip", "--format", "json")
    mixed = run.with_name("mixed.run")
    mixed.write_text("".join(line.replace(" ", "\t", 2) if i > 500 else line
                             for i, line in enumerate(lines)))  # fmt: skip
    outcome = run_cli("evaluate", qrels, mixed, "--unjudged-queries", "skip", "--format", "json")
    assert outcome.json() == reference.json()


def test_without_the_cli_extra_the_command_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow fails
    outcome = run_cli("evaluate", sample_path("sample.qrels"), sample_path("sample.run"))
    assert outcome.status == 1 and outcome.out == ""
    assert "ranking-plugins: error:" in outcome.err
    assert "pyarrow" in outcome.err and 'pip install "ranking-plugins[cli]"' in outcome.err
    with pytest.raises(reading.MissingExtraError, match=r"ranking-plugins\[cli\]"):
        reading.read_records(str(sample_path("sample.run")), "run")
    run = sample_path("sample.run")
    outcome = run_cli("compare", sample_path("sample.qrels"), run, run)
    assert outcome.status == 1 and outcome.out == ""
    assert 'pip install "ranking-plugins[cli]"' in outcome.err


def test_import_ranking_plugins_imports_no_reader() -> None:
    """``import ranking_plugins`` (and its command's module) add nothing to what torch imports
    but the standard library and typing_extensions: the readers are the cli extra."""
    code = (
        "import sys, torch\n"
        "before = {m.split('.')[0] for m in sys.modules}\n"
        "import ranking_plugins, ranking_plugins.cli\n"
        "new = {m.split('.')[0] for m in sys.modules} - before\n"
        "print(sorted(new - set(sys.stdlib_module_names)))\n"
        "print('pyarrow' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=300)  # fmt: skip
    third_party, pyarrow_loaded = done.stdout.splitlines()
    assert set(eval(third_party)) <= {"ranking_plugins", "typing_extensions"}, third_party
    assert pyarrow_loaded == "False"


def test_help_and_usage_errors_import_no_torch() -> None:
    """``--help``, ``evaluate --help``'s usage line and argparse's errors come without torch
    (``ranking_plugins`` imports its names on first use); evaluating imports it."""
    code = (
        "import contextlib, io, sys\n"
        "from ranking_plugins.cli import main\n"
        "for argv in (['--help'], ['evaluate'], ['evaluate', 'q', 'r', '--ties', 'x'],\n"
        "             ['compare', 'q', 'r', 's', '--test', 'x'], ['nothing']):\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit as exit:\n"
        "            code = exit.code\n"
        "    print(argv[0], code, 'torch' in sys.modules, len(out.getvalue()) > 0)\n"
        "import ranking_plugins\n"
        "print(ranking_plugins.rank_metrics.__name__, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=300)  # fmt: skip
    assert done.stdout.splitlines() == [
        "--help 0 False True",
        "evaluate 2 False True",
        "evaluate 2 False True",
        "compare 2 False True",
        "nothing 2 False True",
        "rank_metrics True",
    ], done.stdout + done.stderr


def test_evaluating_files_imports_no_pandas(tmp_path: Path) -> None:
    """The command reads pyarrow's arrays from their buffers: pyarrow's ``to_numpy`` and its
    conversion of numpy or Python values import pandas on first use (0.4 s of a 3 s run)."""
    qrels, run = _long_id_files(tmp_path)
    code = (
        "import contextlib, io, sys\n"
        "from ranking_plugins.cli import main\n"
        "for extra in ([], ['--ties', 'first'], ['-q', '--format', 'trec_eval', '-m', 'all_trec'],\n"
        "              ['--unretrieved-queries', 'count', '-J']):\n"
        "    for files in (sys.argv[1:3], sys.argv[3:5]):\n"
        "        with contextlib.redirect_stdout(io.StringIO()):\n"
        "            assert main(['evaluate', *files, *extra]) == 0\n"
        "print('pandas' in sys.modules)\n"
    )
    files = [sample_path("sample.qrels"), sample_path("sample.run"), qrels, run]
    done = subprocess.run([sys.executable, "-c", code, *map(str, files)], capture_output=True,
                          text=True, check=True, timeout=300)  # fmt: skip
    assert done.stdout.split() == ["False"], done.stdout + done.stderr


def _long_id_files(tmp_path: Path) -> tuple[Path, Path]:
    """A qrels and a run whose document ids are longer than 8 bytes (hashed in the join),
    with ties in the run."""
    qrels, run = tmp_path / "long.qrels", tmp_path / "long.run"
    qrels.write_text(
        "".join(f"q{q} 0 clueweb09-en0000-00-{d:05d} {d % 3}\n" for q in range(3) for d in range(6))
    )
    run.write_text(
        "".join(
            f"q{q} Q0 clueweb09-en0000-00-{d:05d} {d} {float(d // 2)} r\n"
            for q in range(3)
            for d in range(2, 9)
        )
    )
    return qrels, run


@pytest.mark.parametrize("style", ["short", "long", "mixed"])
def test_the_run_keys_made_in_the_reader_thread_give_the_join_s_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    """The run's document keys are made as it is read, in the reader thread
    (``joining.run_keys``), and kept by the join where the judged ids key alike; else (blocks
    of two kinds, judged ids longer than the run's, ids of 8 bytes against hashed ones)
    the join keys both sides. The numbers are those of keys made in the join."""
    rng = random.Random(7)

    def docno(q: int, d: int) -> str:
        long = style == "long" or (style == "mixed" and q % 3 == 1)
        return f"clueweb09-en{q:04d}-{d % 7:02d}-{d:05d}" if long else f"D{q:03d}{d:04d}"

    qrels_lines, run_lines = [], []
    for q in range(40):
        docs = rng.sample(range(200), 30)
        for rank, d in enumerate(docs):
            run_lines.append(f"q{q} Q0 {docno(q, d)} {rank} {rng.randint(0, 9)} r\n")
        for d in rng.sample(docs, 8) + rng.sample(range(200, 300), 3):
            qrels_lines.append(f"q{q} 0 {docno(q, d)} {rng.randint(0, 2)}\n")
        if style == "mixed" and q % 5 == 0:  # a judged id longer than any of the run's
            qrels_lines.append(f"q{q} 0 {'x' * 40}{q} 1\n")
    qrels, run = tmp_path / "k.qrels", tmp_path / "k.run"
    qrels.write_text("".join(qrels_lines))
    run.write_text("".join(run_lines))
    monkeypatch.setattr(reading, "CHUNK_BYTES", 2048)
    monkeypatch.setattr(joining, "PART_LINES", 100)
    threads, kept = [], []
    made, keyed = joining.run_keys, joining._document_keys

    def run_keys(ids: object) -> tuple[object, object]:
        threads.append(threading.get_ident())
        return made(ids)

    def document_keys(*args: object) -> tuple[torch.Tensor, torch.Tensor, bool]:
        judged, retrieved, unique = keyed(*args)  # type: ignore[arg-type]
        given = args[3] if len(args) > 3 else None
        if given is not None:  # the keys made as the run was read: kept, or made again
            kept.append(retrieved.data_ptr() == given[0].ctypes.data)
        return judged, retrieved, unique

    flags = ["-m", "map", "-m", "ndcg@10", "-m", "P@5", "-m", "bpref", "-q", "--format", "json"]
    for ties in ("average", "first"):
        monkeypatch.setattr(evaluation, "run_keys", run_keys)
        monkeypatch.setattr(joining, "_document_keys", document_keys)
        outcome = run_cli("evaluate", qrels, run, "--ties", ties, *flags)
        monkeypatch.setattr(evaluation, "run_keys", lambda ids: (None, None))  # none made
        joined_here = run_cli("evaluate", qrels, run, "--ties", ties, *flags)
        assert outcome.status == 0 and outcome.json() == joined_here.json()
    assert threads and threading.get_ident() not in threads
    assert any(kept) and all(kept) == (style != "mixed")


def test_numpy_column_and_arrow_array_read_the_buffers() -> None:
    """Sliced arrays (an offset into the buffer), booleans (bits), missing values and the
    round trip through :func:`reading.arrow_array` give pyarrow's own values."""
    pa = reading.arrow()
    numbers = pa.array([1.5, -2.0, 3.25, 7.0, 9.0]).slice(1, 3)
    assert reading.numpy_column(numbers).tolist() == [-2.0, 3.25, 7.0]
    flags = pa.array([True, False, True, True, False, False, True, False, True, True]).slice(3, 6)
    assert reading.numpy_column(flags).tolist() == flags.to_pylist()
    codes = pa.array([4, None, 2, None], pa.int32()).slice(1, 3)
    assert reading.numpy_column(codes, -1).tolist() == [-1, 2, -1]
    with pytest.raises(ValueError, match="missing values"):
        reading.numpy_column(codes)
    for kind in (pa.uint8(), pa.int16(), pa.uint64(), pa.float32()):
        values = pa.array([0, 1, 200], kind)
        assert reading.numpy_column(values).tolist() == values.to_pylist()
    assert reading.numpy_column(pa.chunked_array([[1, 2], [3]])).tolist() == [1, 2, 3]
    assert reading.numpy_column(pa.array([], pa.int64())).tolist() == []
    ids = pa.array([b"a", b"b", b"c"])
    assert ids.take(reading.arrow_array(torch.tensor([2, 0]))).to_pylist() == [b"c", b"a"]
    assert reading.arrow_array(torch.tensor([0.5, 1.0])).to_pylist() == [0.5, 1.0]
    assert reading.arrow_array(torch.zeros(0, dtype=torch.int64)).to_pylist() == []


def test_document_ids_packed_into_integers_or_not_give_the_same_numbers(tmp_path: Path) -> None:
    """Ids of at most 8 bytes are joined as one integer, up to 32 as several, longer as codes."""
    qrels, run, _ = _parts_collection(tmp_path)
    args = ["--per-query", "--format", "json", "--unjudged-queries", "skip",
            "--unretrieved-queries", "count", "--ties", "first", *COMPARED]  # fmt: skip
    short = run_cli("evaluate", qrels, run, *args).json()
    text = {path: path.read_text() for path in (qrels, run)}
    for prefix in ("document-", "a-document-id-longer-than-32-bytes-"):
        for path in (qrels, run):
            path.write_text(text[path].replace(" d", f" {prefix}d").replace(" x", f" {prefix}x"))
        assert run_cli("evaluate", qrels, run, *args).json() == short, prefix


def test_ids_are_loaded_as_words_or_hashed() -> None:
    pa = pytest.importorskip("pyarrow")
    ids = pa.array([b"a", b"ab", b"abcdefgh", b"b", b"a", b"abcdefghi", b""], pa.binary())
    words, lengths, itself = joining._words(ids, 2)
    assert words.shape == (2, 7) and lengths.tolist() == [1, 2, 8, 1, 1, 9, 0] and not itself
    assert joining._words(ids.slice(0, 5), 1)[2]  # one word each, the ids themselves
    assert (joining._words(ids.slice(1), 2)[0] == words[:, 1:]).all()  # an offset into buffers
    assert words[:, 5].tolist() == [int.from_bytes(b"abcdefgh", "little"), ord("i")]
    columns = [tuple(column) for column in words.T.tolist()]
    assert len(set(columns)) == 6 and columns[0] == columns[4]  # equal ids, equal words
    assert not joining._words(pa.array([b"a\0", b"a"], pa.binary()), 1)[2]  # would meet b"a"
    # one word: the keys are the bytes, unique; else hashed (the largest int64 is the
    # padding of the sorted rows: no key is it)
    none = pa.array([], pa.binary())
    for docnos, unique in ([[b"a", b"b"], True], [[b"\xff" * 7 + b"\x7f", b"a"], False],
                           [[b"x" * 33, b"a"], False], [[b"a\0", b"a"], False]):  # fmt: skip
        judged, retrieved, is_unique = joining._document_keys(pa.array(docnos), none, False)
        assert is_unique == unique and len(set(judged.tolist())) == 2, docnos
        assert torch.iinfo(torch.int64).max not in judged.tolist() and retrieved.numel() == 0
