"""RankingMetricsCallback with a real Trainer on CPU (one process).

The module records every evaluation batch's predictions; the logged numbers
must equal ``rank_metrics`` over one epoch's non-sanity batches.
"""

from __future__ import annotations

import csv
import importlib
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger
from lightning_helpers import FEATURES, METRICS, NUM_ITEMS, TOP_K, NextItem, expected, loader

from ranking_plugins import EmbeddingScores, rank_metrics
from ranking_plugins.lightning import RankingMetricsCallback


def trainer(tmp_path: Path, callback: RankingMetricsCallback, **kwargs: Any) -> pl.Trainer:
    kwargs.setdefault("logger", CSVLogger(str(tmp_path), name="run", version=0))
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=[callback],
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        **kwargs,
    )


def test_fit_two_epochs_logs_to_csv(tmp_path: Path) -> None:
    model = NextItem()
    callback = RankingMetricsCallback(metrics=METRICS, top_k=TOP_K, prog_bar=True)
    fit = trainer(tmp_path, callback, max_epochs=2, num_sanity_val_steps=2)
    fit.fit(model, loader(seed=1, size=24, batch_size=8), loader(seed=2, size=13, batch_size=5))

    sanity = [r for r in model.recorded if r["sanity"]]
    assert len(sanity) == 2  # there was a sanity check to leak from
    with open(tmp_path / "run" / "version_0" / "metrics.csv", newline="") as file:
        rows = [row for row in csv.DictReader(file) if row.get("val/mrr@1")]
    columns = {f"val/{m}@{k}" for m in METRICS for k in TOP_K}
    assert columns <= set(rows[0])
    assert [int(row["epoch"]) for row in rows] == [0, 1]
    for row in rows:
        reference = expected(model.recorded, "validate", int(row["epoch"]))
        for key, value in reference.items():
            assert float(row[f"val/{key}"]) == pytest.approx(value, rel=1e-9, abs=1e-12), key
    last = expected(model.recorded, "validate", 1)
    assert set(fit.callback_metrics) >= columns
    assert float(fit.callback_metrics["val/ndcg@5"]) == pytest.approx(last["ndcg@5"])
    assert set(fit.progress_bar_metrics) >= columns
    assert callback.last_results["validate"]["val/mrr@3"].item() == pytest.approx(last["mrr@3"])


def test_test_stage_several_dataloaders_and_options(tmp_path: Path) -> None:
    model = NextItem()
    callback = RankingMetricsCallback(
        metrics=METRICS, top_k=TOP_K, stages="test", ties="first", empty_target_action="skip"
    )
    run = trainer(tmp_path, callback, logger=False)
    run.test(
        model,
        [loader(seed=3, size=10, batch_size=4), loader(seed=4, size=7, batch_size=3)],
        verbose=False,
    )
    for index in (0, 1):
        reference = expected(
            model.recorded, "test", 0, index, ties="first", empty_target_action="skip"
        )
        for key, value in reference.items():
            logged = run.callback_metrics[f"test/{key}/dataloader_idx_{index}"]
            assert float(logged) == pytest.approx(value), (key, index)
    assert not any(key.startswith("val/") for key in run.callback_metrics)


def test_validate_only_stage_is_not_test(tmp_path: Path) -> None:
    model = NextItem()
    run = trainer(tmp_path, RankingMetricsCallback(stages=["validate"], top_k=5), logger=False)
    run.test(model, loader(seed=5, size=6, batch_size=3), verbose=False)
    assert not any("@" in key for key in run.callback_metrics)
    run.validate(model, loader(seed=5, size=6, batch_size=3), verbose=False)
    reference = expected(model.recorded, "validate", 0)
    assert float(run.callback_metrics["val/mrr@5"]) == pytest.approx(reference["mrr@5"])


class TupleOutputs(NextItem):
    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
        out = self._evaluate("validate", batch, dataloader_idx)
        return out["target"], out["mask"], out["preds"]


