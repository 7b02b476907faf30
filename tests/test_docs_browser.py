"""docs/browser_check.py finds each thing it says it finds, in a real Chromium."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)"
)


def browser_check():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "browser_check", ROOT / "docs" / "browser_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAGE = """<!doctype html><html><head><style>article {{ width: 400px; }}</style></head>
<body><article>{}</article></body></html>"""

CASES = {
    "fine": ("<pre>short</pre><table><tr><td>a</td></tr></table><p>x = 1</p>", []),
    "wide_code": (
        '<div style="overflow-x: auto"><pre style="overflow-x: auto">' + "x" * 300 + "</pre></div>",
        ["code block wider than its box"],
    ),
    "wide_table": (
        '<div style="overflow-x: auto"><table><tr><td style="white-space: nowrap">'
        + "y" * 300
        + "</td></tr></table></div>",
        ["table wider than its container"],
    ),
    "missing_image": ('<img src="nowhere.png" alt="gone">', ["missing image: nowhere.png"]),
    "raw_latex": (r"<p>the formula \[\mathrm{HR@}k = 1\] shows as text</p>", ["raw LaTeX"]),
    "latex_in_code_is_fine": (r"<pre>\begin{table}</pre>", []),
    "cdn": (
        '<script src="https://cdn.example.org/mathjax.js"></script>',
        ["loads from the internet"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_problem_is_found(case: str, tmp_path: Path) -> None:
    body, expected = CASES[case]
    page = tmp_path / f"{case}.html"
    page.write_text(PAGE.format(body), encoding="utf-8")
    check = browser_check()
    problems = check.check_page(check.chromium(), page, tmp_path, None)
    assert len(problems) == len(expected), problems
    for problem, start in zip(problems, expected, strict=True):
        assert problem.startswith(start), problems
