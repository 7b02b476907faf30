"""Statistics of judged items: what bpref, infAP, unj and rbp_resid read.

An item is *pooled* when it carries a judgment entry (trec_eval: it is in the
qrels) and *judged* when it is pooled with a grade of 0 or more (a negative
grade is trec_eval's "in the pool but not judged"). :class:`JudgedStats`
reads those states along a ranked list (:class:`RankedList`) and gives, per
query, the sums the measures of incomplete judgments need, exactly under every
tie policy where the measure is a sum of per-group terms:

* under "average" a tie group's members share its places evenly, so the
  chance that a place holds a judged item is the group's judged share;
* a relevant item's count of judged non-relevant items before it is the
  count before its group plus U, where U, the number of the group's n judged
  non-relevant items placed before it, is uniform over 0..n (the item's place
  among those n + 1 items is uniform): bpref's E[min(J + U, R)] is a
  difference of prefix sums of min(v, R) (:func:`capped_prefix_sum`);
* under the ordered policies a group that holds a relevant item holds only
  relevant items, so those counts are the counts before the group, and the
  same formulas give the deterministic value;
* infAP's term reads the place and three counts before the item, not a sum
  of per-position terms: under "average" a group that mixes relevant and
  other items is summed over its orders
  (:func:`~ranking_plugins.kernel.statistics.tie_orders.expected_infap_terms`).

Made only when a measure of judged items is read (``RankStats.judgments``):
the requests of the other metrics never pay for it.
"""

from __future__ import annotations

from functools import cached_property
from typing import Protocol

import torch
from torch import Tensor

from ranking_plugins.kernel.inputs.relevance import Relevance
from ranking_plugins.kernel.ranking.tie_groups import RankedList
from ranking_plugins.kernel.statistics.closed_forms import geometric_weight_sum
from ranking_plugins.kernel.statistics.tie_orders import INFAP_EPSILON, expected_infap_terms


class JudgedReadings(Protocol):
    """What the measures of judged items read, from a ranked list or from counts."""

    @property
    def nonrelevant_judged_ranked(self) -> Tensor: ...
    @property
    def unjudged_ranked(self) -> Tensor: ...
    @property
    def judged_nonrelevant_count(self) -> Tensor: ...
    @property
    def infap_sum(self) -> Tensor: ...
    def judged_at(self, k: Tensor) -> Tensor: ...
    def unjudged_geometric(self, persistence: float) -> Tensor: ...
    def bpref_sum(self, relevant_count: Tensor) -> Tensor: ...


def capped_prefix_sum(x: Tensor, cap: Tensor) -> Tensor:
    """Σ_{v=0}^{x-1} min(v, cap): m(m - 1)/2 + (x - m)·cap with m = min(x, cap)."""
    m = torch.minimum(x, cap)
    return m * (m - 1) / 2 + (x - m) * cap


