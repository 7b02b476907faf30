"""Ranking by counting, for item-index targets: no sort, no top-k.

When a query's relevant items are given as a few item ids, every metric
depends only on where those items stand: for each relevant item, how many
ranked items score above it, how many tie with it (and, under "first", how
many of those have a lower index). Those are counts, and counts add up over
any split of the catalogue; so the same statistics come from one pass over
a dense ``(Q, N)`` score matrix (:func:`count_ranks`) or from a walk over
chunks of an item embedding table, where the matrix is never built
(:mod:`ranking_plugins.kernel.catalogue.chunked`).

From the counts, each relevant item knows its tie group as SPEC section 3
describes it; :meth:`RankCounter.stats` hands those groups to
:class:`~ranking_plugins.kernel.statistics.count_stats.CountStats`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.flags import (
    compare_rows,
    count_compared,
    count_true,
    counts_fit_in_float,
)
from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.inputs.relevance import ItemIds
from ranking_plugins.kernel.ranking.tie_groups import NAN_TIED
from ranking_plugins.kernel.statistics.count_stats import CountStats
from ranking_plugins.kernel.statistics.judged import CountedJudgedStats


def distinct_ids(item_ids: Tensor) -> Tensor:
    """``item_ids`` (Q, T) with every repeat of an id in its row replaced by -1 padding."""
    if item_ids.shape[1] <= 1:
        return item_ids  # one id per row repeats none
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
        # the count planes by name, each made when first counted (zero until then):
        # a counter that counts its one block makes no zeros to add it to
        self._planes: dict[str, Tensor] = {}
        # the scores of the relevant items as the blocks computed them (for
        # relevant-vs-relevant); None until a block records them: the given scores
        self._block_score: Tensor | None = None
        self._first_block = True
        # the items of each row left out of the ranking (None: none so far)
        self._unranked: Tensor | None = None
        self.ranked = self.listed
        #: the scores may hold NaN (``validate_args=False``): listed items are compared
        #: as the lists rank NaN (:func:`rank_nan_first`)
        self.nan_possible = False
        #: whether a counted score may be NaN: False once the counts proved there is none
        self.may_hold_nan = True
        if self.exclude is not None:
            self._unranked = (self.exclude >= 0).sum(dim=1)
            excluded = (item_ids.unsqueeze(2) == self.exclude.unsqueeze(1)).any(dim=2)
            self.ranked = self.ranked & ~excluded

    def _plane(self, name: str) -> Tensor:
        """The count plane ``name`` (Q, T) int64, zeros if nothing was counted in it yet."""
        plane = self._planes.get(name)
        if plane is None:
            plane = torch.zeros(self.ids.shape, dtype=torch.int64, device=self.ids.device)
            self._planes[name] = plane
        return plane

    def _add_to_plane(self, name: str, counts: Tensor) -> None:
        """Add ``counts`` (Q, T) int64 to the plane ``name``; the first counts become it."""
        if name in self._planes:
            self._planes[name] += counts
        else:
            self._planes[name] = counts

    @property
    def above(self) -> Tensor:
        """(Q, T) int64: the ranked items scored above each listed item."""
        return self._plane("above")

    @above.setter
    def above(self, counts: Tensor) -> None:
        self._planes["above"] = counts

    @property
    def tied(self) -> Tensor:
        """(Q, T) int64: the other ranked items tied with each listed item."""
        return self._plane("tied")

    @tied.setter
    def tied(self, counts: Tensor) -> None:
        self._planes["tied"] = counts

    @property
    def tied_before(self) -> Tensor:
        """(Q, T) int64: under "first", the tied ones with a lower index."""
        return self._plane("tied_before")

    @tied_before.setter
    def tied_before(self, counts: Tensor) -> None:
        self._planes["tied_before"] = counts

    @property
    def block_score(self) -> Tensor:
        """(Q, T): each listed item's score as its block gave it (the given one until found)."""
        return self.score if self._block_score is None else self._block_score

    @property
    def unranked(self) -> Tensor:
        """(Q,) int64: the items of each row left out of the ranking."""
        if self._unranked is None:
            self._unranked = torch.zeros(
                self.ids.shape[0], dtype=torch.int64, device=self.ids.device
            )
        return self._unranked

    def add(
        self,
        scores: Tensor,
        start: int,
        ranked: Tensor | None = None,
        check_nan: bool = False,
        own_scores: bool = False,
        find_nan: bool = False,
    ) -> None:
        """Count the block of columns ``start, start + 1, ...`` of the score matrix.

        ``ranked`` (optional, same shape): False marks items that are not ranked.
        ``check_nan``: raise the NaN-scores error if a score is NaN (each block
        of rows is checked while it is in cache for the counting).
        ``own_scores``: the block is the whole catalogue and the target scores
        were read from it (:func:`count_ranks`): each listed item's own column
        holds its target score, so it ties with itself and has no other block
        score to record.
        ``find_nan``: where the counts can tell at no cost, record whether a score
        is NaN (:attr:`may_hold_nan`) instead of raising.
        """
        width = scores.shape[1]
        if ranked is not None:
            inside = (self.ids >= start) & (self.ids < start + width)
            own = ranked.gather(1, (self.ids - start).clamp(0, width - 1))
            self.ranked = self.ranked & (own | ~inside)
        first = self.ties == "first"
        column = torch.arange(start, start + width, device=scores.device) if first else None
        # NaN found by the counting's own comparisons where they can tell (see below), on
        # the CPU, where each block of rows is in cache for them; on an accelerator one
        # reduction and one read find it (the counts would take two reads and more launches)
        nan_in_counts = (
            (check_nan or find_nan)
            and ranked is None
            and column is None
            and host_reads_are_free(scores)
        )
        if check_nan and not nan_in_counts:
            validation.check_values(scores, None, None, 0)
        if ranked is None and column is None and counts_fit_in_float(width):
            self._count_plain(scores, nan_in_counts)
            if check_nan and self.may_hold_nan and nan_in_counts:
                raise ValueError(validation.NAN_PREDS)
        else:
            self._count_flags(scores, ranked, column)
        if ranked is not None:
            unranked = width - count_true(ranked)
            self._unranked = unranked if self._unranked is None else self._unranked + unranked
        if own_scores:
            # each ranked item's own column was counted as tied with itself, unless its
            # score is NaN (NaN ties nothing; with ``check_nan`` there is none)
            own = self.ranked if check_nan else self.ranked & (self.score == self.score)
            self.tied = self.tied.add(own, alpha=-1)
        else:
            self._record_block_scores(scores, start)
            self._correct(scores, start, self.ids, self.listed & self.ranked, is_target=True)
        if self.exclude is not None:
            self._correct(scores, start, self.exclude, self.exclude >= 0, is_target=False)

    def _count_plain(self, scores: Tensor, nan_in_counts: bool) -> None:
        """Above and tied counts when every item is ranked and no tie order is needed.

        Row blocks small enough to stay in cache, each compared twice, the flags
        written as floats (:func:`~ranking_plugins.kernel.flags.count_compared`).
        With ``nan_in_counts`` the second comparison is "below" rather than
        "tied", so that a NaN shows in the counts (:func:`_tied_finding_nan`).
        On an accelerator, one listed id per row: :meth:`_count_one_id`.
        """
        if not host_reads_are_free(scores) and self.ids.shape[1] == 1:
            self._count_one_id(scores)
            return
        num_rows, width = scores.shape
        rows = compare_rows(width, scores)
        buffer = torch.empty(
            (min(rows, num_rows), width), dtype=torch.float32, device=scores.device
        )
        second = torch.lt if nan_in_counts else torch.eq
        above = torch.empty(self.ids.shape, dtype=torch.float32, device=scores.device)
        other = torch.empty_like(above)
        for low in range(0, num_rows, rows):
            block = scores[low : low + rows]
            for t in range(self.ids.shape[1]):
                s = self.score[low : low + rows, t : t + 1]
                count_compared(torch.gt, block, s, buffer, above[low : low + rows, t])
                count_compared(second, block, s, buffer, other[low : low + rows, t])
        above_count = above.to(torch.int64)
        tied = other.to(torch.int64)
        if nan_in_counts:
            tied, self.may_hold_nan = _tied_finding_nan(
                scores, self.score, width - above_count - tied, buffer
            )
        self._add_to_plane("above", above_count)
        self._add_to_plane("tied", tied)

    def _count_one_id(self, scores: Tensor) -> None:
        """Above and tied counts of one listed id per row, on an accelerator.

        One comparison and one reduction per count: each a kernel launch, where
        the CPU's float flags (:meth:`_count_plain`) would add a buffer and its
        views. The bool flags of a block take a quarter of the float buffer's
        memory, so its blocks hold four times the rows.
        """
        num_rows = scores.shape[0]
        rows = 4 * compare_rows(scores.shape[1], scores)
        parts: list[tuple[Tensor, Tensor]] = []
        for low in range(0, num_rows, rows):
            block = scores if rows >= num_rows else scores[low : low + rows]
            s = self.score if rows >= num_rows else self.score[low : low + rows]
            parts.append(
                ((block > s).sum(dim=1, keepdim=True), (block == s).sum(dim=1, keepdim=True))
            )
        if len(parts) == 1:
            ((above, tied),) = parts
        else:
            above = torch.cat([part[0] for part in parts])
            tied = torch.cat([part[1] for part in parts])
        self._add_to_plane("above", above)
        self._add_to_plane("tied", tied)

    def _count_flags(self, scores: Tensor, ranked: Tensor | None, column: Tensor | None) -> None:
        """Above, tied (and, under "first", tied before) counts, masks applied: from
        fused float flags where every item is ranked (:func:`_fused_counts`), else
        from bool flags, a listed item at a time."""
        fused = None if ranked is not None else _fused_counts(scores, self.score, self.ids, column)
        if fused is not None:
            above, tied, tied_before = fused
            self._add_to_plane("above", above)
            self._add_to_plane("tied", tied)
            if tied_before is not None:
                self._add_to_plane("tied_before", tied_before)
            return
        # row blocks small enough for their comparison flags to stay in cache
        rows = compare_rows(scores.shape[1], scores, _BLOCK_ELEMENTS)
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
        self._block_score = torch.where(inside, value.to(dtype), self.block_score.to(dtype))

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

    def counts(self) -> Tensor:
        """(C, Q, T) int64: what adds up over any split of the catalogue.

        The items above and tied with each listed item and, under "first", the
        tied ones before it: the counts of two disjoint sets of items sum to the
        counts of their union (:mod:`ranking_plugins.kernel.catalogue.sharded`).
        """
        planes = (self.above, self.tied)
        return torch.stack((*planes, self.tied_before) if self.ties == "first" else planes)

    def set_counts(self, counts: Tensor) -> None:
        """Take ``counts`` (as :meth:`counts` gives them, e.g. summed over shards) as the counts."""
        self.above, self.tied = counts[0], counts[1]
        if self.ties == "first":
            self.tied_before = counts[2]

    def tracked_counts(self, relevant: Tensor, judged: Tensor) -> dict[str, Tensor]:
        """The counts of the measures of judged items, for ``CountedJudgedStats``.

        The listed ids are the tracked items (judged or relevant); ``relevant``
        and ``judged`` (Q, T) bool say which they are. Besides the catalogue
        counts (above, tied, tied with a lower index under "first"), the same
        counts among the ranked tracked items: relevant ones, and judged
        non-relevant ones; "tied before": tied with a lower id.
        """
        ranked = self.ranked
        other = ranked.unsqueeze(1) & ~torch.eye(
            self.ids.shape[1], dtype=torch.bool, device=ranked.device
        )
        above, tied = self._listed_pairs()
        above &= other
        tied &= other
        tied_before = tied & (self.ids.unsqueeze(1) < self.ids.unsqueeze(2))
        rel = relevant.unsqueeze(1)
        nonrelevant_judged = (judged & ~relevant).unsqueeze(1)
        return {
            "ranked": ranked,
            "relevant": relevant,
            "judged": judged,
            "above": self.above,
            "tied": self.tied,
            "tied_before": self.tied_before,
            "rel_above": (above & rel).sum(dim=2),
            "rel_tied": (tied & rel).sum(dim=2),
            "rel_tied_before": (tied_before & rel).sum(dim=2),
            "jn_above": (above & nonrelevant_judged).sum(dim=2),
            "jn_tied": (tied & nonrelevant_judged).sum(dim=2),
            "jn_tied_before": (tied_before & nonrelevant_judged).sum(dim=2),
        }

    def _listed_pairs(self) -> tuple[Tensor, Tensor]:
        """(Q, T, T) bool: listed item a (the last dim) above, and tied with, listed
        item b (the middle dim), by the scores the counts were made of."""
        v = self.block_score.unsqueeze(1)  # (Q, 1, T): the other item a
        s = self.score.unsqueeze(2)  # (Q, T, 1): the item b it is compared with
        above, tied = v > s, v == s
        if self.nan_possible:
            v_nan, s_nan = v.isnan(), s.isnan()
            above |= v_nan & ~s_nan
            both = v_nan & s_nan
            if self.ties in NAN_TIED:
                tied |= both
            else:  # each NaN a group of its own, the lower index first
                above |= both & (self.ids.unsqueeze(1) < self.ids.unsqueeze(2))
        return above, tied

    def stats(self) -> CountStats:
        """The rank statistics; R counts every listed id, excluded or masked ones too."""
        ranked = self.ranked
        above, tied = self.above, self.tied
        if self.ids.shape[1] == 1:
            # one listed id per row: no relevant item to compare it with, so its group
            # holds one relevant item (it) and none is before it (CountStats' defaults)
            fields = self._one_id_fields(above, tied)
            return self._stats_of(*fields, None, None)
        # relevant-vs-relevant, from the block scores the counts were made of
        other = ranked.unsqueeze(1) & ~torch.eye(
            self.ids.shape[1], dtype=torch.bool, device=ranked.device
        )
        pair_above, pair_tied = self._listed_pairs()
        rel_above = (pair_above & other).sum(dim=2)
        rel_tied = (pair_tied & other).sum(dim=2)
        rel_before = (pair_tied & other & (self.ids.unsqueeze(1) < self.ids.unsqueeze(2))).sum(
            dim=2
        )
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
        return self._stats_of(
            start.to(torch.float64),
            size.to(torch.float64),
            relevant.to(torch.float64),
            before.to(torch.float64),
        )

    def _one_id_fields(self, above: Tensor, tied: Tensor) -> tuple[Tensor, Tensor]:
        """(T_c, t_c) float64 of one listed id per row: r_c = 1, ρ_c = 0 (section 3)."""
        if self.ties == "average":
            return above.to(torch.float64), (tied + 1).to(torch.float64)
        # the ordered policies: a group of its own
        one = torch.ones(above.shape, dtype=torch.float64, device=above.device)
        if self.ties == "first":
            return (above + self.tied_before).to(torch.float64), one
        if self.ties == "pessimistic":
            return (above + tied).to(torch.float64), one
        return above.to(torch.float64), one

    def _stats_of(
        self, start: Tensor, size: Tensor, relevant: Tensor | None, before: Tensor | None
    ) -> CountStats:
        """The :class:`CountStats` of these groups (None: r_c = 1, ρ_c = 0 for every item)."""
        if self._unranked is None:  # every item ranked
            num_ranked = torch.full(
                (self.ids.shape[0],), self.num_items, dtype=torch.float64, device=start.device
            )
        else:
            num_ranked = self.num_items - self._unranked
        stats = CountStats(
            ranked=self.ranked,
            group_start=start,
            group_size=size,
            group_relevant=relevant,
            relevant_before=before,
            relevant_count=self.listed.sum(dim=1, dtype=torch.float64),
            num_ranked=num_ranked,
            num_items=self.num_items,
        )
        stats.every_judged = self._every_judged  # read only by the judged measures
        stats.shared_ties = self.ties == "average"
        return stats

    def _every_judged(self, stats: CountStats) -> CountedJudgedStats:
        """The statistics of judged items when every item is judged, from these counts."""
        counts = self.tracked_counts(self.listed, self.listed)
        return CountedJudgedStats(
            counts,
            self.ties,
            stats.num_ranked,
            self.num_items - stats.relevant_count,
            every_judged=True,
        )


