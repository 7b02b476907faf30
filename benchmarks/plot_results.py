"""Render ``benchmarks/RESULTS.md`` for the documentation: a plot and an rst copy of its tables.

``suite.py --write-results`` writes RESULTS.md in markdown: a preamble, one
``###`` section per workload, then a ``### Targets`` section and some closing
text. A workload's section holds a timing table (``| row | kind | size | ms |
x floor | ... |``), and may also hold a "peer / ours" table and a note. This
script reads that file without assuming how many workloads there are or what
they are called. Every ``##``/``###`` heading starts a section, every run of
``|`` lines is a table, ``-`` lines are bullets, and everything else is
paragraph text. The script then writes two files:

* ``docs/_static/benchmarks.png``: one panel per section whose timing table
  has ``row`` and ``x floor`` columns. Each row of that table is a horizontal
  bar on a shared log scale, coloured by its ``kind`` (floor, ours, peer, ...).
* ``docs/_static/benchmark_results.inc``: the whole file as reStructuredText
  (``list-table`` tables, ``~`` section underlines), which
  ``docs/performance.rst`` pulls in with ``.. include::``. The ``.inc``
  suffix keeps Sphinx from treating it as a page of its own.

Run it after ``python benchmarks/suite.py --write-results``::

    python benchmarks/plot_results.py
    python benchmarks/plot_results.py --results other.md --png out.png --rst out.inc
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
PNG = ROOT / "docs" / "_static" / "benchmarks.png"
RST = ROOT / "docs" / "_static" / "benchmark_results.inc"

#: bar colours by the timing table's ``kind`` column; other kinds get OTHER_COLOUR
KIND_COLOURS = {"floor": "#9e9e9e", "ours": "#1f77b4", "peer": "#ff7f0e"}
OTHER_COLOUR = "#2ca02c"

_SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^[-*+]\s+(.*)$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


# --------------------------------------------------------------------------- model


@dataclass
class Table:
    """A markdown table: header cells, column alignments and body rows."""

    header: list[str]
    aligns: list[str]
    rows: list[list[str]]

    def column(self, name: str) -> int | None:
        """Index of the column whose header is ``name`` (case-insensitive), or None."""
        wanted = name.strip().lower()
        for index, cell in enumerate(self.header):
            if cell.strip().lower() == wanted:
                return index
        return None

    def cell(self, row: Sequence[str], name: str) -> str:
        """The cell of ``row`` under column ``name`` ("" when there is no such column)."""
        index = self.column(name)
        return row[index] if index is not None and index < len(row) else ""


@dataclass
class Paragraph:
    """Consecutive lines of text, joined with spaces."""

    text: str


@dataclass
class Bullets:
    """A bullet list, one string per item."""

    items: list[str]


Block = Table | Paragraph | Bullets


@dataclass
class Section:
    """A ``##``/``###`` heading and the blocks up to the next heading."""

    title: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def tables(self) -> list[Table]:
        return [b for b in self.blocks if isinstance(b, Table)]

    @property
    def timing_table(self) -> Table | None:
        """The first table with ``row`` and ``x floor`` columns: the one that is plotted."""
        for table in self.tables:
            if table.column("row") is not None and table.column("x floor") is not None:
                return table
        return None


@dataclass
class Results:
    """RESULTS.md: its ``#`` title, the blocks before the first section, and the sections."""

    title: str
    preamble: list[Block]
    sections: list[Section]

    @property
    def plotted(self) -> list[Section]:
        """Sections with a timing table, in file order, up to the History (older runs)."""
        titles = [s.title for s in self.sections]
        latest = self.sections[: titles.index("History")] if "History" in titles else self.sections
        return [s for s in latest if s.timing_table is not None]


@dataclass
class Bar:
    """One bar of the plot: a timing-table row."""

    label: str
    kind: str
    ratio: float


# --------------------------------------------------------------------------- parsing


def _cells(line: str) -> list[str]:
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|") and not inner.endswith("\\|"):
        inner = inner[:-1]
    return [cell.strip().replace("\\|", "|") for cell in _CELL_SPLIT.split(inner)]


def _align(spec: str) -> str:
    spec = spec.strip()
    if spec.startswith(":") and spec.endswith(":"):
        return "center"
    return "right" if spec.endswith(":") else "left"


