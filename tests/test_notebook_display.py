"""How RunResults and ComparisonReport show in a notebook: HTML that parses and holds
the values, a readable repr, DataFrames, and the LaTeX table's booktabs line."""

from __future__ import annotations

import sys
from html.parser import HTMLParser

import pytest
import torch

from ranking_plugins import evaluate_run
from ranking_plugins.compare import ComparisonReport, compare


class _Table(HTMLParser):
    """The text of an HTML table: its caption, its rows of cells, its paragraphs; and
    every tag opened, which must all be closed."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.caption = ""
        self.rows: list[list[str]] = []
        self.notes: list[str] = []
        self.open: list[str] = []
        self.tags: list[str] = []
        self._text: list[str] | None = None
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.open.append(tag)
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th", "caption", "p"):
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, (self.open, tag)
        self.open.pop()
        if tag in ("td", "th", "caption", "p"):
            assert self._text is not None
            text = "".join(self._text)
            if tag == "caption":
                self.caption = text
            elif tag == "p":
                self.notes.append(text)
            else:
                self.rows[-1].append(text)
            self._text = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)


def _report(**keywords: object) -> ComparisonReport:
    generator = torch.Generator().manual_seed(2)
    values = torch.rand(12, 3, generator=generator, dtype=torch.float64)
    values[:, 2] += 0.3
    systems = {
        "bm25": {"ndcg@10": values[:, 0], "mrr": values[:, 0] ** 2},
        "<dense & co>": {"ndcg@10": values[:, 1], "mrr": values[:, 1] ** 2},
        "splade": {"ndcg@10": values[:, 2], "mrr": values[:, 2].clamp(max=1.0)},
    }
    return compare(systems, test="randomization", **keywords)  # type: ignore[arg-type]


def test_comparison_report_html_parses_and_holds_every_row() -> None:
    report = _report()
    table = _Table(report._repr_html_())
    assert table.open == [] and table.tags.count("table") == 1
    head, *body = table.rows
    assert head[:3] == ["metric", "system", "baseline"] and "p_adj" in head
    assert len(body) == len(report.rows) == 6
    for cells, row in zip(body, report.rows, strict=True):
        assert cells[:3] == [row.metric, row.system, row.baseline]  # "<dense & co>" as text
        assert f"{row.difference:.4f}" in cells and f"{row.system_mean:.4f}" in cells
        assert (cells[-1] == "*") == row.significant
    assert "<dense & co>" in table.caption
    assert table.notes == [report.to_table().splitlines()[-1]]  # the legend of the text


def test_comparison_report_html_lists_the_dropped_queries() -> None:
    a = {"q1": 0.1, "q2": 0.4, "q3": float("nan"), "q4": 0.2}
    b = {"q1": 0.3, "q2": 0.5, "q3": float("nan"), "q4": 0.6}
    report = compare({"a": a, "b": b})
    notes = _Table(report._repr_html_()).notes
    assert len(notes) == 2 and "'q3'" in notes[1]


def test_comparison_report_repr_is_its_table_not_a_field_dump() -> None:
    report = _report()
    shown = repr(report)
    assert "Comparison(metric=" not in shown
    assert shown.splitlines()[0] == "ComparisonReport(3 systems, 2 metrics, 12 queries)"
    assert shown.splitlines()[1:] == report.to_table().splitlines()
    assert str(report) == report.to_table()


def test_comparison_report_to_pandas_has_a_row_per_comparison() -> None:
    pytest.importorskip("pandas")
    report = _report()
    frame = report.to_pandas()
    assert list(frame.columns) == report.to_csv().splitlines()[0].split(",")
    assert len(frame) == len(report.rows)
    for (_, line), row in zip(frame.iterrows(), report.rows, strict=True):
        assert line["system"] == row.system and line["p_value"] == row.p_value
        assert line["significant"] == row.significant and line["queries"] == row.queries


def test_to_pandas_without_pandas_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _report()
    results = evaluate_run({"q1": {"d1": 1}}, {"q1": {"d1": 0.5, "d2": 0.1}}, ["map"])
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"ComparisonReport\.to_pandas needs pandas"):
        report.to_pandas()
    with pytest.raises(ImportError, match=r"RunResults\.to_pandas needs pandas"):
        results.to_pandas()


def test_latex_says_it_needs_booktabs() -> None:
    lines = _report().to_latex().splitlines()
    assert lines[0] == "\\begin{table}[ht]"
    assert lines[1].startswith("%") and "\\usepackage{booktabs}" in lines[1]
    assert "\\toprule" in lines and "\\bottomrule" in lines


def test_run_results_html_parses_and_holds_the_means_and_notes() -> None:
    qrels = {
        "q1": {"d1": 1, "d2": 0, "d3": 2},
        "q2": {"d1": 0, "d2": 1},
        "q3": {"d4": 1},
        "q<4>": {"d1": 1},  # not in the run: left out, and said so
    }
    run = {
        "q1": {"d1": 0.9, "d2": 0.8, "d3": 0.1},
        "q2": {"d1": 0.5, "d2": 0.4},
        "q3": {"d4": 0.3, "d5": 0.9},
    }
    results = evaluate_run(qrels, run, ["nDCG@10", "map", "P_5"])
    table = _Table(results._repr_html_())
    assert table.open == [] and table.caption == "RunResults: 3 queries"
    head, *body = table.rows
    assert head == ["measure", "mean", "stderr", "queries"]
    assert [cells[0] for cells in body] == ["nDCG@10", "map", "P_5"]  # the spelling asked
    for cells in body:
        measure = cells[0]
        assert cells[1] == f"{results.means[measure]:.4f}"
        assert cells[2] == f"{results.standard_errors[measure]:.4f}"
        assert cells[3] == str(results.counts[measure])
    assert table.notes == results.notes and "q<4>" in table.notes[0]