def _tied_finding_nan(
    scores: Tensor, score: Tensor, tied_or_nan: Tensor, buffer: Tensor
) -> tuple[Tensor, bool]:
    """The items of each row tied with each of its ``score`` (Q, T), and whether a
    score is NaN.

    NaN compares false both ways, so the items neither above nor below a
    score (``tied_or_nan``) are the tied ones and the NaN. ``score`` holds
    scores of their own rows, so a row without NaN counts each at least once;
    rows counting one more than once (ties, or NaN), or whose score is NaN,
    are compared again exactly (in blocks, flags in ``buffer``), and a
    difference is a NaN; the exact counts then stand in those rows.
    """
    again = ((tied_or_nan > 1) | score.isnan()).any(dim=1).nonzero().squeeze(1)
    rows = max(buffer.shape[0], 1)
    exact = torch.empty((again.numel(), score.shape[1]), dtype=torch.float32, device=score.device)
    for low in range(0, again.numel(), rows):
        which = again[low : low + rows]
        block = scores[which]
        for t in range(score.shape[1]):
            count_compared(
                torch.eq, block, score[which, t : t + 1], buffer, exact[low : low + rows, t]
            )
    exact_counts = exact.to(torch.int64)
    if torch.equal(exact_counts, tied_or_nan[again]):
        return tied_or_nan, False
    return tied_or_nan.index_put((again,), exact_counts), True