def parse_table(lines: Sequence[str]) -> Table:
    """A table from its ``|`` lines: header, separator, then body rows.

    Raises:
        ValueError: if the second line is not a ``| --- |`` separator.
    """
    if len(lines) < 2 or not _SEPARATOR.match(lines[1].strip()):
        raise ValueError(f"not a markdown table (no separator row): {lines[0]!r}")
    header = _cells(lines[0])
    aligns = [_align(spec) for spec in _cells(lines[1])]
    rows = [_cells(line) for line in lines[2:]]
    width = len(header)
    rows = [(row + [""] * width)[:width] if len(row) != width else row for row in rows]
    return Table(header, (aligns + ["left"] * width)[:width], rows)


def parse_blocks(lines: Sequence[str]) -> list[Block]:
    """Tables, bullet lists and paragraphs, in order (blank lines separate them)."""
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
        elif stripped.startswith("|"):
            start = i
            while i < len(lines) and lines[i].strip().startswith("|"):
                i += 1
            blocks.append(parse_table(lines[start:i]))
        elif _BULLET.match(stripped):
            items: list[str] = []
            while i < len(lines) and lines[i].strip():
                found = _BULLET.match(lines[i].strip())
                if found:
                    items.append(found.group(1))
                elif items and lines[i][:1].isspace():
                    items[-1] += " " + lines[i].strip()  # an item's continuation line
                else:
                    break
                i += 1
            blocks.append(Bullets(items))
        else:
            text: list[str] = []
            while (
                i < len(lines)
                and lines[i].strip()
                and not lines[i].strip().startswith("|")
                and not _BULLET.match(lines[i].strip())
            ):
                text.append(lines[i].strip())
                i += 1
            blocks.append(Paragraph(" ".join(text)))
    return blocks


def parse_results(text: str) -> Results:
    """Parse the markdown that ``suite.py --write-results`` writes (any sections)."""
    title = ""
    preamble: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading and len(heading.group(1)) == 1 and not title and not sections:
            title = heading.group(2)
        elif heading:
            sections.append((heading.group(2), []))
        elif sections:
            sections[-1][1].append(line)
        else:
            preamble.append(line)
    return Results(
        title,
        parse_blocks(preamble),
        [Section(name, parse_blocks(body)) for name, body in sections],
    )


def _number(cell: str) -> float | None:
    try:
        return float(cell.replace(",", "").rstrip("x").strip())
    except ValueError:
        return None


def bars(section: Section) -> list[Bar]:
    """The plotted rows of a section: every timing-table row with a numeric ``x floor``."""
    table = section.timing_table
    if table is None:
        return []
    out = []
    for row in table.rows:
        ratio = _number(table.cell(row, "x floor"))
        if ratio is None or ratio <= 0:
            continue
        size = table.cell(row, "size")
        name = table.cell(row, "row")
        label = name if size in ("", "full") else f"{name} ({size})"
        out.append(Bar(label, table.cell(row, "kind") or "other", ratio))
    return out


# --------------------------------------------------------------------------- plot


