"""Scores given as embeddings: the score matrix described, walked in chunks, never built.

:class:`EmbeddingScores` is the user's description (the public name is
:class:`ranking_plugins.EmbeddingScores`, documented in
:mod:`ranking_plugins.embeddings`); :func:`embedding_stats` walks the
catalogue chunk by chunk through
:class:`~ranking_plugins.kernel.statistics.counting.RankCounter`, straight to
count statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.catalogue.checks import (
    check_embedding_targets,
    check_exclude,
    check_scoring,
)
from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.inputs.checks import check_judged_ids, item_ids_in_catalogue
from ranking_plugins.kernel.inputs.relevance import GainRule, ItemIds
from ranking_plugins.kernel.statistics.count_stats import CountStats
from ranking_plugins.kernel.statistics.counting import (
    RankCounter,
    counted_judged_stats,
    distinct_ids,
    tracked_ids,
)

ScoreFn = Callable[[Tensor, Tensor], Tensor]


def dot_scores(query_emb: Tensor, item_emb: Tensor) -> Tensor:
    """(Q, d) x (C, d) -> (Q, C) dot products, in the two embeddings' common dtype."""
    dtype = torch.promote_types(query_emb.dtype, item_emb.dtype)
    return query_emb.to(dtype) @ item_emb.to(dtype).T


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
    the last bit may order differently than in a one-matrix call. The relevant
    items' scores are found first, then every chunk is counted against them:
    on the CPU by a call of every query on the relevant items' own rows (or on
    the chunks that hold them), and where that call scored one otherwise than
    its chunk's call, the chunks are counted again against the chunk calls'
    scores; on an accelerator by a walk of whole chunk calls. A ``score_fn``
    whose scores change between two calls over the same items is an error (a
    ValueError) wherever values may be read on the host (the CPU, or
    ``validate_args=True``).
    """

    query_emb: Tensor
    item_emb: Tensor
    score_fn: ScoreFn | None = None
    exclude: Tensor | None = None
    chunk_size: int = 32768

    def __post_init__(self) -> None:
        _check_embedding_scores(self)

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

    def score_chunk(self, start: int, queries: Tensor | None = None) -> Tensor:
        """Scores (Q, C) of every query (or of the ``queries`` rows) against the chunk
        of items from ``start`` on."""
        return self.score(self.item_emb[start : start + self.chunk_size], queries)

    def score(self, items: Tensor, queries: Tensor | None = None) -> Tensor:
        """Scores (Q, C) of every query (or of the ``queries`` rows) against the item
        embeddings ``items`` (C, d), checked."""
        score_fn = self.score_fn or dot_scores
        query_emb = self.query_emb if queries is None else self.query_emb[queries]
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


#: a call on only the queries that list an item of a chunk scores at least this
#: many rows: BLAS libraries sum a product of very few rows in another order
#: (on one CPU, rows of 1, 2 and 7 queries differed from the whole call's in
#: 30-86% of their scores; 33 and more in none), and a difference costs a walk
QUERY_ROWS_AT_LEAST = 64

#: a call on the listed items' own rows scores at least this many items (or a
#: chunk's width): a product of fewer than 16 item rows took another path on
#: one CPU (1 to 8 rows differed from a 50,000-row call's sums in 90% of their
#: scores; 16 to 256 in none), and a difference costs a walk
ITEM_ROWS_AT_LEAST = 64


def _check_embedding_scores(scores: EmbeddingScores) -> None:
    """What :class:`~ranking_plugins.EmbeddingScores` checks when it is made (no value read)."""
    check_scoring(
        scores.query_emb, scores.item_emb, "item_emb", "N", scores.score_fn, scores.chunk_size
    )
    check_exclude(scores.exclude, scores.query_emb.shape[0])
    validation.check_same_device(
        query_emb=scores.query_emb, item_emb=scores.item_emb, exclude=scores.exclude
    )


def check_embedding_ids(
    scores: EmbeddingScores, target: object, judged: object, validate_args: bool
) -> tuple[EmbeddingScores, Tensor, Tensor | None]:
    """``scores`` (its ``exclude`` in range), ``target`` (Q, T) and ``judged`` (Q, J), checked.

    Every id outside the catalogue is an error (``validate_args``) or padding
    (:func:`item_ids_in_catalogue`), before any is read.
    """
    target = check_embedding_targets(target, scores.query_emb)
    target = item_ids_in_catalogue("target", target, scores.num_items, validate_args)
    if judged is not None:
        judged = validation.check_tensor("judged", judged).detach()
        validation.check_same_device(query_emb=scores.query_emb, judged=judged)
        judged = check_judged_ids(judged, scores.num_queries, scores.num_items, validate_args)
    if scores.exclude is not None:
        exclude = scores.exclude.detach().to(torch.int64)
        exclude = item_ids_in_catalogue("exclude", exclude, scores.num_items, validate_args)
        if not validate_args:
            scores = replace(scores, exclude=exclude)
    return scores, target, judged


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
    """Rank statistics of the whole catalogue for item-index ``target`` (Q, T).

    ``target`` and ``judged`` as :func:`check_embedding_ids`
    gives them, with ``scores``: checked, every id in the catalogue or padding.

    ``judgments``: also count the judged items (``judged``: their ids
    (Q, J), -1 padding; None: every item) for the measures that read them
    (:class:`~ranking_plugins.kernel.statistics.judged.CountedJudgedStats`), in
    the same walk.

    On the CPU, each relevant item's score from the cheaper of a call of every
    query on the relevant items' own rows, or calls on the chunks that hold
    one for only the queries that list one (:func:`_cheapest_listed_scores`);
    then one walk counts every chunk against those scores and records the
    scores the whole chunk calls gave them. Where a call gave another score
    than the chunk's (a matrix product that sums otherwise, a ``score_fn``
    that reads the batch), the walk is made again against the recorded
    scores. On an accelerator, a walk of whole chunk calls reads the relevant
    items' scores and a second counts. So the counts describe one score
    matrix, the chunk calls' (see :class:`EmbeddingScores`), with no score
    taken from another call.
    """
    num_items = scores.num_items
    if validate_args:
        validation.check_values(scores.query_emb, None, None, num_items)
    with torch.no_grad():
        # ItemIds applies the relevance threshold (grade 1 for every listed id)
        relevance = ItemIds(target, num_items, rule, judged)
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
        if not host_reads_are_free(ids):
            # on an accelerator no value is read per chunk: both walks score every chunk
            # whole (skipping a chunk that lists no item would read a flag per chunk), and
            # with validate_args the NaN flags and the two walks' agreement are read once
            # at the end: each read waits for the device (benchmarks/profile_gpu.py)
            counters = _count(scores, listed, ties, validate_args)
            if validate_args:
                _check_same_scores(counters)
            return _stats(counters, ids, relevance, ties)
        # on the CPU, the listed items' scores from the cheaper of: calls of every query on
        # the listed items' own rows (a fraction of a walk when they are few), or calls on
        # only the queries that list an item of each chunk. Where such a call scored one
        # otherwise than its chunk's call (a `score_fn` that reads the batch, a matmul that
        # sums otherwise), counted again against the scores the counting walk's own calls
        # gave (recorded by the counters). On a GPU the whole call costs less than picking
        # the rows (benchmarks/profile_gpu.py)
        given = _cheapest_listed_scores(scores, listed)
        counters = _count(scores, listed, ties, validate_args, given=given)
        if bool(_changed(counters).any()):
            recorded = [each.block_score for each in counters]
            counters = _count(scores, listed, ties, validate_args, given=recorded)
        _check_same_scores(counters)
        return _stats(counters, ids, relevance, ties)


def _count(
    scores: EmbeddingScores,
    listed: list[Tensor],
    ties: str,
    validate_args: bool,
    given: list[Tensor] | None = None,
) -> list[RankCounter]:
    """One counter per list of ids, every chunk counted against the listed items' scores.

    ``given``: those scores, one (Q, T) per list; None: found by a walk that scores
    every chunk whole (:func:`listed_scores`, no host read).
    """
    if given is None:
        given = [listed_scores(scores, each, skip_unlisted=False) for each in listed]
    counters = [
        RankCounter(each, score, scores.num_items, ties, exclude=scores.exclude)
        for each, score in zip(listed, given, strict=True)
    ]
    nan_seen: Tensor | None = None  # every chunk's flag, read once after the walk
    for start in scores.chunks():
        block = scores.score_chunk(start)
        flag = validation.nan_flag(block) if validate_args else None
        if flag is not None:
            nan_seen = flag if nan_seen is None else nan_seen | flag
        for each in counters:
            each.add(block, start)
        del block  # freed before the next chunk is scored
    if nan_seen is not None and bool(nan_seen):
        raise ValueError("`score_fn` gave NaN scores")
    return counters


def _check_same_scores(counters: list[RankCounter]) -> None:
    """Raise if the counting walk's calls scored a listed item otherwise than the first walk's."""
    if bool(_changed(counters).any()):
        raise ValueError(
            "`score_fn` gave different scores to the same (query, item) pairs in two "
            "calls over the same items; EmbeddingScores needs a deterministic "
            "`score_fn` (see torch.use_deterministic_algorithms)"
        )


def _changed(counters: list[RankCounter]) -> Tensor:
    """(Q,) bool: rows whose counts were made against a score the chunk calls did not give."""
    return torch.stack([each.changed_rows() for each in counters]).any(dim=0)


def _stats(counters: list[RankCounter], ids: Tensor, relevance: ItemIds, ties: str) -> CountStats:
    """The counted statistics; with a second counter, of the judged items too."""
    stats = counters[0].stats()
    if len(counters) > 1:
        stats.judged_stats = counted_judged_stats(counters[1], ids, relevance, ties, stats)
    return stats


def _cheapest_listed_scores(scores: EmbeddingScores, listed: list[Tensor]) -> list[Tensor]:
    """The score of each listed id (one (Q, T) per list), from whichever calls score
    fewer (query, item) pairs (reads on the host: the CPU's path).

    Calls of every query on the listed items' rows (:func:`_called_scores`) score
    Q x (distinct listed ids) pairs; the walk over the chunks that hold a listed
    id (:func:`listed_scores`), on only the queries that list one of the chunk's
    (at least :data:`QUERY_ROWS_AT_LEAST`) when there are many queries, scores
    those rows times the chunk's width. Either may round a score otherwise than
    the chunk's own call: the caller checks (:meth:`RankCounter.changed_rows`).
    """
    flat = torch.cat([each.flatten() for each in listed])
    flat = flat[flat >= 0]
    distinct = flat.unique()
    if distinct.numel() == 0:  # no listed id at all: any values (of the scores' dtype)
        return [listed_scores(scores, each, skip_unlisted=True) for each in listed]
    num_queries, size = scores.num_queries, scores.chunk_size
    by_rows = num_queries >= 4 * QUERY_ROWS_AT_LEAST
    # the walk's pairs: per chunk holding a listed id, the queries that list one (or all)
    rows = torch.arange(num_queries, device=flat.device)
    chunk_count = len(scores.chunks())
    query_of = torch.cat([rows.unsqueeze(1).expand_as(each)[each >= 0] for each in listed])
    pairs = (query_of * chunk_count + flat // size).unique()
    per_chunk = torch.bincount(pairs % chunk_count, minlength=chunk_count)
    widths = (scores.num_items - torch.arange(chunk_count, device=flat.device) * size).clamp(
        max=size
    )
    walked_rows = (
        per_chunk.clamp(min=QUERY_ROWS_AT_LEAST, max=num_queries)
        if by_rows
        else torch.full_like(per_chunk, num_queries)
    )
    walk_pairs = int((torch.where(per_chunk > 0, walked_rows, 0) * widths).sum())
    called = max(distinct.numel(), min(ITEM_ROWS_AT_LEAST, size, scores.num_items))
    if num_queries * called <= walk_pairs:
        return _called_scores(scores, listed, distinct)
    return [listed_scores(scores, each, skip_unlisted=True, query_rows=by_rows) for each in listed]


def _called_scores(scores: EmbeddingScores, listed: list[Tensor], distinct: Tensor) -> list[Tensor]:
    """The score of each listed id (one (Q, T) per list, -1: any value) from calls of
    every query on the rows of the ``distinct`` listed ids (sorted), at most a chunk's
    width at a time.

    A call of every query on a few item rows is a fraction of a walk's work;
    its scores are those of the chunks' calls where ``score_fn`` scores each pair
    alone and the matrix product sums each pair's terms in the same order for
    any number of items, which the caller checks.
    """
    at = [torch.searchsorted(distinct, each.clamp(min=0)) for each in listed]
    found: list[Tensor | None] = [None] * len(listed)
    for low in range(0, distinct.numel(), scores.chunk_size):
        piece = distinct[low : low + scores.chunk_size]
        # a few items called with more (any: each pair is scored alone), so that the
        # product takes the path of a chunk's call
        fewer = min(ITEM_ROWS_AT_LEAST, scores.chunk_size, scores.num_items) - piece.numel()
        rows = piece
        if fewer > 0:
            rows = torch.cat([piece, torch.arange(fewer, device=piece.device)])
        block = scores.score(scores.item_emb[rows])
        for i, each in enumerate(listed):
            inside = (each >= 0) & (at[i] >= low) & (at[i] < low + piece.numel())
            value = block.gather(1, (at[i] - low).clamp(0, piece.numel() - 1))
            previous = found[i]
            if previous is None:
                previous = torch.zeros(each.shape, dtype=value.dtype, device=value.device)
            dtype = torch.promote_types(previous.dtype, value.dtype)
            found[i] = torch.where(inside, value.to(dtype), previous.to(dtype))
        del block  # one call's scores alive at a time
    scored = [each for each in found if each is not None]
    assert len(scored) == len(listed)  # every list met the first call
    return scored


def listed_scores(
    scores: EmbeddingScores, ids: Tensor, skip_unlisted: bool, query_rows: bool = False
) -> Tensor:
    """The score of each listed id (Q, T) as its own chunk's call gives it (-1: any value).

    ``ids`` in [0, N) or -1 (:func:`~ranking_plugins.kernel.inputs.checks.item_ids_in_catalogue`):
    the clamp only keeps in bounds the gather of a chunk that does not hold the id,
    whose value is then discarded (or, for padding, any value).

    ``skip_unlisted``: a chunk that holds no listed id is not scored (that reads
    a flag on the host per chunk, so only on the CPU).
    ``query_rows`` (with ``skip_unlisted``): only the queries that list an item of
    the chunk are scored, by a call of their own; the caller checks that the
    whole chunk's call gave the same scores (:meth:`RankCounter.changed_rows`).
    """
    found: Tensor | None = None
    for start in scores.chunks():
        inside = (ids >= start) & (ids < start + scores.chunk_size)
        if skip_unlisted and found is not None and not bool(inside.any()):
            continue
        if query_rows:
            holds = inside.any(dim=1)
            rows = holds.nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            if rows.numel() < QUERY_ROWS_AT_LEAST:
                # a matmul of very few rows takes another path, which sums otherwise
                more = (~holds).nonzero().squeeze(1)[: QUERY_ROWS_AT_LEAST - rows.numel()]
                rows = torch.cat([rows, more]).sort().values
            block = scores.score_chunk(start, rows)
            at = ids[rows]
        else:
            rows, block, at = None, scores.score_chunk(start), ids
        value = block.gather(1, (at - start).clamp(0, block.shape[1] - 1))
        del block  # one chunk's scores alive at a time: freed before the next is made
        if found is None:
            found = torch.zeros(ids.shape, dtype=value.dtype, device=value.device)
        dtype = torch.promote_types(found.dtype, value.dtype)
        found = found.to(dtype)
        if rows is None:
            found = torch.where(inside, value.to(dtype), found)
        else:
            found[rows] = torch.where(inside[rows], value.to(dtype), found[rows])
    if found is None:  # no listed id at all (every one padding): any values
        return listed_scores(scores, ids, skip_unlisted=True)
    return found


__all__ = [
    "EmbeddingScores",
    "ScoreFn",
    "dot_scores",
    "embedding_stats",
    "listed_scores",
]
