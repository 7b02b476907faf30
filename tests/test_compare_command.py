"""``ranking-plugins compare``: run files in, paired tests out (checked against scipy)."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import pytest
from test_cli import run_cli

stats = pytest.importorskip("scipy.stats")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A qrels and three TREC runs over 20 queries; run b ranks relevant documents higher."""
    rng = random.Random(0)
    paths = {name: tmp_path / name for name in ("qrels", "a.run", "b.run", "c.run")}
    grades = {(q, d): rng.choice([0, 0, 1, 2]) for q in range(20) for d in range(8)}
    with paths["qrels"].open("w") as qrels:
        for (q, d), grade in grades.items():
            qrels.write(f"q{q} 0 d{d} {grade}\n")
    for name, boost in (("a.run", 0.0), ("b.run", 0.5), ("c.run", 0.1)):
        with paths[name].open("w") as run:
            for q in range(20):
                for d in range(8):
                    score = rng.random() + boost * grades[q, d]
                    run.write(f"q{q} Q0 d{d} 0 {score:.6f} {name}\n")
    return paths


def per_query(files: dict[str, Path], run: str, metric: str) -> dict[str, float]:
    status, out, err = run_cli(
        "evaluate", files["qrels"], files[run], "-m", metric, "--per-query", "--format", "json"
    )
    assert status == 0, err
    return {qid: values[metric] for qid, values in json.loads(out)["per_query"].items()}


def test_p_values_equal_scipy_on_evaluates_per_query_values(files: dict[str, Path]) -> None:
    status, out, err = run_cli(
        "compare",
        files["qrels"],
        files["a.run"],
        files["b.run"],
        files["c.run"],
        "-m",
        "ndcg@5",
        "--baseline",
        "a.run",
        "--format",
        "json",
    )
    assert status == 0, err
    document = json.loads(out)
    values = {run: per_query(files, run, "ndcg@5") for run in ("a.run", "b.run", "c.run")}
    qids = sorted(values["a.run"])
    assert [(r["baseline"], r["system"]) for r in document["rows"]] == [
        ("a.run", "b.run"),
        ("a.run", "c.run"),
    ]
    p = []
    for row in document["rows"]:
        system = [values[row["system"]][q] for q in qids]
        base = [values["a.run"][q] for q in qids]
        expected = stats.ttest_rel(system, base).pvalue
        assert row["p_value"] == pytest.approx(expected, abs=1e-10)
        p.append(row["p_value"])
    holm_first = min(p) * 2
    assert min(r["adjusted_p_value"] for r in document["rows"]) == pytest.approx(min(1, holm_first))
    assert document["rows"][0]["significant"] is True  # b's boost is large


@pytest.mark.parametrize("test", ["wilcoxon", "randomization", "bootstrap"])
def test_every_test_and_format(files: dict[str, Path], test: str) -> None:
    runs = (files["a.run"], files["b.run"], files["c.run"])
    status, out, err = run_cli(
        "compare",
        files["qrels"],
        *runs,
        "--test",
        test,
        "--format",
        "csv",
        "--permutations",
        "500",
        "--resamples",
        "500",
    )
    assert status == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["baseline"], r["system"]) for r in rows] == [
        ("a.run", "b.run"),
        ("a.run", "c.run"),
        ("b.run", "c.run"),
    ]
    assert all(0 < float(r["p_value"]) <= 1 for r in rows)
    status, table, _ = run_cli(
        "compare",
        files["qrels"],
        *runs,
        "--test",
        test,
        "--permutations",
        "500",
        "--resamples",
        "500",
    )
    assert status == 0 and f"test: {test}" in table
    status, latex, _ = run_cli(
        "compare",
        files["qrels"],
        *runs,
        "--test",
        test,
        "--format",
        "latex",
        "--permutations",
        "500",
        "--resamples",
        "500",
    )
    assert status == 0 and latex.startswith("\\begin{table}") and "95\\%" in latex


