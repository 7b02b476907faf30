"""Tie order and tie groups: how a ranked list is described (SPEC section 3).

A ranked list is described position by position by its tie group (start,
size, relevant count, gain sum; :class:`RankedList`). Under "average" a group
is a run of equal scores; the other ``ties`` policies first order the items
inside equal scores by a :func:`tie_key`, so that a group only holds items no
metric can tell apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

# kept where the command's parser reads it without torch
from ranking_plugins.choices import TIES as TIES
from ranking_plugins.kernel.flags import count_true
from ranking_plugins.kernel.host_reads import host_reads_are_free

#: the policies that order NaN scores (``validate_args=False``) among themselves as
#: tied scores, by their tie key; under "average" and "first" each NaN is a group of
#: its own, lower index first. NaN ranks above every number under every policy.
NAN_TIED = ("pessimistic", "optimistic")


@dataclass(frozen=True)
class RankedList:
    """The first ``L`` positions of every query's ranked list, as tie groups.

    Every field is (Q, L) float64, except ``ranked`` (bool). Positions past the
    ranked items are padding (``ranked`` False, never relevant). The ``group_*``
    fields describe the tie group of the position. Under "average" a group is
    a run of equal scores; under the other policies items are first ordered
    inside equal scores, so a group only holds items no metric can tell apart
    and the same formulas give the deterministic value.
    """

    ranked: Tensor
    group_start: Tensor  # items ranked before the group (T_c)
    group_size: Tensor  # t_c
    group_relevant: Tensor  # r_c
    group_gain: Tensor  # sum of the group's gains
    relevant_before: Tensor  # relevant items ranked before the group (rho_c)
    #: (Q, L) int64: the item at each position (its column in the scores)
    items: Tensor | None = None
    #: under "average" (True) a group's members share its places evenly; under
    #: the other policies each position holds its item (the order decides)
    shared_ties: bool = True
    #: "average": the tie group cut by the selection, with all its members
    #: (whose places beyond the list hold items the list does not show)
    cut_group: CutGroup | None = None
    #: the rows that hold a tie group of several items, when known (on the CPU,
    #: where rows without ties are described apart); every other row is a list
    #: of one-item groups, whose statistics need no group totals. None: any row
    #: may hold ties.
    tied_rows: Tensor | None = None
    #: ``ranked`` is True everywhere (no mask, no padding): no need to test it
    every_ranked: bool = False

    def rows(self, rows: Tensor) -> RankedList:
        """The per-position fields of the queries ``rows`` only (no cut group)."""
        return RankedList(
            ranked=self.ranked[rows],
            group_start=self.group_start[rows],
            group_size=self.group_size[rows],
            group_relevant=self.group_relevant[rows],
            group_gain=self.group_gain[rows],
            relevant_before=self.relevant_before[rows],
            items=None if self.items is None else self.items[rows],
            shared_ties=self.shared_ties,
            every_ranked=self.every_ranked,
        )


def tie_key(ties: str, items: Tensor, relevant: Tensor, gain: Tensor) -> Tensor | None:
    """Order inside a group of equal scores, higher first; None under "average"."""
    if ties == "first":
        return -items.to(torch.float64)
    if ties == "pessimistic":
        return torch.where(relevant, -gain, math.inf)
    if ties == "optimistic":
        return torch.where(relevant, gain, -1.0)
    return None


@dataclass
class Candidates:
    """The items that can reach the evaluated positions, (Q, L) each, in score order."""

    values: Tensor  # scores, masked items at ``lowest``
    items: Tensor  # item index within the query
    ranked: Tensor
    relevant: Tensor
    gain: Tensor
    key: Tensor | None  # tie_key
    #: no mask: ``ranked`` is True everywhere
    every_ranked: bool = False
    #: binary relevance: ``gain`` is ``relevant`` as float64 (every relevant gain is 1)
    gain_is_relevance: bool = False


@dataclass(frozen=True)
class CutGroup:
    """Whole-row statistics of the tie group that the selection cut, for ``rows``."""

    rows: Tensor
    score: Tensor
    size: Tensor
    relevant: Tensor
    gain: Tensor
    start: Tensor  # (rows,) items ranked before the group
    members: Tensor  # (rows, N) bool: the group's ranked members
    #: (rows, C): the catalogue item of each column of ``members``, when the
    #: columns are candidates rather than the catalogue (EmbeddingScores)
    member_items: Tensor | None = None
    #: ``rows`` is every row in order (the accelerator's paths): read the lists'
    #: fields whole, without indexing
    every_row: bool = False


def sort_within_ties(
    c: Candidates, by_ranked: bool, by_item: bool = False, columns: bool = False
) -> None:
    """Order by score, then ranked before masked, then the tie policy (all descending).

    ``by_item``: then by item index, lower first. ``columns``: ``c.items`` is
    every column in order (whole rows), so the sorted items are the order itself.
    """
    keys = [c.values]
    if by_ranked:
        keys.append(c.ranked.to(torch.int8))
    if c.key is not None:
        keys.append(c.key)
    if by_item:
        keys.append(-c.items)
    order, c.values = lexsort_desc(keys)
    c.items = order if columns else c.items.gather(1, order)
    if not c.every_ranked:  # else True everywhere, in any order
        c.ranked = c.ranked.gather(1, order)
    c.relevant, c.gain = c.relevant.gather(1, order), c.gain.gather(1, order)
    if c.key is not None:
        c.key = c.key.gather(1, order)


def in_tie_order(c: Candidates, by_ranked: bool) -> bool:
    """Whether every row already is in the order :func:`sort_within_ties` would give.

    Then the sort is the identity and can be skipped: the usual case for lists
    read from files, written in rank order. The sort is stable, so a row is in
    order when no two neighbours are in increasing order of the keys; NaN
    compares neither way, so a row holding one is never in order (the sort then
    brings it first, where the NaN check finds it). The answer decides a
    branch, so it is only sought where host reads are free; the first row is
    tested alone first, so rows that are not in order cost one row's test.
    """
    if not host_reads_are_free(c.values):
        return False
    keys = [c.values]
    if by_ranked:
        keys.append(c.ranked)
    if c.key is not None:
        keys.append(c.key)
    return all(
        bool(_no_rise([key[rows] for key in keys]).all()) for rows in (slice(1), slice(None))
    )


def _no_rise(keys: list[Tensor]) -> Tensor:
    """(Q, L - 1) bool: each neighbour is at or below the one before, by ``keys`` in turn."""
    above, below = keys[0][:, :-1], keys[0][:, 1:]
    no_rise = above > below
    tied = above == below
    for key in keys[1:]:
        above, below = key[:, :-1], key[:, 1:]
        no_rise |= tied & (above > below)
        tied &= above == below
    return no_rise | tied


def lexsort_desc(keys: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Row-wise permutation sorting by ``keys`` descending, the first key most
    significant, and the first key in that order (the last sort's values: no gather)."""
    order: Tensor | None = None
    ordered = keys[0]
    for key in reversed(keys):
        current = key if order is None else key.gather(1, order)
        ordered, step = torch.sort(current, dim=1, descending=True, stable=True)
        order = step if order is None else order.gather(1, step)
    assert order is not None
    return order, ordered


