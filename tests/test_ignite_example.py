"""examples/ignite_recommender.py runs, quickly, and its model learns something."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ignite")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "ignite_recommender.py"


@pytest.mark.slow
def test_ignite_recommender_example() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["epoch", "loss"])
    columns = lines[header].split()
    rows = [line.split() for line in lines[header + 1 :] if line.split()[0].isdigit()]
    assert [int(row[0]) for row in rows] == list(range(7))  # epoch 0 (untrained) to 6
    ndcg = [float(row[columns.index("ndcg@10")]) for row in rows]
    hit_rate = [float(row[columns.index("hit_rate@10")]) for row in rows]
    assert all(0 <= v <= 1 for v in ndcg + hit_rate)
    # trained beats untrained (near random: about 10 of 470 unseen items)
    assert ndcg[-1] > 3 * ndcg[0]
    assert hit_rate[-1] > 3 * hit_rate[0]
