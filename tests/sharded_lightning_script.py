"""Validate with a catalogue sharded across 2 CPU processes: ``strategy="ddp"`` (gloo).

Run as a script by ``test_sharded_adapters.py`` (Lightning's DDP launcher
starts the second process by running this script again):

    python tests/sharded_lightning_script.py OUT_DIR

The model's item table is sharded: process 0 holds items [0, 13), process 1
items [13, 20). Each process validates its own queries (2 batches each, of
different sizes) with the TorchMetrics ``RankingMetrics`` given nothing but
its shard (the default process group); the CSVLogger writes
OUT_DIR/sharded/version_0/metrics.csv, and each process records its query
embeddings, targets and exclusions in OUT_DIR/records_rank{r}.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

from ranking_plugins import ShardedEmbeddingScores
from ranking_plugins.torchmetrics import RankingMetrics

NUM_ITEMS, WIDTH, FEATURES = 20, 4, 5
SHARDS = [(0, 13), (13, 7)]
METRICS = ["mrr", "ndcg", "hit_rate", "map"]
TOP_K = [1, 5, 10]
#: each process's validation batches (sizes differ between processes)
BATCHES = {0: [4, 3], 1: [2, 5]}


def item_table() -> torch.Tensor:
    # small integers: exact dot products, and many ties (across shards too)
    return torch.randint(
        -1, 2, (NUM_ITEMS, WIDTH), generator=torch.Generator().manual_seed(1)
    ).double()


def data(rank: int) -> TensorDataset:
    g = torch.Generator().manual_seed(100 + rank)
    size = sum(BATCHES[rank])
    features = torch.randint(-2, 3, (size, FEATURES), generator=g).double()
    target = torch.randint(0, NUM_ITEMS, (size, 2), generator=g)
    target[:, 1][torch.rand(size, generator=g) < 0.5] = -1
    seen = torch.randint(0, NUM_ITEMS, (size, 2), generator=g)
    return TensorDataset(features, target, seen)


class ShardedModel(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        # integer weights: the query embeddings, and so the scores, are exact
        self.query_tower = torch.nn.Linear(FEATURES, WIDTH, bias=False, dtype=torch.float64)
        with torch.no_grad():
            self.query_tower.weight.copy_(torch.randint(-1, 2, (WIDTH, FEATURES), generator=g))
        self.metrics = RankingMetrics(METRICS, top_k=TOP_K)
        self.recorded: list[dict[str, Any]] = []

    def setup(self, stage: str) -> None:
        offset, size = SHARDS[self.trainer.global_rank]
        self.offset = offset
        # a plain attribute, not a buffer: DDP would broadcast process 0's buffers to
        # every process (model-parallel tables stay out of DDP's synchronisation)
        self.item_shard = item_table()[offset : offset + size]

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        features, target, seen = batch
        query_emb = self.query_tower(features)
        scores = ShardedEmbeddingScores(
            query_emb,
            self.item_shard,
            exclude=seen,
            chunk_size=4,
            item_offset=self.offset,
            catalogue_size=NUM_ITEMS,
        )
        self.metrics.update(scores, target)
        self.recorded.append(
            {"query_emb": query_emb.detach().clone(), "target": target, "seen": seen}
        )

    def on_validation_epoch_end(self) -> None:
        self.log_dict({f"val/{k}": v for k, v in self.metrics.compute().items()})
        self.metrics.reset()


class PerProcessData(pl.LightningDataModule):
    def val_dataloader(self) -> DataLoader:
        rank = self.trainer.global_rank
        sizes = BATCHES[rank]
        dataset = data(rank)
        return DataLoader(
            dataset, batch_sampler=[list(range(0, sizes[0])), list(range(sizes[0], sum(sizes)))]
        )


def main(out: Path) -> None:
    torch.set_num_threads(1)
    model = ShardedModel()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        use_distributed_sampler=False,
        num_sanity_val_steps=0,
        logger=CSVLogger(str(out), name="sharded", version=0),
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.validate(model, datamodule=PerProcessData())
    torch.save(model.recorded, out / f"records_rank{trainer.global_rank}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
