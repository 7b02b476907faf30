"""A metric is a table entry: one added to ``METRICS`` reaches every entry point.

The new metric here, ``hits``, is the (expected) number of relevant items in
the top k, read from a statistic that already exists. Nothing but the table
entry is added, and ``rank_metrics``, the Ignite and TorchMetrics adapters and
the Lightning callback all compute it.
"""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from ignite.engine import Engine
from lightning_helpers import NextItem, loader

from ranking_plugins import metrics as metric_table
from ranking_plugins import rank_metrics
from ranking_plugins.ignite import RankingMetrics as IgniteRankingMetrics
from ranking_plugins.kernel import Cutoff
from ranking_plugins.lightning import RankingMetricsCallback
from ranking_plugins.options import Options
from ranking_plugins.torchmetrics import RankingMetrics as TorchMetricsRankingMetrics

KS = [1, 3, 5]


def _hits(c: Cutoff, options: Options) -> metric_table.MetricValue:
    return c.hits, (c.relevant_count > 0).expand_as(c.k)


@pytest.fixture
def hits_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = metric_table.Metric(name="hits", higher_is_better=True, value=_hits, upper_bound=None)
    monkeypatch.setitem(metric_table.METRICS, "hits", entry)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    preds = torch.randint(0, 4, (6, 9), generator=g).float()  # ties on purpose
    target = torch.randint(0, 2, (6, 9), generator=g)
    return preds, target


def _expected(preds: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """hits@k = precision@k x k, the same statistic through an existing metric."""
    precision = rank_metrics(preds, target, "precision", KS)
    return {f"hits@{k}": float(precision[f"precision@{k}"]) * k for k in KS}


def test_metric_entries_are_keyword_only_and_at_k_follows_the_cutoff() -> None:
    with pytest.raises(TypeError):
        metric_table.Metric("hits", True, _hits)  # type: ignore[misc]
    assert metric_table.METRICS["ndcg"].at_k
    assert not metric_table.METRICS["auc"].at_k
    assert not metric_table.METRICS["r_precision"].at_k


def test_a_new_entry_reaches_rank_metrics(hits_metric: None) -> None:
    preds, target = _batch()
    got = rank_metrics(preds, target, "hits", KS)
    for key, value in _expected(preds, target).items():
        assert float(got[key]) == pytest.approx(value, abs=1e-12)


def test_a_new_entry_reaches_the_ignite_adapter(hits_metric: None) -> None:
    preds, target = _batch()
    engine = Engine(lambda engine, batch: batch)
    IgniteRankingMetrics(metrics=["hits"], top_k=KS).attach(engine, "ranking")
    state = engine.run([(preds[:3], target[:3]), (preds[3:], target[3:])])
    for key, value in _expected(preds, target).items():
        assert state.metrics[key] == pytest.approx(value, abs=1e-12)


def test_a_new_entry_reaches_the_torchmetrics_adapter(hits_metric: None) -> None:
    preds, target = _batch()
    metric = TorchMetricsRankingMetrics(["hits"], top_k=KS)
    metric.update(preds[:2], target[:2])
    metric.update(preds[2:], target[2:])
    got = metric.compute()
    for key, value in _expected(preds, target).items():
        assert float(got[key]) == pytest.approx(value, abs=1e-12)


def test_a_new_entry_reaches_the_lightning_callback(hits_metric: None, tmp_path: Path) -> None:
    model = NextItem()
    trainer = pl.Trainer(
        default_root_dir=tmp_path,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[RankingMetricsCallback(metrics=["hits"], top_k=KS, stages=["validate"])],
    )
    trainer.validate(model, loader(seed=4, size=8, batch_size=4), verbose=False)
    records = [r for r in model.recorded if not r["sanity"]]
    preds = torch.cat([r["preds"] for r in records])
    target = torch.cat([r["target"] for r in records])
    mask = torch.cat([r["mask"] for r in records])
    precision = rank_metrics(preds, target, "precision", KS, mask=mask)
    for k in KS:
        logged = float(trainer.callback_metrics[f"val/hits@{k}"])
        assert logged == pytest.approx(float(precision[f"precision@{k}"]) * k, abs=1e-6)
