"""RankingMetricsCallback under ``strategy="ddp"``, 2 CPU processes (gloo).

The script (``lightning_ddp_script.py``) is run in a subprocess, as a user
would run it: Lightning's launcher starts the second process. Validation is
uneven (rank 0: 3 batches of 11 rows, rank 1: 1 batch of 2). The CSV that rank
0 writes must hold, for every epoch, the single-process numbers of all 13 rows:
``rank_metrics`` over both ranks' recorded predictions.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from lightning_helpers import METRICS, TOP_K, expected
from processes import run_lightning_script

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available(), reason="torch.distributed is not available"
)


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lightning_ddp")
    run_lightning_script("lightning_ddp_script.py", out)
    return out


def test_csv_equals_single_process_values(ddp_run: Path) -> None:
    records = []
    for rank in (0, 1):
        records += torch.load(ddp_run / f"records_rank{rank}.pt", weights_only=False)
    rows_per_rank = {
        rank: sum(
            len(r["target"])
            for r in torch.load(ddp_run / f"records_rank{rank}.pt", weights_only=False)
            if not r["sanity"] and r["epoch"] == 0
        )
        for rank in (0, 1)
    }
    assert rows_per_rank == {0: 11, 1: 2}  # uneven, as the test claims

    with open(ddp_run / "ddp" / "version_0" / "metrics.csv", newline="") as file:
        rows = [row for row in csv.DictReader(file) if row.get("val/mrr@1")]
    expected_columns = {f"val/{m}@{k}" for m in METRICS for k in TOP_K}
    assert expected_columns <= set(rows[0])
    assert [int(row["epoch"]) for row in rows] == [0, 1]
    for row in rows:
        reference = expected(records, "validate", int(row["epoch"]))
        for key, value in reference.items():
            assert float(row[f"val/{key}"]) == pytest.approx(value, rel=1e-6, abs=1e-9), key
