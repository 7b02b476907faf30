"""ComparisonReport.plot(): the forest plot draws the report's own numbers; matplotlib stays lazy."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from ranking_plugins.compare import compare

pytest.importorskip("matplotlib").use("Agg")
colors = pytest.importorskip("matplotlib.colors")
plt = pytest.importorskip("matplotlib.pyplot")


def report_with_both_outcomes():  # type: ignore[no-untyped-def]
    """Three systems on 12 queries: ``better`` clearly beats ``base``, ``same`` does not."""
    generator = torch.Generator().manual_seed(3)
    base = torch.rand(12, generator=generator, dtype=torch.float64) * 0.5
    noise = (torch.rand(12, generator=generator, dtype=torch.float64) - 0.5) * 0.05
    return compare(
        {
            "base": {"ndcg@10": base},
            "better": {"ndcg@10": base + 0.3 + noise},
            "same": {"ndcg@10": base + noise},
        },
        baseline="base",
        test="randomization",
    )


def test_each_row_is_drawn_at_its_difference_and_interval() -> None:
    report = report_with_both_outcomes()
    assert [row.significant for row in report.rows] == [True, False]
    fig, ax = report.plot()
    lines = ax.get_lines()
    bars = [line for line in lines if line.get_marker() in ("None", None, "")]
    dots = [line for line in lines if line.get_marker() == "o"]
    # the dashed zero line, then one bar and one dot per comparison
    assert len(dots) == len(report.rows)
    intervals = sorted(
        (tuple(bar.get_xdata()), tuple(bar.get_ydata()))
        for bar in bars
        if len(set(bar.get_ydata())) == 1
    )
    expected = sorted(
        ((row.ci_low, row.ci_high), (y, y)) for y, row in zip([1, 0], report.rows, strict=True)
    )
    assert intervals == expected  # the report's numbers, drawn as they are
    for y, row, dot in zip([1, 0], report.rows, dots, strict=True):
        assert list(dot.get_xdata()) == [row.difference]
        assert list(dot.get_ydata()) == [y]
        filled = colors.to_rgba(dot.get_markerfacecolor()) != (1.0, 1.0, 1.0, 1.0)
        assert filled == row.significant
    labels = [tick.get_text() for tick in ax.get_yticklabels()]
    assert labels == ["ndcg@10: better − base", "ndcg@10: same − base"]
    plt.close(fig)


def test_draws_on_the_given_axes() -> None:
    fig, given = plt.subplots()
    returned_fig, returned_ax = report_with_both_outcomes().plot(ax=given)
    assert returned_ax is given and returned_fig is fig
    plt.close(fig)


def test_lower_is_better_is_said_in_the_label() -> None:
    values = torch.tensor([3.0, 5.0, 2.0, 8.0], dtype=torch.float64)
    report = compare({"a": {"mean_rank": values}, "b": {"mean_rank": values + 1}}, test="bootstrap")
    fig, ax = report.plot()
    assert "lower is better" in ax.get_yticklabels()[0].get_text()
    plt.close(fig)


def test_importing_the_package_does_not_import_matplotlib() -> None:
    code = (
        "import sys, ranking_plugins, ranking_plugins.compare; print('matplotlib' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
