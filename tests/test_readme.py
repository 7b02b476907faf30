"""README.md opens with the two commands that CI runs, and its examples run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CI_RUN = ROOT / ".ci" / "run"


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}[ \t]*\n(.*?)^```", text, flags=re.M | re.S)


def readme_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    blocks = fenced_blocks(text, "bash")
    assert blocks, "README.md has no ```bash block"
    return [line for line in blocks[0].splitlines() if line.strip()]


def test_readme_opens_with_title_sentence_and_commands() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    non_blank = [line for line in lines if line.strip()]
    assert non_blank[0].startswith("# "), "the README starts with a one-line title"
    assert not non_blank[1].startswith(("#", "```")), "then a one-sentence description"
    assert non_blank[2] == "```bash", "then the fenced block of commands"


def test_readme_has_exactly_two_commands() -> None:
    quickstart, tests = readme_commands()  # exactly two
    for command in (quickstart, tests):
        assert "python3 -m venv .venv" in command
        torch_at = command.index("pip install torch==2.13.0")
        package_at = command.index("pip install", torch_at + 1)
        assert torch_at < package_at, "torch==2.13.0 is installed before the package"
    assert quickstart.endswith("examples/quickstart.py")
    assert (ROOT / "examples" / "quickstart.py").is_file()
    assert '".[dev]"' in tests
    assert tests.endswith("python -m pytest")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ci_runs_the_readme_commands() -> None:
    """.ci/run reads its two commands out of the README, not a copy of them."""
    printed = subprocess.run(
        ["bash", str(CI_RUN), "--print-readme-commands"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.splitlines()
    assert printed == readme_commands()
    script = CI_RUN.read_text(encoding="utf-8")
    assert 'bash -c "$quickstart_cmd"' in script
    assert 'bash -c "$test_cmd"' in script


def test_readme_python_examples_run() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = fenced_blocks(text, "python")
    assert blocks, "README.md shows a Python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {"__name__": "readme_example"})


def test_readme_links_every_documentation_page_and_example() -> None:
    """Every page of the docs site and every example is one click from the README."""
    text = README.read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([^)#\s]+)\)", text))
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.rst")}
    examples = {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.py")}
    assert pages, "docs/ has pages"
    assert not (pages | examples) - linked, sorted((pages | examples) - linked)
    missing = [target for target in linked if "://" not in target and not (ROOT / target).exists()]
    assert not missing, missing


def test_readme_speed_ratios_are_those_of_the_benchmark_results() -> None:
    """Each "Nx faster than P" of the README is RESULTS.md's ratio, as the docs draw it."""
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import figures
    finally:
        sys.path.pop(0)
    text = README.read_text(encoding="utf-8")
    quoted = dict(
        (peer, ratio) for ratio, peer in re.findall(r"\*\*([\d,.]+x) faster than ([^*]+)\*\*", text)
    )
    assert quoted, "the README quotes speed ratios"
    measured = {speedup.peer: figures._times(ratio) for speedup, ratio in figures.measured()}
    for peer, ratio in quoted.items():
        assert peer in measured, f"the README quotes {peer!r}, which RESULTS.md is not read for"
        assert ratio == measured[peer], f"{peer}: README {ratio}, RESULTS.md {measured[peer]}"
    assert figures.machine().split(" (CPU)")[0].replace("+cpu", "") in text.replace("+cpu", "")
