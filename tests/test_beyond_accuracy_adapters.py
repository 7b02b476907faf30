"""The exposure metrics (issue 14) in the adapters: TorchMetrics (a MetricCollection
beside accuracy metrics, one ranking per batch), Ignite, and both across 2 and 3
gloo processes with uneven data and an idle rank."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("ignite")
pytest.importorskip("torchmetrics")

import torch.distributed as dist
from torchmetrics import MetricCollection

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import beyond_accuracy_ddp_worker as job  # noqa: E402
from processes import run_worker_script  # noqa: E402

import ranking_plugins.batch_cache  # noqa: E402
import ranking_plugins.kernel  # noqa: E402
import ranking_plugins.request  # noqa: E402
from ranking_plugins import ignite as rp_ignite  # noqa: E402
from ranking_plugins import torchmetrics as rp_tm  # noqa: E402


def _close(got: float, expected: float) -> bool:
    if math.isnan(expected):
        return math.isnan(got)
    return got == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_torchmetrics_collection_equals_the_functional_api() -> None:
    expected = job.single_process()
    collection = MetricCollection(
        {
            "ndcg": rp_tm.NDCG(job.KS),
            "beyond": rp_tm.RankingMetrics(job.NAMES, job.KS, **job.item_inputs()),
        }
    )
    for preds, target in job.batches():
        collection.update(preds, target)
    got = collection.compute()
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert _close(float(got[key]), value), key
    errors = collection["beyond"].compute_standard_error()
    for key, value in errors.items():
        # catalogue-level metrics have no standard error; per-query ones do
        assert math.isnan(value) == (key.split("@")[0] in rp_tm_catalogue()), key


def rp_tm_catalogue() -> tuple[str, ...]:
    from ranking_plugins.metrics import CATALOGUE_METRICS

    return CATALOGUE_METRICS


def test_one_ranking_per_batch_in_a_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    original = ranking_plugins.kernel.rank_batch

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(ranking_plugins.kernel, "rank_batch", counting)
    ranking_plugins.batch_cache.last_batch.clear()
    collection = MetricCollection(
        {
            "ndcg": rp_tm.NDCG(job.KS),
            "beyond": rp_tm.RankingMetrics(job.NAMES, job.KS, **job.item_inputs()),
            "mrr": rp_tm.MRR(job.KS),
        }
    )
    for i, (preds, target) in enumerate(job.batches()):
        before = len(calls)
        collection.update(preds, target)
        # as for accuracy metrics alone: the first batch twice (copies of a batch
        # are kept only once the same `preds` came twice), then once
        assert len(calls) - before == (2 if i == 0 else 1), f"batch {i}"


def test_ignite_engine_equals_the_functional_api() -> None:
    from ignite.engine import Engine

    expected = job.single_process()
    engine = Engine(lambda engine, batch: batch)
    rp_ignite.RankingMetrics(job.NAMES, job.KS, **job.item_inputs()).attach(engine, "beyond")
    got = engine.run(job.batches()).metrics
    for key, value in got.items():
        assert _close(value, expected[key]), key


def test_item_inputs_follow_the_metric_device() -> None:
    """The inputs are buffers: ``.to`` moves them; float64 stays float64 under ``.half()``."""
    metric = rp_tm.RankingMetrics(["arp", "coverage"], [2], **job.item_inputs())
    metric = metric.to("cpu").half()
    assert metric._item_popularity.dtype == torch.float64
    preds, target = job.batches()[0]
    metric.update(preds, target)
    assert set(metric.compute()) == {"arp@2", "coverage@2"}


def test_adapters_refuse_bad_item_inputs() -> None:
    with pytest.raises(ValueError, match="give `num_items`"):
        rp_tm.RankingMetrics(["coverage"], [2])
    with pytest.raises(ValueError, match="give `num_items`"):
        rp_ignite.RankingMetrics(["gini"], [2])
    with pytest.raises(ValueError, match="`item_popularity` must be finite and non-negative"):
        rp_tm.RankingMetrics(["arp"], [2], item_popularity=-torch.ones(4))
    with pytest.raises(ValueError, match="arp needs `item_popularity`"):
        rp_ignite.RankingMetrics(["arp"], [2])
    metric = rp_tm.RankingMetrics(["arp"], [2], item_popularity=torch.ones(5))
    with pytest.raises(
        ValueError, match="`item_popularity`: 5 items given, but the scores rank 12"
    ):
        metric.update(*job.batches()[0])
    flat = rp_tm.RankingMetrics(["coverage"], [2], num_items=4)
    with pytest.raises(ValueError, match="grouped"):
        flat.update(torch.rand(6), torch.ones(6), indexes=torch.tensor([0, 0, 0, 1, 1, 1]))


# ---------------------------------------------------------------- 2 and 3 processes


@pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(), reason="needs torch.distributed gloo"
)
@pytest.mark.slow
@pytest.mark.parametrize("nproc", [2, 3])
def test_processes_equal_one_process(nproc: int, tmp_path: Path) -> None:
    run_worker_script("beyond_accuracy_ddp_worker.py", nproc, tmp_path)
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(nproc)]
    assert sorted(r["batches"] for r in reports) == sorted(len(s) for s in job.SHARES[nproc])
    expected = job.single_process()
    for report in reports:
        for source in ("ignite", "torchmetrics", "coverage_alone"):
            got = report[source]
            assert got, source
            for key, value in got.items():
                assert _close(value, expected[key]), (source, key, value, expected[key])


# ------------------------------------------------------------------------ Lightning


def test_lightning_callback_logs_the_exposure_metrics(tmp_path: Path) -> None:
    """A real Trainer with a CSV logger: accuracy and exposure metrics side by side,
    equal to the functional API over the epoch's batches (the item inputs given once)."""
    pytest.importorskip("lightning")
    import csv

    import lightning.pytorch as pl
    from lightning.pytorch.loggers import CSVLogger
    from lightning_helpers import NUM_ITEMS, NextItem, loader

    from ranking_plugins import rank_metrics
    from ranking_plugins.lightning import RankingMetricsCallback

    gen = torch.Generator().manual_seed(3)
    items = {
        "item_popularity": torch.randint(1, 40, (NUM_ITEMS,), generator=gen).double(),
        "item_features": torch.randn(NUM_ITEMS, 3, generator=gen),
    }
    names = ["ndcg", "coverage", "personalisation", "novelty", "diversity"]
    model = NextItem()
    trainer = pl.Trainer(
        logger=CSVLogger(tmp_path, name="run"),
        callbacks=[RankingMetricsCallback(metrics=names, top_k=(2, 4), **items)],
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.validate(model, loader(seed=4, size=17, batch_size=5), verbose=False)
    with open(tmp_path / "run" / "version_0" / "metrics.csv", newline="") as file:
        (row,) = list(csv.DictReader(file))
    chosen = [r for r in model.recorded if not r["sanity"]]
    preds, target, mask = (torch.cat([r[k] for r in chosen]) for k in ("preds", "target", "mask"))
    expected = rank_metrics(preds, target, names, [2, 4], mask=mask, gain="linear", **items)
    for key, value in expected.items():
        assert float(row[f"val/{key}"]) == pytest.approx(float(value), rel=1e-9, abs=1e-12), key


def test_ignite_checkpoint_keeps_the_exposure() -> None:
    """state_dict mid-epoch, loaded into a new metric: the same catalogue values."""
    names = ["coverage", "gini", "personalisation", "arp"]
    batches = job.batches()
    metric = rp_ignite.RankingMetrics(names, job.KS, **job.item_inputs())
    for batch in batches[:2]:
        metric.update(batch)
    restored = rp_ignite.RankingMetrics(names, job.KS, **job.item_inputs())
    restored.load_state_dict(metric.state_dict())
    for batch in batches[2:]:
        metric.update(batch)
        restored.update(batch)
    assert restored.compute() == metric.compute()
    other = rp_ignite.RankingMetrics(names, [3], **job.item_inputs())
    with pytest.raises(ValueError, match="saved"):
        other.load_state_dict(metric.state_dict())


def test_per_query_exposure_metrics_keep_no_exposure_state() -> None:
    """novelty, arp, tail_share and diversity are means of per-query values: the
    (3, K, N) exposure is kept only for the catalogue-level metrics."""
    preds, target = job.batches()[1]
    per_query = rp_tm.RankingMetrics(["novelty", "arp"], job.KS, **job.item_inputs())
    assert not any(name.startswith("exposure_") for name in per_query._defaults)
    per_query.update(preds, target)
    catalogue = rp_tm.RankingMetrics(["gini"], job.KS, **job.item_inputs())
    assert any(name.startswith("exposure_") for name in catalogue._defaults)
    from ranking_plugins import rank_metrics

    expected = rank_metrics(preds, target, ["novelty", "arp"], job.KS, **job.item_inputs())
    for key, value in per_query.compute().items():
        assert _close(float(value), float(expected[key])), key


def test_torchmetrics_takes_bfloat16_item_features() -> None:
    """Found by the fuzzer (test_fuzz.py::test_exposure): the state name's digest of
    the item inputs read them through numpy, which has no bfloat16 (a TypeError
    where rank_metrics gives numbers)."""
    from ranking_plugins import rank_metrics

    preds = torch.tensor([[3.0, 1.0, 2.0, 0.0], [0.0, 2.0, 1.0, 3.0]])
    target = torch.tensor([[1, 0, 0, 1], [0, 1, 0, 0]])
    features = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, -2.0], [0.5, 0.5]], dtype=torch.bfloat16)
    metric = rp_tm.RankingMetrics(["diversity", "coverage"], [2, 3], item_features=features)
    metric.update(preds, target)
    expected = rank_metrics(
        preds, target, ["diversity", "coverage"], [2, 3], item_features=features
    )
    got = metric.compute()
    assert list(got) == list(expected)
    for key, value in expected.items():
        assert torch.equal(got[key], value), key


@pytest.mark.parametrize("adapter", [rp_ignite.RankingMetrics, rp_tm.RankingMetrics])
def test_an_adapter_refuses_an_empty_catalogue(adapter: type) -> None:
    """Found by test_fuzz.py::test_exposure: a (Q, 0) batch is ranked with one phantom
    column, so its exposure has N = 1 while the adapter's state, sized by the item
    inputs, has N = 0 (a RuntimeError at update or compute). The adapters' exposure
    state needs N > 0: refused by name when made."""
    with pytest.raises(ValueError, match=r"catalogue is empty: `num_items`.*must be positive"):
        adapter(["gini", "arp"], [1], item_popularity=torch.ones(0))
    with pytest.raises(ValueError, match=r"`num_items` must be None or a positive int, got 0"):
        adapter(["coverage"], [1], num_items=0)