def test_output_transform(tmp_path: Path) -> None:
    model = TupleOutputs()
    callback = RankingMetricsCallback(
        metrics=METRICS,
        top_k=TOP_K,
        output_transform=lambda outputs, batch: (outputs[2], batch[1], batch[2]),
    )
    run = trainer(tmp_path, callback, logger=False)
    run.validate(model, loader(seed=6, size=9, batch_size=4), verbose=False)
    reference = expected(model.recorded, "validate", 0)
    for key, value in reference.items():
        assert float(run.callback_metrics[f"val/{key}"]) == pytest.approx(value)


class NoOutputs(NextItem):
    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
        self._evaluate("validate", batch, dataloader_idx)


def test_step_without_outputs_gets_a_clear_error(tmp_path: Path) -> None:
    run = trainer(tmp_path, RankingMetricsCallback(), logger=False)
    with pytest.raises(ValueError, match="validation_step must return a dict with 'preds'"):
        run.validate(NoOutputs(), loader(seed=7, size=4, batch_size=4), verbose=False)


# ------------------------------------------- one key logged twice (issue 24, row 11)


class LogsInStep(NextItem):
    """A module that logs its own ``val/mrr@1`` per step, as a hand-written loop would."""

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
        out = super().validation_step(batch, batch_idx, dataloader_idx)
        self.log("val/mrr@1", 0.5)
        return out


class LogsAtEpochEnd(NextItem):
    """Logs ``val/mrr@1`` after the callback, with the callback's own arguments.

    (With other arguments Lightning refuses the second log itself; with these it
    averages the two values.)
    """

    def on_validation_epoch_end(self) -> None:
        self.log("val/mrr@1", 0.5, sync_dist=True, add_dataloader_idx=False, batch_size=1)


def test_a_key_the_module_logs_in_its_step_is_refused(tmp_path: Path) -> None:
    run = trainer(tmp_path, RankingMetricsCallback(metrics=["mrr"], top_k=1), logger=False)
    with pytest.raises(ValueError, match="'val/mrr@1' was already logged in validation_step"):
        run.validate(LogsInStep(), loader(seed=8, size=8, batch_size=4), verbose=False)


def test_a_key_the_module_logs_after_the_callback_is_refused(tmp_path: Path) -> None:
    run = trainer(tmp_path, RankingMetricsCallback(metrics=["mrr"], top_k=1), logger=False)
    with pytest.raises(ValueError, match="'val/mrr@1' was logged again in on_validation_epoch_end"):
        run.validate(LogsAtEpochEnd(), loader(seed=8, size=8, batch_size=4), verbose=False)


def test_name_keeps_the_modules_value_and_the_callbacks_apart(tmp_path: Path) -> None:
    model = LogsInStep()
    callback = RankingMetricsCallback(metrics=["mrr"], top_k=1, name="ranking")
    run = trainer(tmp_path, callback, logger=False)
    run.validate(model, loader(seed=8, size=8, batch_size=4), verbose=False)
    assert float(run.callback_metrics["val/mrr@1"]) == 0.5
    reference = expected(model.recorded, "validate", 0)["mrr@1"]
    assert float(run.callback_metrics["val/ranking/mrr@1"]) == pytest.approx(reference)
    assert reference != 0.5


def two_callbacks(*callbacks: RankingMetricsCallback) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=list(callbacks),
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )


def without_mask(outputs: Any, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    return outputs["preds"], outputs["target"]


def test_two_callbacks_logging_one_key_are_refused_at_setup() -> None:
    model = NextItem()
    run = two_callbacks(
        RankingMetricsCallback(metrics=["mrr"], top_k=[1, 3], stages="test"),
        RankingMetricsCallback(metrics=["ndcg", "mrr"], top_k=3, output_transform=without_mask),
    )
    with pytest.raises(
        ValueError, match=r"trainer.callbacks\[0\] and trainer.callbacks\[1\] both log 'test/mrr@3'"
    ):
        run.test(model, loader(seed=9, size=8, batch_size=4), verbose=False)
    assert model.recorded == []  # refused before the first batch


def test_named_callbacks_log_masked_and_unmasked_values() -> None:
    model = NextItem()
    run = two_callbacks(
        RankingMetricsCallback(metrics=["mrr"], top_k=3),
        RankingMetricsCallback(
            metrics=["mrr"], top_k=3, output_transform=without_mask, name="unmasked"
        ),
    )
    run.validate(model, loader(seed=9, size=40, batch_size=8), verbose=False)
    masked = expected(model.recorded, "validate", 0)["mrr@3"]
    preds, target = (torch.cat([r[k] for r in model.recorded]) for k in ("preds", "target"))
    unmasked = float(rank_metrics(preds, target, "mrr", 3)["mrr@3"])
    assert float(run.callback_metrics["val/mrr@3"]) == pytest.approx(masked)
    assert float(run.callback_metrics["val/unmasked/mrr@3"]) == pytest.approx(unmasked)
    assert masked != pytest.approx(unmasked)  # the mask matters here


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"stages": ["fit"]}, "stages"),
        ({"stages": []}, "stages"),
        ({"top_k": 0}, "top_k"),
        ({"metrics": ["ndgc"]}, "metrics"),
        ({"ties": "random"}, "ties"),
        ({"output_transform": 3}, "output_transform"),
        ({"prog_bar": "yes"}, "prog_bar"),
        ({"name": ""}, "name"),
    ],
)
def test_constructor_errors(kwargs: dict[str, Any], argument: str) -> None:
    with pytest.raises((ValueError, TypeError), match=rf"\b{argument}\b"):
        RankingMetricsCallback(**kwargs)


def test_missing_lightning_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    monkeypatch.delitem(sys.modules, "ranking_plugins.lightning")
    with pytest.raises(ImportError, match=r'pip install "ranking-plugins\[lightning\]"'):
        importlib.import_module("ranking_plugins.lightning")


def test_states_live_on_the_module_device(tmp_path: Path) -> None:
    callback = RankingMetricsCallback(top_k=3)
    model = NextItem()
    trainer(tmp_path, callback, logger=False).validate(
        model, loader(seed=8, size=4, batch_size=4), verbose=False
    )
    assert all(state.device == model.device for state in callback.states["validate"])
    assert torch.isfinite(callback.last_results["validate"]["val/mrr@3"])


class TwoTower(NextItem):
    """Scores as user x item embeddings: the step returns EmbeddingScores, not a matrix."""

    def __init__(self) -> None:
        super().__init__()
        self.items = torch.nn.Embedding(NUM_ITEMS, 4)
        self.users = torch.nn.Linear(FEATURES, 4)

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
        features, target, mask = batch
        users = self.users(features)
        all_items = torch.arange(NUM_ITEMS).expand_as(mask)
        seen = torch.where(mask, -1, all_items)  # exclusion list, -1-padded
        self.recorded.append(
            {
                "stage": "validate",
                "sanity": self.trainer.sanity_checking,
                "epoch": self.current_epoch,
                "dataloader_idx": dataloader_idx,
                "preds": (users @ self.items.weight.T).detach().cpu().clone(),
                "target": target.cpu().clone(),
                "mask": mask.cpu().clone(),
            }
        )
        scores = EmbeddingScores(users, self.items.weight, exclude=seen, chunk_size=5)
        return {"preds": scores, "target": target}


def test_a_step_may_return_embedding_scores(tmp_path: Path) -> None:
    model = TwoTower()
    callback = RankingMetricsCallback(metrics=METRICS, top_k=TOP_K)
    run = trainer(tmp_path, callback, logger=False)
    run.validate(model, loader(seed=8, size=11, batch_size=4), verbose=False)
    reference = expected(model.recorded, "validate", 0)
    for key, value in reference.items():
        assert float(run.callback_metrics[f"val/{key}"]) == pytest.approx(value, abs=1e-9), key
