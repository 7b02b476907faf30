"""The diversity measures from files: ``ranking-plugins evaluate`` and ``compare`` read the
diversity track's qrels (``qid subtopic docid rel``), checked against pyndeval through
ir_measures (the diversity measures), pytrec_eval (the others: each document's largest
grade) and scipy (the paired test)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from test_cli import run_cli

ir_measures = pytest.importorskip("ir_measures")
pytest.importorskip("pyndeval")

#: the diversity measures asked of the command, and their ir_measures names
MEASURES = {
    "alpha_ndcg@20": "alpha_nDCG@20",
    "alpha_ndcg@5": "alpha_nDCG@5",
    "err_ia@10": "ERR_IA@10",
    "nrbp": "NRBP",
    "subtopic_recall@5": "StRecall@5",
}


def _write_files(directory: Path, seed: int, boost: float = 0.0) -> tuple[Path, Path]:
    """A diversity qrels and a TREC run, distinct scores (ndeval's tie break is not ours),
    every run query judged and every judged query retrieved. ``boost``: how much a
    document's relevant subtopics raise its score."""
    rng = random.Random(seed)
    qrels_lines, run_lines = [], []
    for q in range(8):
        documents = sorted({f"d{rng.randint(0, 40):02d}" for _ in range(12)})
        covered: dict[str, int] = {}
        for doc in documents:
            for s in range(rng.randint(2, 4)):
                if rng.random() < 0.4:
                    grade = rng.randint(0, 2)
                    qrels_lines.append(f"q{q} {s + 1} {doc} {grade}")
                    covered[doc] = covered.get(doc, 0) + (grade > 0)
        retrieved = rng.sample(documents, k=min(8, len(documents))) + [
            f"u{q}x{i}" for i in range(2)
        ]
        scores = rng.sample(range(1000), k=len(retrieved))
        for doc, score in zip(retrieved, scores, strict=True):
            run_lines.append(f"q{q} Q0 {doc} 0 {score + 300 * boost * covered.get(doc, 0)} r")
    qrels_path, run_path = directory / f"div{seed}.qrels", directory / f"div{seed}_{boost}.run"
    qrels_path.write_text("\n".join(qrels_lines) + "\n")
    run_path.write_text("\n".join(run_lines) + "\n")
    return qrels_path, run_path


def _metric_args(keys: list[str]) -> list[str]:
    return [arg for key in keys for arg in ("-m", key)]


def test_evaluate_reads_the_second_column_as_the_subtopic(tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = _write_files(tmp_path, 0)
    keys = [*MEASURES, "ndcg@5"]
    document = run_cli("evaluate", qrels, run, *_metric_args(keys), "-q", "--format", "json").json()
    judgments = list(ir_measures.read_trec_qrels(str(qrels)))
    scored = list(ir_measures.read_trec_run(str(run)))
    for key, name in MEASURES.items():
        measure = ir_measures.parse_measure(name)
        expected = {
            m.query_id: m.value for m in ir_measures.iter_calc([measure], judgments, scored)
        }
        got = {qid: values[key] for qid, values in document["per_query"].items()}
        assert got == pytest.approx(expected, abs=1e-9), key
        assert document["metrics"][key] == pytest.approx(
            sum(expected.values()) / len(expected), abs=1e-9
        )
    # the other measures read each (query, document)'s largest grade
    largest: dict[str, dict[str, int]] = {}
    for qrel in judgments:
        row = largest.setdefault(qrel.query_id, {})
        row[qrel.doc_id] = max(row.get(qrel.doc_id, 0), qrel.relevance)
    run_dict: dict[str, dict[str, float]] = {}
    for doc in scored:
        run_dict.setdefault(doc.query_id, {})[doc.doc_id] = doc.score
    evaluator = pytrec_eval.RelevanceEvaluator(largest, {"ndcg_cut.5"})
    for qid, values in evaluator.evaluate(run_dict).items():
        assert document["per_query"][qid]["ndcg@5"] == pytest.approx(values["ndcg_cut_5"], abs=1e-9)


def test_outputs_keep_their_shape(tmp_path: Path) -> None:
    """A diversity measure changes no output's layout: the same JSON keys, CSV header and
    table lines as a measure of plain qrels."""
    qrels, run = _write_files(tmp_path, 1)
    plain = tmp_path / "plain.qrels"
    plain.write_text("".join(f"q{q} 0 d00 1\n" for q in range(8)))
    for per_query in ([], ["-q"]):
        diverse = run_cli(
            "evaluate", qrels, run, "-m", "alpha_ndcg@20", *per_query, "--format", "json"
        )
        other = run_cli("evaluate", plain, run, "-m", "ndcg@20", *per_query, "--format", "json")
        mine, theirs = diverse.json(), other.json()
        assert list(mine) == list(theirs)
        for name, value in theirs.items():
            if isinstance(value, dict):
                assert len(mine[name]) == len(value), name
        for output in ("csv", "table"):
            lines = run_cli(
                "evaluate", qrels, run, "-m", "alpha_ndcg@20", *per_query, "--format", output
            )
            assert lines.status == 0, lines.err
            reference = run_cli(
                "evaluate", plain, run, "-m", "ndcg@20", *per_query, "--format", output
            )
            mine_lines, their_lines = lines.out.splitlines(), reference.out.splitlines()
            assert len(mine_lines) == len(their_lines)
            header = mine_lines[0].replace("alpha_ndcg@20", "ndcg@20").replace(",", " ")
            assert header.split() == their_lines[0].replace(",", " ").split()


def test_ir_measures_names_at_the_commands_alpha_and_beta(tmp_path: Path) -> None:
    """ir_measures' names write alpha and beta; at the command's values (no flag sets them)
    they are the package's names; at others, a usage error that says so."""
    qrels, run = _write_files(tmp_path, 2)
    names = ["alpha_nDCG@5", "NRBP", "nNRBP", "ERR_IA@10"]
    theirs = run_cli("evaluate", qrels, run, *_metric_args(names), "--format", "json").json()
    ours = ["alpha_ndcg@5", "nrbp", "nnrbp", "err_ia@10"]
    mine = run_cli("evaluate", qrels, run, *_metric_args(ours), "--format", "json").json()
    assert list(theirs["metrics"].values()) == list(mine["metrics"].values())
    refused = run_cli("evaluate", qrels, run, "-m", "alpha_nDCG(alpha=0.3)@5")
    assert refused.status == 2
    assert "alpha=0.3" in refused.err and "alpha=0.5, beta=0.5" in refused.err


def test_bad_diversity_input_to_the_command(tmp_path: Path) -> None:
    qrels, run = _write_files(tmp_path, 3)
    three = tmp_path / "three.qrels"
    three.write_text("q0 d00 1\n")
    found = run_cli("evaluate", three, run, "-m", "alpha_ndcg@5")
    assert found.status == 1
    assert f"{three}:1: expected 4 columns (qid subtopic docid rel), got 3" in found.err
    found = run_cli("evaluate", qrels, run, "-m", "alpha_ndcg@5", "--qrels-format", "tsv")
    assert found.status == 1 and "no subtopic column" in found.err
    found = run_cli("evaluate", qrels, run, "-m", "alpha_ndcg@0")
    assert found.status == 2 and "-m/--metric" in found.err
    # a run query the qrels lack: an error at its line, as for every other measure
    unjudged = tmp_path / "unjudged.run"
    unjudged.write_text(run.read_text() + "zz Q0 d00 0 1.0 r\n")
    found = run_cli("evaluate", qrels, unjudged, "-m", "alpha_ndcg@5")
    lines = len(run.read_text().splitlines())
    assert found.status == 1 and f"{unjudged}:{lines + 1}: query 'zz'" in found.err
    skipped = run_cli(
        "evaluate", qrels, unjudged, "-m", "alpha_ndcg@5", "--unjudged-queries", "skip"
    )
    assert skipped.status == 0 and "zz" in skipped.err


def test_compare_command_tests_diversity_measures(tmp_path: Path) -> None:
    stats = pytest.importorskip("scipy.stats")
    qrels, run_a = _write_files(tmp_path, 4)
    _, run_b = _write_files(tmp_path, 4, boost=1.0)
    found = run_cli("compare", qrels, run_a, run_b, "-m", "alpha_ndcg@10", "--format", "json")
    assert found.status == 0, found.err
    (row,) = json.loads(found.out)["rows"]
    values = {}
    for run in (run_a, run_b):
        document = run_cli("evaluate", qrels, run, "-m", "alpha_ndcg@10", "-q", "--format", "json")
        per_query = document.json()["per_query"]
        values[run.name] = [per_query[q]["alpha_ndcg@10"] for q in sorted(per_query)]
    expected = stats.ttest_rel(values[row["system"]], values[row["baseline"]]).pvalue
    assert row["metric"] == "alpha_ndcg@10"
    assert row["p_value"] == pytest.approx(expected, abs=1e-10)


def test_compare_takes_evaluate_run_results_of_diversity_measures(tmp_path: Path) -> None:
    stats = pytest.importorskip("scipy.stats")
    from ranking_plugins import evaluate_run
    from ranking_plugins.compare import compare

    qrels, run_a = _write_files(tmp_path, 5)
    _, run_b = _write_files(tmp_path, 5, boost=1.0)
    measures = ["alpha_nDCG@10", "NRBP", "ndcg@10"]
    a, b = (evaluate_run(qrels, run, measures) for run in (run_a, run_b))
    report = compare({"a": a, "b": b}, baseline="a")
    assert sorted(row.metric for row in report.rows) == sorted(measures)
    for row in report.rows:
        qids = a.qids
        first = [a.per_query[row.metric][q] for q in qids]
        second = [b.per_query[row.metric][q] for q in qids]
        expected = stats.ttest_rel(second, first).pvalue
        assert row.p_value == pytest.approx(expected, abs=1e-10), row.metric
