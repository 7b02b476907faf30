"""Item exposure: which catalogue items each query's top k holds, exactly, under every policy.

Under "average" every order of a tie group is equally likely, so a group
that straddles the cutoff k shares its ``s`` remaining places evenly: each of
its ``t`` members is in the top k with probability ``s / t`` (and any two of
them together with probability ``s (s - 1) / (t (t - 1))``). Under the other
policies the order decides (with ``identities``, items that the policy
cannot tell apart are ordered by index), so membership is 0 or 1.

:class:`TopItems` reads one ranked part at every k of the request: the
expected membership of each listed item, sums of an item weight over the top
k (novelty, arp, tail_share), the expected sum of pairwise similarities
inside the top k (diversity), and the batch's :class:`Exposure`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.inputs.items import ItemInputs
from ranking_plugins.kernel.ranking.tie_groups import RankedList

#: rows of :attr:`Exposure.sums`
COUNTS, SQUARES, LOG_ABSENT = range(3)


@dataclass(frozen=True)
class Exposure:
    """Sums over queries of each item's membership of the top k, per k: (3, K, N) float64.

    Rows (p = P(item in the query's top k)): Σp (the expected exposure count),
    Σp² and Σlog(1 - p) (-inf once an item is surely in some top k); with
    ``queries``, the number of queries. Every entry is a plain sum, so merging
    batches or processes is one addition.
    """

    sums: Tensor
    queries: Tensor  # 0-d float64

    @classmethod
    def zeros(cls, num_ks: int, num_items: int, device: torch.device | str | None) -> Exposure:
        return cls(
            torch.zeros(3, num_ks, num_items, dtype=torch.float64, device=device),
            torch.zeros((), dtype=torch.float64, device=device),
        )

    def merge(self, other: Exposure) -> Exposure:
        if other.sums.shape != self.sums.shape:
            raise ValueError(
                f"cannot merge an exposure of shape {tuple(other.sums.shape)} into one of "
                f"shape {tuple(self.sums.shape)}: the batches rank different catalogues"
            )
        return Exposure(self.sums + other.sums, self.queries + other.queries)

    @property
    def counts(self) -> Tensor:
        """(K, N) the expected number of queries whose top k holds each item."""
        return self.sums[COUNTS]


class TopItems:
    """Expected top-k membership of the items of one ranked part, at the ks (K,)."""

    def __init__(
        self,
        ranked: RankedList,
        num_ranked: Tensor,
        num_items: int,
        ks: Tensor,
        items: ItemInputs,
    ) -> None:
        assert ranked.items is not None
        self.list = ranked
        self.num_items = num_items
        self.items = items
        self.ks = ks  # (K,) float64
        self.num_ranked = num_ranked  # (Q,) float64
        length = ranked.ranked.shape[1]
        self.length = length
        position = torch.arange(length, dtype=torch.float64, device=ks.device)
        if ranked.shared_ties:
            self.start, self.size = ranked.group_start, ranked.group_size
        else:  # the order decides: each place is a group of its own
            self.start = position.expand_as(ranked.group_start)
            self.size = torch.ones_like(ranked.group_size)
        cut = ranked.cut_group
        # places of a group that goes on past the list: its members are read from the row
        self.listed = ranked.ranked
        if cut is not None:
            self.listed = self.listed & (self.start + self.size <= length)

    @staticmethod
    def _share(start: Tensor, size: Tensor, ks: Tensor) -> Tensor:
        """P(a member of a group at ``start`` of ``size`` is in the top k), (..., K)."""
        slots = (ks - start.unsqueeze(-1)).clamp(min=0)
        size = size.unsqueeze(-1)
        return torch.minimum(slots, size) / size.clamp(min=1)

    @cached_property
    def share(self) -> Tensor:
        """(Q, L, K): P(the item listed at this place is in the top k); 0 for a cut group."""
        share = self._share(self.start, self.size, self.ks)
        return torch.where(self.listed.unsqueeze(-1), share, 0.0)

    @cached_property
    def cut_share(self) -> Tensor | None:
        """(R, K) for the rows of the cut group: P(each member is in the top k), else None."""
        cut = self.list.cut_group
        if cut is None:
            return None
        start, size = cut.start.to(torch.float64), cut.size.to(torch.float64)
        beyond = (start + size > self.length).unsqueeze(-1)
        return torch.where(beyond, self._share(start, size, self.ks), 0.0)

    @cached_property
    def _cut_members(self) -> Tensor:
        assert self.list.cut_group is not None
        return self.list.cut_group.members.to(torch.float64)

    def _cut_sum(self, values: Tensor) -> Tensor:
        """Σ over each cut group's members of ``values`` (N, ...) per item: (R, ...)."""
        cut = self.list.cut_group
        assert cut is not None
        members = self._cut_members
        if cut.member_items is None:  # the columns are the catalogue
            return members @ values[: members.shape[1]]
        index = cut.member_items.clamp(max=values.shape[0] - 1)  # padding is no member
        chosen = values[index]  # (R, C, ...)
        weights = members.reshape(*members.shape, *([1] * (chosen.ndim - 2)))
        return (chosen * weights).sum(dim=1)

    @cached_property
    def list_size(self) -> Tensor:
        """(Q, K) items in the top k: min(k, ranked items)."""
        return torch.minimum(self.ks, self.num_ranked.unsqueeze(1))

    def exposure(self) -> Exposure:
        """This part's sums of membership per item and k (see :class:`Exposure`)."""
        assert self.list.items is not None
        num_items, num_ks = self.num_items, self.ks.shape[0]
        share = self.share  # (Q, L, K)
        device = share.device
        queries = torch.full((), float(self.list.ranked.shape[0]), dtype=torch.float64)
        if num_items == 0:  # an empty catalogue: no item to count (coverage is then 0 / 0)
            return Exposure(Exposure.zeros(num_ks, 0, device).sums, queries.to(device))
        # one flat scatter per row: entry (k, item) of the (K, N) table is k * N + item
        offsets = torch.arange(num_ks, device=device) * num_items
        # (a place without an item may name no catalogue item: its share is 0)
        items = self.list.items.clamp(max=num_items - 1)
        index = (items.unsqueeze(-1) + offsets).reshape(-1)
        sums = torch.zeros(3, num_ks * num_items, dtype=torch.float64, device=device)
        flat_share = share.reshape(-1)
        sums[COUNTS].index_add_(0, index, flat_share)
        if self._fractional(flat_share):
            sums[SQUARES].index_add_(0, index, flat_share * flat_share)
            sums[LOG_ABSENT].index_add_(0, index, torch.log1p(-flat_share))
        else:  # every share is 0 or 1: p² = p, and Σlog(1 - p) is 0 or -inf
            sums[SQUARES] = sums[COUNTS]
            sums[LOG_ABSENT] = torch.where(sums[COUNTS] > 0, -math.inf, 0.0)
        sums = sums.view(3, num_ks, num_items)
        cut_share = self.cut_share
        if cut_share is not None:  # every member of a cut group: P < 1, so the log is finite
            cut = self.list.cut_group
            assert cut is not None
            members = self._cut_members
            per_row = (cut_share, cut_share * cut_share, torch.log1p(-cut_share))  # (R, K) each
            if cut.member_items is None:  # the columns are the catalogue
                for row, value in enumerate(per_row):
                    sums[row] += value.T @ members
            else:  # candidate columns: scatter to their items (padding is no member)
                index = (
                    cut.member_items.clamp(max=num_items - 1).unsqueeze(1) + offsets.unsqueeze(1)
                ).reshape(-1)  # (R, K, C) flat
                flat = sums.view(3, -1)
                for row, value in enumerate(per_row):
                    flat[row].index_add_(
                        0, index, (value.unsqueeze(-1) * members.unsqueeze(1)).reshape(-1)
                    )
        return Exposure(sums, queries.to(device))

    def _fractional(self, flat_share: Tensor) -> bool:
        """Whether a membership may be strictly between 0 and 1 (a tie at a cutoff).

        Under "average" on the CPU the shares are read (free there): lists
        without a tie at any cutoff, the common case, take the 0-or-1 way.
        """
        if not self.list.shared_ties:
            return False
        if self.cut_share is not None or not host_reads_are_free(flat_share):
            return True
        return bool(((flat_share > 0) & (flat_share < 1)).any())

    def weight_sum(self, weight: Tensor) -> Tensor:
        """(Q, K): E[Σ of ``weight`` (N,) over the items in the top k]."""
        assert self.list.items is not None
        if weight.shape[0] == 0:  # an empty catalogue: no item in any top k, no index
            return torch.zeros_like(self.list_size)
        listed = weight[self.list.items.clamp(max=weight.shape[0] - 1)]  # (Q, L)
        listed = torch.where(self.listed, listed, 0.0)  # no weight read at padding
        total = torch.einsum("ql,qlk->qk", listed, self.share)
        cut_share = self.cut_share
        if cut_share is not None:
            cut = self.list.cut_group
            assert cut is not None
            total = total.index_add(0, cut.rows, cut_share * self._cut_sum(weight)[:, None])
        return total

    def pair_similarity_sum(self) -> Tensor:
        """(Q, K): E[Σ over pairs {i, j} in the top k of the similarity of i and j].

        The top k is A (the groups wholly inside) and s of the t members of the
        group B at the cutoff, so the expectation is
        pairs(A) + (s / t) cross(A, B) + s (s - 1) / (t (t - 1)) pairs(B),
        cross(A, B) the sum over the pairs of one item of A and one of B.
        Features: pairs of unit vectors (cosine), by vector sums. Categories:
        pairs of equal category, counted from the listed places (no one-hot
        table: a catalogue where nearly every item has its own category made
        it N x N).
        """
        assert self.list.items is not None
        length = self.length
        ks = self.ks.expand(self.list.ranked.shape[0], -1)
        last = (ks.clamp(max=length) - 1).to(torch.int64)  # the place before the cutoff
        start = self.start.gather(1, last)
        size = self.size.gather(1, last)
        group_start = start.to(torch.int64)
        group_end = (start + size).clamp(max=length).to(torch.int64)
        # a group at the cutoff that goes on past the list (the cut group): its members
        # come from the whole row
        beyond = (start + size > length) if self.list.cut_group is not None else None
        if self.items.features is not None:
            terms = self._vector_pairs(group_start, group_end, beyond)
        else:
            terms = self._category_pairs(group_start, group_end, beyond)
        if not self.list.shared_ties:  # the order decides: the top k is the first k places
            return terms[0]
        pairs_a, cross, pairs_b = terms
        slots = torch.minimum((ks - start).clamp(min=0), size)
        one = slots / size.clamp(min=1)
        both = torch.where(size > 1, slots * (slots - 1) / (size * (size - 1)).clamp(min=1), 0.0)
        return pairs_a + one * cross + both * pairs_b

    def _vector_pairs(
        self, group_start: Tensor, group_end: Tensor, beyond: Tensor | None
    ) -> tuple[Tensor, ...]:
        """pairs(A), cross(A, B), pairs(B) (Q, K) of :attr:`ItemInputs.unit_vectors`.

        For a set X with vector sum S and Σ|v|² = n the pairs sum to
        (|S|² - n) / 2, and cross(A, B) = S_A · S_B. Without shared ties: only
        the pairs of the first ``group_end`` places.
        """
        assert self.list.items is not None
        vectors, norms = self.items.unit_vectors, self.items.unit_norms
        padding = vectors.shape[0] - 1
        index = torch.where(self.list.ranked, self.list.items, padding)
        prefix = vectors[index].cumsum_(1)  # (Q, L, d): the sum of the first j + 1 places
        norm_prefix = norms[index].cumsum_(1)
        d = prefix.shape[2]

        def at(places: Tensor) -> tuple[Tensor, Tensor]:
            """Sums over the first ``places`` places (Q, K): prefix row places - 1, or 0."""
            row = (places - 1).clamp(min=0)
            some = (places > 0).unsqueeze(-1)
            s = prefix.gather(1, row.unsqueeze(-1).expand(-1, -1, d))
            return torch.where(some, s, 0.0), torch.where(
                some.squeeze(-1), norm_prefix.gather(1, row), 0.0
            )

        sum_end, norm_end = at(group_end)
        if not self.list.shared_ties:
            return (((sum_end * sum_end).sum(-1) - norm_end) / 2,)
        sum_a, norm_a = at(group_start)
        sum_b, norm_b = sum_end - sum_a, norm_end - norm_a
        cut = self.list.cut_group
        if cut is not None:
            assert beyond is not None
            in_cut = beyond[cut.rows].unsqueeze(-1)
            row_sum = self._cut_sum(vectors[:-1]).unsqueeze(1)  # (R, 1, d)
            row_norm = self._cut_sum(norms[:-1]).unsqueeze(1)
            sum_b = sum_b.index_put((cut.rows,), torch.where(in_cut, row_sum, sum_b[cut.rows]))
            norm_b = norm_b.index_put(
                (cut.rows,), torch.where(in_cut.squeeze(-1), row_norm, norm_b[cut.rows])
            )
        pairs_a = ((sum_a * sum_a).sum(-1) - norm_a) / 2
        pairs_b = ((sum_b * sum_b).sum(-1) - norm_b) / 2
        return pairs_a, (sum_a * sum_b).sum(-1), pairs_b

    def _category_pairs(
        self, group_start: Tensor, group_end: Tensor, beyond: Tensor | None
    ) -> tuple[Tensor, ...]:
        """pairs(A), cross(A, B), pairs(B) (Q, K): the pairs of equal category.

        Each listed item pairs with the earlier places of its row of its
        category: ``earlier`` of them in all, ``in_group`` of them in its own tie
        group. Summed over the first p places, ``earlier`` gives the pairs of
        those places; over the places of B, ``in_group`` gives pairs(B) and the
        rest cross(A, B) (B's earlier places outside B are in A). Integers, as
        sums of one-hot vectors would be: the same float64 values.
        """
        assert self.list.items is not None and self.items.categories is not None
        ranked = self.list.ranked
        q, length = ranked.shape
        position = torch.arange(length, device=ranked.device).expand(q, length)
        categories = self.items.categories
        if categories.shape[0] == 0:  # an empty catalogue: every place is padding
            categories = categories.new_zeros(1)
        listed = categories[self.list.items.clamp(max=categories.shape[0] - 1)]
        # a place without an item pairs with nothing: a label of its own (ids are >= 0)
        label = torch.where(ranked, listed, -1 - position)
        # a stable sort keeps each category's places in list order, so the earlier
        # places of a category are its places before it in the sorted row
        label, order = label.sort(dim=1, stable=True)
        new_label = torch.ones_like(ranked)
        torch.ne(label[:, 1:], label[:, :-1], out=new_label[:, 1:])

        def earlier(new_run: Tensor) -> Tensor:
            """(Q, L) per place of the list: the places before it in its run of the sort."""
            first = torch.where(new_run, position, 0).cummax(dim=1).values
            return torch.empty_like(order).scatter_(1, order, position - first)

        earlier_same = earlier(new_label).cumsum_(1)

        def at(prefix: Tensor, places: Tensor) -> Tensor:
            """The sum of ``prefix`` over the first ``places`` places (Q, K)."""
            row = (places - 1).clamp(min=0)
            return torch.where(places > 0, prefix.gather(1, row), 0)

        if not self.list.shared_ties:
            return (at(earlier_same, group_end).to(torch.float64),)
        # a tie group is a run of places: inside a category's sorted places, those
        # of one group are neighbours
        group = self.start.gather(1, order)
        new_group = new_label.clone()
        new_group[:, 1:] |= group[:, 1:] != group[:, :-1]
        in_group = earlier(new_group).cumsum_(1)
        pairs_a = at(earlier_same, group_start)
        pairs_b = at(in_group, group_end) - at(in_group, group_start)
        cross = at(earlier_same, group_end) - pairs_a - pairs_b
        cut = self.list.cut_group
        if cut is not None:
            assert beyond is not None
            in_cut = beyond[cut.rows]
            row_pairs, row_cross = self._cut_category_pairs(listed, ranked)
            pairs_b = pairs_b.index_put(
                (cut.rows,), torch.where(in_cut, row_pairs.unsqueeze(1), pairs_b[cut.rows])
            )
            cross = cross.index_put(
                (cut.rows,), torch.where(in_cut, row_cross.unsqueeze(1), cross[cut.rows])
            )
        return tuple(t.to(torch.float64) for t in (pairs_a, cross, pairs_b))

    def _cut_category_pairs(self, listed: Tensor, ranked: Tensor) -> tuple[Tensor, Tensor]:
        """(R,) each: pairs(B) and cross(A, B) of the cut groups' whole rows.

        B is all the group's members, A the places before the group (the group
        that holds the last place): Σ_c m_c (m_c - 1) / 2 and Σ_c a_c m_c, from
        the counts m_c of members and a_c of places of each category c.
        """
        cut = self.list.cut_group
        assert cut is not None and self.items.categories is not None
        categories = self.items.categories
        members = cut.members.to(torch.int64)  # (R, N), or (R, candidates)
        if cut.member_items is None:  # the columns are the catalogue
            member_labels = categories.expand_as(members)
        else:  # (padding is no member: any label)
            member_labels = categories[cut.member_items.clamp(max=categories.shape[0] - 1)]
        start = self.start[cut.rows, -1:].to(torch.int64)
        places = (torch.arange(self.length, device=ranked.device) < start) & ranked[cut.rows]
        place_labels = listed[cut.rows]  # (a place without an item is counted 0 times)
        num_rows, num_categories = members.shape[0], self.items.num_categories
        if num_rows * num_categories <= members.numel():
            # an (R, C) table no larger than the members': counted without a sort
            # (sorting the members of large groups was ten times slower)
            table = members.new_zeros(2, num_rows, num_categories)
            in_b = table[0].scatter_add_(1, member_labels, members)
            in_a = table[1].scatter_add_(1, place_labels, places.to(torch.int64))
        else:  # more categories than candidates: count the runs of each row's sorted labels
            labels, order = torch.cat([member_labels, place_labels], dim=1).sort(dim=1)
            run = torch.ones_like(labels)
            run[:, 0] = 0
            torch.ne(labels[:, 1:], labels[:, :-1], out=run[:, 1:])
            run = run.cumsum_(1)
            zeros = torch.zeros_like(place_labels)
            in_b = torch.zeros_like(labels).scatter_add_(
                1, run, torch.cat([members, zeros], dim=1).gather(1, order)
            )
            in_a = torch.zeros_like(labels).scatter_add_(
                1,
                run,
                torch.cat([torch.zeros_like(members), places.to(torch.int64)], 1).gather(1, order),
            )
        return (in_b * (in_b - 1) // 2).sum(1), (in_a * in_b).sum(1)


def personalisation(exposure: Exposure, ks: Tensor) -> Tensor:
    """(K,) 1 - E[mean overlap ``|L_a ∩ L_b| / k`` over pairs of queries] (PyG's definition).

    The pairs' overlaps sum to Σ_i Σ_{a<b} p_ai p_bi = Σ_i (c_i² - Σ_a p_ai²) / 2,
    from the exposure's Σp and Σp²: no pair of queries is visited.
    """
    counts, squares = exposure.sums[COUNTS], exposure.sums[SQUARES]
    q = exposure.queries
    overlap = ((counts * counts - squares).sum(1) / 2) / (q * (q - 1) / 2) / ks
    return torch.where(q > 1, 1 - overlap, math.nan)


__all__ = ["Exposure", "TopItems", "personalisation"]
