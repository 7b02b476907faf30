"""examples/quickstart.py, the README's first command: the tour runs and its claims hold."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ignite")
pytest.importorskip("lightning")

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^(\w+@\d+)((?:\s+-?\d+\.\d{4}){3})$")


@pytest.fixture(scope="module")
def tour_output() -> str:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def test_three_entry_points_print_the_same_table(tour_output: str) -> None:
    rows = [m for line in tour_output.splitlines() if (m := ROW.match(line))]
    # 5 metrics x 4 cutoffs, one row each
    assert len(rows) == 20, tour_output
    for row in rows:
        functional, ignite, lightning = row.group(2).split()
        assert functional == ignite == lightning, row.group(0)
    assert "The three agree on all 20 values" in tour_output


def test_tour_runs_the_command_on_the_sample_files(tour_output: str) -> None:
    commands = [line for line in tour_output.splitlines() if line.startswith("$ ranking-plugins")]
    assert len(commands) == 2, tour_output
    after_first = tour_output.split(commands[0], 1)[1]
    for key in ("ndcg@5", "mrr", "map"):
        assert key in after_first
