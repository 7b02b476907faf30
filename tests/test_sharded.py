"""Catalogues sharded across 2 and 3 processes (gloo, CPU) against one process.

``tests/sharded_worker.py`` runs every case of one process count in one
spawned job under ``ignite.distributed.Parallel``, in a subprocess with a
time limit (a hung collective fails the test, not the suite). Every
process's per-query values must equal, to 1e-12, the values one process
gets from the whole dense score matrix; the metrics of item exposure must
equal, to 1e-12, what one process gets for the same queries from the whole
table (``EmbeddingScores``) and from the dense matrix; every bad sharding,
bad item input and option that differs between processes must raise
``ShardError`` on every process; with 2 processes the TorchMetrics and
Ignite adapters must report the single-process means (exposure metrics
included).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("ignite")

import torch.distributed as dist

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sharded_worker as job  # noqa: E402
from processes import run_worker_script  # noqa: E402

pytestmark = [
    pytest.mark.skipif(
        not dist.is_available() or not dist.is_gloo_available(),
        reason="needs torch.distributed gloo",
    ),
    pytest.mark.slow,
]


@pytest.fixture(scope="module", params=[2, 3], ids=["2 processes", "3 processes"])
def reports(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, Any]]:
    nproc = request.param
    out = tmp_path_factory.mktemp(f"sharded{nproc}")
    run_worker_script("sharded_worker.py", nproc, out, timeout=180)
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(nproc)]


def test_cases_are_what_the_tests_claim() -> None:
    """Unequal and empty shards, shards out of process order, targets on other shards."""
    for world in (2, 3):
        for name, case in job.cases(world).items():
            sizes = [size for _, size in case["shards"]]
            assert len(set(sizes)) > 1, name  # shards of unequal size
            if "one_empty" in name:
                assert 0 in sizes and 0 in [len(q) for q in case["queries"]]
            if "constant" in name:
                assert bool((case["items"] == case["items"][0]).all())
            for ids in ("targets", "exclude"):  # some on another process's shard
                elsewhere = False
                for rank, listed in enumerate(case[ids]):
                    offset, size = case["shards"][rank]
                    outside = (listed >= 0) & ((listed < offset) | (listed >= offset + size))
                    elsewhere |= bool(outside.any())
                assert elsewhere, (name, ids)
    assert (job.cases(2)["reversed_random"]["shards"][0][0]) > 0


def test_every_process_gets_the_single_process_values(reports: list[dict[str, Any]]) -> None:
    world = reports[0]["world"]
    checked = 0
    for name, case in job.cases(world).items():
        for ties in job.TIES:
            expected = job.dense_reference(case, ties)
            for rank, report in enumerate(reports):
                got = report[f"{name}/{ties}"]
                assert list(got) == list(expected[rank])
                for key, value in expected[rank].items():
                    torch.testing.assert_close(
                        got[key],
                        value,
                        rtol=1e-12,
                        atol=1e-12,
                        equal_nan=True,
                        msg=f"{name} {ties} {key}",
                    )
                    checked += value.numel()
    assert checked > 1000


def test_exposure_metrics_equal_one_process_holding_the_whole_table(
    reports: list[dict[str, Any]],
) -> None:
    """Per-query (novelty, arp, tail_share, diversity) and catalogue-level (coverage,
    gini, entropy, personalisation) values of each process's queries, every policy."""
    world = reports[0]["world"]
    checked = 0
    for name, case in job.cases(world).items():
        for ties in job.TIES:
            references = job.exposure_references(case, ties)
            for rank, report in enumerate(reports):
                got = report[f"exposure/{name}/{ties}"]
                for source in ("embedding", "dense"):
                    expected = references[rank][source]
                    assert set(got) == set(expected)
                    for key, value in expected.items():
                        torch.testing.assert_close(
                            got[key],
                            value,
                            rtol=1e-12,
                            atol=1e-12,
                            equal_nan=True,
                            msg=f"{name} {ties} process {rank} {key} against {source}",
                        )
                        checked += value.isfinite().sum().item()
    assert checked > 500


