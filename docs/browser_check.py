"""Render every built page in headless Chromium and fail on what a reader would find broken.

    python docs/browser_check.py [docs/_build/html] [--screenshots docs/_build/screenshots]

``tox -e docs`` runs it after the HTML build. For each ``*.html`` page of the
site (not ``_modules``, ``genindex``, ``search``, ``py-modindex``), at a
1280 x 900 window, once MathJax has typeset the page, it measures:

* a code block wider than its box: a ``pre`` whose ``scrollWidth`` exceeds its
  ``clientWidth`` (a horizontal scroll bar, text hidden behind it), or whose
  right edge passes the right edge of the page's content column (``article``);
* a table wider than its container: a ``table`` whose width exceeds its
  wrapper's visible width, or whose right edge passes the content column's;
* a missing image: an ``img`` that finished loading with no pixels
  (``naturalWidth == 0``);
* raw LaTeX: ``\\[``, ``\\(``, ``\\begin{`` in the page's visible text outside
  code (MathJax did not typeset it), or a ``math`` block left without MathJax
  output;
* anything fetched from the internet: a ``script``, ``link`` or ``img``
  whose address starts with ``http`` (the site must work offline).

Chromium is Debian's ``chromium``; the check installs it with apt-get when it
is missing and it runs as root (CI), and otherwise says how to. Each page
is also saved as a screenshot (the top 1280 x 4800 pixels) under
``--screenshots``, for a person to look at; the measurements do not use them.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DOCS = Path(__file__).resolve().parent
WIDTH, HEIGHT, SHOT_HEIGHT = 1280, 900, 4800
SKIPPED = {"genindex.html", "search.html", "py-modindex.html"}

#: Injected at the end of a copy of each page: waits for MathJax, measures, and
#: writes the findings as JSON into the DOM that ``--dump-dom`` prints.
PROBE = r"""
<script>
(function () {
  function measure() {
    const problems = [];
    const column = document.querySelector("article") || document.body;
    const right = column.getBoundingClientRect().right + 1;  // the content column's edge
    const where = (el) => {
      const text = (el.innerText || el.getAttribute("src") || "").trim();
      return text.split("\n")[0].slice(0, 80);
    };
    document.querySelectorAll("pre").forEach((pre) => {
      if (pre.scrollWidth > pre.clientWidth + 1 || pre.getBoundingClientRect().right > right) {
        problems.push(`code block wider than its box (${pre.scrollWidth} > ` +
                      `${pre.clientWidth} px): ${where(pre)}`);
      }
    });
    document.querySelectorAll("table").forEach((table) => {
      const box = table.parentElement;
      const rect = table.getBoundingClientRect();
      // a wrapper that scrolls hides part of the table; a few px past the column is a border
      const scrolls = box.scrollWidth > box.clientWidth + 1;
      if (rect.width > box.clientWidth + 1 || scrolls || rect.right > right + 4) {
        problems.push(`table wider than its container (${Math.round(rect.width)} px in ` +
                      `${box.clientWidth} px; right edge ${Math.round(rect.right)} past ` +
                      `the column's ${Math.round(right)}): ${where(table)}`);
      }
    });
    document.querySelectorAll("img").forEach((img) => {
      if (!img.complete || img.naturalWidth === 0) {
        problems.push(`missing image: ${img.getAttribute("src")}`);
      }
    });
    const visible = document.body.cloneNode(true);
    visible.querySelectorAll("pre, code, script, style, mjx-container, textarea")
      .forEach((el) => el.remove());
    const text = visible.textContent;
    for (const raw of ["\\[", "\\(", "\\begin{"]) {
      const at = text.indexOf(raw);
      if (at >= 0) {
        problems.push(`raw LaTeX in the text: ...${text.slice(at, at + 60).trim()}`);
      }
    }
    document.querySelectorAll("div.math, span.math").forEach((math) => {
      if (!math.querySelector("mjx-container")) {
        problems.push(`formula not typeset: ${math.textContent.trim().slice(0, 60)}`);
      }
    });
    document.querySelectorAll("script[src], link[href], img[src]").forEach((el) => {
      const url = el.getAttribute("src") || el.getAttribute("href");
      if (/^(https?:)?\/\//.test(url) && !(el.tagName === "LINK" && el.rel !== "stylesheet")) {
        problems.push(`loads from the internet: ${url}`);
      }
    });
    const out = document.createElement("script");
    out.type = "application/json";
    out.id = "browser-check";
    out.textContent = JSON.stringify(problems);
    document.body.appendChild(out);
  }
  window.addEventListener("load", () => {
    const typeset = window.MathJax && MathJax.startup && MathJax.startup.promise;
    (typeset ? typeset : Promise.resolve()).then(measure, measure);
  });
})();
</script>
"""

RESULT = re.compile(r'<script type="application/json" id="browser-check">(.*?)</script>', re.S)


def chromium() -> str:
    """The Chromium binary, installed with apt-get when missing and possible."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        print("browser check: installing Debian's chromium (apt-get)", flush=True)
        install = ["apt-get", "install", "-y", "-q", "chromium"]
        if subprocess.run(install, stdout=subprocess.DEVNULL).returncode != 0:
            # a new machine's package lists may be empty or old: read them, then again
            subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL)
            subprocess.run(install, check=True, stdout=subprocess.DEVNULL)
        found = shutil.which("chromium")
        if found:
            return found
    sys.exit("browser check: no chromium; install it (apt-get install chromium) and rerun")


