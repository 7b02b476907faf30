"""The first hits of lists that are never ranked: hit rate and reciprocal rank from counts.

A request whose metrics read only where each query's first relevant item
lies (hit_rate, mrr) needs no ranked list under "average": that item is in
the first tie group holding a relevant item, the group of the best relevant
score, which three counts over each whole row describe: T items score above
it, t items share its score, r of them relevant (SPEC section 3). On the
accelerator's paths, where each operation is a kernel launch, those counts
replace the selection and the tie groups of every place.

The probabilities are made at the group's places 1..W (W: the list's
length), by the operations :class:`RankStats` applies there along a ranked
list, in the same order: the same bits (a place before the group steps by
exactly 1 and holds 0 there, so it changes no product nor sum).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from functools import cached_property

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.inputs.parts import RankingInput
from ranking_plugins.kernel.inputs.relevance import DenseGrades
from ranking_plugins.kernel.ranking.selection import rank
from ranking_plugins.kernel.statistics.closed_forms import (
    first_hit_at_first_place,
    first_hit_probabilities,
    first_hit_step_inside,
)
from ranking_plugins.kernel.statistics.rank_stats import SUMS_OF_METRICS, RankStats

#: the prefix sums of :class:`RankStats` that :class:`FirstHitStats` reads off counts
FIRST_HIT_SUMS = ("cum_first_hit", "cum_rr")


def first_hits_apply(data: RankingInput, ties: str, depth: int | None) -> bool:
    """Whether :class:`FirstHitStats` may describe ``data`` to ``depth``: under
    "average", to a cutoff, for dense grades and real-valued scores without a mask,
    on the accelerator's paths (the CPU's own paths save work by reading values)."""
    return (
        ties == "average"
        and depth is not None
        and data.ranked is None
        and data.scores.is_floating_point()
        and isinstance(data.relevance, DenseGrades)
        and not host_reads_are_free(data.scores)
    )


def _count_per_row(flags: Tensor) -> Tensor:
    """(Q, 1) float64: the True flags of each row (exact: fewer than 2^53)."""
    return flags.sum(dim=1, keepdim=True, dtype=torch.float64)


def _first_group_past_nan(scores: Tensor, relevant: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(T, t, r) of each row's first relevant group, (Q, 1) float64 each, where the
    scores may hold NaN (``validate_args=False``), ranked as the lists rank it: above
    every number, each NaN a group of its own, lower column first.

    A relevant NaN is the first relevant group (t = r = 1) below the NaNs of lower
    columns; else the best relevant number's group is, below every NaN.
    """
    is_nan = scores.isnan()
    width = scores.shape[1]
    # the narrowest index that holds the columns: the (Q, N) temporary within the scores' size
    index = torch.int32 if width < 2**31 else torch.int64
    column = torch.arange(width, dtype=index, device=scores.device)
    first = torch.where(is_nan & relevant, column, width).amin(dim=1, keepdim=True)
    nan_above = _count_per_row(is_nan & (column < first))
    best = (
        torch.where(relevant, scores, -math.inf)
        .nan_to_num(nan=-math.inf, posinf=math.inf)
        .amax(dim=1, keepdim=True)
    )
    tied = scores == best
    in_nan = first < width
    return (
        # above a number: the greater numbers and every NaN, which compares as neither
        torch.where(in_nan, nan_above, _count_per_row(~(scores <= best))),
        torch.where(in_nan, 1.0, _count_per_row(tied)),
        torch.where(in_nan, 1.0, _count_per_row(tied & relevant)),
    )


class FirstHitStats(RankStats):
    """:class:`RankStats` whose first hits come from each query's first relevant group.

    Any other statistic (a later request that reuses these) reads the ranked
    list, made when first read.
    """

    def __init__(self, data: RankingInput, ties: str, depth: int) -> None:
        scores, relevance = data.scores, data.relevance
        assert isinstance(relevance, DenseGrades), "first_hits_apply admits dense grades"
        # NaN is above every number for amax, as for a top-k: one reduction, one read
        if data.nan_unchecked and scores.numel() and math.isnan(float(scores.amax())):
            raise ValueError(validation.NAN_PREDS)
        relevant = relevance.relevant_items()
        if data.nan_possible:
            self._above, self._size, self._relevant = _first_group_past_nan(scores, relevant)
        else:
            # the first relevant group's score: the best relevant one (-inf without any)
            best = torch.where(relevant, scores, -math.inf).amax(dim=1, keepdim=True)
            tied = scores == best
            self._above = _count_per_row(scores > best)  # T
            self._size = _count_per_row(tied)  # t
            # r: 0 where the row has no relevant item
            self._relevant = _count_per_row(tied & relevant)
        #: the cutoff last read and the group's places in its top (:meth:`_in_top`)
        self._group_read_at: tuple[Tensor, Tensor] | None = None
        num_ranked = torch.full(
            (data.num_queries,), data.num_items, dtype=torch.float64, device=scores.device
        )
        super().__init__(
            (lambda: rank(data, ties, depth), min(depth, data.num_items)),
            relevance.relevant_count,
            None,
            relevance,
            num_ranked,
            data.catalogue_size,
        )

    def any_relevant(self) -> Tensor:
        # known from the grades' check where it took the row maxima; else from r
        found = self._relevance.any_relevant()
        return self._relevant.squeeze(1) > 0 if found is None else found

    def expect(self, metric_names: Collection[str], deepest: int | None = None) -> None:
        others = [n for n in metric_names if SUMS_OF_METRICS.get(n) not in FIRST_HIT_SUMS]
        if others:
            super().expect(others, deepest)

    @cached_property
    def _group_first_hits(self) -> Tensor:
        """(Q, W) P(the first relevant item is at the first group's i-th place), i = 1..W.

        Where i - 1 is past the group's end (i > t) the value is 0 / 0 or worse,
        never read (:meth:`_in_top`); so is every value of a row without a
        relevant item but its zeros inside the group.
        """
        t, r, i = self._size, self._relevant, self.position
        steps = first_hit_step_inside(t - i, r)
        return first_hit_probabilities(first_hit_at_first_place(t, r), steps)

    def _in_top(self, k: Tensor) -> Tensor:
        """(Q, K) int64: the first group's places in the top k, min(k - T, t) and at
        least 0: where its prefix sums are read (made once per cutoff tensor)."""
        if self._group_read_at is None or self._group_read_at[0] is not k:
            places = torch.minimum(k - self._above, self._size).clamp_(min=0)
            self._group_read_at = (k, places.to(torch.int64))
        return self._group_read_at[1]

    @cached_property
    def _group_hit_sums(self) -> Tensor:
        """(Q, W + 1) Σ P(the first hit is at the group's place i), 0 first: the sums
        of :attr:`RankStats.cum_first_hit` from the group's start on."""
        return self._cumulative(self._group_first_hits)

    @cached_property
    def _group_rr_sums(self) -> Tensor:
        """(Q, W + 1) Σ P(the first hit is at the group's place i) / (T + i), 0 first:
        those of :attr:`RankStats.cum_rr` from the group's start on."""
        return self._cumulative(self._group_first_hits, over=self._above + self.position)

    def hit_probability_at(self, k: Tensor) -> Tensor:
        return self._group_hit_sums.gather(1, self._in_top(k))

    def reciprocal_rank_at(self, k: Tensor, deepest: int | None) -> Tensor:
        return self._group_rr_sums.gather(1, self._in_top(k))
