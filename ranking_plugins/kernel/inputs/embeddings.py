"""Scores given as embeddings: the score matrix described, walked in chunks, never built.

:class:`EmbeddingScores` is the user's description (the public name is
:class:`ranking_plugins.EmbeddingScores`, documented in
:mod:`ranking_plugins.embeddings`); :func:`embedding_stats` walks the
catalogue chunk by chunk through
:class:`~ranking_plugins.kernel.ranking.counting.RankCounter`, straight to
count statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ranking_plugins import _validation as V
from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.inputs.relevance import GainRule, ItemIds
from ranking_plugins.kernel.ranking.counting import (
    RankCounter,
    counted_judged_stats,
    distinct_ids,
    tracked_ids,
)
from ranking_plugins.kernel.statistics.count_stats import CountStats

ScoreFn = Callable[[Tensor, Tensor], Tensor]


def dot_scores(query_emb: Tensor, item_emb: Tensor) -> Tensor:
    """(Q, d) x (C, d) -> (Q, C) dot products, in the two embeddings' common dtype."""
    dtype = torch.promote_types(query_emb.dtype, item_emb.dtype)
    return query_emb.to(dtype) @ item_emb.to(dtype).T


def check_dot_product(query_emb: Tensor, item_emb: Tensor, item_name: str = "item_emb") -> None:
    """What the default dot product needs: real embeddings of one width."""
    for name, emb in (("query_emb", query_emb), (item_name, item_emb)):
        if emb.dtype == torch.bool or emb.is_complex():
            raise TypeError(
                f"`{name}` must hold real numbers (a floating point or integer dtype) "
                f"for dot-product scores, got {emb.dtype}; pass a `score_fn` for "
                "other embeddings"
            )
        if not emb.is_floating_point() and emb.device.type != "cpu":
            raise TypeError(
                f"`{name}`: torch multiplies integer matrices on the CPU only, got "
                f"{emb.dtype} on {emb.device}; convert the embeddings to a floating "
                "point dtype (exact while the dot products stay below 2^24 in "
                "float32, 2^53 in float64) or pass a `score_fn`"
            )
    if query_emb.shape[1] != item_emb.shape[1]:
        raise ValueError(
            f"`query_emb` and `{item_name}` must have the same width d for dot-product "
            f"scores, got {query_emb.shape[1]} and {item_emb.shape[1]}"
        )


def check_exclude(exclude: Tensor | None, num_queries: int) -> None:
    """``exclude``: None, or (Q, X) integer item ids for ``num_queries`` queries."""
    if exclude is None:
        return
    exclude = V.check_tensor("exclude", exclude)
    if not V.is_integer_dtype(exclude.dtype):
        raise TypeError(f"`exclude` must hold integer item ids, got {exclude.dtype}")
    if exclude.ndim != 2 or exclude.shape[0] != num_queries:
        raise ValueError(
            f"`exclude` must be (Q, X) item ids with Q = {num_queries}, "
            f"got shape {tuple(exclude.shape)}"
        )