def describe_tie_groups(c: Candidates, cut_group: CutGroup | None) -> RankedList:
    """Per-position statistics of each position's tie group.

    On the CPU, rows where no two ranked positions share a group (distinct
    scores, the usual top of real-valued scores) are described without totals
    to gather (:func:`_one_item_groups`); only the other rows are grouped.
    Masked items come last, all at the lowest score: under "average" they are
    one group, whose statistics are known without grouping too.
    """
    ranked = c.ranked
    if c.every_ranked:
        # binary relevance: the gains are the relevance itself, one tensor for both
        relevant = c.gain if c.gain_is_relevance else c.relevant.to(torch.float64)
        gain = c.gain
    else:
        relevant = (c.relevant & ranked).to(torch.float64)
        gain = torch.where(ranked, c.gain, 0.0)

    # a new group wherever the score, the ranked flag or the tie key changes
    starts = torch.ones_like(ranked)
    torch.ne(c.values[:, 1:], c.values[:, :-1], out=starts[:, 1:])
    if not c.every_ranked:
        starts[:, 1:] |= ranked[:, 1:] != ranked[:, :-1]
    if c.key is not None:
        starts[:, 1:] |= c.key[:, 1:] != c.key[:, :-1]
    if cut_group is None and host_reads_are_free(starts):
        grouped_rows = ~starts if c.key is not None else ~starts & ranked
        rows = grouped_rows.any(dim=1).nonzero().squeeze(1)
        if rows.numel() < ranked.shape[0]:
            grouped = (
                _tie_groups(
                    starts[rows], c.values[rows], ranked[rows], relevant[rows], gain[rows], None
                )
                if rows.numel()
                else None
            )
            # relevant and gain become fields: only now may they be written
            masked_tail = None if c.key is not None or c.every_ranked else ranked
            fields = _one_item_groups(relevant, gain, masked_tail, writable=grouped is not None)
            if grouped is not None:
                for field, value in zip(fields, grouped, strict=True):
                    field[rows] = value
            return _ranked_list(c, ranked, fields, None, tied_rows=rows)
    fields = _tie_groups(starts, c.values, ranked, relevant, gain, cut_group)
    return _ranked_list(c, ranked, fields, cut_group)


