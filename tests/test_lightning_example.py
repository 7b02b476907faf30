"""``examples/lightning_sequential.py`` runs, as a user runs it, and learns something."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "lightning_sequential.py"


def test_lightning_sequential_example(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(EXAMPLE.parent.parent), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--epochs", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = {}
    for line in done.stdout.splitlines():
        match = re.match(r"^(mrr|ndcg|hit_rate)\s+([\d.\s]+)$", line)
        if match:
            table[match.group(1)] = [float(v) for v in match.group(2).split()]
    assert set(table) == {"mrr", "ndcg", "hit_rate"}, done.stdout
    assert all(len(row) == 4 for row in table.values())
    random_hit_rate_at_10 = 10 / (300 - 8)
    assert table["hit_rate"][2] > 5 * random_hit_rate_at_10  # it learned the item graph
    # at k = 1 the three metrics are one number; hit rate never decreases with k
    assert table["mrr"][0] == table["ndcg"][0] == table["hit_rate"][0]
    assert table["hit_rate"] == sorted(table["hit_rate"])
