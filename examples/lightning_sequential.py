"""Next-item recommendation with Lightning, evaluated by RankingMetricsCallback.

A GRU reads a user's item history and scores every item of the catalogue as
the next one. The data set is made here, seeded: users walk a random graph in
which every item has a few likely successors, so there is something to learn.
At validation the items already in the history are masked (never ranked, as
recommenders usually do) and the callback logs MRR, NDCG and hit rate at
several cutoffs; the script prints the final table.

    python examples/lightning_sequential.py [--epochs 3]

Runs in well under a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import logging
import warnings

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from ranking_plugins.lightning import RankingMetricsCallback

NUM_ITEMS = 300
HISTORY = 8
METRICS = ("mrr", "ndcg", "hit_rate")
TOP_K = (1, 5, 10, 20)


def make_sequences(num_users: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Histories (U, HISTORY) and next items (U,) from random walks on a fixed graph."""
    graph = torch.Generator().manual_seed(1234)  # the same item graph for every split
    successors = torch.randint(0, NUM_ITEMS, (NUM_ITEMS, 4), generator=graph)
    preference = torch.tensor([0.55, 0.25, 0.15, 0.05])
    walk = torch.empty(num_users, HISTORY + 1, dtype=torch.long)
    walk[:, 0] = torch.randint(0, NUM_ITEMS, (num_users,), generator=generator)
    for step in range(1, HISTORY + 1):
        choice = torch.multinomial(preference, num_users, replacement=True, generator=generator)
        jump = torch.rand(num_users, generator=generator) < 0.1  # some noise
        noise = torch.randint(0, NUM_ITEMS, (num_users,), generator=generator)
        walk[:, step] = torch.where(jump, noise, successors[walk[:, step - 1], choice])
    return walk[:, :HISTORY], walk[:, HISTORY]


def history_mask(history: Tensor) -> Tensor:
    """True for the items that may be recommended: all but those already in the history."""
    mask = torch.ones(history.shape[0], NUM_ITEMS, dtype=torch.bool, device=history.device)
    return mask.scatter(1, history, False)


class GRURecommender(pl.LightningModule):
    def __init__(self, dim: int = 48, lr: float = 5e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.embedding = nn.Embedding(NUM_ITEMS, dim)
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.output = nn.Linear(dim, NUM_ITEMS)

    def forward(self, history: Tensor) -> Tensor:
        states, _ = self.gru(self.embedding(history))
        return self.output(states[:, -1])  # (B, NUM_ITEMS) scores

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        history, next_item = batch
        loss = nn.functional.cross_entropy(self(history), next_item)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> dict[str, Tensor]:
        history, next_item = batch
        # what the callback reads: scores, the relevant item id, and the mask
        return {"preds": self(history), "target": next_item, "mask": history_mask(history)}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams["lr"])


def main(epochs: int = 3, seed: int = 0) -> dict[str, float]:
    pl.seed_everything(seed, verbose=False)
    torch.set_num_threads(2)
    generator = torch.Generator().manual_seed(seed)
    train = TensorDataset(*make_sequences(6000, generator))
    val = TensorDataset(*make_sequences(1000, generator))
    trainer = pl.Trainer(
        accelerator="cpu",
        max_epochs=epochs,
        callbacks=[RankingMetricsCallback(metrics=METRICS, top_k=TOP_K, prog_bar=False)],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(
        GRURecommender(),
        DataLoader(train, batch_size=128, shuffle=True),
        DataLoader(val, batch_size=256),
    )
    results = {
        key: float(value)
        for key, value in trainer.callback_metrics.items()
        if key.startswith("val/")
    }
    print_table(results)
    return results


def print_table(results: dict[str, float]) -> None:
    header = "metric    " + "".join(f"{'@' + str(k):>9}" for k in TOP_K)
    print(header)
    print("-" * len(header))
    for metric in METRICS:
        cells = "".join(f"{results[f'val/{metric}@{k}']:9.4f}" for k in TOP_K)
        print(f"{metric:<10}{cells}")
    print(f"(random ranking: hit_rate@10 ≈ {10 / (NUM_ITEMS - HISTORY):.4f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")  # Lightning's hints about this tiny setup
    main(arguments.epochs, arguments.seed)
