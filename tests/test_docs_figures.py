"""docs/_ext/figures.py: the speed-ups it draws and quotes are RESULTS.md's, or the build fails."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "RESULTS.md"


@pytest.fixture(scope="module")
def figures():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import figures
    finally:
        sys.path.pop(0)
    return figures


def test_every_peer_has_its_ratio(figures) -> None:  # type: ignore[no-untyped-def]
    found = figures.measured()
    assert [s.peer for s, _ in found] == [s.peer for s in figures.SPEEDUPS]
    assert {"ranx", "pytrec_eval", "torchmetrics.retrieval", "Ignite rec_sys"} <= {
        s.peer for s, _ in found
    }
    assert all(ratio > 0 for _, ratio in found)


def test_a_ratio_is_the_files_own(figures) -> None:  # type: ignore[no-untyped-def]
    text = RESULTS.read_text(encoding="utf-8")
    # the "peer / ours" table's quotient, as written (the latest run's row, not History's)
    row = "| rank_metrics | torchmetrics.retrieval (36 objects) | Q=64 | "
    written = float(text[text.index(row) + len(row) :].split("x |")[0].replace(",", ""))
    assert dict((s.peer, r) for s, r in figures.measured(text))["torchmetrics.retrieval"] == (
        pytest.approx(written)
    )
    edited = text.replace(f"{row}{written:,.1f}x |", f"{row}1,234.5x |", 1)
    assert edited != text
    ratios = dict((s.peer, r) for s, r in figures.measured(edited))
    assert ratios["torchmetrics.retrieval"] == pytest.approx(1234.5)
    # and a quotient of two times
    changed = text.replace(
        "| pytrec_eval `RelevanceEvaluator(...).evaluate(run)` | 0.527 |",
        "| pytrec_eval `RelevanceEvaluator(...).evaluate(run)` | 1.107 |",
    )
    assert changed != text
    ratios = dict((s.peer, r) for s, r in figures.measured(changed))
    assert ratios["pytrec_eval"] == pytest.approx(1.107 / 0.369)


def test_a_renamed_row_fails_naming_it(figures) -> None:  # type: ignore[no-untyped-def]
    text = RESULTS.read_text(encoding="utf-8").replace(
        "ranx `Qrels(dict)`, `Run(dict)`, `evaluate`", "ranx, renamed"
    )
    with pytest.raises(KeyError, match="Qrels"):
        figures.measured(text)


def test_the_machine_is_quoted_without_date_or_load(figures) -> None:  # type: ignore[no-untyped-def]
    machine = figures.machine()
    assert "cores" in machine and "2026" not in machine and "load" not in machine
