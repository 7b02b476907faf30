"""Rank statistics from counts: the tie group of each relevant item.

From the counts of :class:`~ranking_plugins.kernel.statistics.counting.RankCounter`,
each relevant item knows its tie group as SPEC section 3 describes it (T_c
items before it, t_c items in it, r_c of them relevant, ρ_c relevant items
before it). :class:`CountStats` sums the closed forms of section 3 over those
groups (:mod:`~ranking_plugins.kernel.statistics.closed_forms`), exactly as
:class:`~ranking_plugins.kernel.statistics.rank_stats.RankStats` sums them
position by position, so the metric table reads either one.

A group with r_c relevant members is reported by each of them; each adds
1/r_c of the group's share, so nothing has to be deduplicated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import cached_property

import torch
from torch import Tensor

from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.statistics.closed_forms import (
    ap_slope,
    first_hit_at_first_place,
    first_hit_probabilities,
    first_hit_step,
    geometric_weight_sum,
    log_hypergeometric,
    nonrelevant_below,
    nonrelevant_slots_discount,
    recall_level_hits,
    stopping_probability,
)
from ranking_plugins.kernel.statistics.judged import CountedJudgedStats, JudgedReadings
from ranking_plugins.kernel.statistics.list_stats import ListStats
from ranking_plugins.kernel.statistics.partial_auc import AucSlots
from ranking_plugins.kernel.statistics.tie_orders import interpolated_precision_of_mixed_groups


@functools.lru_cache(maxsize=4)
def _prefix_pairs(length: int, device: torch.device) -> Tensor:
    """(length + 1, 2) float64: :func:`_prefix_sums`' two tables side by side, read at once."""
    return torch.stack(_prefix_sums(length, device), dim=1)