def test_bad_item_inputs_and_differing_options_raise_on_every_process(
    reports: list[dict[str, Any]],
) -> None:
    world = reports[0]["world"]
    short = "`item_popularity`: 10 items given, but the scores rank 11 items"
    expected = {
        "items_short": [f"process {rank} of the group: {short}" for rank in range(world)],
        "items_short_on_one": [f"process {world - 1} of the group: {short}"],
        "ties_differ": ["`ties` differs across the processes of the group: 'first', 'average'"],
        "validate_differs": ["`validate_args` differs across the processes of the group"],
        "depth_differs": ["the deepest k of the exposure metrics (-1: none asked) differs"],
    }
    for name, phrases in expected.items():
        for rank, report in enumerate(reports):
            error = report[f"error/{name}"]
            assert error is not None, f"{name}: no error on process {rank}"
            assert error[0] == "ShardError", error
            for words in phrases:
                assert words in error[1], error


def test_bad_shardings_raise_on_every_process(reports: list[dict[str, Any]]) -> None:
    expected = {
        "overlap": "overlap",
        "gap": "leave items [",
        "target_outside": "`target` item indices must lie in [0, 11)",
        "exclude_outside": "process 0 of the group: `exclude` item indices must lie in [0, 11)",
        "width_differs": "embedding width of `query_emb` differs",
        "catalogue_differs": "`catalogue_size` differs",
        "dtype_differs": "the dtype of `query_emb` differs across the processes of the group: torch.float64",
    }
    for name, words in expected.items():
        for rank, report in enumerate(reports):
            error = report[f"error/{name}"]
            assert error is not None, f"{name}: no error on process {rank}"
            assert error[0] == "ShardError", error
            assert words in error[1], error
    too_small = reports[0]["error/group_too_small"]
    assert too_small is not None and too_small[0] == "ShardError"
    assert "the shards of the 1 processes of `group` leave items" in too_small[1]
    for report in reports[1:]:
        outside = report["error/group_too_small"]
        assert outside == (
            "ShardError",
            "`group`: this process is not a member of the process group",
        )


def test_without_validation_ids_outside_the_catalogue_are_padding(
    reports: list[dict[str, Any]],
) -> None:
    """Issue 24, row 10: one policy with EmbeddingScores (they raised whatever validate_args said)."""
    world = reports[0]["world"]
    case = job.cases(world)["unequal_random"]
    padded = dict(case)
    for key, name in (("target", "targets"), ("exclude", "exclude")):
        padded[name] = [
            torch.where((ids >= 0) & (ids < 11), ids, -1)
            for ids in (job.outside_ids(case, rank)[key] for rank in range(world))
        ]
    for ties in ("average", "first"):
        expected = job.dense_reference(padded, ties)
        for rank, report in enumerate(reports):
            for key, value in expected[rank].items():
                torch.testing.assert_close(
                    report[f"outside/{ties}"][key], value, rtol=1e-12, atol=1e-12, equal_nan=True
                )


def test_the_group_works_after_the_errors(reports: list[dict[str, Any]]) -> None:
    world = reports[0]["world"]
    expected = job.dense_reference(job.cases(world)["unequal_random"], "first")
    for rank, report in enumerate(reports):
        for key, value in expected[rank].items():
            torch.testing.assert_close(report["after_errors"][key], value, equal_nan=True)


def test_adapters_report_the_single_process_means(reports: list[dict[str, Any]]) -> None:
    if reports[0]["world"] != 2:
        pytest.skip("the adapters run with 2 processes")
    expected = job.single_process_adapters()
    for report in reports:
        for adapter in ("torchmetrics", "ignite"):
            assert set(report[adapter]) == set(expected)
            for key, value in expected.items():
                assert report[adapter][key] == pytest.approx(
                    value, rel=1e-12, abs=1e-12, nan_ok=True
                ), (
                    adapter,
                    key,
                )
