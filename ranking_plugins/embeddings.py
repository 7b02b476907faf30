"""Full-catalogue evaluation from embeddings, without the (Q, N) score matrix.

Recommenders score every user against every item; for a catalogue of a
million items the score matrix does not fit. :class:`EmbeddingScores`
describes that matrix instead of holding it: query embeddings, item
embeddings and a score function (dot product by default). Pass it wherever
``preds`` goes (:func:`ranking_plugins.rank_metrics`, every adapter's
``update``), with item-index targets; the kernel walks the catalogue in
chunks of ``chunk_size`` items and counts, for each relevant item, the items
scored above it and tied with it (:mod:`ranking_plugins.kernel.statistics.counting`).
Every metric, at every k, under every tie policy, is what the matrix of those
chunk calls gives, every item ranked by the one score its chunk gave it; see
:class:`EmbeddingScores` for when that is the one-call matrix to the last bit.

>>> import torch
>>> from ranking_plugins import EmbeddingScores, rank_metrics
>>> users = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
>>> items = torch.tensor([[3.0, 0.0], [1.0, 1.0], [0.0, 2.0], [2.0, 2.0]])
>>> scores = EmbeddingScores(users, items, chunk_size=2)
>>> rank_metrics(scores, torch.tensor([1, 2]), ["mrr", "hit_rate"], top_k=2)
{'mrr@2': tensor(0.3750, dtype=torch.float64), 'hit_rate@2': tensor(0.5000, dtype=torch.float64)}

Already-seen items are left out of the ranking with ``exclude`` (item ids per
query, ``-1``-padded), as a ``mask`` would on a dense matrix:

>>> seen = torch.tensor([[0, -1], [3, -1]])
>>> rank_metrics(EmbeddingScores(users, items, exclude=seen), torch.tensor([1, 2]), "mrr", 2)
{'mrr@2': tensor(0.7500, dtype=torch.float64)}

An item table sharded across processes (one shard per process of a
``torch.distributed`` group) is described by
:class:`ShardedEmbeddingScores`, with the same exact numbers; see
:doc:`/sharded`.
"""

from ranking_plugins.kernel import (
    EmbeddingScores,
    ScoreFn,
    ShardedEmbeddingScores,
    ShardError,
    dot_scores,
)

#: scores described by embeddings, whole or sharded: what ``preds`` may be besides a tensor
EmbeddingInput = EmbeddingScores | ShardedEmbeddingScores

__all__ = [
    "EmbeddingInput",
    "EmbeddingScores",
    "ScoreFn",
    "ShardError",
    "ShardedEmbeddingScores",
    "dot_scores",
]