def plot(results: Results, path: Path) -> Path:
    """Write the bar chart of every plotted section to ``path`` (PNG, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    panels = [(section, bars(section)) for section in results.plotted]
    panels = [(section, found) for section, found in panels if found]
    if not panels:
        raise ValueError("no section of the results has a timing table with 'x floor' values")
    ratios = [bar.ratio for _, found in panels for bar in found]
    smallest = min(ratios) / 1.5
    low = 10 ** math.floor(math.log10(smallest))
    low = low * 5 if low * 5 <= smallest else low
    high = 10 ** math.ceil(math.log10(max(ratios) * 4))
    heights = [len(found) * 0.32 + 0.9 for _, found in panels]
    fig = Figure(figsize=(11.0, sum(heights) + 1.0), layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, gridspec_kw={"height_ratios": heights})
    axes = list(axes) if len(panels) > 1 else [axes]
    kinds: dict[str, str] = {}
    for ax, (section, found) in zip(axes, panels, strict=True):
        positions = range(len(found))
        colours = [KIND_COLOURS.get(bar.kind, OTHER_COLOUR) for bar in found]
        for bar, colour in zip(found, colours, strict=True):
            kinds.setdefault(bar.kind, colour)
        # bars start at the axis' left edge: a log axis has no 0
        widths = [bar.ratio - low for bar in found]
        ax.barh(list(positions), widths, color=colours, left=low)
        for position, bar in zip(positions, found, strict=True):
            value = f"{bar.ratio:,.0f}x" if bar.ratio >= 100 else f"{bar.ratio:.2f}x"
            ax.text(bar.ratio * 1.08, position, value, va="center", fontsize=8)
        ax.set_yticks(list(positions), [bar.label for bar in found], fontsize=8)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_title(section.title, loc="left", fontsize=10, fontweight="bold")
        ax.grid(axis="x", which="major", linewidth=0.4, alpha=0.6)
        ax.tick_params(axis="x", labelbottom=True, labelsize=8)
        ax.set_axisbelow(True)
    axes[-1].set_xscale("log")
    axes[-1].set_xlim(low, high)
    axes[-1].xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,g}x"))
    axes[-1].set_xlabel("time as a multiple of the workload's floor (log scale; 1 = floor)")
    fig.legend(
        handles=[Patch(color=colour, label=kind) for kind, colour in kinds.items()],
        loc="outside upper center",
        ncols=len(kinds),
        frameon=False,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    return path


# --------------------------------------------------------------------------- rst

_INLINE = re.compile(r"(`[^`]+`|\*\*[^*]+\*\*)")
_RST_SPECIAL = re.compile(r"([\\*`_|\[\]@])")


def _escape(text: str) -> str:
    escaped = _RST_SPECIAL.sub(r"\\\1", text)
    # Sphinx's smart quotes would turn "--ties" into an en dash and "ties"
    return re.sub(r"-{2,}", lambda found: "\\-" * len(found.group()), escaped)


def inline(text: str) -> str:
    """Markdown inline text as rst: code spans become literals, bold stays, the rest escaped."""
    out = []
    for piece in _INLINE.split(text):
        if piece.startswith("`") and piece.endswith("`") and len(piece) > 1:
            out.append(f"``{piece[1:-1]}``")
        elif piece.startswith("**") and piece.endswith("**") and len(piece) > 4:
            out.append(f"**{_escape(piece[2:-2])}**")
        else:
            out.append(_escape(piece))
    rendered = "".join(out)
    # a paragraph that starts like "1. " would be read as an enumerated list
    return re.sub(r"^(\d+)\.(\s)", r"\1\\.\2", rendered)


def _rst_table(table: Table) -> list[str]:
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [table.header, *table.rows]:
        for index, cell in enumerate(row):
            marker = "   * -" if index == 0 else "     -"
            lines.append(f"{marker} {inline(cell)}".rstrip())
    return lines


def _rst_blocks(blocks: Iterable[Block]) -> list[str]:
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Table):
            lines += _rst_table(block)
        elif isinstance(block, Bullets):
            lines += [f"- {inline(item)}" for item in block.items]
        else:
            lines.append(inline(block.text))
        lines.append("")
    return lines


def render_rst(results: Results, underline: str = "~") -> str:
    """The results as reStructuredText; section titles are underlined with ``underline``."""
    lines = [
        ".. Generated from benchmarks/RESULTS.md by benchmarks/plot_results.py; do not edit.",
        "",
        *_rst_blocks(results.preamble),
    ]
    for section in results.sections:
        title = inline(section.title)
        lines += [title, underline * len(title), "", *_rst_blocks(section.blocks)]
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the markdown to read")
    parser.add_argument("--png", type=Path, default=PNG, help="where to write the plot")
    parser.add_argument("--rst", type=Path, default=RST, help="where to write the rst tables")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    results = parse_results(args.results.read_text(encoding="utf-8"))
    plot(results, args.png)
    args.rst.parent.mkdir(parents=True, exist_ok=True)
    args.rst.write_text(render_rst(results), encoding="utf-8")
    left_out = [s.title for s in results.sections if s.timing_table is None]
    print(
        f"{len(results.plotted)} workloads plotted to {args.png}; "
        f"{len(results.sections)} sections written to {args.rst}"
        + (f" (not plotted: {', '.join(left_out)})" if left_out else ""),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
