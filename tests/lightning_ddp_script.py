"""Fit with ``strategy="ddp"``, 2 CPU processes (gloo), uneven validation per rank.

Run as a script by ``test_lightning_ddp.py`` (Lightning's DDP launcher starts
the second process by running this script again):

    python tests/lightning_ddp_script.py OUT_DIR

Rank 0 validates 3 batches (sizes 4, 4, 3), rank 1 one batch of 2; each rank
records its predictions in OUT_DIR/records_rank{r}.pt and the CSVLogger
writes OUT_DIR/ddp/version_0/metrics.csv.
"""

from __future__ import annotations

import sys
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.loggers import CSVLogger
from lightning_helpers import METRICS, TOP_K, NextItem, loader

from ranking_plugins.lightning import RankingMetricsCallback


class UnevenData(pl.LightningDataModule):
    def train_dataloader(self):  # the same number of batches on every rank
        return loader(seed=10 + self.trainer.global_rank, size=16, batch_size=8)

    def val_dataloader(self):
        if self.trainer.global_rank == 0:
            return loader(seed=20, size=11, batch_size=4)
        return loader(seed=21, size=2, batch_size=2)


def main(out: Path) -> None:
    torch.set_num_threads(1)
    model = NextItem()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=2,
        use_distributed_sampler=False,
        callbacks=[RankingMetricsCallback(metrics=METRICS, top_k=TOP_K)],
        logger=CSVLogger(str(out), name="ddp", version=0),
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.fit(model, datamodule=UnevenData())
    torch.save(model.recorded, out / f"records_rank{trainer.global_rank}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