def count_ranks(
    scores: Tensor,
    relevance: ItemIds,
    ties: str,
    ranked: Tensor | None = None,
    check_nan: bool = False,
    judgments: bool = False,
    nan_possible: bool = False,
) -> CountStats:
    """Rank statistics of a dense score matrix (Q, N) by counting, in one block.

    ``check_nan``: raise the NaN-scores error if a score is NaN, found block by
    block while each block of rows is in cache for the counting.
    ``judgments``: count the judged items too (:func:`tracked_ids`), for the
    measures that read them; without ``judged_ids`` every item is
    judged and the relevant items' own counts serve (``CountStats.every_judged``).
    ``nan_possible``: the scores may hold NaN that no check rejects
    (``validate_args=False``): they are counted as the lists rank them
    (:func:`rank_nan_first`).
    """
    ids = distinct_ids(relevance.item_ids)
    counter = RankCounter(ids, scores.gather(1, ids.clamp(min=0)), scores.shape[1], ties)
    counter.add(scores, 0, ranked, check_nan=check_nan, own_scores=True, find_nan=nan_possible)
    if nan_possible and counter.may_hold_nan:
        rank_nan_first(counter, scores, ranked)
    stats = counter.stats()
    if judgments and relevance.judged_ids is not None:
        tracked = tracked_ids(relevance, relevance.judged_ids)
        tracker = RankCounter(
            tracked, scores.gather(1, tracked.clamp(min=0)), scores.shape[1], ties
        )
        tracker.add(scores, 0, ranked, own_scores=True)
        if nan_possible:
            rank_nan_first(tracker, scores, ranked)
        stats.judged_stats = counted_judged_stats(tracker, ids, relevance, ties, stats)
    return stats