@dataclass(frozen=True, eq=False)
class EmbeddingScores:
    """The score matrix ``score_fn(query_emb, item_emb)``, (Q, N), described not built.

    Args:
        query_emb: (Q, d) one row per query (user, session, ...).
        item_emb: (N, d) one row per item of the catalogue.
        score_fn: ``(query_emb (Q, d), items (C, d)) -> (Q, C)`` real scores (a
            floating point or integer dtype, on the embeddings' device), higher
            first; the dot product by default (:func:`dot_scores`, in the common
            dtype of the two embeddings, which must then be real numbers). Called
            on chunks of items, so it must score each (query, item) pair
            independently of the other items, and give the same scores when
            called twice on the same items.
        exclude: (Q, X) ids of items that are not ranked for each query (already
            seen, ...), ``-1`` for padding. A relevant excluded item still counts in
            R, as a masked item does.
        chunk_size: items scored at once; memory grows as Q x chunk_size.

    Which scores the numbers are exactly those of: the matrix of the chunk calls,
    ``torch.cat([score_fn(query_emb, item_emb[i : i + chunk_size]) for i in
    range(0, N, chunk_size)], dim=1)``, in ``score_fn``'s own dtype. Every item,
    relevant or not, is ranked by the one score its chunk's call gave it (the
    relevant items' scores are read from those calls, never computed apart), so
    every metric, at every k and under every tie policy, is what
    :func:`~ranking_plugins.rank_metrics` gives on that matrix. It is
    ``score_fn(query_emb, item_emb)`` itself when ``chunk_size >= N`` (one call),
    and for any ``chunk_size`` when ``score_fn`` gives a pair the same score in
    calls of any shape, as exact arithmetic does (integer embeddings, or dot
    products that are exact in the dtype). A matrix product of real-valued
    embeddings is not always such a function: BLAS libraries (MKL, cuBLAS) may
    round a pair's score differently in calls of different shapes, even two
    identical item rows within one call, so scores that tie or differ only in
    the last bit may order differently than in a one-matrix call. A chunk that
    holds a relevant item is scored twice (the relevant items' scores first,
    then the counts); a ``score_fn`` whose scores change between the two calls
    is an error (a ValueError) wherever values may be read on the host (the
    CPU, or ``validate_args=True``).
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
        if self.score_fn is None:
            check_dot_product(query_emb, item_emb)
        if self.score_fn is not None and not callable(self.score_fn):
            raise TypeError(f"`score_fn` must be callable, got {type(self.score_fn).__name__}")
        V.check("chunk_size", V.positive_int_problem(self.chunk_size))
        check_exclude(self.exclude, query_emb.shape[0])
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

    def chunks(self) -> range:
        """The first item of each chunk of the catalogue."""
        return range(0, self.num_items, self.chunk_size)

    def score_chunk(self, start: int) -> Tensor:
        """Scores (Q, C) of every query against the chunk of items from ``start`` on."""
        return self.score(self.item_emb[start : start + self.chunk_size])

    def score(self, items: Tensor) -> Tensor:
        """Scores (Q, C) of every query against the item embeddings ``items`` (C, d), checked."""
        score_fn = self.score_fn or dot_scores
        query_emb = self.query_emb
        block = score_fn(query_emb, items)
        expected = (query_emb.shape[0], items.shape[0])
        if not isinstance(block, Tensor) or tuple(block.shape) != expected:
            got = tuple(block.shape) if isinstance(block, Tensor) else type(block).__name__
            raise ValueError(f"`score_fn` must return scores of shape {expected}, got {got}")
        if block.is_nested or block.layout != torch.strided:
            raise TypeError(
                f"`score_fn` must return a dense (strided) tensor, got layout {block.layout}"
            )
        if block.dtype == torch.bool or block.is_complex():
            raise TypeError(
                "`score_fn` must return real scores (a floating point or integer dtype), "
                f"got {block.dtype}"
            )
        if block.device != query_emb.device:
            raise ValueError(
                f"`score_fn` must return scores on the embeddings' device {query_emb.device}, "
                f"got {block.device}"
            )
        return block


def embedding_stats(
    scores: EmbeddingScores,
    target: Tensor,
    *,
    ties: str,
    rule: GainRule,
    validate_args: bool,
    judged: Tensor | None = None,
    judgments: bool = False,
) -> CountStats:
    """Rank statistics of the whole catalogue for item-index ``target`` (Q,) or (Q, T).

    ``judgments`` (issue 13): also count the judged items (``judged``: their ids
    (Q, J), -1 padding; None: every item) for the measures that read them
    (:class:`~ranking_plugins.kernel.statistics.judged.CountedJudgedStats`), in
    the same walk.

    Two walks over the catalogue: the first reads each relevant item's score
    from its own chunk's call (scoring only the chunks that hold one, where a
    flag may be read on the host), the second counts every chunk against those
    scores. So the counts describe one score matrix, the chunk calls' (see
    :class:`EmbeddingScores`), with no score computed apart.
    """
    target = item_targets(target, scores.query_emb)
    num_items = scores.num_items
    if validate_args:
        V.check_values(scores.query_emb, None, target, num_items)
        if scores.exclude is not None:
            V.check_item_ids("exclude", scores.exclude, num_items)
    with torch.no_grad():
        # ItemIds applies the relevance threshold (grade 1 for every listed id)
        relevance = ItemIds(target.to(torch.int64), num_items, rule, judged)
        ids = distinct_ids(relevance.item_ids)
        # judged measures: the judged (or relevant) items counted too, in the same walk;
        # without `judged` every item is judged and the relevant items' counts serve
        listed = (
            [ids, tracked_ids(relevance, judged)] if judgments and judged is not None else [ids]
        )
        if scores.num_queries == 0 or num_items == 0:
            # nothing to score: no query, or no item (then every listed id is padding)
            counters = [
                RankCounter(
                    each,
                    torch.zeros(each.shape, dtype=torch.float64, device=each.device),
                    num_items,
                    ties,
                    exclude=scores.exclude,
                )
                for each in listed
            ]
            return _stats(counters, ids, relevance, ties)
        may_read = host_reads_are_free(ids) or validate_args
        counters = [
            RankCounter(
                each,
                listed_scores(scores, each, skip_unlisted=may_read),
                num_items,
                ties,
                exclude=scores.exclude,
            )
            for each in listed
        ]
        for start in scores.chunks():
            block = scores.score_chunk(start)
            if validate_args and V.has_nan(block):
                raise ValueError("`score_fn` gave NaN scores")
            for each in counters:
                each.add(block, start)
            del block  # freed before the next chunk is scored
        if may_read:
            changed = torch.stack([each.changed_rows() for each in counters]).any(dim=0)
            if bool(changed.any()):
                raise ValueError(
                    "`score_fn` gave different scores to the same (query, item) pairs in two "
                    "calls over the same items; EmbeddingScores needs a deterministic "
                    "`score_fn` (see torch.use_deterministic_algorithms)"
                )
        return _stats(counters, ids, relevance, ties)


def _stats(counters: list[RankCounter], ids: Tensor, relevance: ItemIds, ties: str) -> CountStats:
    """The counted statistics; with a second counter, of the judged items too (issue 13)."""
    stats = counters[0].stats()
    if len(counters) > 1:
        stats.judged_stats = counted_judged_stats(counters[1], ids, relevance, ties, stats)
    return stats


def item_targets(target: Tensor, query_emb: Tensor) -> Tensor:
    """``target``, item ids (Q,) or (Q, T) for the Q rows of ``query_emb``, checked, as (Q, T)."""
    target = V.check_tensor("target", target).detach()
    if not V.is_integer_dtype(target.dtype):
        raise TypeError(
            "with EmbeddingScores, `target` must be integer item ids (Q,) or (Q, T) "
            f"(-1 for padding), got dtype {target.dtype}"
        )
    if target.ndim == 1:
        target = target.unsqueeze(1)
    num_queries = query_emb.shape[0]
    if target.ndim != 2 or target.shape[0] != num_queries:
        raise ValueError(
            f"item-index `target` must be (Q,) or (Q, T) with Q = {num_queries} "
            f"queries, got shape {tuple(target.shape)}"
        )
    V.check_same_device(query_emb=query_emb, target=target)
    return target


def listed_scores(scores: EmbeddingScores, ids: Tensor, skip_unlisted: bool) -> Tensor:
    """The score of each listed id (Q, T) as its own chunk's call gives it (-1: any value).

    ``skip_unlisted``: a chunk that holds no listed id is not scored (that reads
    a flag on the host, so on an accelerator only when ``validate_args=True``).
    """
    found: Tensor | None = None
    for start in scores.chunks():
        inside = (ids >= start) & (ids < start + scores.chunk_size)
        if skip_unlisted and found is not None and not bool(inside.any()):
            continue
        block = scores.score_chunk(start)
        value = block.gather(1, (ids - start).clamp(0, block.shape[1] - 1))
        del block  # one chunk's scores alive at a time: freed before the next is made
        if found is None:
            found = value
        else:
            dtype = torch.promote_types(found.dtype, value.dtype)
            found = torch.where(inside, value.to(dtype), found.to(dtype))
    assert found is not None  # at least one chunk
    return found


__all__ = [
    "EmbeddingScores",
    "ScoreFn",
    "check_dot_product",
    "check_exclude",
    "dot_scores",
    "embedding_stats",
    "item_targets",
    "listed_scores",
]