def _flags(profile: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--hide-scrollbars",
        "--allow-file-access-from-files",  # MathJax's fonts, beside the page
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=15000",  # let MathJax finish before the dump
    ]


def check_page(browser: str, page: Path, scratch: Path, shots: Path | None) -> list[str]:
    """The problems the probe finds on one page (a screenshot saved on the side)."""
    name = page.name
    copy = scratch / f"{page.parent.name}-{name}"
    source = page.read_text(encoding="utf-8")
    base = f'<base href="{html.escape(page.resolve().as_uri())}">'
    source = source.replace("<head>", "<head>" + base, 1).replace("</body>", PROBE + "</body>", 1)
    copy.write_text(source, encoding="utf-8")
    profile = Path(tempfile.mkdtemp(dir=scratch))
    window = f"--window-size={WIDTH},{HEIGHT}"
    dumped = subprocess.run(
        [browser, *_flags(profile), window, "--dump-dom", copy.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    if shots is not None:
        subprocess.run(
            [
                browser,
                *_flags(profile),
                f"--window-size={WIDTH},{SHOT_HEIGHT}",
                f"--screenshot={shots / (page.stem + '.png')}",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            timeout=120,
            check=False,
        )
    found = RESULT.search(dumped)
    if found is None:
        return ["the page did not finish rendering (no result from the probe)"]
    return list(json.loads(html.unescape(found.group(1))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", nargs="?", type=Path, default=DOCS / "_build" / "html")
    parser.add_argument("--screenshots", type=Path, default=DOCS / "_build" / "screenshots")
    parser.add_argument("--no-screenshots", action="store_true")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    pages = sorted(p for p in args.html.glob("*.html") if p.name not in SKIPPED)
    if not pages:
        sys.exit(f"browser check: no pages under {args.html}; build the HTML first")
    browser = chromium()
    shots = None if args.no_screenshots else args.screenshots
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(args.jobs) as pool:
        found = list(pool.map(lambda p: check_page(browser, p, Path(scratch), shots), pages))
    failed = 0
    for page, problems in zip(pages, found, strict=True):
        for problem in problems:
            print(f"{page.name}: {problem}")
        failed += bool(problems)
    where = f"; screenshots in {shots}" if shots is not None else ""
    print(f"browser check: {len(pages)} pages at {WIDTH}x{HEIGHT}, {failed} with problems{where}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