def test_a_run_that_fails_to_parse_gives_file_and_line(
    files: dict[str, Path], tmp_path: Path
) -> None:
    lines = files["b.run"].read_text().splitlines()
    lines[4] = "q0 Q0 d4 0 not-a-score b.run"
    bad = tmp_path / "bad.run"
    bad.write_text("\n".join(lines) + "\n")
    status, out, err = run_cli("compare", files["qrels"], files["a.run"], bad)
    assert status == 1 and out == ""
    assert f"{bad}:5:" in err


def test_runs_over_different_queries_are_an_error_naming_them(
    files: dict[str, Path], tmp_path: Path
) -> None:
    short = tmp_path / "short.run"
    short.write_text(
        "".join(
            line + "\n"
            for line in files["b.run"].read_text().splitlines()
            if not line.startswith("q7 ")
        )
    )
    status, _, err = run_cli("compare", files["qrels"], files["a.run"], short)
    assert status == 1
    assert (
        "'q7' of 'a.run' missing from 'short.run'" in err and "--unretrieved-queries count" in err
    )
    status, _, err = run_cli(
        "compare", files["qrels"], files["a.run"], short, "--unretrieved-queries", "count"
    )
    assert status == 0, err


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--alpha", "1.5"], "--alpha must be a number in (0, 1)"),
        (["--alpha", "0"], "--alpha must be a number in (0, 1)"),
        (
            ["--permutations", "0", "--test", "randomization"],
            "--permutations must be a positive int",
        ),
        (["--baseline", "z.run"], "--baseline must name one of the runs"),
    ],
)
def test_bad_arguments_are_usage_errors(
    files: dict[str, Path], arguments: list[str], message: str
) -> None:
    status, _, err = run_cli("compare", files["qrels"], files["a.run"], files["b.run"], *arguments)
    assert status == 2 and message in err


def test_one_run_is_a_usage_error(files: dict[str, Path]) -> None:
    status, _, err = run_cli("compare", files["qrels"], files["a.run"])
    assert status == 2 and "at least 2 runs" in err


@pytest.mark.parametrize(
    "flags",
    [
        ["--ties", "first", "--gain", "exponential"],
        ["-J", "-l", "2"],
        ["--rbp-persistence", "0.5", "--empty-target-action", "pos"],
        ["--ap-denominator", "min_k_relevant", "--ties", "pessimistic"],
        ["-c", "--run-format", "trec"],
    ],
)
def test_every_run_is_evaluated_as_evaluate_does_with_the_same_flags(
    files: dict[str, Path], flags: list[str]
) -> None:
    """The evaluation options are defined once for both commands: compare's means are
    evaluate's, flag by flag (-J, -c and --rbp-persistence included)."""
    # q20 is judged but not retrieved (-c counts it); q21 is retrieved but not judged
    # (skipped, with a note naming the run); d9 is retrieved and unjudged (-J drops it)
    with files["qrels"].open("a") as qrels:
        qrels.write("q20 0 d1 1\nq3 0 d9 -1\n")
    for name in ("a.run", "b.run"):
        with files[name].open("a") as run:
            run.write(f"q21 Q0 d1 0 1.0 {name}\nq3 Q0 d9 0 9.5 {name}\n")
    metrics = ["-m", "map@5", "-m", "ndcg@3", "-m", "rbp", "-m", "bpref", "-m", "mrr"]
    flags = [*flags, "--unjudged-queries", "skip"]
    status, out, err = run_cli(
        "compare", files["qrels"], files["a.run"], files["b.run"], *metrics, *flags,
        "--format", "json",
    )  # fmt: skip
    assert status == 0, err
    means = json.loads(out)["means"]
    for name in ("a.run", "b.run"):
        status, evaluated, evaluate_err = run_cli(
            "evaluate", files["qrels"], files[name], *metrics, *flags, "--format", "json"
        )
        assert status == 0, evaluate_err
        expected = json.loads(evaluated)["metrics"]
        assert {key: means[key][name] for key in expected} == pytest.approx(expected, abs=1e-12)
        assert f"of run {name} is not in the qrels and was left out: q21" in err
