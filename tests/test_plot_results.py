"""benchmarks/plot_results.py: the parser finds everything in RESULTS.md, the plot is a PNG."""

from __future__ import annotations

import importlib.util
import re
import struct
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "plot_results.py"
RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"
CHECKED_IN_RST = ROOT / "docs" / "_static" / "benchmark_results.inc"


@pytest.fixture(scope="module")
def plot_results() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plot_results", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["plot_results"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def count_markdown(text: str) -> list[tuple[str, list[int]]]:
    """(heading, body rows of each table) per ##/### section, counted line by line."""
    sections: list[tuple[str, list[int]]] = []
    run = 0
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            run += 1
            continue
        if run:
            sections[-1][1].append(run - 2)  # minus the header and the separator
            run = 0
        heading = re.match(r"^#{2,6} (.*)$", line)
        if heading:
            sections.append((heading.group(1).strip(), []))
    return sections


def timing_rows(text: str) -> dict[str, int]:
    """Body rows of each workload section's first table with a 'x floor' column.

    Workload sections are numbered (``### 1. ...``); an issue's own section may
    have such a table too, and is not plotted.
    """
    found: dict[str, int] = {}
    section = ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        heading = re.match(r"^#{2,6} (.*)$", line)
        if heading:
            section = heading.group(1).strip()
        is_header = line.startswith("|") and (i == 0 or not lines[i - 1].startswith("|"))
        is_workload = re.match(r"\d+\. ", section) is not None
        if is_header and is_workload and "| x floor |" in line and section not in found:
            body = 0
            for following in lines[i + 2 :]:
                if not following.startswith("|"):
                    break
                body += 1
            found[section] = body
    return found


def test_finds_every_section_and_row(plot_results: ModuleType) -> None:
    text = RESULTS_MD.read_text(encoding="utf-8")
    expected = count_markdown(text)
    results = plot_results.parse_results(text)

    assert [s.title for s in results.sections] == [title for title, _ in expected]
    for section, (title, table_rows) in zip(results.sections, expected, strict=True):
        assert [len(t.rows) for t in section.tables] == table_rows, title
    assert any(title == "Targets" for title, _ in expected)


def test_plots_every_workload_row(plot_results: ModuleType) -> None:
    text = RESULTS_MD.read_text(encoding="utf-8")
    expected = timing_rows(text)
    results = plot_results.parse_results(text)

    assert [s.title for s in results.plotted] == list(expected)
    workloads = [line for line in text.splitlines() if re.match(r"^### \d+\. ", line)]
    assert len(results.plotted) == len(workloads) >= 5
    for section in results.plotted:
        found = plot_results.bars(section)
        assert len(found) == expected[section.title], section.title
        assert all(bar.kind for bar in found)
        assert all(bar.ratio > 0 for bar in found)


def test_plot_is_a_png(plot_results: ModuleType, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    results = plot_results.parse_results(RESULTS_MD.read_text(encoding="utf-8"))
    path = plot_results.plot(results, tmp_path / "out" / "benchmarks.png")

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 600 and height > 600
    assert data[-8:-4] == b"IEND"


def test_main_writes_both_files(plot_results: ModuleType, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png, rst = tmp_path / "b.png", tmp_path / "b.inc"
    assert plot_results.main(["--png", str(png), "--rst", str(rst)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    results = plot_results.parse_results(RESULTS_MD.read_text(encoding="utf-8"))
    assert rst.read_text(encoding="utf-8") == plot_results.render_rst(results)


def test_checked_in_rst_matches_results(plot_results: ModuleType) -> None:
    results = plot_results.parse_results(RESULTS_MD.read_text(encoding="utf-8"))
    assert CHECKED_IN_RST.read_text(encoding="utf-8") == plot_results.render_rst(results), (
        "docs/_static/benchmark_results.inc is out of date with benchmarks/RESULTS.md: "
        "run `python benchmarks/plot_results.py` (it also redraws docs/_static/benchmarks.png)"
    )


def test_rst_is_valid_docutils(plot_results: ModuleType) -> None:
    docutils_core = pytest.importorskip("docutils.core")
    results = plot_results.parse_results(RESULTS_MD.read_text(encoding="utf-8"))
    source = "Results\n=======\n\n" + plot_results.render_rst(results)
    tree = docutils_core.publish_doctree(
        source, settings_overrides={"halt_level": 2, "report_level": 5}
    )
    text = tree.astext()
    for section in results.sections:
        assert section.title in text
    assert "rank_metrics" in text  # escaped underscores come back as underscores


def test_generic_over_sections(plot_results: ModuleType) -> None:
    text = "\n".join(
        [
            "# Benchmark results",
            "",
            "Machine: `test`, **busy**.",
            "",
            "### 7. files vs pytrec_eval",
            "",
            "Run of 100 queries, NDCG@10 [trec].",
            "",
            "| row | kind | size | ms | x floor | note |",
            "| --- | --- | --- | ---: | ---: | --- |",
            "| read only | floor | full | 10.0 | 1.00 | |",
            "| ranking-plugins eval | ours | full | 12.0 | 1.20 | a \\| b |",
            "| pytrec_eval | peer | full | 1,234 | 123.40 | |",
            "| broken | peer | full | n/a | n/a | not timed |",
            "",
            "| ours | peer | size | peer / ours |",
            "| --- | --- | --- | ---: |",
            "| ranking-plugins eval | pytrec_eval | full | 102.8x |",
            "",
            "## Closing",
            "",
            "- W7 pytrec_eval: 123x its floor",
            "- second bullet",
        ]
    )
    results = plot_results.parse_results(text)
    assert results.title == "Benchmark results"
    assert [s.title for s in results.sections] == ["7. files vs pytrec_eval", "Closing"]
    section = results.sections[0]
    assert [len(t.rows) for t in section.tables] == [4, 1]
    assert section.tables[0].rows[1][-1] == "a | b"
    assert [(b.label, b.kind, b.ratio) for b in plot_results.bars(section)] == [
        ("read only", "floor", 1.0),
        ("ranking-plugins eval", "ours", 1.2),
        ("pytrec_eval", "peer", 123.4),
    ]
    assert results.plotted == [section]
    rst = plot_results.render_rst(results)
    assert "``test``" in rst and "**busy**" in rst
    assert "7\\. files vs pytrec\\_eval" in rst
    assert "- W7 pytrec\\_eval: 123x its floor" in rst
    assert "NDCG\\@10 \\[trec\\]." in rst  # no mailto: link, no reference
    assert plot_results.inline("evaluate --ties first") == "evaluate \\-\\-ties first"
