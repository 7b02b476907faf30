"""Rank a small synthetic catalogue and print its ranking metrics.

A seeded toy recommender: 200 users and 1000 items live in a shared 16-d taste
space. Each user interacted with a few items drawn from their true tastes; the
model scores every item with a noisy estimate of the same dot product. The
relevant items are given as item indices (the next-item recommendation layout),
one ``rank_metrics`` call computes every metric at every cutoff.

    python examples/quickstart.py
"""

from __future__ import annotations

import torch

from ranking_plugins import rank_metrics

USERS, ITEMS, DIM, RELEVANT_PER_USER = 200, 1000, 16, 5
CUTOFFS = (1, 5, 10, 20)
AT_K = ("hit_rate", "mrr", "ndcg", "map", "precision", "recall")
WHOLE_LIST = ("auc", "mean_rank")


def synthetic_catalogue(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores ``(USERS, ITEMS)`` and relevant item ids ``(USERS, RELEVANT_PER_USER)``."""
    gen = torch.Generator().manual_seed(seed)
    users = torch.randn(USERS, DIM, generator=gen)
    items = torch.randn(ITEMS, DIM, generator=gen)
    affinity = users @ items.T / DIM**0.5
    # What each user actually interacted with: drawn from their true tastes.
    relevant = torch.multinomial(
        torch.softmax(2.0 * affinity, dim=1), RELEVANT_PER_USER, replacement=False, generator=gen
    )
    # The model only sees a noisy estimate of the taste vectors.
    noisy_users = users + 0.7 * torch.randn(USERS, DIM, generator=gen)
    noisy_items = items + 0.7 * torch.randn(ITEMS, DIM, generator=gen)
    scores = noisy_users @ noisy_items.T / DIM**0.5
    return scores, relevant


def main() -> None:
    scores, relevant = synthetic_catalogue()
    results = rank_metrics(scores, relevant, metrics=AT_K + WHOLE_LIST, top_k=CUTOFFS)

    print(
        f"{USERS} users x {ITEMS} items, {RELEVANT_PER_USER} relevant items per user "
        f"(mean over users, ties='average')\n"
    )
    header = f"{'metric':<10}" + "".join(f"{'@' + str(k):>9}" for k in CUTOFFS)
    print(header)
    print("-" * len(header))
    for name in AT_K:
        row = "".join(f"{results[f'{name}@{k}'].item():>9.4f}" for k in CUTOFFS)
        print(f"{name:<10}{row}")
    print()
    print(f"{'auc':<10}{results['auc'].item():>9.4f}   (random ranking: 0.5)")
    random_rank = (ITEMS + 1) / 2
    print(f"{'mean_rank':<10}{results['mean_rank'].item():>9.1f}   (random ranking: {random_rank})")


if __name__ == "__main__":
    main()
