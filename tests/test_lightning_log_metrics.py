"""Lightning's own logging idioms with the TorchMetrics adapters (issue 26), a real Trainer.

``self.log(name, metric)`` and ``self.log_dict(collection)`` log one number per
name: a metric of one key works as any TorchMetrics metric; one of several
keys (``NDCG(top_k=[1, 3])``, ``RankingMetrics``) is refused with the lines
that work, and ``self.log_dict(collection.compute())`` logs every key.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
from lightning_helpers import NextItem, expected, loader
from torchmetrics import Metric, MetricCollection

from ranking_plugins.torchmetrics import MRR, NDCG, RankingMetrics


class Logging(NextItem):
    """Logs ``metrics`` by one of Lightning's idioms (``how``)."""

    def __init__(self, how: str, metrics: dict[str, Metric]) -> None:
        super().__init__()
        self.how = how
        self.val_metrics = MetricCollection(metrics, prefix="val/")

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
        out = self._evaluate("validate", batch, dataloader_idx)
        self.val_metrics.update(out["preds"], out["target"], mask=out["mask"])
        if self.how == "log_dict":
            self.log_dict(self.val_metrics)
        elif self.how == "log":
            for name, metric in self.val_metrics.items():
                self.log(name, metric)
        return out

    def on_validation_epoch_end(self) -> None:
        if self.how == "compute":
            self.log_dict(self.val_metrics.compute())
            self.val_metrics.reset()


def fit(model: Logging) -> pl.Trainer:
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        num_sanity_val_steps=0,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.fit(model, loader(seed=1, size=24, batch_size=8), loader(seed=2, size=13, batch_size=5))
    return trainer


@pytest.mark.parametrize("how", ["log_dict", "log", "compute"])
def test_metrics_of_one_key_log_by_every_idiom(how: str) -> None:
    model = Logging(how, {"mrr": MRR(top_k=3), "ndcg": NDCG(top_k=1)})
    logged = fit(model).callback_metrics
    reference = expected(model.recorded, "validate", 0)
    assert float(logged["val/mrr"]) == pytest.approx(reference["mrr@3"], rel=1e-9)
    assert float(logged["val/ndcg"]) == pytest.approx(reference["ndcg@1"], rel=1e-9)


def test_several_ks_log_every_key_by_log_dict_of_compute() -> None:
    model = Logging("compute", {"ndcg": NDCG(top_k=[1, 3]), "mrr": MRR(top_k=3)})
    logged = fit(model).callback_metrics
    reference = expected(model.recorded, "validate", 0)
    for key in ("ndcg@1", "ndcg@3", "mrr@3"):
        name = "val/mrr" if key == "mrr@3" else f"val/{key}"
        assert float(logged[name]) == pytest.approx(reference[key], rel=1e-9), key


@pytest.mark.parametrize("how", ["log_dict", "log"])
@pytest.mark.parametrize(
    ("metric", "keys"),
    [
        (NDCG(top_k=[1, 3]), "'ndcg@1', 'ndcg@3'"),
        (RankingMetrics(["mrr"], top_k=3), "'mrr@3'"),  # always a dict
    ],
    ids=["ndcg-two-ks", "ranking-metrics"],
)
def test_several_keys_logged_by_name_are_refused_with_the_lines_that_work(
    how: str, metric: Metric, keys: str
) -> None:
    """Before: Lightning's "The `.compute()` return of the metric logged as 'val/ndcg'
    must be a tensor", at the epoch's end, with no way out."""
    model = Logging(how, {"ndcg": metric.clone(), "mrr": MRR(top_k=3)})
    with pytest.raises(ValueError) as error:
        fit(model)
    message = str(error.value)
    assert f"logged as 'val/ndcg' computes {len(keys.split(','))} ({keys})" in message
    assert "`self.log_dict(metrics.compute())` then `metrics.reset()`" in message
    assert "RankingMetricsCallback" in message