class JudgedStats:
    """Per-query sums over a ranked list of the judged, pooled and relevant items.

    ``relevance``: the expected relevance of each place (``RankStats.relevance``);
    ``position``: 1..L, float64.
    """

    def __init__(
        self,
        ranked_list: RankedList,
        relevance: Relevance,
        place_relevance: Tensor,
        position: Tensor,
    ) -> None:
        g = ranked_list
        assert g.items is not None, "a ranked list names its items"
        ranked = g.ranked
        relevant, _ = relevance.at(g.items)
        judged, pooled = relevance.judgment_at(g.items)
        relevant &= ranked
        judged &= ranked
        pooled &= ranked
        self.list = g
        self.ranked = ranked
        self.position = position
        self.place_relevance = place_relevance
        self._relevance = relevance
        self._group = g.group_start.to(torch.int64)
        self._judged = judged.to(torch.float64)
        self._nonrelevant_judged = (judged & ~relevant).to(torch.float64)
        # pooled but not judged, and not relevant: a negative grade that a threshold
        # below it makes relevant (SPEC 4) is counted once, as relevant (it is in R);
        # counting it here as well pushed infAP above 1 (tests/test_judged.py)
        self._pooled_unjudged = (pooled & ~judged & ~relevant).to(torch.float64)

    def _group_total(self, values: Tensor) -> Tensor:
        """The sum of ``values`` over each place's tie group, at every place."""
        total = torch.zeros_like(values).scatter_add_(1, self._group, values)
        return total.gather(1, self._group)

    def _before_group(self, values: Tensor) -> Tensor:
        """The sum of ``values`` over the places before each place's tie group."""
        cumulative = torch.cat(
            [torch.zeros_like(values[:, :1]), torch.cumsum(values, dim=1)], dim=1
        )
        return cumulative.gather(1, self._group)

    @cached_property
    def judged_share(self) -> Tensor:
        """(Q, L) P(the place holds a judged item)."""
        share = self._group_total(self._judged) / self.list.group_size
        return torch.where(self.ranked, share, 0.0)

    @cached_property
    def _cumulative_judged(self) -> Tensor:
        share = self.judged_share
        return torch.cat([torch.zeros_like(share[:, :1]), torch.cumsum(share, dim=1)], dim=1)

    def judged_at(self, k: Tensor) -> Tensor:
        """(Q, K) E[judged items in the top k]; places past the list hold none."""
        cumulative = self._cumulative_judged
        index = k.clamp(max=cumulative.shape[1] - 1).to(torch.int64)
        return cumulative.gather(1, index)

    @cached_property
    def nonrelevant_judged_ranked(self) -> Tensor:
        """(Q,) judged non-relevant ranked items (trec_eval's num_nonrel_judged_ret)."""
        return self._nonrelevant_judged.sum(dim=1)

    @cached_property
    def unjudged_ranked(self) -> Tensor:
        """(Q,) ranked items that are not judged."""
        return (self.ranked.to(torch.float64) - self._judged).sum(dim=1)

    def unjudged_geometric(self, persistence: float) -> Tensor:
        """(Q,) E[Σ over unjudged ranked places j of p^(j-1)] (rbp_resid's sum)."""
        unjudged = torch.where(self.ranked, 1 - self.judged_share, 0.0)
        return (unjudged * persistence ** (self.position - 1)).sum(dim=1)

    @cached_property
    def judged_nonrelevant_count(self) -> Tensor:
        """(Q,) N: judged non-relevant items of the query, ranked or not."""
        return self._relevance.judged_nonrelevant_count().to(torch.float64)

    def bpref_sum(self, relevant_count: Tensor) -> Tensor:
        """(Q,) E[Σ over ranked relevant items of 1 - min(n_r, R) / min(N, R)].

        n_r: judged non-relevant items ranked before the item (trec_eval's bpref,
        before its division by R); J before the item's group plus U, uniform over
        0..n, n the group's judged non-relevant items.
        """
        r = relevant_count.unsqueeze(1)
        before = self._before_group(self._nonrelevant_judged)
        inside = self._group_total(self._nonrelevant_judged)
        expected_min = (
            capped_prefix_sum(before + inside + 1, r) - capped_prefix_sum(before, r)
        ) / (inside + 1)
        scale = torch.minimum(self.judged_nonrelevant_count.unsqueeze(1), r)
        term = 1 - torch.where(scale > 0, expected_min / torch.where(scale > 0, scale, 1.0), 0.0)
        return (self.place_relevance * term).sum(dim=1)

    @cached_property
    def infap_sum(self) -> Tensor:
        """(Q,) Σ over ranked relevant items at place j of trec_eval's infAP term.

        (1 + d · (ρ + ε) / (ρ + n + 2ε)) / j, with ρ relevant, n judged
        non-relevant and d = ρ + n + u pooled items before it (u pooled but not
        judged). A group of relevant items only (every group that holds one,
        under the ordered policies) gives each place its deterministic term;
        under "average" a group that mixes relevant and other items gives r
        times a member's expected term
        (:func:`~ranking_plugins.kernel.statistics.tie_orders.expected_infap_terms`).
        """
        g = self.list
        rho = g.relevant_before + (self.position - g.group_start - 1)
        n = self._before_group(self._nonrelevant_judged)
        u = self._before_group(self._pooled_unjudged)
        precision = (rho + INFAP_EPSILON) / (rho + n + 2 * INFAP_EPSILON)
        term = self.place_relevance * (1 + (rho + n + u) * precision) / self.position
        if not g.shared_ties:
            return term.sum(dim=1)
        mixed = g.ranked & (g.group_relevant > 0) & (g.group_size > g.group_relevant)
        total = torch.where(mixed, 0.0, term).sum(dim=1)
        first = mixed & (self.position - 1 == g.group_start)
        if not bool(first.any()):
            return total
        rows, places = first.nonzero(as_tuple=True)
        relevant = g.group_relevant[rows, places]
        expected = expected_infap_terms(
            rows,
            g.group_start[rows, places],
            g.group_size[rows, places],
            relevant,
            self._group_total(self._nonrelevant_judged)[rows, places],
            self._group_total(self._pooled_unjudged)[rows, places],
            g.relevant_before[rows, places],
            n[rows, places],
            u[rows, places],
        )
        return total.index_add(0, rows, relevant * expected)


