"""Rank statistics from a ranked list: per-position expected values and their sums.

:class:`RankStats` turns the tie groups of :func:`~ranking_plugins.kernel.ranking.rank`
into per-position expected values (relevance, gain, AP term, probability of
the first hit) whose cumulative sums give hits@k, DCG@k, AP@k, RR@k, ... at
any cutoff, exactly (SPEC section 3).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from functools import cached_property

import torch
from torch import Tensor

from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.inputs.relevance import Relevance
from ranking_plugins.kernel.ranking.tie_groups import RankedList
from ranking_plugins.kernel.statistics.closed_forms import (
    ap_term_at,
    first_hit_at_first_place,
    first_hit_probabilities,
    first_hit_step,
    first_hit_step_inside,
    nonrelevant_below,
    nonrelevant_slots_discount,
    recall_level_hits,
    stopping_probability,
)
from ranking_plugins.kernel.statistics.judged import JudgedStats
from ranking_plugins.kernel.statistics.list_stats import Cutoff, ListStats, shaped_as
from ranking_plugins.kernel.statistics.partial_auc import AucSlots
from ranking_plugins.kernel.statistics.placed_sums import PlacedSums
from ranking_plugins.kernel.statistics.tie_orders import (
    g_group_expectation,
    interpolated_precision_of_mixed_groups,
    subset_product_means,
)

#: places (queries x list length) up to which a ranked list's sums of values that are
#: 0 but at a few places (AP's, the reciprocal rank's) take the prefix sums of every
#: place: on (Q, L) float64 matrices this small a pass costs less than the ~30
#: operations of :class:`PlacedSums` (benchmarks/profile_gpu.py counts them)
PLACED_SUMS_ELEMENTS = 1 << 14


class RankStats(ListStats):
    """Expected per-position values of a ranked list, and their sums at any cutoff.

    Under "average" every value is the expectation over all orders of each tie
    group (SPEC section 3); under the other policies the groups hold
    interchangeable items, so the same formulas give the deterministic value.
    """

    def __init__(
        self,
        ranked_list: RankedList | tuple[Callable[[], RankedList], int],
        relevant_count: Tensor | Callable[[], Tensor],
        relevant_ranked: Tensor | Callable[[], Tensor] | None,
        relevance: Relevance,
        num_ranked: Tensor,
        num_items: int | None = None,
    ) -> None:
        """``relevant_count`` (R) and ``relevant_ranked`` (None: R, every item is ranked)
        may be given as functions, called when first read: a pass over the targets
        that no metric may need (ndcg@k reads the ideal list's top k, not R). So may
        the list, as (the function, its length), for a subclass that reads some
        statistics without it (:mod:`~ranking_plugins.kernel.statistics.first_hits`)."""
        if isinstance(ranked_list, RankedList):
            self.__dict__["list"] = ranked_list  # what :attr:`list` would have made
            self.top_list = ranked_list
            self.shared_ties = ranked_list.shared_ties
            length = ranked_list.ranked.shape[1]
        else:
            self._list_of, length = ranked_list
        self.num_items = num_items  # the columns of the scores: catalogue items
        self.num_ranked = num_ranked.to(torch.float64)
        self._relevance = relevance
        self._relevant_count_of = relevant_count
        self._relevant_ranked_of = relevant_ranked
        self.length = length
        self.position = torch.arange(
            1, length + 1, dtype=torch.float64, device=self.num_ranked.device
        )
        #: the cutoffs last read (every statistic of a Cutoff reads at its one k tensor)
        #: and the places to read them at: int64, and as float64 (:class:`PlacedSums`)
        self._read_at: tuple[Tensor, Tensor, Tensor | None] | None = None
        #: the prefix sums :meth:`expect` stacked, (S, Q, L + 1), and each one's row
        self._stacked: tuple[Tensor, tuple[Tensor, ...]] | None = None
        #: the stacked sums read at a cutoff: that cutoff tensor and each sum's (Q, K)
        self._stacked_at: tuple[Tensor, tuple[Tensor, ...]] | None = None
        #: a cutoff at or past every list's last place (:meth:`at`): read there, no index
        self._list_end: Tensor | None = None

    @cached_property
    def list(self) -> RankedList:
        """The ranked list, made when first read where it was given as a function."""
        return self._list_of()

    @cached_property
    def _relevant_count_int(self) -> Tensor:
        found = self._relevant_count_of
        return found if isinstance(found, Tensor) else found()

    @cached_property
    def relevant_count(self) -> Tensor:  # type: ignore[override]
        return self._relevant_count_int.to(torch.float64)

    @cached_property
    def relevant_ranked(self) -> Tensor:  # type: ignore[override]
        found = self._relevant_ranked_of
        if found is None:
            return self.relevant_count
        return (found if isinstance(found, Tensor) else found()).to(torch.float64)

    def any_relevant(self) -> Tensor:
        """R > 0, from the targets without counting R where they know it (their largest
        grades, taken by the grades' check) and no metric has counted R."""
        counted = isinstance(self._relevant_count_of, Tensor) or any(
            name in self.__dict__ for name in ("relevant_count", "_relevant_count_int")
        )
        found = None if counted else self._relevance.any_relevant()
        return super().any_relevant() if found is None else found

    def relevant_count_later(self) -> Tensor | Callable[[], Tensor]:
        if "relevant_count" in self.__dict__ or isinstance(self._relevant_count_of, Tensor):
            return self.relevant_count
        count = self._relevant_count_of
        return lambda: count().to(torch.float64)

    def _ideal_gains(self, length: int) -> Tensor:
        """The ideal list's ``length`` top gains; R is read only if the targets need it."""
        return self._relevance.ideal_gains(length, lambda: self._relevant_count_int)

    # -- per-position expected values --------------------------------------

    # Rows whose positions are tie groups of one item (t_c = 1; the CPU's
    # description says which rows hold ties: ``RankedList.tied_rows``) take the
    # closed forms at t_c = 1, which reduce to the item's own values, held by
    # the list already (0 at unranked places): relevance r, gain G, AP term
    # r (ρ + 1) / j, first hit r where ρ = 0. Each reduction is exact (the
    # general forms divide by t_c = 1, add 0 · slope and multiply by steps of
    # 1), so both give the same bits; only the tied rows take the general forms.

    @cached_property
    def relevance(self) -> Tensor:
        """P(the item at this position is relevant) = r_c / t_c."""
        return self._per_position(self.list.group_relevant, _relevance)

    @cached_property
    def gain(self) -> Tensor:
        if self.list.group_gain is self.list.group_relevant:
            return self.relevance  # binary relevance: the gains are the relevance itself
        return self._per_position(self.list.group_gain, _gain)

    def _ap_term_fields(self) -> tuple[Tensor, ...]:
        """What :func:`~ranking_plugins.kernel.statistics.closed_forms.ap_term_at` reads,
        but the position (relevance first)."""
        g = self.list
        return (self.relevance, g.group_start, g.group_size, g.group_relevant, g.relevant_before)

    @cached_property
    def _first_group(self) -> tuple[Tensor, Tensor, Tensor]:
        """The first group holding a relevant ranked item: its first place (Q, 1),
        P(first hit) at each of its places (Q, W) and whether each place is in
        the list (Q, W): W is the widest such group where host reads are free,
        the list's length elsewhere. No other place holds a first hit.
        """
        g = self.list
        first_group = g.ranked & (g.relevant_before == 0) & (g.group_relevant > 0)
        at = first_group.to(torch.int8).argmax(dim=1, keepdim=True)  # (Q, 1) its first place
        found = first_group.gather(1, at)
        r, t = g.group_relevant.gather(1, at), g.group_size.gather(1, at)
        # the group's places in the list (it may run past the end of a top-k list)
        places = torch.where(found, torch.minimum(t, self.length - at), 0.0)
        width = int(places.amax()) if host_reads_are_free(at) and at.numel() else self.length
        i = self.position[:width]  # 1-based place inside the group
        step = torch.where(t - i > 0, first_hit_step(t, r, i), 1.0)
        p = first_hit_probabilities(first_hit_at_first_place(t, r), step)
        in_list = i <= places
        return at, torch.where(in_list, p, 0.0), in_list

    def _per_position(self, own: Tensor, grouped: Callable[[RankedList], Tensor]) -> Tensor:
        """``grouped(list)``; or, where the list knows its tied rows, ``own`` (the
        list's field that is the value at t_c = 1) with those rows from ``grouped``."""
        g = self.list
        rows = g.tied_rows
        if rows is None:
            return grouped(g)
        if not rows.numel():
            return own
        values = own.clone()
        values[rows] = grouped(g.rows(rows))
        return values

    @cached_property
    def discount(self) -> Tensor:
        # reciprocal_ is what 1.0 / x computes (then times 1.0): the same bits, one launch
        return torch.log2(self.position + 1).reciprocal_()

    # -- cumulative sums, with a leading zero column: index k is "top k" ---------

    def _cumulative(
        self,
        values: Tensor,
        times: Tensor | None = None,
        over: Tensor | None = None,
        padded: bool = False,
    ) -> Tensor:
        """Prefix sums of ``values`` (times ``times``, over ``over``), 0 first: (Q, L + 1).

        One tensor, scaled and summed in place (0, x1, x1 + x2, ... as a cumsum
        adds them): every (Q, L) float64 tensor made here is fresh memory that
        the allocator may have to map page by page, often costlier than the
        arithmetic. ``padded``: ``values`` is that tensor already (its first
        column 0), and is summed in place.
        """
        sums = values if padded else torch.nn.functional.pad(values, (1, 0))
        if times is not None:
            sums[:, 1:].mul_(times)
        if over is not None:
            sums[:, 1:].div_(over)
        return sums.cumsum_(dim=1)

    def _sums(
        self,
        own: Tensor,
        one_item: Callable[[Tensor], object] | None,
        grouped: Callable[[RankedList], Tensor],
        times: Tensor | None = None,
        over: Tensor | None = None,
    ) -> Tensor:
        """:meth:`_cumulative` of a per-position value made in the sums' own tensor.

        Where the list knows which rows hold ties, the value of the other rows
        is their closed form at t_c = 1: ``own``, a field of the list, copied
        and changed in place by ``one_item``; the tied rows get ``grouped``.
        Elsewhere ``grouped`` gives every row.
        """
        g = self.list
        rows = g.tied_rows
        if rows is None:
            return self._cumulative(grouped(g), times, over)
        sums = torch.nn.functional.pad(own, (1, 0))
        body = sums[:, 1:]
        if one_item is not None:
            one_item(body)
        if rows.numel():
            body[rows] = grouped(g.rows(rows))
        return self._cumulative(sums, times, over, padded=True)

    # Where every row takes the general forms (no ``tied_rows``), the sums take the
    # per-position values made once (``relevance``, ``gain``): the same formulas, so
    # the same bits, without making them again for each sum that reads them.

    @cached_property
    def cum_hits(self) -> Tensor:
        if self.list.tied_rows is None:
            return self._cumulative(self.relevance)
        return self._sums(self.list.group_relevant, None, _relevance)

    @cached_property
    def cum_dcg(self) -> Tensor:
        if self.list.tied_rows is None:
            return self._cumulative(self.gain, times=self.discount)
        return self._sums(self.list.group_gain, None, _gain, times=self.discount)

    @cached_property
    def discount_prefix(self) -> Tensor:
        """(L + 1,) the discounts' prefix sums: index n is Σ_{j ≤ n} 1 / log2(j + 1)."""
        return self._cumulative(self.discount.unsqueeze(0))[0]

    @cached_property
    def cum_idcg(self) -> Tensor:
        if self._relevance.binary:  # ideal gains 1 down to R: the discounts' sums to min(n, R)
            n = torch.arange(self.length + 1, device=self.position.device)
            return self.discount_prefix[torch.minimum(n, self._ideal_depth.unsqueeze(1))]
        # the ideal list needs its own selection over the targets: only for ndcg
        ideal = self._ideal_gains(self.length)
        width = ideal.shape[1]
        discount = self.discount if width == self.length else self.discount[:width]
        return self._cumulative(ideal, times=discount)

    @property
    def _ideal_depth(self) -> Tensor:
        """(Q,) int64: R, where a binary ideal list's gains of 1 end."""
        return self._relevant_count_int.to(torch.int64)

    @cached_property
    def cum_ap(self) -> Tensor:
        """Σ E[rel_j * hits@j] / j: the AP term of SPEC section 3; at t_c = 1, r (ρ + 1) / j."""
        g, position = self.list, self.position
        if g.tied_rows is None:
            relevance, start, size, relevant, before = self._ap_term_fields()
            terms = ap_term_at(relevance, position, start, size, relevant, before, self._offset)
            return self._cumulative(terms)
        return self._sums(
            g.relevant_before,
            lambda body: body.add_(1).mul_(g.group_relevant).div_(position),
            lambda g: _ap_term(g, position),
        )

    @cached_property
    def cum_rr(self) -> Tensor:
        """Σ P(the first relevant item is at j) / j."""
        return self._first_hit_sums(over=self.position)

    @cached_property
    def cum_first_hit(self) -> Tensor:
        """Σ P(the first relevant item is at j); at t_c = 1 that is r where ρ = 0."""
        return self._first_hit_sums()

    @cached_property
    def _first_hit_at(self) -> Tensor:
        """(Q, L) P(the first relevant item is at each place), by the general forms:
        made once for both the reciprocal rank and the hit rate. Its first places' share
        r_c / t_c is :attr:`relevance` (the two are one division; where an unranked
        place's relevance is 0, its probability is dropped by ``_first_hit``'s last
        ``where``), its places in the group :attr:`_offset`, shared with AP."""
        return _first_hit(self.list, self.position, self.relevance, self._offset)

    @cached_property
    def _offset(self) -> Tensor:
        """(Q, L) position - group start, as the general forms of AP and the first hit
        read it (made once for both)."""
        return self.position - self.list.group_start

    def _first_hit_sums(self, over: Tensor | None = None) -> Tensor:
        g, position = self.list, self.position
        if g.tied_rows is None:  # every row by the general forms
            return self._cumulative(self._first_hit_at, over=over)
        return self._sums(
            g.group_relevant,
            lambda body: body.mul_(g.relevant_before == 0),
            lambda g: _first_hit(g, position),
            over=over,
        )

    def expect(self, metric_names: Collection[str], deepest: int | None = None) -> None:
        """Make the prefix sums that the metrics will read as one stacked tensor: one
        pad and one cumsum for all, instead of one of each per sum.

        Only on the accelerator's paths, where every row takes the general forms
        (no ``tied_rows``) and every sum is read from its prefix sums (no
        :class:`PlacedSums`). Each value is the one :meth:`_cumulative` sums (the
        factor or divisor applied first, as there) and the sums run along the
        same rows in the same order: the same bits.

        ``deepest``: the largest k read (None: the whole list). ndcg reads the ideal
        list's sums of this length (``cum_idcg``) when it is read that deep, and they
        join the stack when the ideal list is as long (graded targets: a binary ideal
        list takes the discounts' sums).
        """
        if self.list.tied_rows is not None or host_reads_are_free(self.list.ranked):
            return
        names = sorted(
            {SUMS_OF_METRICS[n] for n in metric_names if n in SUMS_OF_METRICS} - set(self.__dict__)
        )
        ideal: Tensor | None = None
        if (
            "ndcg" in metric_names
            and not self._relevance.binary
            and (deepest is None or deepest >= self.length)
            and "cum_idcg" not in self.__dict__
        ):
            ideal = self._ideal_gains(self.length)
            if ideal.shape[1] == self.length:
                names.append("cum_idcg")
            else:  # a shorter ideal list: its own sums, as cum_idcg makes them
                discount = self.discount[: ideal.shape[1]]
                self.__dict__["cum_idcg"] = self._cumulative(ideal, times=discount)
        if len(names) < 2:
            if names == ["cum_idcg"]:
                assert ideal is not None
                self.__dict__["cum_idcg"] = self._cumulative(ideal, times=self.discount)
            return

        def ap_terms() -> Tensor:
            relevance, start, size, relevant, before = self._ap_term_fields()
            position, offset = self.position, self._offset
            return ap_term_at(relevance, position, start, size, relevant, before, offset)

        def ideal_terms() -> Tensor:
            assert ideal is not None
            return ideal * self.discount

        made = {
            "cum_hits": lambda: self.relevance,
            "cum_dcg": lambda: self.gain * self.discount,
            "cum_ap": ap_terms,
            "cum_first_hit": lambda: self._first_hit_at,
            "cum_rr": lambda: self._first_hit_at / self.position,
            "cum_idcg": ideal_terms,
        }
        values = torch.stack([made[name]() for name in names])
        sums = torch.nn.functional.pad(values, (1, 0)).cumsum_(dim=2)
        rows = sums.unbind(0)
        for name, summed in zip(names, rows, strict=True):
            self.__dict__[name] = summed  # what the cached property would have made
        if len(names) > 3:  # one gather for all (expand, gather, unbind): fewer than one each
            self._stacked = (sums, rows)

    # -- sums over the top k, for a cutoff k (Q, K) ------------------------

    def _top(self, k: Tensor) -> Tensor:
        """(Q, K) int64: ``k`` cut at the list's length, made once per cutoff tensor."""
        if self._read_at is None or self._read_at[0] is not k:
            self._read_at = (k, k.clamp(max=self.length).to(torch.int64), None)
        return self._read_at[1]

    def _top_places(self, k: Tensor) -> Tensor:
        """:meth:`_top` as float64, the places of :class:`PlacedSums`."""
        top = self._top(k)
        assert self._read_at is not None
        places = self._read_at[2]
        if places is None:
            places = top.to(torch.float64).contiguous()
            self._read_at = (k, top, places)
        return places

    def at(
        self, cutoff: Tensor, adaptive_k: bool, whole_list: bool = False, deepest: int | None = None
    ) -> Cutoff:
        if whole_list and self._relevant_ranked_of is None:  # every item ranked: k = N
            self._list_end = cutoff
        return super().at(cutoff, adaptive_k, whole_list, deepest)

    def _read(self, cumulative: Tensor, k: Tensor) -> Tensor:
        stacked = self._stacked
        for row, summed in enumerate(() if stacked is None else stacked[1]):
            if summed is cumulative and stacked is not None:
                return self._read_stacked(stacked[0], k)[row]
        if k is self._list_end:  # the sums' last column, whatever their length
            return cumulative[:, -1:]
        if cumulative.shape[1] > self.length:  # a sum for every place of the list
            return cumulative.gather(1, self._top(k))
        index = k.clamp(max=cumulative.shape[1] - 1).to(torch.int64)
        return cumulative.gather(1, index)

    def _read_stacked(self, sums: Tensor, k: Tensor) -> tuple[Tensor, ...]:
        """Every stacked sum (:meth:`expect`) read at ``k``: one gather, made once per cutoff."""
        if self._stacked_at is None or self._stacked_at[0] is not k:
            if k is self._list_end:  # the lists' last place: a view of it, no gather
                read = sums[:, :, -1:]
            else:
                top = self._top(k)
                read = sums.gather(2, top.expand(sums.shape[0], *top.shape))
            self._stacked_at = (k, read.unbind(0))
        return self._stacked_at[1]

    def hits_at(self, k: Tensor) -> Tensor:
        return self._read(self.cum_hits, k)

    def dcg_at(self, k: Tensor) -> Tensor:
        return self._read(self.cum_dcg, k)

    def idcg_at(self, k: Tensor, whole_list: bool, deepest: int | None = None) -> Tensor:
        if whole_list:  # every relevant item's: the whole ideal list's last sum
            ideal = self._read(self.cum_idcg, k) if k is self._list_end else self.cum_idcg[:, -1:]
            return shaped_as(ideal, k)
        if self._relevance.binary:
            # cum_idcg read at k is the discounts' sum to min(k, R): no (Q, L) ideal list
            index = self._top(k)
            return self.discount_prefix[torch.minimum(index, self._ideal_depth.unsqueeze(1))]
        if deepest is not None and deepest < self.length:
            # the ideal list to the largest k only: a top-k selection, not a sort of the row
            # (a whole-list ranking read at k=10 would select all its L gains)
            return self._read(self._ideal_dcg_to(deepest), k)
        return self._read(self.cum_idcg, k)

    def _ideal_dcg_to(self, depth: int) -> Tensor:
        """(Q, depth + 1) the ideal DCG's prefix sums to ``depth``: cum_idcg's first columns."""
        if depth not in self._ideal_dcgs:
            ideal = self._ideal_gains(depth)
            self._ideal_dcgs[depth] = self._cumulative(ideal, times=self.discount[: ideal.shape[1]])
        return self._ideal_dcgs[depth]

    @cached_property
    def _ideal_dcgs(self) -> dict[int, Tensor]:
        return {}

    def _placed(self, k: Tensor) -> bool:
        """Whether to sum the values that are 0 but at a few places there only
        (:class:`PlacedSums`): on the CPU, for lists of more than
        :data:`PLACED_SUMS_ELEMENTS` places; smaller ones take the prefix sums of
        every place, fewer operations (both give the same bits)."""
        return host_reads_are_free(k) and self.list.ranked.numel() > PLACED_SUMS_ELEMENTS

    def ap_sum_at(self, k: Tensor) -> Tensor:
        if not self._placed(k):
            return self._read(self.cum_ap, k)
        # the AP term is 0 but at relevant places: summed there only
        relevance, *fields = self._ap_term_fields()
        rows, columns = (relevance != 0).nonzero(as_tuple=True)
        flat = rows * self.length + columns
        position = (columns + 1).to(torch.float64)
        terms = ap_term_at(
            torch.take(relevance, flat), position, *(torch.take(f, flat) for f in fields)
        )
        return PlacedSums.of(rows, columns, terms, relevance.shape[0]).at(self._top_places(k))

    def reciprocal_rank_at(self, k: Tensor, deepest: int | None) -> Tensor:
        # the prefix sums cover every position: read at k, no bound needed
        if not self._placed(k):
            return self._read(self.cum_rr, k)
        at, p, in_list = self._first_group
        position = at + self.position[: p.shape[1]]  # 1-based, in the whole list
        places = torch.where(in_list, position, math.inf)
        return PlacedSums(places, self._cumulative(p / position)).at(self._top_places(k))

    def hit_probability_at(self, k: Tensor) -> Tensor:
        return self._read(self.cum_first_hit, k)

    def geometric_gain_at(self, k: Tensor, persistence: float) -> Tensor:
        weight = persistence ** (self.position - 1)
        return self._read(self._cumulative(self.gain, times=weight), k)

    @cached_property
    def max_gain(self) -> Tensor:
        return self._ideal_gains(1)[:, 0]

    # -- whole-list statistics ---------------------------------------------

    @cached_property
    def rank_sum(self) -> Tensor:
        """E[sum of the ranks of the relevant ranked items]."""
        return (self.relevance * self.position).sum(dim=1)

    @cached_property
    def ordered_pairs(self) -> Tensor:
        """E[(relevant, non-relevant) pairs with the relevant item first]; a tie counts 1/2."""
        g, nonrelevant = self.list, self.nonrelevant_ranked.unsqueeze(1)
        t, r = g.group_size, g.group_relevant
        below = nonrelevant_below(g.group_start, t, r, g.relevant_before, nonrelevant)
        return (self.relevance * below).sum(dim=1)

    @property
    def auc_slots(self) -> AucSlots:
        """Every place, weighing the chance that it holds a relevant item."""
        g = self.list
        fields = (g.group_start, g.group_size, g.group_relevant, g.relevant_before)
        return AucSlots(self.relevance, *fields)

    def interpolated_precision(self, recall_levels: tuple[float, ...]) -> Tensor:
        """The best hits@j / j over the ranked relevant places from where hits@j reaches the level.

        hits@j never decreases, so those places are a suffix of the list: a
        suffix maximum of the precisions, read at the first place that reaches
        the level (O(Q · places), not per level).
        """
        hits = self.cum_hits[:, 1:]
        precision = torch.where(self.relevance > 0, hits / self.position, 0.0)
        suffix_best = torch.cummax(precision.flip(1), dim=1).values.flip(1)
        suffix_best = torch.cat([suffix_best, torch.zeros_like(suffix_best[:, :1])], dim=1)
        levels = torch.tensor(recall_levels, dtype=torch.float64, device=hits.device)
        needed = recall_level_hits(levels, self.relevant_count.unsqueeze(1))  # (Q, L)
        first = torch.searchsorted(hits.contiguous(), (needed - 1e-9).contiguous())
        best = suffix_best.gather(1, first)
        if not self.list.shared_ties:
            return best
        # "average": an expected maximum where a group mixes relevant and other items
        g = self.list
        mixed = g.ranked & (g.group_relevant > 0) & (g.group_size > g.group_relevant)
        first = g.ranked & (g.group_relevant > 0) & (self.position - 1 == g.group_start)
        fields = (g.group_start, g.group_size, g.group_relevant, g.relevant_before)
        return interpolated_precision_of_mixed_groups(best, needed, mixed, first, fields)

    def err_at(self, k: Tensor, exponential: bool) -> Tensor:
        if self.list.shared_ties:  # "average": survival over each group's orders
            return self._read(self._cumulative(self._err_average(exponential)), k)
        stop = stopping_probability(self.gain, self.max_gain.unsqueeze(1), exponential)
        stop = torch.where(self.list.ranked, stop, 0.0)
        reach = torch.cumprod(torch.cat([torch.ones_like(stop[:, :1]), 1 - stop[:, :-1]], 1), 1)
        return self._read(self._cumulative(reach * stop / self.position), k)

    @cached_property
    def bin_g_sum(self) -> Tensor:
        """Σ over places of P(relevant) · E[1/log2(2 + non-relevant before)] (closed_forms)."""
        g = self.list
        prefix = self.discount_prefix
        nonrelevant_before = g.group_start - g.relevant_before
        term = nonrelevant_slots_discount(
            prefix, nonrelevant_before, g.group_size - g.group_relevant
        )
        return (self.relevance * term).sum(dim=1)

    # -- judgments ------------------------------------------------

    def judgments(self) -> JudgedStats:
        """The statistics of judged items, made once, when a measure reads them."""
        cached: JudgedStats | None = self.__dict__.get("_judged")
        if cached is None:
            cached = JudgedStats(self.list, self._relevance, self.relevance, self.position)
            self.__dict__["_judged"] = cached
        return cached

    # -- G, ndcg_rel, Rndcg: computed only when one of them is read ----

    @cached_property
    def _ideal(self) -> Tensor:
        """(Q, L') the ideal list's gains, descending (zeros after R)."""
        return self._ideal_gains(self.length)

    @cached_property
    def ideal_gain_sum(self) -> Tensor:
        return self._ideal.sum(dim=1)

    @cached_property
    def gain_level_ends(self) -> Tensor:
        """Places where the ideal gain is positive and the next differs (or the list ends)."""
        ideal = self._ideal
        after = torch.cat([ideal[:, 1:], torch.zeros_like(ideal[:, :1])], dim=1)
        ends = (ideal > 0) & (after != ideal)
        return torch.where(ends, self.position[: ideal.shape[1]], 0.0)

    @cached_property
    def _cost_prefix(self) -> Tensor:
        """(Q, L + 1) trec_eval's cost of the top n: Σ_{j ≤ n} max(ideal gain_j, 1)."""
        ideal = self._ideal[:, : self.length]
        pad = self.length - ideal.shape[1]
        cost = torch.cat([ideal.clamp(min=1), torch.ones_like(ideal[:, :1]).expand(-1, pad)], 1)
        return self._cumulative(cost)

    @cached_property
    def g_sum(self) -> Tensor:
        """Position by position where groups hold interchangeable items; else group by group.

        Under "average" a group of several members with a non-zero gain among
        them is summed exactly over its orders on the host
        (:func:`~ranking_plugins.kernel.statistics.tie_orders.g_group_expectation`).
        """
        g = self.list
        gains = self._cumulative(self.gain)
        # Past 2^53 the cost of 1 that G adds at a place of gain < 1 vanishes in float64
        # (2^60 + 1 is 2^60) and log2(2 + cost - gain) is then far off: such gains are
        # refused, never approximated (one host read, under every policy).
        if bool((self._cost_prefix[:, -1] >= 2.0**53).any()):
            raise ValueError(
                "`g`: a query's gains sum to 2^53 or more, where G's costs of 1 per place "
                "are lost in float64; use smaller grades or gain='linear'"
            )
        # 2 + (cost - gain), not (2 + cost) - gain: past 2^53 the 2 was lost and the
        # log of 0 made a gain's term 0 (cost >= gain; rounding may not keep it so)
        left = 2 + (self._cost_prefix[:, 1:] - gains[:, 1:]).clamp(min=0)
        term = torch.where(self.gain != 0, self.gain / torch.log2(left), 0.0)
        if not g.shared_ties:
            return term.sum(dim=1)
        tied = g.ranked & (g.group_size > 1) & (g.group_gain != 0)
        total = torch.where(tied, 0.0, term).sum(dim=1)
        if not bool(tied.any()):
            return total
        assert g.items is not None, "a ranked list names its items"
        item_gain = self._relevance.at(g.items)[1]
        cost = self._cost_prefix.tolist()
        starts, sizes = g.group_start.tolist(), g.group_size.tolist()
        first = tied & (self.position - 1 == g.group_start)
        for q, place in first.nonzero().tolist():
            start, size = int(starts[q][place]), int(sizes[q][place])
            members = item_gain[q, start : start + size].tolist()
            total[q] += g_group_expectation(members, start, cost[q], float(gains[q, start]))
        return total

    @cached_property
    def ndcg_rel_sum(self) -> Tensor:
        """Σ over places of E[rel_p · DCG@p] / IDCG@min(p, R), E[rel_p · DCG@p] in closed form.

        A place p of group c (T items before it, t members, r relevant, gains G)
        holds a relevant item with probability r/t, independent of the groups
        before (expected DCG ``DB``); a relevant item there and a gain at an
        earlier place of the group go together with E = (r - 1) G / (t (t - 1));
        at p itself E = G / t.
        """
        g = self.list
        t, r = g.group_size, g.group_relevant
        before = self.cum_dcg.gather(1, g.group_start.to(torch.int64))
        prefix = self.discount_prefix
        start = g.group_start.to(torch.int64)
        inside = prefix[(self.position - 1).to(torch.int64)] - prefix[start]
        pair = torch.where(t > 1, (r - 1) * g.group_gain / (t * (t - 1)).clamp(min=1), 0.0)
        expected = self.relevance * before + pair * inside + self.discount * g.group_gain / t
        ideal = self._read(self.cum_idcg, self.position.expand_as(t))
        return torch.where(g.ranked & (r > 0), _ratio0(expected, ideal), 0.0).sum(dim=1)

    # -- ERR under "average": computed only when err is read ----------

    def _err_average(self, exponential: bool) -> Tensor:
        """(Q, L) E[ERR's term at each place] over the orders of every tie group.

        ERR = Σ_p (S(p-1) - S(p)) / p, S(p) = E[Π_{j ≤ p} (1 - R_j)]: the chance
        of reading past place p. Groups are ordered independently and a whole
        group's product does not depend on its order, so S at place u of group
        c is P_c (the product over the groups before) times the mean product
        over the u-subsets of the group's members
        (:func:`~ranking_plugins.kernel.statistics.tie_orders.subset_product_means`).
        """
        g = self.list
        assert g.items is not None, "a ranked list names its items"
        relevant, gain = self._relevance.at(g.items)
        relevant &= g.ranked
        max_gain = self.max_gain.unsqueeze(1)
        keep = torch.where(relevant, 1 - stopping_probability(gain, max_gain, exponential), 1.0)
        survive = torch.cumprod(torch.cat([torch.ones_like(keep[:, :1]), keep], dim=1), dim=1)
        tied = g.ranked & (g.group_size > 1) & (g.group_relevant > 0)
        if bool(tied.any()):
            survive = survive.clone()
            first = tied & (self.position - 1 == g.group_start)
            rows, starts = first.nonzero(as_tuple=True)
            number = torch.full_like(g.group_start, -1, dtype=torch.int64)
            number[rows, starts] = torch.arange(rows.numel(), device=rows.device)
            group = number.gather(1, g.group_start.to(torch.int64))  # -1: not a tied group
            size = g.group_size[rows, starts]
            count = g.group_relevant[rows, starts]
            # the relevant members' (1 - R), listed places first
            member = (torch.cumsum(relevant, 1) - 1 - g.relevant_before).to(torch.int64)
            width = int(count.max())
            keeps = torch.ones(rows.numel(), width, dtype=torch.float64, device=keep.device)
            listed = tied & relevant
            keeps[group[listed], member[listed]] = keep[listed]
            cut = g.cut_group
            if cut is not None:  # its members past the list: from the whole row
                row_relevant, row_gain = self._relevance.rows(cut.rows)
                row_keep = 1 - stopping_probability(row_gain, max_gain[cut.rows], exponential)
                for at_row, row in enumerate(cut.rows.tolist()):
                    place = int(g.group_start[row, -1])
                    index = int(number[row, place]) if bool(g.ranked[row, -1]) else -1
                    if index >= 0:
                        values = row_keep[at_row][cut.members[at_row] & row_relevant[at_row]]
                        keeps[index, : values.numel()] = values
            # F is built one member at a time, so its rounding follows the members'
            # order: the listed places' order, or the row's where a group is cut (the
            # accelerator's lists always have one). Ascending values give every path
            # the same bits; the padding of 1 stays last, past each group's count.
            keeps = keeps.sort(dim=1).values
            places = torch.minimum(size, self.length - starts.to(torch.float64))
            means = subset_product_means(keeps, size, count, int(places.max()))
            before = survive[rows, starts].unsqueeze(1)
            inside = (self.position - 1 - g.group_start).to(torch.int64)  # place - 1 in the group
            at = means[group.clamp(min=0), (inside + 1).clamp(max=means.shape[1] - 1)]
            at = before[group.clamp(min=0)].squeeze(-1) * at
            survive[:, 1:] = torch.where(group >= 0, at, survive[:, 1:])
        return (survive[:, :-1] - survive[:, 1:]) / self.position


#: the prefix sums of :class:`RankStats` that each metric reads at its cutoff
#: (:meth:`RankStats.expect`)
SUMS_OF_METRICS = {
    "hit_rate": "cum_first_hit",
    "mrr": "cum_rr",
    "ndcg": "cum_dcg",
    "map": "cum_ap",
    "precision": "cum_hits",
    "recall": "cum_hits",
    "f1": "cum_hits",
}


def _relevance(g: RankedList) -> Tensor:
    share = g.group_relevant / g.group_size
    return share if g.every_ranked else torch.where(g.ranked, share, 0.0)


def _gain(g: RankedList) -> Tensor:
    share = g.group_gain / g.group_size
    return share if g.every_ranked else torch.where(g.ranked, share, 0.0)


def _ap_term(g: RankedList, position: Tensor) -> Tensor:
    fields = (g.group_start, g.group_size, g.group_relevant, g.relevant_before)
    return ap_term_at(_relevance(g), position, *fields)


def _first_hit(
    g: RankedList, position: Tensor, share: Tensor | None = None, offset: Tensor | None = None
) -> Tensor:
    """P(the first relevant item is at each place). ``share``: r_c / t_c at the ranked
    places (:func:`_relevance`), ``offset``: position - group start, where made already."""
    r, t = g.group_relevant, g.group_size
    # the places outside the first relevant group, filled in place (``masked_fill_``
    # takes its value as is: no 0-d tensor to make for it, as ``where`` makes)
    outside = (g.relevant_before != 0) | (r <= 0)
    if not g.every_ranked:
        outside |= ~g.ranked
    if offset is None:
        offset = position - g.group_start
    left = t - offset  # places after this one in the group
    # At the group's last place (left = 0) the step is 0 / 0 or x / 0: it only scales
    # the places after the first group, which the last ``where`` sets to 0, so it
    # needs no guard. Places outside the first group step by exactly 1.
    step = first_hit_step_inside(left, r).masked_fill_(outside, 1.0)
    # positions before the first group contribute factor 1, so the product restarts there
    first = first_hit_at_first_place(t, r) if share is None else share
    p = first_hit_probabilities(first, step)
    return p.masked_fill_(outside, 0.0)


def _ratio0(numerator: Tensor, denominator: Tensor) -> Tensor:
    positive = denominator > 0
    return torch.where(positive, numerator / torch.where(positive, denominator, 1.0), 0.0)
