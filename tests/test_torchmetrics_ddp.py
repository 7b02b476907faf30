"""TorchMetrics adapters across 2 processes (gloo, no Lightning): uneven data,
queries split across processes, a process that never updates. Every process
must get the single-process numbers, and nothing may hang."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torchmetrics_ddp_worker as worker
from processes import spawn_and_wait

pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available(), reason="torch.distributed is not available"
)


def single_process() -> dict[str, Any]:
    expected: dict[str, Any] = {}
    for scenario, per_rank in worker.scenarios().items():
        metrics = worker.make_metrics(scenario)
        for updates in per_rank:
            for args, kwargs in updates:
                for metric in metrics.values():
                    metric.update(*args, **kwargs)
        expected[scenario] = worker.results(metrics)
    return expected


@pytest.fixture(scope="module")
def ddp_results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("ddp")
    spawn_and_wait(worker.run, (2, str(tmp / "init"), str(tmp)), nprocs=2)
    return [torch.load(tmp / f"rank{r}.pt", weights_only=False) for r in range(2)]


@pytest.mark.parametrize("scenario", list(worker.scenarios()))
@pytest.mark.parametrize("rank", [0, 1])
def test_every_process_gets_the_single_process_values(
    ddp_results: list[dict[str, Any]], scenario: str, rank: int
) -> None:
    expected = single_process()[scenario]
    for run in (scenario, scenario + "_again"):
        got = ddp_results[rank][run]
        assert set(got) == set(expected)
        for name, value in expected.items():
            if isinstance(value, dict):
                assert list(got[name]) == list(value)
                for key in value:
                    torch.testing.assert_close(got[name][key], value[key], equal_nan=True)
            else:
                torch.testing.assert_close(got[name], value, equal_nan=True)


def test_scenarios_are_uneven_and_split_queries() -> None:
    """The data really is what the test claims (so the test can fail)."""
    data = worker.scenarios()
    assert len(data["dense"][0]) != len(data["dense"][1])
    assert data["one_rank_idle"][1] == []
    queries = [
        set(kwargs["indexes"].tolist()) for updates in data["grouped"] for _, kwargs in updates
    ]
    assert set.intersection(*queries)  # some query has items on both ranks