def rank_nan_first(counter: RankCounter, scores: Tensor, ranked: Tensor | None) -> None:
    """Correct the counts of ``counter``, made of the whole rows ``scores`` (one block),
    for their NaNs, which the comparisons count neither above nor tied with anything.

    NaN ranks above every number: every ranked NaN is above a listed number. A
    listed NaN has no number above it; under "average" and "first" the NaNs of
    lower index are (each NaN a group of its own), under :data:`NAN_TIED`
    policies the other NaNs are tied with it.
    """
    counter.nan_possible = True
    is_nan = scores.isnan()
    if ranked is not None:
        is_nan &= ranked
    nans = count_true(is_nan).unsqueeze(1)
    listed_nan = counter.score.isnan()
    ids = counter.ids.clamp(min=0)
    own = is_nan.gather(1, ids)  # the listed item is a ranked NaN
    counter.above = torch.where(listed_nan, 0, counter.above + nans)
    if counter.ties in NAN_TIED:
        counter.tied = torch.where(listed_nan, nans - own.to(torch.int64), counter.tied)
    else:
        before = is_nan.cumsum(dim=1, dtype=torch.int32).gather(1, ids) - own.to(torch.int32)
        counter.above = torch.where(listed_nan, before.to(torch.int64), counter.above)


def tracked_ids(relevance: ItemIds, judged_ids: Tensor) -> Tensor:
    """The items whose counts the measures of judged items read: judged or relevant (Q, T)."""
    return distinct_ids(torch.cat([relevance.listed_ids, judged_ids], dim=1))