#: group_start, group_size, group_relevant, group_gain, relevant_before: (Q, L) float64
GroupFields = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]


def _ranked_list(
    c: Candidates,
    ranked: Tensor,
    fields: GroupFields,
    cut_group: CutGroup | None,
    tied_rows: Tensor | None = None,
) -> RankedList:
    group_start, size, group_relevant, group_gain, relevant_before = fields
    return RankedList(
        ranked=ranked,
        group_start=group_start,
        group_size=size,
        group_relevant=group_relevant,
        group_gain=group_gain,
        relevant_before=relevant_before,
        items=c.items,
        shared_ties=c.key is None,
        cut_group=cut_group,
        tied_rows=tied_rows,
    )


def _tie_groups(
    starts: Tensor,
    values: Tensor,
    ranked: Tensor,
    relevant: Tensor,
    gain: Tensor,
    cut_group: CutGroup | None,
) -> GroupFields:
    """Each position's group statistics, groups beginning where ``starts``."""
    num_queries, length = ranked.shape
    device = ranked.device
    group = torch.cumsum(starts, dim=1) - 1
    # the size, relevant count and gain sum of every group as one (3, Q, L) tensor:
    # one scatter and one gather for the three
    per_position = torch.stack([torch.ones_like(gain), relevant, gain])
    by_group = group.expand_as(per_position)
    totals = torch.zeros_like(per_position).scatter_add_(2, by_group, per_position)
    position = torch.arange(length, device=device).expand(num_queries, length)
    start = torch.full_like(group, length).scatter_reduce_(1, group, position, reduce="amin")

    if cut_group is not None:
        # "average": the cut group's totals come from its whole row
        rows = slice(None) if cut_group.every_row else cut_group.rows
        # the group's first listed place is its start (a NaN score equals no value)
        cut = group[rows].gather(1, cut_group.start.unsqueeze(1))
        # no ranked member at all (only masked items at that score): nothing to replace
        at_cut = (torch.arange(length, device=device) == cut) & (cut_group.size > 0).unsqueeze(1)
        whole_row = torch.stack([cut_group.size, cut_group.relevant, cut_group.gain])
        replaced = torch.where(at_cut, whole_row.unsqueeze(2).to(totals.dtype), totals[:, rows])
        if cut_group.every_row:
            totals = replaced
        else:
            totals[:, rows] = replaced

    group_start = start.gather(1, group)
    relevant_so_far = torch.cumsum(relevant, dim=1)
    relevant_before = torch.where(
        group_start > 0,
        relevant_so_far.gather(1, (group_start - 1).clamp(min=0)),
        0.0,
    )
    size, group_relevant, group_gain = totals.gather(2, by_group).unbind(0)
    return group_start.to(torch.float64), size, group_relevant, group_gain, relevant_before


def _one_item_groups(
    relevant: Tensor, gain: Tensor, masked_tail: Tensor | None, writable: bool
) -> GroupFields:
    """:func:`_tie_groups` where each ranked position is its own group (no two scores equal).

    No totals to gather: a group is its position, and the relevant items
    before it are the running count less its own. ``relevant`` and ``gain``
    are the fields themselves (not copied). ``masked_tail`` (the ``ranked``
    flags, under "average" with masked items): the masked positions, which
    come last, are one group (from the first of them to the end, nothing
    relevant in it); None: each position is its own group. ``writable``: the
    caller writes the rows that have ties into the fields afterwards, so none
    may be a broadcast view; else the starts and sizes may be views of one row.
    """
    num_queries, length = relevant.shape
    position = torch.arange(length, dtype=torch.float64, device=relevant.device)
    relevant_before = torch.cumsum(relevant, dim=1).sub_(relevant)
    if masked_tail is not None:
        num_ranked = count_true(masked_tail).to(torch.float64).unsqueeze(1)
        start = torch.minimum(position, num_ranked)  # the ranked positions come first
        size = torch.where(masked_tail, 1.0, length - num_ranked)
    elif writable:
        start, size = position.repeat(num_queries, 1), torch.ones_like(gain)
    else:
        start = position.expand(num_queries, length)
        size = torch.ones_like(position).expand(num_queries, length)
    return start, size, relevant, gain, relevant_before
