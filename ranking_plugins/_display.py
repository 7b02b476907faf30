"""How results show in a notebook: one HTML table, and pandas imported on demand.

:class:`~ranking_plugins.runs.python_api.RunResults` and
:class:`~ranking_plugins.compare.ComparisonReport` give Jupyter a
``_repr_html_`` through :func:`html_table`, so the escaping and the layout are
written once; their ``to_pandas`` import pandas through :func:`import_pandas`
(pandas is no dependency of the package).

>>> print(html_table(["name", "value"], [["a<b", "0.5000"]], caption="one row"))
<table>
<caption>one row</caption>
<thead>
<tr><th style="text-align: left">name</th><th style="text-align: right">value</th></tr>
</thead>
<tbody>
<tr><td style="text-align: left">a&lt;b</td><td style="text-align: right">0.5000</td></tr>
</tbody>
</table>
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any


def html_table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    caption: str = "",
    notes: Sequence[str] = (),
    names: int = 1,
) -> str:
    """An HTML table of text cells (escaped): ``head`` the header row, ``rows`` the body.

    The first ``names`` columns hold names and are left-aligned, the others
    numbers, right-aligned. ``caption`` goes above; ``notes``, one paragraph
    each, below.
    """

    def cells(tag: str, line: Sequence[str]) -> str:
        return "".join(
            f'<{tag} style="text-align: {"left" if i < names else "right"}">'
            f"{html.escape(cell)}</{tag}>"
            for i, cell in enumerate(line)
        )

    lines = ["<table>"]
    if caption:
        lines.append(f"<caption>{html.escape(caption)}</caption>")
    lines += ["<thead>", f"<tr>{cells('th', head)}</tr>", "</thead>", "<tbody>"]
    lines += [f"<tr>{cells('td', row)}</tr>" for row in rows]
    lines += ["</tbody>", "</table>"]
    lines += [f"<p>{html.escape(note)}</p>" for note in notes]
    return "\n".join(lines)


def import_pandas(owner: str) -> Any:
    """pandas, or an ImportError saying that ``owner`` (a method's name) needs it."""
    try:
        import pandas  # type: ignore[import-untyped]
    except ImportError as error:
        raise ImportError(f"{owner} needs pandas: pip install pandas") from error
    return pandas
