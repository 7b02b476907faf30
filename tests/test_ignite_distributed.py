"""The Ignite metrics across processes: gloo on CPU, 2 and 3 processes.

``tests/ignite_distributed_worker.py`` runs under ``ignite.distributed.Parallel``
in a subprocess (with a time limit, so a hung collective fails the test
instead of the suite). Shares of the data are uneven and, with 3 processes,
one rank gets no batch at all; every rank must report the numbers one process
gets on all the data, to float64 precision.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ignite")

import torch.distributed as dist

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ignite_distributed_worker as job  # noqa: E402
from processes import run_worker_script  # noqa: E402

pytestmark = pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(), reason="needs torch.distributed gloo"
)


def assert_close(got: Any, expected: Any) -> None:
    if isinstance(expected, dict):
        assert set(got) == set(expected)
        for key in expected:
            assert_close(got[key], expected[key])
    elif isinstance(expected, list):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_close(g, e)
    elif math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return job.single_process()


@pytest.mark.slow
@pytest.mark.parametrize("nproc", [2, 3])
def test_parallel_equals_single_process(
    nproc: int, reference: dict[str, Any], tmp_path: Path
) -> None:
    run_worker_script("ignite_distributed_worker.py", nproc, tmp_path)
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(nproc)]
    assert sorted(r["batches"] for r in reports) == sorted(len(s) for s in job.SHARES[nproc])
    if nproc == 3:
        assert any(r["batches"] == 0 for r in reports)
    # the single-process "direct" reference: every batch through update, one process
    from ranking_plugins import ignite as rp

    direct = rp.RankingMetrics(["mrr", "ndcg", "auc"], [1, 4], ignore_zero_hits=False)
    for batch in job.batches():
        direct.update(batch)
    for report in reports:
        assert report["world_size"] == nproc
        assert_close(report["engine"], reference)
        restored = {k: v for k, v in reference.items() if k in report["restored"]}
        assert_close(report["restored"], restored)
        assert report["not_computable"] is True
        assert_close(report["direct"], direct.compute())
