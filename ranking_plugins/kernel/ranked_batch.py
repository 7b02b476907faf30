"""A batch's rank statistics, part by part: the way from a :class:`Batch` to statistics.

:func:`rank_batch` ranks each part of a batch once, the cheaper way
(:func:`ranking_method`): by counting for item-index targets when that is
cheaper, by selection and tie groups otherwise; whole rows that are sorted are
ranked in blocks of rows, each when it is read (:class:`Unranked`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.flags import count_true
from ranking_plugins.kernel.inputs.parts import Batch, RankingInput
from ranking_plugins.kernel.inputs.relevance import ItemIds
from ranking_plugins.kernel.ranking.selection import rank
from ranking_plugins.kernel.statistics.counting import count_ranks
from ranking_plugins.kernel.statistics.first_hits import FirstHitStats, first_hits_apply
from ranking_plugins.kernel.statistics.list_stats import ListStats
from ranking_plugins.kernel.statistics.rank_stats import RankStats

#: item-index targets with at most this many ids per query are ranked by counting
#: (two comparisons per id and item); with more, one top-k selection is cheaper
COUNT_TARGETS_MAX = 1


def ranking_method(
    data: RankingInput, depth: int | None, ties: str = "average", first_hits: bool = False
) -> str:
    """``"count"``, ``"rank"`` or ``"first_hits"``: the cheaper way to the statistics
    (see :func:`rank_stats`); ``first_hits``: the metrics read the first hits alone."""
    if first_hits and first_hits_apply(data, ties, depth):
        return "first_hits"
    relevance = data.relevance
    if not isinstance(relevance, ItemIds):
        return "rank"
    few_ids = relevance.item_ids.shape[1] <= COUNT_TARGETS_MAX
    return "count" if depth is None or few_ids else "rank"


def rank_stats(
    data: RankingInput,
    ties: str,
    depth: int | None,
    method: str | None = None,
    identities: bool = False,
    judgments: bool = False,
) -> ListStats:
    """Rank once (down to ``depth``, all when None) and describe the list.

    ``method``: ``"count"`` (item-index targets only: count the items above and
    tied with each relevant item, :mod:`~ranking_plugins.kernel.statistics.counting`),
    ``"first_hits"`` (the first relevant group of each list alone, from counts,
    :mod:`~ranking_plugins.kernel.statistics.first_hits`: any other statistic ranks
    when read) or ``"rank"`` (select and order the top of every list); by default counting
    is used for item-index targets when the whole list is needed or each query
    lists one id (next-item recommendation), where it is the cheaper of the two.
    ``identities``: the statistics must say which item holds each place (the
    metrics of item exposure), so the lists are ranked, never counted.
    ``judgments``: a measure of judged items is read: counting then
    counts the judged items too (a ranked list knows them anyway).
    """
    relevance = data.relevance
    method = method or ranking_method(data, depth)
    if method == "count":
        if not isinstance(relevance, ItemIds):
            raise ValueError("ranking by counting needs item-index targets")
        return count_ranks(
            data.scores,
            relevance,
            ties,
            data.ranked,
            data.nan_unchecked,
            judgments,
            data.nan_possible,
        )
    if method == "first_hits":
        assert depth is not None, "first hits are read to a cutoff"
        return FirstHitStats(data, ties, depth)
    ranked_list = rank(data, ties, depth, item_order=identities)
    num_ranked = (
        # float64, as the statistics keep it: no conversion to make
        torch.full(
            (data.num_queries,), data.num_items, dtype=torch.float64, device=data.scores.device
        )
        if data.ranked is None
        else count_true(data.ranked)
    )
    mask = data.ranked
    return RankStats(
        ranked_list,
        relevance.relevant_count,  # counted when read
        None if mask is None else lambda: relevance.relevant_count(mask),
        relevance,
        num_ranked,
        data.catalogue_size,
    )


#: Sorting whole rows costs about 140 bytes per (query, item); rows are ranked
#: in blocks of at most this many elements, or of the input's size in bytes / 48
#: when that is larger, so that peak memory stays within a few copies of the scores.
WHOLE_ROW_BLOCK_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class Unranked:
    """A block of rows ranked only when read (and dropped after), to bound memory."""

    data: RankingInput
    ties: str
    depth: int | None
    method: str | None
    identities: bool = False
    judgments: bool = False

    def rank(self, depth: int | None = None) -> ListStats:
        """Rank the block, to ``depth`` when the reader needs no more than that.

        A whole-list ranking read by a request of cutoffs (``ndcg@10`` after
        ``map``) only ranks the top of each row of the block.
        """
        if depth is None or (self.depth is not None and self.depth < depth):
            depth = self.depth
        return rank_stats(self.data, self.ties, depth, self.method, self.identities, self.judgments)


@dataclass(frozen=True)
class RankedBatch:
    """Rank statistics of a batch, in parts: (the parts' query positions, statistics)."""

    num_queries: int
    device: torch.device
    parts: tuple[tuple[slice | Tensor, ListStats | Unranked], ...]
    #: the statistics cover whole lists, whatever depth was asked (counting does)
    whole_lists: bool = False
    #: every part says which item holds each place (:func:`rank_batch`'s ``identities``)
    identities: bool = False

    @property
    def reusable(self) -> bool:
        """Whether reading it again costs no ranking (no part is ranked on reading)."""
        return not any(isinstance(stats, Unranked) for _, stats in self.parts)


def rank_batch(
    batch: Batch,
    ties: str,
    depth: int | None,
    method: str | None = None,
    identities: bool = False,
    judgments: bool = False,
    first_hits: bool = False,
) -> RankedBatch:
    """:func:`rank_stats` of every part of ``batch``.

    ``first_hits``: the metrics read where the first relevant item lies, nothing
    else (hit_rate, mrr), which a part may then take from counts
    (:func:`ranking_method`).

    ``identities``: rank (never count) so that the statistics say which item
    holds each place. Under "average" and "first" a ranked list says so anyway;
    under "pessimistic" and "optimistic" items the policy cannot tell apart
    are then ordered by index too.

    Whole rows that are sorted (not counted) are ranked in blocks of rows, each
    when it is read, so that only one block's statistics exist at a time.
    """
    parts: list[tuple[slice | Tensor, ListStats | Unranked]] = []
    whole_lists = True
    if identities:
        method = "rank"
    every_part_ranked = True
    for part in batch.parts:
        data = part.data
        part_method = method or ranking_method(data, depth, ties, first_hits)
        every_part_ranked &= part_method == "rank"
        whole_lists &= depth is None or part_method == "count"
        rows = data.num_queries
        if (depth is None or depth >= data.num_items) and part_method == "rank":
            size = data.scores.numel() * data.scores.element_size()
            budget = max(WHOLE_ROW_BLOCK_ELEMENTS, size // 48)
            rows = max(1, budget // max(data.num_items, 1))
        if rows >= data.num_queries:
            stats = rank_stats(data, ties, depth, part_method, identities, judgments)
            parts.append((part.queries, stats))
            continue
        if data.nan_unchecked:
            # blocks are ranked when read: check now, so that the error comes from here
            validation.check_values(data.scores, None, None, 0)
            data = replace(data, nan_unchecked=False)
        for low in range(0, data.num_queries, rows):
            block = slice(low, low + rows)
            queries = (
                slice(low, min(low + rows, data.num_queries))
                if isinstance(part.queries, slice)  # the whole batch, in order
                else part.queries[block]
            )
            parts.append(
                (
                    queries,
                    Unranked(data.rows(block), ties, depth, part_method, identities, judgments),
                )
            )
    identified = identities or (every_part_ranked and ties in ("average", "first"))
    return RankedBatch(batch.num_queries, batch.device, tuple(parts), whole_lists, identified)
