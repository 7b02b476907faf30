"""A tiny next-item model for the Lightning tests (in-process and the DDP script).

Every validation/test batch's predictions are recorded, with the stage, the
epoch, the dataloader and whether it was the sanity check, so that a test can
recompute the logged numbers with ``ranking_plugins.rank_metrics``.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

NUM_ITEMS = 12
FEATURES = 5
METRICS = ("mrr", "ndcg", "hit_rate")
TOP_K = (1, 3, 5)


def dataset(seed: int, size: int) -> TensorDataset:
    """Features, the next item (the target, an item id) and a mask hiding 2 'seen' items."""
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(size, FEATURES, generator=g)
    target = torch.randint(0, NUM_ITEMS, (size,), generator=g)
    seen = torch.randint(0, NUM_ITEMS, (size, 2), generator=g)
    mask = torch.ones(size, NUM_ITEMS, dtype=torch.bool)
    mask.scatter_(1, seen, False)
    mask[torch.arange(size), target] = True  # the next item is never hidden
    return TensorDataset(features, target, mask)


def loader(seed: int, size: int, batch_size: int) -> DataLoader:
    return DataLoader(dataset(seed, size), batch_size=batch_size, shuffle=False)


class NextItem(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(FEATURES, NUM_ITEMS)
        self.recorded: list[dict[str, Any]] = []

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layer(features)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        features, target, _ = batch
        return torch.nn.functional.cross_entropy(self(features), target)

    def _evaluate(self, stage: str, batch: Any, dataloader_idx: int) -> dict[str, torch.Tensor]:
        features, target, mask = batch
        preds = self(features)
        self.recorded.append(
            {
                "stage": stage,
                "sanity": self.trainer.sanity_checking,
                "epoch": self.current_epoch,
                "dataloader_idx": dataloader_idx,
                "preds": preds.detach().cpu().clone(),
                "target": target.cpu().clone(),
                "mask": mask.cpu().clone(),
            }
        )
        return {"preds": preds, "target": target, "mask": mask}

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
        return self._evaluate("validate", batch, dataloader_idx)

    def test_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
        return self._evaluate("test", batch, dataloader_idx)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.5)


def expected(
    records: list[dict[str, Any]], stage: str, epoch: int, dataloader_idx: int = 0, **options: Any
) -> dict[str, float]:
    """rank_metrics over every non-sanity batch of one epoch of one dataloader."""
    from ranking_plugins import rank_metrics

    chosen = [
        r
        for r in records
        if r["stage"] == stage
        and not r["sanity"]
        and r["epoch"] == epoch
        and r["dataloader_idx"] == dataloader_idx
    ]
    assert chosen, f"no {stage} batch recorded for epoch {epoch}"
    preds, target, mask = (torch.cat([r[k] for r in chosen]) for k in ("preds", "target", "mask"))
    options.setdefault("gain", "linear")
    values = rank_metrics(preds, target, list(METRICS), list(TOP_K), mask=mask, **options)
    return {key: float(value) for key, value in values.items()}
