"""A first tour: one toy recommender, evaluated four ways, all giving the same numbers.

    python examples/quickstart.py

1. A seeded toy recommender scores a catalogue of 1,000 items for 200 users;
   each user's relevant items are given as item ids (the next-item layout).
2. The scores are evaluated with the functional API (one ``rank_metrics``
   call), with an Ignite evaluator ``Engine`` and with the Lightning callback
   in ``Trainer.validate``. The three agree to float64 rounding: they share one
   rank kernel and one metric table.
3. The sample TREC files shipped with the package are evaluated with the
   command ``ranking-plugins evaluate`` (here as ``python -m ranking_plugins``).

Needs the framework extras: ``pip install "ranking-plugins[all]"``. Runs in
well under a minute on 2 CPU cores.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
import warnings
from importlib.resources import files

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from ranking_plugins import rank_metrics

USERS, ITEMS, DIM, RELEVANT_PER_USER, BATCH = 200, 1000, 16, 5, 64
METRICS = ("hit_rate", "mrr", "ndcg", "map", "recall")
CUTOFFS = (1, 5, 10, 20)
# The same options for every entry point: each adapter keeps its framework's
# defaults (Ignite's MAP divides by min(k, R), for one), so spell them out.
OPTIONS = {"ties": "average", "ap_denominator": "relevant", "empty_target_action": "neg"}


class ToyRecommender(nn.Module):
    """Scores every item for a batch of users with a dot product of embeddings."""

    def __init__(self, user_emb: Tensor, item_emb: Tensor) -> None:
        super().__init__()
        self.user_emb = nn.Parameter(user_emb)
        self.item_emb = nn.Parameter(item_emb)

    def forward(self, users: Tensor) -> Tensor:
        return self.user_emb[users] @ self.item_emb.T / DIM**0.5


def synthetic_catalogue(seed: int = 0) -> tuple[ToyRecommender, DataLoader]:
    """A model with noisy taste vectors, and batches of (user ids, relevant item ids)."""
    gen = torch.Generator().manual_seed(seed)
    users = torch.randn(USERS, DIM, generator=gen)
    items = torch.randn(ITEMS, DIM, generator=gen)
    # What each user actually interacted with: drawn from their true tastes.
    affinity = users @ items.T / DIM**0.5
    relevant = torch.multinomial(
        torch.softmax(2.0 * affinity, dim=1), RELEVANT_PER_USER, replacement=False, generator=gen
    )
    # The model only knows noisy estimates of the taste vectors.
    model = ToyRecommender(
        users + 0.7 * torch.randn(USERS, DIM, generator=gen),
        items + 0.7 * torch.randn(ITEMS, DIM, generator=gen),
    )
    batches = DataLoader(TensorDataset(torch.arange(USERS), relevant), batch_size=BATCH)
    return model, batches


def with_functional_api(model: ToyRecommender, batches: DataLoader) -> dict[str, float]:
    """Score every user, then one call ranks them all and computes every metric and k."""
    with torch.no_grad():
        scores = torch.cat([model(users) for users, _ in batches])
    relevant = torch.cat([ids for _, ids in batches])
    results = rank_metrics(scores, relevant, METRICS, top_k=CUTOFFS, **OPTIONS)
    return {key: value.item() for key, value in results.items()}


def with_ignite(model: ToyRecommender, batches: DataLoader) -> dict[str, float]:
    """An Ignite evaluator: the process function returns ``(y_pred, y)`` per batch."""
    from ignite.engine import Engine

    from ranking_plugins.ignite import RankingMetrics

    def score_batch(engine: Engine, batch: list[Tensor]) -> tuple[Tensor, Tensor]:
        users, relevant = batch
        with torch.no_grad():
            return model(users), relevant

    evaluator = Engine(score_batch)
    # One entry per metric and k lands in engine.state.metrics ("mrr@10", ...).
    RankingMetrics(METRICS, top_k=CUTOFFS, **OPTIONS).attach(evaluator, "ranking")
    return dict(evaluator.run(batches).metrics)


def with_lightning(model: ToyRecommender, batches: DataLoader) -> dict[str, float]:
    """``Trainer.validate`` with the callback, which logs ``val/<metric>@<k>``."""
    import lightning as L

    from ranking_plugins.lightning import RankingMetricsCallback

    class Recommender(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def validation_step(self, batch: list[Tensor], batch_idx: int) -> dict[str, Tensor]:
            users, relevant = batch
            return {"preds": self.model(users), "target": relevant}

    # Lightning's start-up banners and tips would bury the tour's output.
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="lightning")
    callback = RankingMetricsCallback(METRICS, top_k=CUTOFFS, **OPTIONS)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        callbacks=[callback],
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.validate(Recommender(), batches, verbose=False)
    prefix = "val/"
    return {
        name.removeprefix(prefix): value.item()
        for name, value in trainer.callback_metrics.items()
        if name.startswith(prefix)
    }


def print_side_by_side(results: dict[str, dict[str, float]]) -> float:
    """One row per metric and k, one column per entry point; returns the largest gap."""
    names = list(results)
    reference = results[names[0]]
    print(f"{'':<13}" + "".join(f"{name:>12}" for name in names))
    largest_gap = 0.0
    for key, value in reference.items():
        row = [results[name].get(key, float("nan")) for name in names]
        largest_gap = max([largest_gap, *(abs(v - value) for v in row)])
        print(f"{key:<13}" + "".join(f"{v:>12.4f}" for v in row))
    return largest_gap


def evaluate_sample_files() -> None:
    """Run the command on the sample TREC files shipped with the package."""
    data = files("ranking_plugins") / "data"
    qrels, run = str(data / "sample.qrels"), str(data / "sample.run")
    for ties in ("average", "first"):
        command = ["ranking-plugins", "evaluate", "sample.qrels", "sample.run"]
        options = ["-m", "ndcg@5", "-m", "mrr", "-m", "map", "--ties", ties]
        print("$ " + " ".join(command + options))
        completed = subprocess.run(
            [sys.executable, "-m", "ranking_plugins", "evaluate", qrels, run, *options],
            capture_output=True,
            text=True,
            check=False,
        )
        print(completed.stdout + completed.stderr)
        if completed.returncode != 0:
            raise SystemExit(f"the command failed with exit status {completed.returncode}")


def main() -> None:
    start = time.perf_counter()
    model, batches = synthetic_catalogue()
    print(
        f"{USERS} users x {ITEMS} items, {RELEVANT_PER_USER} relevant items per user, "
        f"scored in batches of {BATCH}.\nMean over users, ties={OPTIONS['ties']!r}.\n"
    )
    results = {
        "functional": with_functional_api(model, batches),
        "Ignite": with_ignite(model, batches),
        "Lightning": with_lightning(model, batches),
    }
    largest_gap = print_side_by_side(results)
    keys = [set(r) for r in results.values()]
    if largest_gap > 1e-12 or any(k != keys[0] for k in keys):
        raise SystemExit(f"the three entry points disagree (largest gap {largest_gap:.3g})")
    print(f"\nThe three agree on all {len(keys[0])} values (largest gap {largest_gap:.1g}).\n")

    print("The same kernel on files: the sample TREC qrels and run shipped with the package.")
    print("Some of the run's scores tie, so the tie policy changes the numbers.\n")
    evaluate_sample_files()
    print(f"Tour finished in {time.perf_counter() - start:.1f} s.")


if __name__ == "__main__":
    main()
