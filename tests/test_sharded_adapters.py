"""A Lightning ``Trainer(strategy="ddp", devices=2)`` validating with a sharded catalogue.

The script (``sharded_lightning_script.py``) runs in a subprocess, as a user
would run it: Lightning's launcher starts the second process. Each process
holds one shard of the item table and its own queries; the metrics that rank
0 logs must be what one process gets from the whole score matrix of every
process's queries. (The TorchMetrics adapter without Lightning and the
Ignite adapter under ``idist.Parallel`` are checked in ``test_sharded.py``.)
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("lightning")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sharded_lightning_script as script  # noqa: E402
from processes import run_lightning_script  # noqa: E402

pytestmark = [
    pytest.mark.skipif(
        not torch.distributed.is_available(), reason="torch.distributed is not available"
    ),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sharded_ddp")
    run_lightning_script("sharded_lightning_script.py", out)
    return out


def test_logged_metrics_equal_the_single_process_values(ddp_run: Path) -> None:
    from ranking_plugins import rank_metrics

    records = [torch.load(ddp_run / f"records_rank{r}.pt", weights_only=False) for r in (0, 1)]
    assert [[len(b["target"]) for b in r] for r in records] == [
        script.BATCHES[0],
        script.BATCHES[1],
    ]
    batches = [batch for per_rank in records for batch in per_rank]
    query_emb = torch.cat([b["query_emb"] for b in batches])
    preds = query_emb @ script.item_table().T
    mask = torch.ones(preds.shape, dtype=torch.bool)
    mask.scatter_(1, torch.cat([b["seen"] for b in batches]), False)
    target = torch.cat([b["target"] for b in batches])
    expected = rank_metrics(preds, target, script.METRICS, script.TOP_K, mask=mask)

    with open(ddp_run / "sharded" / "version_0" / "metrics.csv", newline="") as file:
        rows = [row for row in csv.DictReader(file) if row.get("val/mrr@1")]
    assert len(rows) == 1
    for key, value in expected.items():
        assert float(rows[0][f"val/{key}"]) == pytest.approx(float(value), rel=1e-6, abs=1e-9), key


def test_targets_and_exclusions_lie_on_both_shards() -> None:
    """The data is what the test claims, so that it can fail."""
    offset = script.SHARDS[1][0]
    for rank in (0, 1):
        _, target, seen = script.data(rank).tensors
        for ids in (target, seen):
            listed = ids[ids >= 0]
            assert bool((listed < offset).any()) and bool((listed >= offset).any())
