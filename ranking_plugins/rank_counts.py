"""Rank statistics by counting, for item-index targets: no sort, no top-k.

When a query's relevant items are given as a few item ids, every metric
depends only on where those items stand: for each relevant item, how many
ranked items score above it, how many tie with it (and, under "first", how
many of those have a lower index). Those are counts, and counts add up over
any split of the catalogue; so the same statistics come from one pass over
a dense ``(Q, N)`` score matrix or from a walk over chunks of an item
embedding table, where the matrix is never built (:mod:`ranking_plugins.embeddings`).

From the counts, each relevant item knows its tie group as SPEC section 3
describes it (T_c items before it, t_c items in it, r_c of them relevant,
ρ_c relevant items before it). :class:`CountStats` sums the closed forms of
section 3 over those groups, exactly as :class:`ranking_plugins.kernel.RankStats`
sums them position by position, so the metric table reads either one.

A group with r_c relevant members is reported by each of them; each adds
1/r_c of the group's share, so nothing has to be deduplicated.
"""

from __future__ import annotations

import functools
from functools import cached_property

import torch
from torch import Tensor

from ranking_plugins.kernel import Cutoff, ItemIds, count_true, host_reads_are_free


def distinct_ids(item_ids: Tensor) -> Tensor:
    """``item_ids`` (Q, T) with every repeat of an id in its row replaced by -1 padding."""
    ids = item_ids.sort(dim=1).values
    repeat = torch.zeros_like(ids, dtype=torch.bool)
    repeat[:, 1:] = ids[:, 1:] == ids[:, :-1]
    return torch.where(repeat, -1, ids)


_BLOCK_ELEMENTS = 1 << 21


