"""What :func:`~ranking_plugins.compare.compare` found, and its renderings: a text
table, JSON, CSV, LaTeX, a pandas DataFrame, a notebook's HTML and a forest plot.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ranking_plugins._display import html_table, import_pandas
from ranking_plugins.compare.pairing import _listing


@dataclass(frozen=True)
class Comparison:
    """One comparison: ``system`` against ``baseline`` on one metric."""

    metric: str
    system: str
    baseline: str
    system_mean: float
    baseline_mean: float
    difference: float  # system mean - baseline mean
    ci_low: float
    ci_high: float
    effect_size: float
    p_value: float
    adjusted_p_value: float
    significant: bool  # adjusted_p_value < alpha
    queries: int


@dataclass(frozen=True)
class ComparisonReport:
    """What :func:`compare` found: the means and one :class:`Comparison` per pair and metric."""

    test: str
    alpha: float
    correction: str
    confidence: float
    systems: list[str]
    metrics: list[str]
    means: dict[str, dict[str, float]]  # metric -> system -> mean over the compared queries
    rows: list[Comparison]
    queries: int
    dropped_queries: list[str]
    #: metric -> whether a higher mean is better (the metric table's; True for a key
    #: that names no metric, such as the ``""`` of bare tensors)
    higher_is_better: dict[str, bool] = field(default_factory=dict)

    def _higher_is_better(self, metric: str) -> bool:
        return self.higher_is_better.get(metric, True)

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["rows"] = [asdict(row) for row in self.rows]
        return _nan_to_none(document)

    def to_json(self) -> str:
        """JSON (NaN as null)."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_csv(self) -> str:
        """One line per comparison, every field of :class:`Comparison`, full precision."""
        buffer = io.StringIO()
        fields = list(Comparison.__dataclass_fields__)
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(fields)
        for row in self.rows:
            writer.writerow([_cell(getattr(row, f)) for f in fields])
        return buffer.getvalue()

    def to_table(self) -> str:
        """Plain text: a line per comparison, ``*`` where the adjusted p is below alpha."""
        head, body = self._cells()
        lines = [head, *body]
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        text = [
            "  ".join(
                cell.ljust(w) if i < 3 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
            for line in lines
        ]
        text.append(self._legend())
        return "\n".join(text) + "\n"

    def _cells(self) -> tuple[list[str], list[list[str]]]:
        """The table's header and its rows as text, for :meth:`to_table` and the HTML."""
        head = ["metric", "system", "baseline", "mean", "base", "diff", "ci_low", "ci_high"]
        head += ["d", "p", "p_adj", ""]
        lines = []
        for row in self.rows:
            lines.append(
                [
                    row.metric,
                    row.system,
                    row.baseline,
                    *(
                        _fixed(v)
                        for v in (
                            row.system_mean,
                            row.baseline_mean,
                            row.difference,
                            row.ci_low,
                            row.ci_high,
                            row.effect_size,
                        )
                    ),
                    _p(row.p_value),
                    _p(row.adjusted_p_value),
                    "*" if row.significant else "",
                ]
            )
        return head, lines

    def _legend(self) -> str:
        """The line under the table: the test, the queries, what ``*`` and the columns mean."""
        interval = "bootstrap percentile" if self.test != "t" else "t"
        lower = [m for m in self.metrics if not self._higher_is_better(m)]
        return (
            f"test: {self.test}; {self.queries} queries; correction: {self.correction}; "
            f"* adjusted p < {self.alpha:g}; {self.confidence:.0%} {interval} interval; "
            "d: Cohen's d of the differences"
            + (f"; lower is better: {', '.join(lower)}" if lower else "")
        )

    def _repr_html_(self) -> str:
        """Jupyter's view: the rows of :meth:`to_table` as an HTML table."""
        head, body = self._cells()
        notes = [self._legend()]
        if self.dropped_queries:
            notes.append(f"left out (no value: skipped as empty): {_listing(self.dropped_queries)}")
        caption = f"ComparisonReport: {', '.join(self.systems)}"
        return html_table(head, body, caption=caption, notes=notes, names=3)

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per comparison, a column per field of
        :class:`Comparison` (the rows of :meth:`to_csv`). Needs pandas (imported here)."""
        pd = import_pandas("ComparisonReport.to_pandas")
        fields = list(Comparison.__dataclass_fields__)
        return pd.DataFrame(
            [[getattr(row, f) for f in fields] for row in self.rows], columns=fields
        )

    def to_latex(self) -> str:
        """A booktabs table, systems by metrics, as ranx's ``Report.to_latex``.

        Each cell is the mean; a superscript letter marks each system (by its
        letter in the first column) that this one beats significantly
        (adjusted p below alpha, better mean); the best mean is bold. Better is
        higher, or lower for a metric whose ``higher_is_better`` is False (fall_out,
        mean_rank, ...).

        The rules are booktabs' (``\\toprule``, ``\\midrule``, ``\\bottomrule``): the
        document needs ``\\usepackage{booktabs}`` in its preamble, and the table's
        second line, a LaTeX comment, says so.
        """
        letters = {name: chr(ord("a") + i) for i, name in enumerate(self.systems)}
        beats: dict[tuple[str, str], list[str]] = {}
        for row in self.rows:
            if not row.significant:
                continue
            ahead = row.difference > 0 if self._higher_is_better(row.metric) else row.difference < 0
            winner, loser = (row.system, row.baseline) if ahead else (row.baseline, row.system)
            beats.setdefault((row.metric, winner), []).append(letters[loser])
        columns = "c" * len(self.metrics)
        lines = [
            "\\begin{table}[ht]",
            "% needs \\usepackage{booktabs} in the preamble (\\toprule, \\midrule, \\bottomrule)",
            "\\centering",
            f"\\begin{{tabular}}{{cl{columns}}}",
            "\\toprule",
            "\\# & Model & "
            + " & ".join(_latex_text(m or "value") for m in self.metrics)
            + " \\\\",
            "\\midrule",
        ]
        best = {
            m: (max if self._higher_is_better(m) else min)(
                (v for v in self.means[m].values() if not math.isnan(v)), default=math.nan
            )
            for m in self.metrics
        }
        for name in self.systems:
            cells = []
            for metric in self.metrics:
                mean = self.means[metric][name]
                cell = _fixed(mean)
                if mean == best[metric]:
                    cell = f"\\textbf{{{cell}}}"
                marks = "".join(sorted(beats.get((metric, name), [])))
                cells.append(cell + (f"$^{{{marks}}}$" if marks else ""))
            lines.append(f"{letters[name]} & {_latex_text(name)} & " + " & ".join(cells) + " \\\\")
        interval = "bootstrap percentile" if self.test != "t" else "t"
        lower = [m for m in self.metrics if not self._higher_is_better(m)]
        level = f"{self.confidence:.0%}".replace("%", "\\%")
        lines += [
            "\\bottomrule",
            "\\end{tabular}",
            f"\\caption{{Means over {self.queries} queries. A superscript marks the systems "
            f"this one beats with adjusted $p < {self.alpha:g}$ ({_latex_text(self.test)} "
            f"test, {_latex_text(self.correction)} correction; {level} "
            f"{interval} intervals in the CSV/JSON output). Best in bold"
            + (f" (the lowest for {_latex_text(', '.join(lower))})" if lower else "")
            + ".}",
            "\\end{table}",
        ]
        return "\n".join(lines) + "\n"

    def plot(self, ax: Any = None) -> tuple[Any, Any]:
        """A forest plot: each comparison's difference (system − baseline) with its interval.

        One line per row of :meth:`to_table`, top to bottom: a dot at the
        difference, a bar from ``ci_low`` to ``ci_high``, a filled dot where the
        adjusted p is below alpha (hollow otherwise) and a dashed line at 0. A
        metric where lower is better says so in its label. Needs matplotlib
        (imported here, not with the package).

        Args:
            ax: the matplotlib axes to draw on; a new figure when omitted.

        Returns:
            ``(figure, axes)``, as the adapters' ``plot``.
        """
        try:
            import matplotlib.pyplot as plt
        except ImportError as error:
            raise ImportError(
                "ComparisonReport.plot needs matplotlib: pip install matplotlib"
            ) from error
        if ax is None:
            fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.45 * max(len(self.rows), 1)))
        else:
            fig = ax.figure
        positions = list(range(len(self.rows)))[::-1]  # first row at the top
        labels = []
        for y, row in zip(positions, self.rows, strict=True):
            lower = "" if self._higher_is_better(row.metric) else " (lower is better)"
            labels.append(f"{row.metric or 'value'}{lower}: {row.system} − {row.baseline}")
            ax.plot([row.ci_low, row.ci_high], [y, y], color="C0", linewidth=2)
            ax.plot(
                [row.difference],
                [y],
                "o",
                color="C0",
                markerfacecolor="C0" if row.significant else "white",
                markersize=7,
            )
        ax.axvline(0.0, color="0.4", linestyle="--", linewidth=1)
        ax.set_yticks(positions, labels)
        ax.set_ylim(-0.7, len(self.rows) - 0.3)
        interval = "bootstrap percentile" if self.test != "t" else "t"
        ax.set_xlabel(
            f"difference of means, {self.confidence:.0%} {interval} interval\n"
            f"filled: adjusted p < {self.alpha:g} ({self.test}, {self.correction}; "
            f"{self.queries} queries)"
        )
        return fig, ax

    def __str__(self) -> str:
        return self.to_table()

    def __repr__(self) -> str:
        # the table, not the dataclass's dump of every field: what a notebook cell or a
        # REPL shows for a report (the fields are in rows, to_dict() and to_json())
        head = (
            f"ComparisonReport({len(self.systems)} systems, {len(self.metrics)} metrics, "
            f"{self.queries} queries)"
        )
        return head + "\n" + self.to_table().rstrip("\n")


def _fixed(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.4f}"


def _p(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return str(value)


def _latex_text(text: str) -> str:
    for char, escaped in (("\\", "\\textbackslash{}"), ("_", "\\_"), ("&", "\\&"), ("%", "\\%")):
        text = text.replace(char, escaped)
    return text.replace("#", "\\#").replace("$", "\\$")


def _nan_to_none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value
