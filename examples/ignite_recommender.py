"""Train a small matrix-factorisation recommender with PyTorch-Ignite and rank its output.

A seeded synthetic implicit-feedback data set: users and items live in a
hidden taste space, each user interacted with a few dozen items drawn from
their tastes. The last few interactions of every user are held out. The model
(user and item embeddings, a dot product, softmax over the catalogue) is
trained with an Ignite trainer; after every epoch an evaluator scores the whole
catalogue for every user, masks the items the user already interacted with in
training, and :class:`ranking_plugins.ignite.RankingMetrics` computes every
metric at every k from one ranking per batch. Epoch 0 is the untrained model.

    python examples/ignite_recommender.py [--epochs 6] [--seed 0]

Needs the Ignite extra (``pip install "ranking-plugins[ignite]"``); the
progress bar needs ``tqdm`` and is left out without it.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from ignite.engine import Engine, Events, create_supervised_trainer
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from ranking_plugins.ignite import RankingMetrics

USERS, ITEMS, TASTE_DIM = 1000, 500, 8
INTERACTIONS_PER_USER, HELD_OUT_PER_USER = 30, 3
EMBEDDING_DIM, BATCH_SIZE = 32, 512
METRICS = ("hit_rate", "mrr", "ndcg", "recall", "map")
CUTOFFS = (5, 10, 20)
SHOWN = ("hit_rate@10", "mrr@10", "ndcg@10", "recall@20", "map@10")


def synthetic_feedback(seed: int) -> tuple[Tensor, Tensor]:
    """Training pairs ``(P, 2)`` of (user, item) and held-out items ``(USERS, HELD_OUT)``."""
    gen = torch.Generator().manual_seed(seed)
    users = torch.randn(USERS, TASTE_DIM, generator=gen)
    items = torch.randn(ITEMS, TASTE_DIM, generator=gen)
    popularity = torch.randn(ITEMS, generator=gen)
    affinity = users @ items.T / TASTE_DIM**0.5 + 0.5 * popularity
    # what each user interacted with, in order; the last few are held out
    history = torch.multinomial(
        torch.softmax(2.0 * affinity, dim=1), INTERACTIONS_PER_USER, generator=gen
    )
    train, held_out = history[:, :-HELD_OUT_PER_USER], history[:, -HELD_OUT_PER_USER:]
    user_ids = torch.arange(USERS).repeat_interleave(train.shape[1])
    return torch.stack([user_ids, train.reshape(-1)], dim=1), held_out


class MatrixFactorisation(nn.Module):
    """Scores every item for a batch of users: a dot product plus an item bias."""

    def __init__(self) -> None:
        super().__init__()
        self.users = nn.Embedding(USERS, EMBEDDING_DIM)
        self.items = nn.Embedding(ITEMS, EMBEDDING_DIM)
        self.item_bias = nn.Parameter(torch.zeros(ITEMS))
        nn.init.normal_(self.users.weight, std=0.1)
        nn.init.normal_(self.items.weight, std=0.1)

    def forward(self, user_ids: Tensor) -> Tensor:
        return self.users(user_ids) @ self.items.weight.T + self.item_bias


def user_batches(held_out: Tensor) -> list[tuple[Tensor, Tensor]]:
    """Evaluation batches: user ids and their held-out items."""
    users = torch.arange(USERS)
    return [
        (users[i : i + BATCH_SIZE], held_out[i : i + BATCH_SIZE])
        for i in range(0, USERS, BATCH_SIZE)
    ]


def attach_progress_bar(trainer: Engine) -> None:
    try:
        from ignite.contrib.handlers import ProgressBar

        ProgressBar(persist=False).attach(trainer, output_transform=lambda loss: {"loss": loss})
    except ModuleNotFoundError:  # ProgressBar needs tqdm
        print("(no progress bar: pip install tqdm)", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # a small model: one thread is fastest on a shared CPU
    started = time.perf_counter()

    pairs, held_out = synthetic_feedback(args.seed)
    seen = torch.zeros(USERS, ITEMS, dtype=torch.bool)
    seen[pairs[:, 0], pairs[:, 1]] = True

    model = MatrixFactorisation()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=3e-4)
    trainer = create_supervised_trainer(model, optimizer, nn.CrossEntropyLoss())
    attach_progress_bar(trainer)

    def score(engine: Engine, batch: tuple[Tensor, Tensor]) -> dict[str, Tensor]:
        user_ids, relevant_items = batch
        model.eval()
        with torch.no_grad():
            scores = model(user_ids)
        # y: the held-out item ids of each user (the item-index layout);
        # mask: items seen in training are not candidates
        return {"y_pred": scores, "y": relevant_items, "mask": ~seen[user_ids]}

    evaluator = Engine(score)
    RankingMetrics(METRICS, top_k=CUTOFFS).attach(evaluator, "ranking")
    eval_data = user_batches(held_out)

    history: list[tuple[int, float, dict[str, float]]] = []

    def evaluate(epoch: int, loss: float) -> None:
        history.append((epoch, loss, dict(evaluator.run(eval_data).metrics)))

    @trainer.on(Events.EPOCH_COMPLETED)
    def after_epoch(engine: Engine) -> None:
        evaluate(engine.state.epoch, float(engine.state.output))

    train_data = DataLoader(
        TensorDataset(pairs[:, 0], pairs[:, 1]),
        batch_size=BATCH_SIZE,
        shuffle=True,
        generator=torch.Generator().manual_seed(args.seed + 1),
    )
    evaluate(0, float("nan"))  # the untrained model: a near-random ranking
    trainer.run(train_data, max_epochs=args.epochs)

    print(
        f"{USERS} users, {ITEMS} items, {pairs.shape[0]} training interactions, "
        f"{HELD_OUT_PER_USER} held out per user (seen items masked)"
    )
    print(f"{'epoch':>5}  {'loss':>7}  " + "  ".join(f"{key:>11}" for key in SHOWN))
    for epoch, loss, metrics in history:
        print(f"{epoch:>5}  {loss:>7.3f}  " + "  ".join(f"{metrics[k]:>11.4f}" for k in SHOWN))
    print(f"done in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