def counted_judged_stats(
    tracker: RankCounter, relevant_ids: Tensor, relevance: ItemIds, ties: str, stats: CountStats
) -> CountedJudgedStats:
    """The judged items' statistics from the counts of the tracked items (:func:`tracked_ids`)."""
    tracked = tracker.ids
    listed = tracked >= 0
    relevant = listed & (tracked.unsqueeze(2) == relevant_ids.unsqueeze(1)).any(dim=2)
    return CountedJudgedStats(
        tracker.tracked_counts(relevant, listed),
        ties,
        stats.num_ranked,
        relevance.judged_nonrelevant_count(),
        every_judged=relevance.judged_ids is None,
    )


def _fused_counts(
    scores: Tensor, score: Tensor, ids: Tensor, column: Tensor | None
) -> tuple[Tensor, Tensor, Tensor | None] | None:
    """Above, tied and (with ``column``) tied-before counts (Q, T) of a block whose
    items are all ranked, or None where this path does not apply.

    It applies on the CPU (it reads on the host where a listed item's own block
    holds ties) to rows whose counts are exact as float sums. One fused
    comparison per kind for all the listed items replaces three bool
    comparisons per listed item (:func:`_above_and_tied`); "tied before"
    follows from the tied counts but in the block that holds the listed item
    (:func:`_ids_tied_before`).
    """
    if not (counts_fit_in_float(scores.shape[1]) and host_reads_are_free(scores)):
        return None
    above, tied = _above_and_tied(scores, score)
    if column is None or scores.shape[1] == 0:
        return above, tied, None
    return above, tied, _ids_tied_before(scores, score, ids, column, tied)