class RankCounter:
    """Counts, for each relevant item, the ranked items above it and tied with it.

    Feed it the score matrix column block by column block (:meth:`add`); the
    relevant items' own scores are given up front, and the counts are made
    against them. An item's own column is recognised by its index, so an item
    never counts against itself; the score each block gives a listed item is
    recorded (``block_score``), so a caller can check that the counts were made
    against the blocks' own scores (:meth:`changed_rows`).
    """

    def __init__(
        self,
        item_ids: Tensor,
        target_scores: Tensor,
        num_items: int,
        ties: str,
        exclude: Tensor | None = None,
    ) -> None:
        self.ids = item_ids  # (Q, T), distinct, -1 = padding
        self.listed = item_ids >= 0
        self.score = target_scores  # (Q, T)
        self.num_items = num_items
        self.ties = ties
        self.exclude = None if exclude is None else distinct_ids(exclude)  # (Q, X)
        shape = item_ids.shape
        device = item_ids.device
        self.above = torch.zeros(shape, dtype=torch.int64, device=device)
        self.tied = torch.zeros(shape, dtype=torch.int64, device=device)
        self.tied_before = torch.zeros(shape, dtype=torch.int64, device=device)
        # the scores of the relevant items as the blocks computed them (for relevant-vs-relevant)
        self.block_score = target_scores.clone()
        self._first_block = True
        self.unranked = torch.zeros(item_ids.shape[0], dtype=torch.int64, device=device)
        if self.exclude is not None:
            self.unranked += (self.exclude >= 0).sum(dim=1)
        self.ranked = self.listed.clone()
        if self.exclude is not None:
            excluded = (item_ids.unsqueeze(2) == self.exclude.unsqueeze(1)).any(dim=2)
            self.ranked &= ~excluded

    def add(self, scores: Tensor, start: int, ranked: Tensor | None = None) -> None:
        """Count the block of columns ``start, start + 1, ...`` of the score matrix.

        ``ranked`` (optional, same shape): False marks items that are not ranked.
        """
        width = scores.shape[1]
        if ranked is not None:
            inside = (self.ids >= start) & (self.ids < start + width)
            own = ranked.gather(1, (self.ids - start).clamp(0, width - 1))
            self.ranked &= own | ~inside
        first = self.ties == "first"
        column = torch.arange(start, start + width, device=scores.device) if first else None
        # row blocks small enough for their comparison flags to stay in cache
        rows = max(1, _BLOCK_ELEMENTS // max(width, 1))
        for low in range(0, scores.shape[0], rows):
            block = scores[low : low + rows]
            block_ranked = None if ranked is None else ranked[low : low + rows]
            for t in range(self.ids.shape[1]):
                s = self.score[low : low + rows, t : t + 1]
                above = block > s
                tied = block == s
                if block_ranked is not None:
                    above &= block_ranked
                    tied &= block_ranked
                self.above[low : low + rows, t] += count_true(above)
                self.tied[low : low + rows, t] += count_true(tied)
                if column is not None:
                    before = tied & (column < self.ids[low : low + rows, t : t + 1])
                    self.tied_before[low : low + rows, t] += count_true(before)
        if ranked is not None:
            self.unranked += width - count_true(ranked)
        self._record_block_scores(scores, start)
        self._correct(scores, start, self.ids, self.listed & self.ranked, is_target=True)
        if self.exclude is not None:
            self._correct(scores, start, self.exclude, self.exclude >= 0, is_target=False)

    def _record_block_scores(self, scores: Tensor, start: int) -> None:
        """Keep the score this block gives each listed item found in it, in the blocks' dtype.

        Once the walk is complete every listed id has been found in its block, so
        the given scores only fill the places not yet reached; the first block's
        dtype replaces theirs (an int64 score is never rounded to a float32 one).
        """
        width = scores.shape[1]
        inside = self.listed & (self.ids >= start) & (self.ids < start + width)
        value = scores.gather(1, (self.ids - start).clamp(0, width - 1))
        if self._first_block:
            dtype = value.dtype
            self._first_block = False
        else:
            dtype = torch.promote_types(self.block_score.dtype, value.dtype)
        self.block_score = torch.where(inside, value.to(dtype), self.block_score.to(dtype))

    def changed_rows(self) -> Tensor:
        """(Q,) bool: rows with a listed item whose block score is not its given score.

        The counts of such a row were made against a score the blocks did not
        give (compared as :meth:`add` compares, NaN equal to NaN). Reads nothing
        on the host.
        """
        block, given = self.block_score, self.score
        same = (block == given) | (block.isnan() & given.isnan())
        return (self.listed & ~same).any(dim=1)

    def _correct(
        self, scores: Tensor, start: int, items: Tensor, counted: Tensor, is_target: bool
    ) -> None:
        """Take the listed ``items`` found in this block back out of the counts.

        Targets: their own column was counted as tied with themselves (or, if
        their block score differs from ``target_scores`` in the last bit, as
        above). Excluded items: they are not ranked at all.
        """
        width = scores.shape[1]
        inside = counted & (items >= start) & (items < start + width)
        value = scores.gather(1, (items - start).clamp(0, width - 1))  # (Q, I)
        s = self.score.unsqueeze(2)  # (Q, T, 1)
        v = value.unsqueeze(1)  # (Q, 1, I)
        inside_ = inside.unsqueeze(1)
        if is_target:
            # only the item itself: the diagonal
            inside_ = inside_ & torch.eye(items.shape[1], dtype=torch.bool, device=items.device)
        self.above -= ((v > s) & inside_).sum(dim=2)
        tied = (v == s) & inside_
        self.tied -= tied.sum(dim=2)
        if self.ties == "first" and not is_target:
            self.tied_before -= (tied & (items.unsqueeze(1) < self.ids.unsqueeze(2))).sum(dim=2)

    def stats(self) -> CountStats:
        """The rank statistics; R counts every listed id, excluded or masked ones too."""
        ranked = self.ranked
        # relevant-vs-relevant, from the block scores the counts were made of
        other = ranked.unsqueeze(1) & ~torch.eye(
            self.ids.shape[1], dtype=torch.bool, device=ranked.device
        )
        v = self.block_score.unsqueeze(1)  # (Q, 1, T): the other item a
        s = self.score.unsqueeze(2)  # (Q, T, 1): the item b it is compared with
        rel_above = ((v > s) & other).sum(dim=2)
        rel_tied = ((v == s) & other).sum(dim=2)
        rel_before = ((v == s) & other & (self.ids.unsqueeze(1) < self.ids.unsqueeze(2))).sum(dim=2)
        above, tied = self.above, self.tied
        if self.ties == "average":
            start, size, relevant, before = above, tied + 1, rel_tied + 1, rel_above
        elif self.ties == "first":
            start = above + self.tied_before
            size = relevant = torch.ones_like(above)
            before = rel_above + rel_before
        elif self.ties == "pessimistic":
            start, size, relevant, before = (
                above + tied - rel_tied,
                rel_tied + 1,
                rel_tied + 1,
                rel_above,
            )
        else:  # optimistic
            start, size, relevant, before = above, rel_tied + 1, rel_tied + 1, rel_above
        return CountStats(
            ranked=ranked,
            group_start=start.to(torch.float64),
            group_size=size.to(torch.float64),
            group_relevant=relevant.to(torch.float64),
            relevant_before=before.to(torch.float64),
            relevant_count=self.listed.sum(dim=1),
            num_ranked=self.num_items - self.unranked,
            num_items=self.num_items,
        )


def count_ranks(
    scores: Tensor, relevance: ItemIds, ties: str, ranked: Tensor | None = None
) -> CountStats:
    """Rank statistics of a dense score matrix (Q, N) by counting, in one block."""
    ids = distinct_ids(relevance.item_ids)
    counter = RankCounter(ids, scores.gather(1, ids.clamp(min=0)), scores.shape[1], ties)
    counter.add(scores, 0, ranked)
    return counter.stats()


@functools.lru_cache(maxsize=4)
def _prefix_sums(length: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Σ_{j≤n} 1/log2(j+1) and Σ_{j≤n} 1/j for n = 0..length, float64."""
    j = torch.arange(1, length + 1, dtype=torch.float64, device=device)
    zero = torch.zeros(1, dtype=torch.float64, device=device)
    discount = torch.cat([zero, torch.cumsum(1.0 / torch.log2(j + 1), 0)])
    harmonic = torch.cat([zero, torch.cumsum(1.0 / j, 0)])
    return discount, harmonic


class CountStats:
    """Rank statistics from the tie group of each relevant item (Q, T each).

    Same reading interface as :class:`ranking_plugins.kernel.RankStats`.
    """

    def __init__(
        self,
        ranked: Tensor,
        group_start: Tensor,
        group_size: Tensor,
        group_relevant: Tensor,
        relevant_before: Tensor,
        relevant_count: Tensor,
        num_ranked: Tensor,
        num_items: int,
    ) -> None:
        self.ranked = ranked
        self.start, self.size = group_start, group_size
        self.group_relevant, self.before = group_relevant, relevant_before
        self.relevant_count = relevant_count.to(torch.float64)
        self.relevant_ranked = ranked.sum(dim=1).to(torch.float64)
        self.num_ranked = num_ranked.to(torch.float64)
        # positions read go up to the end of the longest list, or R ≤ T for the ideal list
        self._table_length = max(num_items, ranked.shape[1], 1)

    @cached_property
    def _prefix(self) -> tuple[Tensor, Tensor]:
        return _prefix_sums(self._table_length, self.num_ranked.device)

    def _read(self, table: Tensor, n: Tensor) -> Tensor:
        return table[n.clamp(0, table.shape[0] - 1).to(torch.int64)]

    def _inside(self, k: Tensor) -> Tensor:
        """m: positions of each group within the top k, (Q, T, K)."""
        m = k.unsqueeze(1) - self.start.unsqueeze(2)
        return torch.minimum(m.clamp(min=0), self.size.unsqueeze(2))

    def _total(self, per_item: Tensor) -> Tensor:
        """Sum over the ranked relevant items (dim 1) of (Q, T, K) values."""
        return torch.where(self.ranked.unsqueeze(2), per_item, 0.0).sum(dim=1)

    # -- sums over the top k, per relevant item: its group's share / r_c --------

    def hits_at(self, k: Tensor) -> Tensor:
        return self._total(self._inside(k) / self.size.unsqueeze(2))

    def dcg_at(self, k: Tensor) -> Tensor:
        discount, _ = self._prefix
        start = self.start.unsqueeze(2)
        inside = self._read(discount, start + self._inside(k)) - self._read(discount, start)
        return self._total(inside / self.size.unsqueeze(2))

    def idcg_at(self, k: Tensor, whole_list: bool) -> Tensor:
        discount, _ = self._prefix
        r = self.relevant_count.unsqueeze(1).expand_as(k)
        return self._read(discount, r if whole_list else torch.minimum(r, k))

    def ap_sum_at(self, k: Tensor) -> Tensor:
        _, harmonic = self._prefix
        t = self.size.unsqueeze(2)
        r = self.group_relevant.unsqueeze(2)
        start = self.start.unsqueeze(2)
        m = self._inside(k)
        slope = torch.where(t > 1, (r - 1) / (t - 1).clamp(min=1), 0.0)
        harmonic_part = self._read(harmonic, start + m) - self._read(harmonic, start)
        before = self.before.unsqueeze(2)
        return self._total(((before + 1 - (start + 1) * slope) * harmonic_part + slope * m) / t)

    def _first_group(self) -> Tensor:
        return (self.ranked & (self.before == 0)).unsqueeze(2)

    def hit_probability_at(self, k: Tensor) -> Tensor:
        """1 - P(no relevant item in the first m places of the first group), per member / r."""
        t = self.size.unsqueeze(2)
        r = self.group_relevant.unsqueeze(2)
        m = self._inside(k)
        miss = torch.ones_like(m)
        for i in range(self.ranked.shape[1]):  # r ≤ T factors: C(t-m, r) / C(t, r)
            factor = ((t - m - i).clamp(min=0) / (t - i).clamp(min=1)).clamp(max=1)
            miss = torch.where(r > i, miss * factor, miss)
        share = (1 - miss) / r
        return torch.where(self._first_group(), share, 0.0).sum(dim=1)

    def reciprocal_rank_at(self, k: Tensor, deepest: int | None = None) -> Tensor:
        """Σ_i P(first hit at T+i) / (T+i) over the first group's places within k, / r."""
        _, harmonic = self._prefix
        t = self.size.unsqueeze(2)
        r = self.group_relevant.unsqueeze(2)
        start = self.start.unsqueeze(2)
        m = torch.minimum(self._inside(k), t - r + 1)
        # r = 1: P = 1/t at every place, a harmonic difference
        single = (self._read(harmonic, start + m) - self._read(harmonic, start)) / t
        several = self._several_relevant(start, t, r, m, deepest)
        share = torch.where(r == 1, single, several)
        return torch.where(self._first_group(), share / r, 0.0).sum(dim=1)

    def _several_relevant(
        self, start: Tensor, t: Tensor, r: Tensor, m: Tensor, deepest: int | None
    ) -> Tensor:
        """Σ_{i≤m} C(t-i, r-1)/C(t, r) / (T+i) for first groups with r ≥ 2 (rare: tied hits).

        Walks the places of the group in blocks: P(first hit at place 1) = r/t and
        P(i+1) = P(i) (t - i - r + 1) / (t - i), as in the ranked-list kernel.
        On the CPU the walk stops at the last place any such group needs; on an
        accelerator, where reading that would synchronise, at the largest cutoff
        (or the end of the catalogue).
        """
        several = (r > 1) & self._first_group()
        total = torch.zeros_like(m)
        if self.ranked.shape[1] < 2:
            return total  # one relevant item per query: never several in a group
        if host_reads_are_free(m):
            places = int(torch.where(several, m, 0).max()) if m.numel() else 0
        else:
            places = self._table_length if deepest is None else min(deepest, self._table_length)
        t, r, start = t.squeeze(2), r.squeeze(2), start.squeeze(2)  # (Q, T)

        def ratio(i: Tensor) -> Tensor:
            return (t.unsqueeze(2) - i - r.unsqueeze(2) + 1).clamp(min=0) / (
                t.unsqueeze(2) - i
            ).clamp(min=1)

        p = (r / t).unsqueeze(2)  # (Q, T, 1): P at the first place of the block
        block = 1024
        for first in range(1, places + 1, block):
            i = torch.arange(
                first, min(first + block, places + 1), dtype=torch.float64, device=m.device
            )
            step = ratio(i)
            p_i = p * torch.cumprod(
                torch.cat([torch.ones_like(step[..., :1]), step[..., :-1]], dim=2), dim=2
            )
            # running sums of P(i) / (T + i) over the block, with a leading 0: read at m
            partial = torch.cumsum(p_i / (start.unsqueeze(2) + i), dim=2)
            partial = torch.cat([torch.zeros_like(partial[..., :1]), partial], dim=2)
            read = (m - first + 1).clamp(0, i.numel()).to(torch.int64)
            total = total + partial.gather(2, read)
            p = p_i[..., -1:] * step[..., -1:]
        return torch.where(several, total, 0.0)

    # -- whole-list statistics ---------------------------------------------

    @cached_property
    def nonrelevant_ranked(self) -> Tensor:
        return self.num_ranked - self.relevant_ranked

    @cached_property
    def rank_sum(self) -> Tensor:
        """E[sum of the ranks of the relevant ranked items]: T_c + (t_c + 1) / 2 each."""
        expected = self.start + (self.size + 1) / 2
        return torch.where(self.ranked, expected, 0.0).sum(dim=1)

    @cached_property
    def ordered_pairs(self) -> Tensor:
        """E[non-relevant items ranked below each relevant one]; a tie counts 1/2."""
        t, r = self.size, self.group_relevant
        nonrelevant_to_group_end = (self.start + t) - (self.before + r)
        below = self.nonrelevant_ranked.unsqueeze(1) - nonrelevant_to_group_end
        return torch.where(self.ranked, below + (t - r) / 2, 0.0).sum(dim=1)

    def at(
        self,
        cutoff: Tensor,
        adaptive_k: bool,
        whole_list: bool = False,
        deepest: int | None = None,
    ) -> Cutoff:
        return Cutoff(self, cutoff, adaptive_k, whole_list, deepest)


__all__ = ["CountStats", "RankCounter", "count_ranks", "distinct_ids"]
