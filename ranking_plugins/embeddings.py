"""Full-catalogue evaluation from embeddings, without the (Q, N) score matrix.

Recommenders score every user against every item; for a catalogue of a
million items the score matrix does not fit. :class:`EmbeddingScores`
describes that matrix instead of holding it: query embeddings, item
embeddings and a score function (dot product by default). Pass it wherever
``preds`` goes (:func:`ranking_plugins.rank_metrics`, every adapter's
``update``), with item-index targets; the kernel walks the catalogue in
chunks of ``chunk_size`` items and counts, for each relevant item, the items
scored above it and tied with it (:mod:`ranking_plugins.rank_counts`). Every
metric, at every k, under every tie policy, is what the full matrix would give.

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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral

import torch
from torch import Tensor

from ranking_plugins import _validation as V
from ranking_plugins.kernel import GainRule, ItemIds
from ranking_plugins.rank_counts import CountStats, RankCounter, distinct_ids

ScoreFn = Callable[[Tensor, Tensor], Tensor]


def dot_scores(query_emb: Tensor, item_emb: Tensor) -> Tensor:
    """(Q, d) x (C, d) -> (Q, C) dot products."""
    return query_emb @ item_emb.T


@dataclass(frozen=True, eq=False)
class EmbeddingScores:
    """The score matrix ``score_fn(query_emb, item_emb)``, (Q, N), described not built.

    Args:
        query_emb: (Q, d) one row per query (user, session, ...).
        item_emb: (N, d) one row per item of the catalogue.
        score_fn: ``(query_emb (Q, d), items (C, d)) -> (Q, C)`` scores, higher first;
            the dot product by default. Called on chunks of items, so it must score
            each (query, item) pair independently of the other items.
        exclude: (Q, X) ids of items that are not ranked for each query (already
            seen, ...), ``-1`` for padding. A relevant excluded item still counts in
            R, as a masked item does.
        chunk_size: items scored at once; memory grows as Q x chunk_size.
    """

    query_emb: Tensor
    item_emb: Tensor
    score_fn: ScoreFn | None = None
    exclude: Tensor | None = None
    chunk_size: int = 32768

    def __post_init__(self) -> None:
        query_emb = V.check_tensor("query_emb", self.query_emb)
        item_emb = V.check_tensor("item_emb", self.item_emb)
        if query_emb.ndim != 2 or item_emb.ndim != 2:
            raise ValueError(
                "`query_emb` must be (Q, d) and `item_emb` (N, d), got shapes "
                f"{tuple(query_emb.shape)} and {tuple(item_emb.shape)}"
            )
        if self.score_fn is None and query_emb.shape[1] != item_emb.shape[1]:
            raise ValueError(
                "`query_emb` and `item_emb` must have the same width d for dot-product "
                f"scores, got {query_emb.shape[1]} and {item_emb.shape[1]}"
            )
        if self.score_fn is not None and not callable(self.score_fn):
            raise TypeError(f"`score_fn` must be callable, got {type(self.score_fn).__name__}")
        if isinstance(self.chunk_size, bool) or not isinstance(self.chunk_size, Integral):
            raise TypeError(f"`chunk_size` must be a positive int, got {self.chunk_size!r}")
        if self.chunk_size <= 0:
            raise ValueError(f"`chunk_size` must be a positive int, got {self.chunk_size}")
        if self.exclude is not None:
            exclude = V.check_tensor("exclude", self.exclude)
            if not V.is_integer_dtype(exclude.dtype):
                raise TypeError(f"`exclude` must hold integer item ids, got {exclude.dtype}")
            if exclude.ndim != 2 or exclude.shape[0] != query_emb.shape[0]:
                raise ValueError(
                    f"`exclude` must be (Q, X) item ids with Q = {query_emb.shape[0]}, "
                    f"got shape {tuple(exclude.shape)}"
                )
        V.check_same_device(query_emb=query_emb, item_emb=item_emb, exclude=self.exclude)

    @property
    def num_queries(self) -> int:
        return self.query_emb.shape[0]

    @property
    def num_items(self) -> int:
        return self.item_emb.shape[0]

    @property
    def device(self) -> torch.device:
        return self.query_emb.device

    def tensors(self) -> tuple[Tensor, ...]:
        """The tensors the scores depend on (to tell whether they changed)."""
        found = (self.query_emb, self.item_emb, self.exclude)
        return tuple(t for t in found if t is not None)

    def score(self, items: Tensor, queries: slice = slice(None)) -> Tensor:
        """Scores of ``queries`` against the item embeddings ``items`` (C, d)."""
        score_fn = self.score_fn or dot_scores
        block = score_fn(self.query_emb[queries], items)
        expected = (self.query_emb[queries].shape[0], items.shape[0])
        if not isinstance(block, Tensor) or tuple(block.shape) != expected:
            got = tuple(block.shape) if isinstance(block, Tensor) else type(block).__name__
            raise ValueError(f"`score_fn` must return scores of shape {expected}, got {got}")
        return block

    def relevant_scores(self, ids: Tensor) -> Tensor:
        """Scores of each query's listed items (Q, T), by the same ``score_fn``.

        Queries are scored in blocks against the items listed by that block, so
        the scores come from the same kind of call as the catalogue chunks.
        """
        num_queries, width = ids.shape
        out = torch.empty(ids.shape, dtype=self.query_emb.dtype, device=ids.device)
        rows = 256
        for low in range(0, num_queries, rows):
            block_ids = ids[low : low + rows].clamp(min=0)
            n = block_ids.shape[0]
            scores = self.score(self.item_emb[block_ids.reshape(-1)], slice(low, low + n))
            own = torch.arange(n, device=ids.device).unsqueeze(1) * width + torch.arange(
                width, device=ids.device
            )
            out[low : low + n] = scores.gather(1, own).to(out.dtype)
        return out


def embedding_stats(
    scores: EmbeddingScores,
    target: Tensor,
    *,
    ties: str,
    rule: GainRule,
    validate_args: bool,
) -> CountStats:
    """Rank statistics of the whole catalogue for item-index ``target`` (Q,) or (Q, T)."""
    target = V.check_tensor("target", target).detach()
    if not V.is_integer_dtype(target.dtype):
        raise TypeError(
            "with EmbeddingScores, `target` must be integer item ids (Q,) or (Q, T) "
            f"(-1 for padding), got dtype {target.dtype}"
        )
    if target.ndim == 1:
        target = target.unsqueeze(1)
    if target.ndim != 2 or target.shape[0] != scores.num_queries:
        raise ValueError(
            f"item-index `target` must be (Q,) or (Q, T) with Q = {scores.num_queries} "
            f"queries, got shape {tuple(target.shape)}"
        )
    V.check_same_device(query_emb=scores.query_emb, target=target)
    num_items = scores.num_items
    if validate_args:
        V.check_values(scores.query_emb, None, target, num_items)
        if scores.exclude is not None:
            V.check_item_ids("exclude", scores.exclude, num_items)
    with torch.no_grad():
        # ItemIds applies the relevance threshold (grade 1 for every listed id)
        ids = distinct_ids(ItemIds(target.to(torch.int64), num_items, rule).item_ids)
        relevant_scores = (
            scores.relevant_scores(ids)
            if num_items
            else torch.zeros(ids.shape, dtype=scores.query_emb.dtype, device=ids.device)
        )
        counter = RankCounter(ids, relevant_scores, num_items, ties, exclude=scores.exclude)
        for start in range(0, num_items, scores.chunk_size):
            items = scores.item_emb[start : start + scores.chunk_size]
            block = scores.score(items)
            if validate_args and block.is_floating_point() and bool(block.amax().isnan()):
                raise ValueError("`score_fn` gave NaN scores")
            counter.add(block, start)
        return counter.stats()


__all__ = ["EmbeddingScores", "ScoreFn", "dot_scores", "embedding_stats"]