def _above_and_tied(scores: Tensor, score: Tensor) -> tuple[Tensor, Tensor]:
    """(Q, T) int64: the items of each row of ``scores`` (Q, C) above and tied with each
    of the row's ``score`` (Q, T), every item ranked; NaN neither.

    Floating point scores (but -inf, and 0 or subnormal ones where subnormal
    numbers read as zero) are compared once, with ``>``, against each score
    and the next value below it (:func:`_next_below`): an item is at or above
    a score exactly when it is above that next value, so the tied ones are the
    difference of the two counts. Other scores are compared twice, ``>`` and
    ``==``.
    """
    num_rows, targets = score.shape
    if targets == 0 or num_rows == 0:
        zero = torch.zeros((num_rows, targets), dtype=torch.int64, device=scores.device)
        return zero, zero.clone()
    score = score.to(torch.promote_types(scores.dtype, score.dtype))
    below = _next_below(score)
    if below is None:
        above = _count_against_thresholds(scores, score)
        return above, _count_against_thresholds(scores, score, equal=True)
    counts = _count_against_thresholds(scores, torch.cat([score, below], dim=1))
    above = counts[:, :targets]
    return above, counts[:, targets:] - above


def _next_below(score: Tensor) -> Tensor | None:
    """The next value below each score, or None where ``x > next`` is not ``x >= score``.

    No value lies between a floating point number and the next one below it;
    -inf has none below it, and where the CPU reads subnormal numbers as zero
    (``torch.set_flush_denormal``), the next value below 0 or a subnormal
    score reads as the score itself: those are not below their score, and are
    left to the two comparisons. NaN ties with nothing either way.
    """
    if not score.dtype.is_floating_point:
        return None
    below = torch.nextafter(score, torch.full_like(score, -torch.inf))
    if not bool(((below < score) | score.isnan()).all()):
        return None
    return below