class CountedJudgedStats:
    """:class:`JudgedStats`' readings from counts, for item-id targets (``EmbeddingScores``).

    The tracked items of each query (Q, T) are its judged and relevant items,
    each with its counts over the whole catalogue (ranked items above, tied, and
    tied with a lower index) and the same counts among the tracked items
    (relevant, judged non-relevant), from :meth:`RankCounter.tracked_counts`.
    Each tracked item's place is uniform over a range ``lo + 1 .. lo + m``
    (the tie policy's: its tie group under "average", one place under
    "first", the relevant or the non-relevant part of its tie under
    "pessimistic" and "optimistic"), which gives the judged share of the top
    k and the geometric sums; bpref's and infAP's terms follow from the counts
    before the item as :class:`JudgedStats` reads them from a ranked list.
    ``every_judged``: no ``judged`` was given, every item is judged (the tracked
    items are then the relevant ones, and the judged non-relevant counts are
    the non-relevant ones).
    """

    def __init__(
        self,
        counts: dict[str, Tensor],
        ties: str,
        num_ranked: Tensor,
        judged_nonrelevant_count: Tensor,
        every_judged: bool,
    ) -> None:
        c = {name: value.to(torch.float64) for name, value in counts.items()}
        self.ranked = counts["ranked"]
        self.relevant = counts["relevant"] & self.ranked
        self.judged = counts["judged"] & self.ranked
        self.ties = ties
        self.num_ranked = num_ranked.to(torch.float64)
        self.judged_nonrelevant_count = judged_nonrelevant_count.to(torch.float64)
        self.every_judged = every_judged
        above, tied, tied_before = c["above"], c["tied"], c["tied_before"]
        rel_above, rel_tied, rel_tied_before = c["rel_above"], c["rel_tied"], c["rel_tied_before"]
        if every_judged:  # every other item is judged: non-relevant = all less relevant
            jn_above, jn_tied = above - rel_above, tied - rel_tied
            jn_tied_before = tied_before - rel_tied_before
        else:
            jn_above, jn_tied, jn_tied_before = c["jn_above"], c["jn_tied"], c["jn_tied_before"]
        relevant = self.relevant
        # the range of places lo + 1 .. lo + m each tracked item is uniform over
        if ties == "average":
            lo, m = above, tied + 1
        elif ties == "first":
            lo, m = above + tied_before, torch.ones_like(above)
        elif ties == "pessimistic":  # non-relevant ties first, then the relevant ones
            lo = torch.where(relevant, above + tied - rel_tied, above)
            m = torch.where(relevant, rel_tied + 1, tied - rel_tied + 1)
        else:  # optimistic: relevant ties first
            lo = torch.where(relevant, above, above + rel_tied)
            m = torch.where(relevant, rel_tied + 1, tied - rel_tied + 1)
        self._lo, self._m = lo, m
        #: under "average": each tracked item's tie group, for infAP's expectation
        self._groups = (above, tied, rel_above, rel_tied, jn_above, jn_tied)
        # bpref: judged non-relevant items before a relevant one: J + U, U uniform 0..n
        if ties == "average":
            self._before, self._inside = jn_above, jn_tied
        elif ties == "first":
            self._before, self._inside = jn_above + jn_tied_before, torch.zeros_like(above)
        elif ties == "pessimistic":
            self._before, self._inside = jn_above + jn_tied, torch.zeros_like(above)
        else:
            self._before, self._inside = jn_above, torch.zeros_like(above)
        # infAP (ordered policies): the place and the relevant items before it
        if ties == "first":
            self._place = above + tied_before + 1
            self._rho = rel_above + rel_tied_before
        else:  # a relevant item takes the i-th place of its tie's relevant part
            self._place = lo + rel_tied_before + 1
            self._rho = rel_above + rel_tied_before

    def judged_at(self, k: Tensor) -> Tensor:
        if self.every_judged:
            return torch.minimum(k, self.num_ranked.unsqueeze(1))
        inside = (k.unsqueeze(1) - self._lo.unsqueeze(2)).clamp(min=0)
        share = torch.minimum(inside, self._m.unsqueeze(2)) / self._m.unsqueeze(2)
        return torch.where(self.judged.unsqueeze(2), share, 0.0).sum(dim=1)

    @cached_property
    def nonrelevant_judged_ranked(self) -> Tensor:
        if self.every_judged:
            return self.num_ranked - self.relevant.sum(dim=1)
        return (self.judged & ~self.relevant).sum(dim=1).to(torch.float64)

    @cached_property
    def unjudged_ranked(self) -> Tensor:
        if self.every_judged:
            return torch.zeros_like(self.num_ranked)
        return self.num_ranked - self.judged.sum(dim=1)

    def unjudged_geometric(self, persistence: float) -> Tensor:
        if self.every_judged:
            return torch.zeros_like(self.num_ranked)
        p = persistence
        every_place = (1 - p**self.num_ranked) / (1 - p)
        judged = geometric_weight_sum(self._lo, self._m, p) / self._m
        return every_place - torch.where(self.judged, judged, 0.0).sum(dim=1)

    def bpref_sum(self, relevant_count: Tensor) -> Tensor:
        r = relevant_count.unsqueeze(1)
        before, inside = self._before, self._inside
        expected_min = (
            capped_prefix_sum(before + inside + 1, r) - capped_prefix_sum(before, r)
        ) / (inside + 1)
        scale = torch.minimum(self.judged_nonrelevant_count.unsqueeze(1), r)
        term = 1 - torch.where(scale > 0, expected_min / torch.where(scale > 0, scale, 1.0), 0.0)
        return torch.where(self.relevant, term, 0.0).sum(dim=1)

    @cached_property
    def infap_sum(self) -> Tensor:
        """As :attr:`JudgedStats.infap_sum` (no pooled-only items: a listed id is judged).

        Under "average" a relevant item whose tie group holds other items takes
        its expected term, once per group
        (:func:`~ranking_plugins.kernel.statistics.tie_orders.expected_infap_terms`).
        """
        rho, n = self._rho, self._before
        precision = (rho + INFAP_EPSILON) / (rho + n + 2 * INFAP_EPSILON)
        term = torch.where(self.relevant, (1 + (rho + n) * precision) / self._place, 0.0)
        if self.ties != "average":
            return term.sum(dim=1)
        above, tied, rel_above, rel_tied, jn_above, jn_tied = self._groups
        mixed = self.relevant & (tied > rel_tied)
        if not bool(mixed.any()):
            return term.sum(dim=1)
        rows, cols = mixed.nonzero(as_tuple=True)
        # the relevant members of a group report it alike: one expectation per group
        keys = torch.stack([rows, above[rows, cols].to(torch.int64)])
        _, inverse = torch.unique(keys, dim=1, return_inverse=True)
        first = torch.full((int(inverse.max()) + 1,), rows.numel(), device=rows.device)
        first = first.scatter_reduce(
            0, inverse, torch.arange(rows.numel(), device=rows.device), reduce="amin"
        )
        q, i = rows[first], cols[first]
        zero = torch.zeros_like(above[q, i])
        expected = expected_infap_terms(
            q,
            above[q, i],
            tied[q, i] + 1,
            rel_tied[q, i] + 1,
            jn_tied[q, i],
            zero,
            rel_above[q, i],
            jn_above[q, i],
            zero,
        )
        term = term.index_put((rows, cols), expected[inverse])
        return term.sum(dim=1)
