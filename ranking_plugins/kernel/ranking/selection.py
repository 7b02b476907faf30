"""Selection: the top of every list (or whole rows), ordered and cut into tie groups.

Only the cutoffs that are asked for are looked at: when every metric is an @k
metric, :func:`rank` takes a top-k selection instead of sorting whole rows.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.flags import count_true
from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.inputs.parts import RankingInput, lowest
from ranking_plugins.kernel.ranking.tie_groups import (
    NAN_TIED,
    Candidates,
    CutGroup,
    RankedList,
    describe_tie_groups,
    in_tie_order,
    lexsort_desc,
    sort_within_ties,
    tie_key,
)


def rank(data: RankingInput, ties: str, depth: int | None, item_order: bool = False) -> RankedList:
    """Rank every query and describe its first ``depth`` positions (all when None).

    ``item_order``: under "pessimistic" and "optimistic", items the policy
    cannot tell apart (equal score, relevance and gain) are also ordered by
    index, lower first, so that *which* item holds each place is decided (the
    metrics of item exposure read it; the accuracy metrics do not need it).

    With a finite ``depth`` only a top-(depth + 1) selection is taken. It is
    exact about which scores reach the top ``depth``; but when the tie group at
    position ``depth`` continues past it, which of its members made the cut is
    arbitrary, so those rows are completed from their whole row.

    When the input left its NaN check here (``nan_unchecked``), the first
    value of each row after the selection or sort is checked: NaN ranks above
    every number in both, so a row holding one brings it first.
    """
    scores, mask = data.scores, data.ranked
    selectable = scores if mask is None else scores.masked_fill(~mask, lowest(scores.dtype))
    num_queries, num_items = scores.shape
    cut_group = None
    if depth is None or depth >= num_items:
        if _lean_average_path(data, ties, item_order):
            return _average_whole_groups(data)
        items = torch.arange(num_items, device=scores.device).expand(num_queries, num_items)
        candidates = _candidates(data, ties, selectable, items, whole_rows=True)
        if not in_tie_order(candidates, by_ranked=mask is not None):
            sort_within_ties(candidates, by_ranked=mask is not None, columns=True)
        if data.nan_unchecked:
            validation.check_no_nan_scores(candidates.values[:, 0])
    elif _lean_average_path(data, ties, item_order):
        return _average_top_groups(data, depth)
    else:
        values, items = top(selectable, depth + 1, data.nan_possible)
        if data.nan_unchecked:  # a row's NaN comes first: the selection holds it (no view)
            validation.check_no_nan_scores(values)
        is_cut = values[:, depth] == values[:, depth - 1]
        if data.nan_possible and ties in NAN_TIED:
            # more NaNs than places: the policy picks which enter, as in a cut tie group
            is_cut |= values[:, depth].isnan()
        by_item = item_order and ties in ("pessimistic", "optimistic")
        if host_reads_are_free(is_cut):
            candidates = _candidates(data, ties, values[:, :depth], items[:, :depth])
            cut_group = _complete_cut_groups(data, ties, selectable, candidates, is_cut, by_item)
        else:
            candidates, cut_group = _complete_every_row(
                data, ties, selectable, values[:, :depth], items[:, :depth], by_item
            )
        # topk returns scores in order, but not ties in tie order nor masked items last
        if mask is not None or candidates.key is not None:
            sort_within_ties(candidates, by_ranked=mask is not None, by_item=by_item)
    return describe_tie_groups(candidates, None if candidates.key is not None else cut_group)


def top(scores: Tensor, n: int, nan_possible: bool) -> tuple[Tensor, Tensor]:
    """The ``n`` best scores of each row, descending, and their columns (a top-k).

    ``nan_possible``: a top-k brings a row's NaNs first but picks and orders them
    as it likes (differently on each device); their places then take the row's
    first NaNs by column, in column order, as a stable sort of the whole rows
    lists them. The columns are found by a second top-k, over an index of the
    scores' width (no wider than int32 unless the rows are).
    """
    values, items = torch.topk(scores, n, dim=1)
    if nan_possible and _may_hold_nan(values):
        width = scores.shape[1]
        index = torch.int32 if width < 2**31 else torch.int64
        column = torch.arange(width, dtype=index, device=scores.device)
        first_nans = torch.where(scores.isnan(), column, width).topk(n, dim=1, largest=False)
        items = torch.where(values.isnan(), first_nans.values, items)  # int64, as items
    return values, items


def _may_hold_nan(values: Tensor) -> bool:
    """Whether a top-k selection may hold a NaN: read where reading costs nothing (a
    row's NaNs come first in it), so that lists without one take no second top-k."""
    return not host_reads_are_free(values) or bool(values[:, 0].isnan().any())


def _lean_average_path(data: RankingInput, ties: str, item_order: bool) -> bool:
    """Whether :func:`_average_top_groups` describes the top of the lists: the
    accelerator's paths under "average", without a mask, for real-valued scores
    (it finds groups by a search over the negated scores), when no reader needs
    to know which members of the cut group hold the list's last places."""
    return (
        ties == "average"
        and data.ranked is None
        and not item_order
        and data.scores.is_floating_point()
        and not host_reads_are_free(data.scores)
    )


def _average_top_groups(data: RankingInput, depth: int) -> RankedList:
    """The first ``depth`` positions as "average" tie groups, in few operations.

    The accelerator's path: each operation is a launch there, and no value may
    be read. Under "average" the members of a tie group share its places
    evenly, so a position's statistics are its group's totals; which members
    of the group cut by the list's end hold its last places matters to no
    statistic, only the group's whole-row totals do.

    The groups are found and totalled by :func:`_group_starts_and_totals`;
    the last group's totals are then replaced by its whole row's in every row
    (the group may run past the list; where it does not, they are the same
    members' totals, the gains summed in row order).
    The selection is the one the CPU's path takes (depth + 1), so that the
    members of each group come in the same order and their gains sum to the
    same bits.
    """
    scores = data.scores
    values, items = top(scores, depth + 1, data.nan_possible)
    if data.nan_unchecked:  # a row's NaN comes first: the selection holds it (no view)
        validation.check_no_nan_scores(values)
    values, items = values.narrow(1, 0, depth), items.narrow(1, 0, depth)
    relevance = data.relevance
    # the whole rows' relevance, which the cut group reads, gathered at the list
    row_relevant, row_gain = relevance.rows(slice(None))
    relevant, gain = row_relevant.gather(1, items), row_gain.gather(1, items)
    binary = relevance.binary  # the gain is the relevance itself: one total for both
    relevant_f = gain if binary else relevant.to(torch.float64)
    start, totals = _group_starts_and_totals(values, relevant_f, gain, binary, data.nan_possible)

    # the last listed group, over its whole row
    score = values.narrow(1, depth - 1, 1)
    members = scores == score
    if data.nan_possible:  # a NaN equals no score: its group is the item alone
        members.scatter_(1, items.narrow(1, depth - 1, 1), True)
    size = members.sum(dim=1, dtype=torch.float64)
    whole = (
        [size, (row_gain * members).sum(dim=1)]
        if binary
        else [
            size,
            (members & row_relevant).sum(dim=1, dtype=torch.float64),
            (row_gain * members).sum(dim=1),
        ]
    )
    in_cut = values == score
    totals = torch.where(in_cut, torch.stack(whole).unsqueeze(2), totals)
    cut_group = CutGroup(
        torch.arange(scores.shape[0], device=scores.device),
        score.squeeze(1),
        size,
        whole[1],
        whole[-1],
        start.select(1, depth - 1),
        members,
        every_row=True,
    )
    return _average_groups_list(start, totals, relevant, relevant_f, items, cut_group)


def _average_whole_groups(data: RankingInput) -> RankedList:
    """Whole rows as "average" tie groups, in few operations (:func:`_average_top_groups`
    without a cut group: the list is the whole row).

    The order is the CPU's path's: without a mask or a tie key,
    :func:`sort_within_ties` there sorts the scores alone by the same stable
    :func:`lexsort_desc`, so the members of each group come in the same order
    (by column) and their gains sum to the same bits.
    """
    scores = data.scores
    items, values = lexsort_desc([scores])
    if data.nan_unchecked:
        validation.check_no_nan_scores(values[:, 0])
    relevant, gain = data.relevance.at(items)
    binary = data.relevance.binary  # the gain is the relevance itself: one total for both
    relevant_f = gain if binary else relevant.to(torch.float64)
    start, totals = _group_starts_and_totals(values, relevant_f, gain, binary, data.nan_possible)
    return _average_groups_list(start, totals, relevant, relevant_f, items, None)


def _group_starts_and_totals(
    values: Tensor, relevant_f: Tensor, gain: Tensor, binary: bool, nan_possible: bool
) -> tuple[Tensor, Tensor]:
    """Each position's group start (Q, L) and its group's (size, [relevant,] gain)
    totals (C, Q, L), for descending ``values``.

    In a descending list a position's group starts at the number of listed
    scores strictly above it: one search of the negated (ascending) scores
    gives every group's start, which also serves as the group's id. The totals
    are one scatter and one gather of a stacked tensor, summed in list order as
    :func:`_tie_groups` does.

    ``nan_possible``: NaN, which the search cannot order, may lead the lists (it
    ranks above every number, as the selection and the sort place it); each NaN
    is a group of its own, so the i-th of a row's m NaNs starts at i, and the
    numbers after them start at m or later: the search sees the NaNs as -inf,
    above (before) every negated number, and the starts are raised to that.
    """
    ascending = values.neg()
    if nan_possible:
        is_nan = ascending.isnan()
        ascending = ascending.masked_fill(is_nan, -math.inf)
        start = torch.searchsorted(ascending, ascending)
        position = torch.arange(values.shape[1], device=values.device)
        nans = is_nan.sum(dim=1, keepdim=True)
        start = torch.maximum(start, torch.minimum(position, nans))
    else:
        start = torch.searchsorted(ascending, ascending)  # (Q, L) listed scores above
    per_position = torch.stack(
        [torch.ones_like(gain), gain] if binary else [torch.ones_like(gain), relevant_f, gain]
    )
    by_group = start.expand_as(per_position)
    totals = torch.zeros_like(per_position).scatter_add_(2, by_group, per_position)
    return start, totals.gather(2, by_group)


def _average_groups_list(
    start: Tensor,
    totals: Tensor,
    relevant: Tensor,
    relevant_f: Tensor,
    items: Tensor,
    cut_group: CutGroup | None,
) -> RankedList:
    """The :class:`RankedList` of :func:`_group_starts_and_totals`' groups."""
    group_size, *group_totals = totals.unbind(0)
    relevant_so_far = torch.nn.functional.pad(relevant_f, (1, 0)).cumsum_(dim=1)
    return RankedList(
        ranked=torch.ones_like(relevant),
        group_start=start.to(torch.float64),
        group_size=group_size,
        group_relevant=group_totals[0],
        group_gain=group_totals[-1],
        relevant_before=relevant_so_far.gather(1, start),
        items=items,
        shared_ties=True,
        cut_group=cut_group,
        every_ranked=True,
    )


def _candidates(
    data: RankingInput,
    ties: str,
    values: Tensor,
    items: Tensor,
    whole_rows: bool = False,
    ranked: Tensor | None = None,
    row_relevance: tuple[Tensor, Tensor] | None = None,
) -> Candidates:
    """``whole_rows``: ``items`` is every column in order, so the mask is read as it is.
    ``ranked``: the items' ranked flags, when known already; ``row_relevance``: the
    relevance and gain of every item of every row, when made already (read there)."""
    if ranked is not None:
        pass
    elif data.ranked is None:
        ranked = torch.ones_like(values, dtype=torch.bool)
    else:
        ranked = data.ranked if whole_rows else data.ranked.gather(1, items)
    if row_relevance is None:
        relevant, gain = data.relevance.at(items)
    else:
        relevant, gain = (t.gather(1, items) for t in row_relevance)
    key = tie_key(ties, items, relevant, gain)
    return Candidates(
        values, items, ranked, relevant, gain, key, data.ranked is None, data.relevance.binary
    )


def _complete_cut_groups(
    data: RankingInput,
    ties: str,
    selectable: Tensor,
    c: Candidates,
    is_cut: Tensor,
    by_item: bool = False,
) -> CutGroup | None:
    """Refill the slots of each cut tie group with its first members in tie order."""
    rows = rows_to_complete(is_cut)
    if rows is None:
        return None
    depth = c.values.shape[1]
    score = c.values[rows, -1].unsqueeze(1)
    members = selectable[rows] == score
    if data.nan_possible and ties in NAN_TIED:  # a NaN score: the row's NaNs
        members |= selectable[rows].isnan() & score.isnan()
    if data.ranked is not None:
        members &= data.ranked[rows]
    row_relevant, row_gain = data.relevance.rows(rows)
    row_items = torch.arange(data.num_items, device=score.device).expand_as(members)
    row_key = tie_key(ties, row_items, row_relevant, row_gain)
    fill_key = torch.where(members, 0.0 if row_key is None else row_key, -math.inf)
    if by_item:  # equal keys: the lower index first (a stable sort keeps index order)
        best_key, best = (
            t[:, :depth] for t in torch.sort(fill_key, dim=1, descending=True, stable=True)
        )
    else:
        best_key, best = torch.topk(fill_key, depth, dim=1)

    first_slot = _places_above(c.values[rows], score, data.nan_possible, ties).unsqueeze(1)
    slot = torch.arange(depth, device=score.device) - first_slot
    take = slot >= 0
    slot = slot.clamp(min=0)
    items = torch.where(take, best.gather(1, slot), c.items[rows])
    c.items[rows] = items
    c.ranked[rows] = torch.where(take, best_key.gather(1, slot) > -math.inf, c.ranked[rows])
    relevant, gain = data.relevance.at(items, rows)
    c.relevant[rows], c.gain[rows] = relevant, gain
    if c.key is not None:
        c.key[rows] = tie_key(ties, items, relevant, gain)  # type: ignore[assignment]
    return CutGroup(
        rows,
        score.squeeze(1),
        count_true(members),
        count_true(members & row_relevant),
        (row_gain * members).sum(dim=1),
        first_slot.squeeze(1),
        members,
    )


def _complete_every_row(
    data: RankingInput,
    ties: str,
    selectable: Tensor,
    values: Tensor,
    items: Tensor,
    by_item: bool = False,
) -> tuple[Candidates, CutGroup]:
    """:func:`_candidates` and :func:`_complete_cut_groups` where every row is completed.

    The accelerator's path (no read says which rows were cut): each row's
    boundary group is refilled before the candidates' relevance is read (gathered
    from the whole rows' relevance, which the refill reads anyway), and no row is
    indexed or written back: the same numbers in fewer operations, each a kernel
    launch there.
    """
    depth = values.shape[1]
    score = values[:, -1:]
    members = selectable == score
    if data.nan_possible and ties in NAN_TIED:  # a NaN score: the row's NaNs
        members |= selectable.isnan() & score.isnan()
    elif data.nan_possible:  # a NaN equals no score: its group is the item alone
        members.scatter_(1, items[:, -1:], True)
    if data.ranked is not None:
        members &= data.ranked
    row_relevant, row_gain = data.relevance.rows(slice(None))
    row_items = torch.arange(data.num_items, device=score.device).expand_as(members)
    row_key = tie_key(ties, row_items, row_relevant, row_gain)
    fill_key = torch.where(members, 0.0 if row_key is None else row_key, -math.inf)
    if by_item:  # equal keys: the lower index first (a stable sort keeps index order)
        best_key, best = (
            t[:, :depth] for t in torch.sort(fill_key, dim=1, descending=True, stable=True)
        )
    else:
        best_key, best = torch.topk(fill_key, depth, dim=1)
    first_slot = _places_above(values, score, data.nan_possible, ties).unsqueeze(1)
    slot = torch.arange(depth, device=score.device) - first_slot
    take = slot >= 0
    slot = slot.clamp(min=0)
    listed = (
        torch.ones_like(values, dtype=torch.bool)
        if data.ranked is None
        else data.ranked.gather(1, items)
    )
    ranked = torch.where(take, best_key.gather(1, slot) > -math.inf, listed)
    items = torch.where(take, best.gather(1, slot), items)
    candidates = _candidates(
        data, ties, values, items, ranked=ranked, row_relevance=(row_relevant, row_gain)
    )
    cut_group = CutGroup(
        torch.arange(values.shape[0], device=score.device),
        score.squeeze(1),
        count_true(members),
        count_true(members & row_relevant),
        (row_gain * members).sum(dim=1),
        first_slot.squeeze(1),
        members,
        every_row=True,
    )
    return candidates, cut_group


def _places_above(values: Tensor, score: Tensor, nan_possible: bool, ties: str) -> Tensor:
    """(Q,) int64: the listed places above the last one's tie group, ``values``
    descending and ``score`` (Q, 1) their last.

    ``nan_possible``: a NaN is listed above every number yet compares above
    none: the places above are then those outside the run of the last score.
    A NaN last is a group of one under "average" and "first"; under
    :data:`NAN_TIED` policies the NaNs are ordered as one group, which starts
    the list.
    """
    if not nan_possible:
        return count_true(values > score)
    above = values.shape[1] - 1 - count_true(values[:, :-1] == score)
    if ties in NAN_TIED:
        above = above.masked_fill(score.squeeze(1).isnan(), 0)
    return above


def rows_to_complete(is_cut: Tensor) -> Tensor | None:
    """Rows whose boundary tie group was cut by the selection.

    On the CPU, reading the flags is free, so only those rows are completed.
    Elsewhere every row is completed (correct for every row, and it keeps the
    device from synchronising with the host).
    """
    if host_reads_are_free(is_cut):
        rows = is_cut.nonzero().squeeze(1)
        return rows if rows.numel() else None
    return torch.arange(is_cut.shape[0], device=is_cut.device)