def _count_against_thresholds(scores: Tensor, thresholds: Tensor, equal: bool = False) -> Tensor:
    """(Q, K) int64: the items of each row of ``scores`` (Q, C) above (``equal``: equal
    to) each of the row's ``thresholds`` (Q, K).

    One comparison for all K thresholds at once (:func:`count_compared` on
    (rows, K, C) flags, a row block at a time, 32 MiB of flags: within the last
    level cache, and few operations per block of scores, each of which waits
    for every thread; on a machine whose cores other processes share, blocks of
    8 MiB took up to 3 times longer per call, 32 MiB as long as 16 MiB when the
    cores were free).
    """
    num_rows, width = scores.shape
    kinds = thresholds.shape[1]
    op = torch.eq if equal else torch.gt
    counts = torch.empty((num_rows, kinds), dtype=torch.float32, device=scores.device)
    rows = compare_rows(width * kinds, scores, 4 * _BLOCK_ELEMENTS)
    buffer = torch.empty(
        (min(rows, num_rows), kinds, width), dtype=torch.float32, device=scores.device
    )
    for low in range(0, num_rows, rows):
        block = scores[low : low + rows].unsqueeze(1)  # (rows, 1, C)
        at = thresholds[low : low + rows].unsqueeze(2)  # (rows, K, 1)
        count_compared(op, block, at, buffer, counts[low : low + rows])
    return counts.to(torch.int64)


def _ids_tied_before(
    scores: Tensor, score: Tensor, ids: Tensor, column: Tensor, tied: Tensor
) -> Tensor:
    """(Q, T) int64: the items of the block tied with each listed item and before it.

    ``column`` (C,): the consecutive item indices of the block's columns;
    ``tied``: the block's items tied with each ``score``. A listed item after the
    block has every tied item before it, one before the block (or padding)
    none; in the block that holds it, the tied items are its own column (when
    it ties with its ``score``) and others, and only where there are others
    are the columns before it counted (reads on the host: the CPU's path).
    """
    width = scores.shape[1]
    first, last = column[0], column[-1]
    inside = (ids >= first) & (ids <= last)
    before = torch.where(ids > last, tied, torch.zeros_like(tied))
    own = scores.gather(1, (ids - first).clamp(0, width - 1)) == score
    others = inside & (tied > own.to(torch.int64))
    pairs = others.nonzero()
    if pairs.numel() == 0:
        return before
    rows = max(1, _BLOCK_ELEMENTS // max(width, 1))
    for low in range(0, pairs.shape[0], rows):
        row, t = pairs[low : low + rows].unbind(1)
        block = scores[row]  # (pairs, C)
        flags = (block == score[row, t].unsqueeze(1)) & (column < ids[row, t].unsqueeze(1))
        before[row, t] = count_true(flags)
    return before