@functools.lru_cache(maxsize=4)
def _prefix_sums(length: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Σ_{j≤n} 1/log2(j+1) and Σ_{j≤n} 1/j for n = 0..length, float64."""
    j = torch.arange(1, length + 1, dtype=torch.float64, device=device)
    zero = torch.zeros(1, dtype=torch.float64, device=device)
    discount = torch.cat([zero, torch.cumsum(1.0 / torch.log2(j + 1), 0)])
    harmonic = torch.cat([zero, torch.cumsum(1.0 / j, 0)])
    return discount, harmonic


class CountStats(ListStats):
    """Rank statistics from the tie group of each relevant item (Q, T each).

    The same readings as :class:`~ranking_plugins.kernel.statistics.rank_stats.RankStats`.
    """

    def __init__(
        self,
        ranked: Tensor,
        group_start: Tensor,
        group_size: Tensor,
        group_relevant: Tensor | None,
        relevant_before: Tensor | None,
        relevant_count: Tensor,
        num_ranked: Tensor,
        num_items: int,
    ) -> None:
        """``group_relevant``, ``relevant_before`` None: r_c = 1 and ρ_c = 0 for every
        item (one relevant id per query), made when a reading needs them."""
        self.ranked = ranked
        self.start, self.size = group_start, group_size
        if group_relevant is not None:
            self.group_relevant = group_relevant
        if relevant_before is not None:
            self.before = relevant_before
        self.relevant_count = relevant_count.to(torch.float64)
        self.num_ranked = num_ranked.to(torch.float64)
        # positions read go up to the end of the longest list, or R ≤ T for the ideal list
        self._table_length = max(num_items, ranked.shape[1], 1)
        #: the cutoffs last read and :meth:`_inside` of them
        self._inside_at: tuple[Tensor, Tensor] | None = None
        #: the readings at the cutoffs last read, one relevant id per query (:meth:`_one_id`)
        self._one_id_at: _OneIdReadings | None = None
        #: the statistics of judged items, when the judged items were
        #: counted; else ``every_judged`` makes them from these counts, every item judged
        self.judged_stats: CountedJudgedStats | None = None
        self.every_judged: Callable[[CountStats], CountedJudgedStats] | None = None

    @cached_property
    def group_relevant(self) -> Tensor:
        """r_c (Q, T) float64: where not given, one relevant item per group."""
        return torch.ones_like(self.start)

    @cached_property
    def before(self) -> Tensor:
        """ρ_c (Q, T) float64: where not given, no relevant item before a group."""
        return torch.zeros_like(self.start)

    @cached_property
    def relevant_ranked(self) -> Tensor:  # type: ignore[override]
        """Counted when read: only the whole-list measures read it."""
        return self.ranked.sum(dim=1, dtype=torch.float64)

    def judgments(self) -> JudgedReadings:
        if self.judged_stats is None and self.every_judged is not None:
            self.judged_stats = self.every_judged(self)
        if self.judged_stats is None:
            return super().judgments()
        return self.judged_stats

    @cached_property
    def _prefix(self) -> tuple[Tensor, Tensor]:
        return _prefix_sums(self._table_length, self.num_ranked.device)

    def _read(self, table: Tensor, n: Tensor) -> Tensor:
        return table[n.clamp(0, table.shape[0] - 1).to(torch.int64)]

    def _inside(self, k: Tensor) -> Tensor:
        """m: positions of each group within the top k, (Q, T, K).

        Made once per cutoff tensor (every metric of a Cutoff reads at its one k)."""
        if self._inside_at is None or self._inside_at[0] is not k:
            m = k.unsqueeze(1) - self.start.unsqueeze(2)
            self._inside_at = (k, torch.minimum(m.clamp(min=0), self.size.unsqueeze(2)))
        return self._inside_at[1]

    def _one_id(self, k: Tensor) -> _OneIdReadings | None:
        """The readings at ``k`` of one relevant id per query (T = 1), made once per cutoff
        tensor; None where a query lists several (the general readings)."""
        if self.ranked.shape[1] != 1 or k.ndim != 2:
            return None
        if self._one_id_at is None or self._one_id_at.k is not k:
            self._one_id_at = _OneIdReadings(self, k)
        return self._one_id_at

    def _total(self, per_item: Tensor) -> Tensor:
        """Sum over the ranked relevant items (dim 1) of (Q, T, K) values."""
        return torch.where(self.ranked.unsqueeze(2), per_item, 0.0).sum(dim=1)

    # -- sums over the top k, per relevant item: its group's share / r_c --------

    def hits_at(self, k: Tensor) -> Tensor:
        if (one_id := self._one_id(k)) is not None:
            return one_id.hits
        return self._total(self._inside(k) / self.size.unsqueeze(2))

    def dcg_at(self, k: Tensor) -> Tensor:
        if (one_id := self._one_id(k)) is not None:
            return one_id.table_share[..., 0]
        discount, _ = self._prefix
        start = self.start.unsqueeze(2)
        inside = self._read(discount, start + self._inside(k)) - self._read(discount, start)
        return self._total(inside / self.size.unsqueeze(2))

    def idcg_at(self, k: Tensor, whole_list: bool, deepest: int | None = None) -> Tensor:
        if not whole_list and (one_id := self._one_id(k)) is not None:
            return one_id.ideal_dcg
        discount, _ = self._prefix
        r = self.relevant_count.unsqueeze(1).expand_as(k)
        return self._read(discount, r if whole_list else torch.minimum(r, k))

    def ap_sum_at(self, k: Tensor) -> Tensor:
        _, harmonic = self._prefix
        t = self.size.unsqueeze(2)
        r = self.group_relevant.unsqueeze(2)
        start = self.start.unsqueeze(2)
        m = self._inside(k)
        slope = ap_slope(t, r)
        harmonic_part = self._read(harmonic, start + m) - self._read(harmonic, start)
        before = self.before.unsqueeze(2)
        return self._total(((before + 1 - (start + 1) * slope) * harmonic_part + slope * m) / t)

    def _first_group(self) -> Tensor:
        return (self.ranked & (self.before == 0)).unsqueeze(2)

    def hit_probability_at(self, k: Tensor) -> Tensor:
        """1 - P(no relevant item in the first m places of the first group), per member / r."""
        if (one_id := self._one_id(k)) is not None:
            return one_id.hit_probability
        t = self.size.unsqueeze(2)
        r = self.group_relevant.unsqueeze(2)
        m = self._inside(k)
        miss = torch.ones_like(m)
        for i in range(self.ranked.shape[1]):  # r ≤ T factors: C(t-m, r) / C(t, r)
            factor = ((t - m - i).clamp(min=0) / (t - i).clamp(min=1)).clamp(max=1)
            miss = torch.where(r > i, miss * factor, miss)
        share = (1 - miss) / r
        return torch.where(self._first_group(), share, 0.0).sum(dim=1)

    def reciprocal_rank_at(self, k: Tensor, deepest: int | None) -> Tensor:
        """Σ_i P(first hit at T+i) / (T+i) over the first group's places within k, / r."""
        if (one_id := self._one_id(k)) is not None:
            return one_id.table_share[..., 1]
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

        Walks the places of the group in blocks, with the first-hit recursion of
        :mod:`~ranking_plugins.kernel.statistics.closed_forms` (as ``RankStats`` does).
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
        p = first_hit_at_first_place(t, r)  # (Q, T, 1): P at the first place of the block
        block = 1024
        for first in range(1, places + 1, block):
            i = torch.arange(
                first, min(first + block, places + 1), dtype=torch.float64, device=m.device
            )
            step = first_hit_step(t, r, i)
            p_i = first_hit_probabilities(p, step)
            # running sums of P(i) / (T + i) over the block, with a leading 0: read at m
            partial = torch.cumsum(p_i / (start + i), dim=2)
            partial = torch.cat([torch.zeros_like(partial[..., :1]), partial], dim=2)
            read = (m - first + 1).clamp(0, i.numel()).to(torch.int64)
            total = total + partial.gather(2, read)
            p = p_i[..., -1:] * step[..., -1:]
        return torch.where(several, total, 0.0)

    @cached_property
    def max_gain(self) -> Tensor:
        """Item-index targets have one grade: gain 1 wherever a query has a relevant item."""
        return (self.relevant_count > 0).to(torch.float64)

    def geometric_gain_at(self, k: Tensor, persistence: float) -> Tensor:
        start = self.start.unsqueeze(2)
        weight = geometric_weight_sum(start, self._inside(k), persistence)
        return self._total(weight / self.size.unsqueeze(2))

    # -- whole-list statistics ---------------------------------------------

    @cached_property
    def rank_sum(self) -> Tensor:
        """E[sum of the ranks of the relevant ranked items]: T_c + (t_c + 1) / 2 each."""
        expected = self.start + (self.size + 1) / 2
        return torch.where(self.ranked, expected, 0.0).sum(dim=1)

    @cached_property
    def ordered_pairs(self) -> Tensor:
        """E[non-relevant items ranked below each relevant one]; a tie counts 1/2."""
        nonrelevant = self.nonrelevant_ranked.unsqueeze(1)
        below = nonrelevant_below(
            self.start, self.size, self.group_relevant, self.before, nonrelevant
        )
        return torch.where(self.ranked, below, 0.0).sum(dim=1)

    @property
    def auc_slots(self) -> AucSlots:
        """Each relevant ranked item, with its group."""
        fields = (self.start, self.size, self.group_relevant, self.before)
        return AucSlots(self.ranked.to(torch.float64), *fields)

    def interpolated_precision(self, recall_levels: tuple[float, ...]) -> Tensor:
        """The best place of each group of relevant items is its last: hits / place grows there."""
        hits = self.before + self.group_relevant
        precision = torch.where(self.ranked, hits / (self.start + self.size), 0.0)
        levels = torch.tensor(recall_levels, dtype=torch.float64, device=hits.device)
        needed = recall_level_hits(levels, self.relevant_count.unsqueeze(1))  # (Q, L)
        reached = self.ranked.unsqueeze(1) & (hits.unsqueeze(1) >= needed.unsqueeze(2) - 1e-9)
        best = torch.where(reached, precision.unsqueeze(1), 0.0)
        best = best.amax(dim=2) if best.shape[2] else best.sum(dim=2)
        # "average": an expected maximum where a group mixes relevant and other items
        mixed = self.ranked & (self.size > self.group_relevant)
        fields = (self.start, self.size, self.group_relevant, self.before)
        return interpolated_precision_of_mixed_groups(best, needed, mixed, self.ranked, fields)

    def err_at(self, k: Tensor, exponential: bool) -> Tensor:
        """Item-index targets: every relevant item has grade 1, R = 1/2 (g_max = 1).

        Under the ordered policies a group holding a relevant item holds only
        relevant items, at places T+1..T+t after ρ relevant ones: it adds
        Σ_{i ≤ m} (1/2)^(ρ+i) / (T+i) for its m places within k, each member 1/t.
        """
        one = torch.ones((), dtype=torch.float64, device=self.start.device)
        half = stopping_probability(one, one, exponential)
        if bool((self.ranked & (self.size > self.group_relevant)).any()):
            return self._err_mixed_groups(k, half)  # "average": relevant and not, tied
        start, before = self.start.unsqueeze(2), self.before.unsqueeze(2)
        m = self._inside(k)
        total = torch.zeros_like(m)
        for i in range(1, self.ranked.shape[1] + 1):  # t ≤ T places per group
            term = half * (1 - half) ** (before + i - 1) / (start + i)
            total = total + torch.where(m >= i, term, 0.0)
        return self._total(total / self.size.unsqueeze(2))

    @cached_property
    def bin_g_sum(self) -> Tensor:
        """Σ over the ranked relevant items of E[1/log2(2 + non-relevant before)] (closed_forms)."""
        discount, _ = self._prefix
        term = nonrelevant_slots_discount(
            discount, self.start - self.before, self.size - self.group_relevant
        )
        return torch.where(self.ranked, term, 0.0).sum(dim=1)

    # -- G, ndcg_rel, Rndcg: computed only when one of them is read ----

    @property
    def g_sum(self) -> Tensor:
        """Every relevant item has gain 1 and every cost is 1: trec_eval's G is its binG."""
        return self.bin_g_sum

    @property
    def ideal_gain_sum(self) -> Tensor:
        return self.relevant_count

    @property
    def gain_level_ends(self) -> Tensor:
        """One gain, so one level: it ends at R."""
        return self.relevant_count.unsqueeze(1)

    @cached_property
    def ndcg_rel_sum(self) -> Tensor:
        """Σ over the group's places p of E[rel_p · DCG@p] / D(min(p, R)), per member / r.

        Gain 1: E[rel_p · DCG@p] = (r/t) DB + r (r - 1) / (t (t - 1)) (D(p-1) - D(T))
        + (r/t) d_p, DB the expected DCG of the top T; the ideal DCG@p is D(p) up to
        R and D(R) after, so both stretches are differences of prefix tables.
        """
        discount, _ = self._prefix
        by_place, shifted = _ndcg_rel_tables(self._table_length, discount.device)
        t, r, start = self.size, self.group_relevant, self.start
        before = self.dcg_at(start) if start.shape[1] else torch.zeros_like(start)
        pair = torch.where(t > 1, (r - 1) / (t * (t - 1)).clamp(min=1), 0.0)
        R = self.relevant_count.unsqueeze(1)
        end = start + t
        high = torch.minimum(end, R).clamp(min=start)  # places start+1..high: IDCG@p = D(p)
        low = torch.maximum(start, R)  # places low+1..end: IDCG@p = D(R)
        high2 = torch.maximum(end, low)
        d_start = self._read(discount, start)

        def span(table: Tensor, a: Tensor, b: Tensor) -> Tensor:
            return self._read(table, b) - self._read(table, a)

        inverse, previous, own = by_place
        first = (
            before * span(inverse, start, high) / t
            + pair * (span(previous, start, high) - d_start * span(inverse, start, high))
            + span(own, start, high) / t
        )
        count = high2 - low
        second = (
            before * count / t
            + pair * (span(shifted, low, high2) - d_start * count)
            + span(discount, low, high2) / t
        ) / self._read(discount, R).clamp(min=1e-300)
        return torch.where(self.ranked, first + second, 0.0).sum(dim=1)

    # -- ERR under "average": read only for err -----------------------

    def _err_mixed_groups(self, k: Tensor, stop: Tensor) -> Tensor:
        """ERR@k when tie groups mix relevant and non-relevant items ("average").

        The group's place u + 1 holds a relevant item reached with j relevant
        items before it in the group with chance H(j) (r - j) / (t - u), H the
        hypergeometric chance of j relevant among u of t; it adds that times
        (1 - s)^(ρ + j) s / (T + u + 1), s = 1/2 (each member 1/r). The places are
        walked in blocks up to the deepest one any group has within k (a host
        read: on an accelerator it synchronises once). Cost O(Q · T · places · r).
        """
        t, r = self.size.unsqueeze(2), self.group_relevant.unsqueeze(2)
        start, before = self.start.unsqueeze(2), self.before.unsqueeze(2)
        m = self._inside(k)
        places = int(torch.where(self.ranked.unsqueeze(2), m, 0).max()) if m.numel() else 0
        widest = int(self.group_relevant.max()) if self.group_relevant.numel() else 0
        keep = 1 - stop
        total = torch.zeros_like(m)
        block = 256
        for first in range(0, places, block):
            u = torch.arange(
                first, min(first + block, places), dtype=torch.float64, device=m.device
            )
            reached = torch.zeros(*t.shape[:2], u.numel(), dtype=m.dtype, device=m.device)
            for j in range(widest + 1):
                possible = (j <= r) & (u - j >= 0) & (u - j <= t - r) & (u < t)
                log_h = log_hypergeometric(r, j, t, u)
                h = torch.where(possible, torch.exp(torch.where(possible, log_h, 0.0)), 0.0)
                chance = h * (r - j).clamp(min=0) / (t - u).clamp(min=1)
                reached = reached + chance * keep**j
            term = reached * stop * keep**before / (start + u + 1)
            partial = torch.cumsum(term, dim=2)
            partial = torch.cat([torch.zeros_like(partial[..., :1]), partial], dim=2)
            read = (m - first).clamp(0, u.numel()).to(torch.int64)
            total = total + partial.gather(2, read)
        return self._total(total / r.clamp(min=1))


class _OneIdReadings:
    """The readings at ``k`` (Q, K) of one relevant id per query, each made when read.

    A lone relevant item's group holds no other relevant item (r = 1, ρ = 0, the
    first group), so each reading is a closed form of its places within k,
    m = min(max(k - T, 0), t), shared; DCG, reciprocal rank and the ideal DCG
    read the prefix tables at T, T + m and min(R, k), stacked and read at once
    for every k. The expressions are the general readings' with r = 1, so the
    numbers are theirs to the bit.
    """

    def __init__(self, stats: CountStats, k: Tensor) -> None:
        self.k = k
        self.stats = stats
        m = torch.minimum((k - stats.start).clamp(min=0), stats.size)
        # an item not ranked has no place within k: each reading below is then 0, as
        # the general readings' mask makes it (t ≥ 1 and T is a count, so all is finite)
        self.m = torch.where(stats.ranked, m, 0.0)

    @cached_property
    def hits(self) -> Tensor:
        """E[hits]: m of the group's t places are within k."""
        return self.m / self.stats.size

    @cached_property
    def hit_probability(self) -> Tensor:
        """1 - C(t - m, 1) / C(t, 1): the item is among the group's first m places."""
        t = self.stats.size
        return 1 - (t - self.m) / t

    @cached_property
    def _read(self) -> Tensor:
        """(Q, 2K + 1, 2): the discount and harmonic tables at T, T + m and min(R, k)."""
        stats, k = self.stats, self.k
        start = stats.start
        ideal = torch.minimum(stats.relevant_count.unsqueeze(1), k)
        places = torch.cat([start, start + self.m, ideal], dim=1)
        pairs = _prefix_pairs(stats._table_length, start.device)
        return pairs[places.clamp(0, pairs.shape[0] - 1).to(torch.int64)]

    @cached_property
    def table_share(self) -> Tensor:
        """(Q, K, 2): DCG and reciprocal rank, the tables' differences over the m places / t."""
        read, width = self._read, self.k.shape[1]
        return (read[:, 1 : width + 1] - read[:, :1]) / self.stats.size.unsqueeze(2)

    @cached_property
    def ideal_dcg(self) -> Tensor:
        """D(min(R, k)), the ideal list's DCG."""
        return self._read[:, self.k.shape[1] + 1 :, 0]


@functools.lru_cache(maxsize=4)
def _ndcg_rel_tables(
    length: int, device: torch.device
) -> tuple[tuple[Tensor, Tensor, Tensor], Tensor]:
    """Prefix sums over places p ≤ n of 1/D(p), D(p-1)/D(p), d_p/D(p), and of D(p-1).

    D(p) = Σ_{j ≤ p} 1/log2(j + 1), d_p = 1/log2(p + 1): ndcg_rel's sums over a
    stretch of places, for item-id targets (gain 1).
    """
    j = torch.arange(1, length + 1, dtype=torch.float64, device=device)
    d = 1.0 / torch.log2(j + 1)
    big_d = torch.cumsum(d, 0)
    previous = big_d - d
    zero = torch.zeros(1, dtype=torch.float64, device=device)

    def prefix(values: Tensor) -> Tensor:
        return torch.cat([zero, torch.cumsum(values, 0)])

    tables = (prefix(1 / big_d), prefix(previous / big_d), prefix(d / big_d))
    return tables, prefix(previous)
