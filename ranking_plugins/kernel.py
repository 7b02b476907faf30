"""The rank kernel: the one place that ranks items.

It reads top to bottom like SPEC.md:

1. :func:`normalize_input` turns any of the three input layouts (dense, item
   indices, grouped) into one shape: scores ``(Q, N)``, an optional ``ranked``
   mask and a :class:`Relevance` that answers questions about the targets.
2. :func:`rank` orders the items of every query under a ``ties`` policy and
   describes the ranked list as *tie groups*: for each position its group's
   start, size, relevant count and gain sum (SPEC section 3).
3. :class:`RankStats` turns the groups into per-position expected values
   (relevance, gain, AP term, probability of the first hit) whose cumulative
   sums give hits@k, DCG@k, AP@k, RR@k, ... at any cutoff, exactly.

Only the cutoffs that are asked for are looked at: when every metric is an @k
metric the kernel takes a top-k selection instead of sorting whole rows.
Metric formulas on top of these statistics live in :mod:`ranking_plugins.metrics`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import torch
from torch import Tensor

from ranking_plugins import _validation as V

TIES = ("average", "first", "pessimistic", "optimistic")


# ---------------------------------------------------------------------------
# 1. Inputs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GainRule:
    """Which grades are relevant and what gain a relevant grade earns (SPEC section 4)."""

    relevance_threshold: float | None  # finite; None: grade > 0 is relevant
    gain: str  # "exponential" | "linear"

    def relevant(self, grades: Tensor) -> Tensor:
        """grade > 0, or grade >= threshold, compared exactly in the grades' own dtype."""
        if grades.dtype == torch.bool:
            return self._relevant_bool(grades)
        if self.relevance_threshold is None:
            return grades > 0
        bound = least_at_or_above(self.relevance_threshold, grades.dtype)
        if bound is None:  # above every value of the dtype
            return torch.zeros_like(grades, dtype=torch.bool)
        return grades >= bound

    def _relevant_bool(self, grades: Tensor) -> Tensor:
        # a bool is grade 0 or 1
        t = self.relevance_threshold
        if t is None or 0 < t <= 1:
            return grades
        return torch.full_like(grades, t <= 0)

    @property
    def grade_one_is_relevant(self) -> bool:
        """Whether a bool ``True`` or a listed item id (both grade 1) is relevant."""
        return self.relevance_threshold is None or self.relevance_threshold <= 1

    @property
    def grade_zero_is_relevant(self) -> bool:
        """Whether grade 0 (a bool ``False``) is relevant: a threshold at or below 0."""
        return self.relevance_threshold is not None and self.relevance_threshold <= 0

    def gain_of(self, grades: Tensor) -> Tensor:
        """float64 gain of each grade as if relevant; negative grades earn nothing.

        2^g − 1 is computed without cancellation: ``expm1`` below 1 (a grade of
        1e-20 earns 6.9e-21, not 0), ``exp2`` from 1 on (exact for integers).
        """
        g = grades.to(torch.float64).clamp(min=0)
        if self.gain == "linear":
            return g
        return torch.where(g >= 1, torch.exp2(g) - 1, torch.expm1(g * math.log(2)))

    def gains(self, grades: Tensor, relevant: Tensor) -> Tensor:
        """float64 gains; non-relevant and negative grades earn nothing."""
        return torch.where(relevant, self.gain_of(grades), 0.0)


def least_at_or_above(threshold: float, dtype: torch.dtype) -> float | int | Tensor | None:
    """The least value of ``dtype`` that is >= ``threshold``; None if there is none.

    ``grades >= threshold`` with a Python float would round the threshold to the
    grades' dtype (float32 for integer grades), so 16777216 >= 16777217.0 holds;
    comparing with this bound in the grades' own dtype is exact.
    """
    if not dtype.is_floating_point:
        bound = math.ceil(threshold)
        info = torch.iinfo(dtype)
        if bound > info.max:
            return None
        return max(bound, info.min)
    if dtype == torch.float64:
        return threshold
    value = torch.tensor(threshold, dtype=torch.float64).to(dtype)
    if float(value) < threshold:
        value = torch.nextafter(value, torch.tensor(math.inf, dtype=dtype))
    return value


class Relevance(Protocol):
    """What the kernel needs to know about the targets of a batch."""

    binary: bool  # every relevant item has gain 1

    def at(self, items: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """(relevant, gain) of ``items`` (item indices per query) of all queries or ``rows``."""
        ...

    def rows(self, rows: Tensor) -> tuple[Tensor, Tensor]:
        """(relevant, gain) of every item of the queries ``rows``, shape (len(rows), N)."""
        ...

    def relevant_count(self, within: Tensor | None = None) -> Tensor:
        """R: relevant items per query, int64 (Q,); only those where ``within`` if given."""
        ...

    def ideal_gains(self, length: int, relevant_count: Tensor) -> Tensor:
        """The ``length`` largest gains of each query (all items), descending, float64."""
        ...

    def take(self, rows: slice) -> Relevance:
        """The targets of the queries ``rows`` only."""
        ...


def count_true(flags: Tensor) -> Tensor:
    """Number of True per row, int64 (Q,).

    A plain ``sum`` widens every bool to int64 first, several times slower than
    the pass itself; blocks of 255 bytes summed in uint8 cannot overflow.
    """
    block = 255
    as_bytes = flags.view(torch.uint8)
    whole = as_bytes.shape[-1] // block * block
    blocks = as_bytes[:, :whole].unflatten(1, (whole // block, block))
    return blocks.sum(dim=2, dtype=torch.uint8).sum(dim=1) + as_bytes[:, whole:].sum(dim=1)


class DenseGrades:
    """Targets given as a grade for every item: (Q, N) bool, int or float.

    ``judged`` (bool, same shape, optional): False marks positions that carry
    no judgment (the padding of grouped lists); they are never relevant,
    whatever the threshold.
    """

    def __init__(self, grades: Tensor, rule: GainRule, judged: Tensor | None = None) -> None:
        if grades.dtype == torch.bool and (rule.grade_zero_is_relevant or judged is not None):
            # not every relevant item has gain 1 any more: grades 0/1 as numbers
            grades = grades.to(torch.uint8)
        self.grades = grades
        self.rule = rule
        self.judged = judged
        self.binary = grades.dtype == torch.bool

    def _relevant_and_gain(
        self, grades: Tensor, judged: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        relevant = self.rule.relevant(grades)
        if judged is not None:
            relevant &= judged
        return relevant, self.rule.gains(grades, relevant)

    def at(self, items: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Tensor]:
        grades = self.grades if rows is None else self.grades[rows]
        judged = None
        if self.judged is not None:
            judged = (self.judged if rows is None else self.judged[rows]).gather(1, items)
        return self._relevant_and_gain(grades.gather(1, items), judged)

    def rows(self, rows: Tensor) -> tuple[Tensor, Tensor]:
        judged = None if self.judged is None else self.judged[rows]
        return self._relevant_and_gain(self.grades[rows], judged)

    def take(self, rows: slice) -> DenseGrades:
        judged = None if self.judged is None else self.judged[rows]
        return DenseGrades(self.grades[rows], self.rule, judged)

    def relevant_count(self, within: Tensor | None = None) -> Tensor:
        relevant = self.rule.relevant(self.grades)
        if self.judged is not None:
            relevant &= self.judged
        return count_true(relevant if within is None else relevant & within)

    def ideal_gains(self, length: int, relevant_count: Tensor) -> Tensor:
        if self.binary:
            return binary_ideal_gains(relevant_count, length)
        length = min(length, self.grades.shape[1])
        if self.judged is not None:
            # unjudged positions may hold any grade: select among relevant gains
            gains = self._relevant_and_gain(self.grades, self.judged)[1]
            return torch.topk(gains, length, dim=1).values
        # Rows whose relevant items all have one grade (0/1 floats, the common
        # case) need no selection: R copies of that grade's gain.
        top_grade, one_grade = self._single_relevant_grade(relevant_count)
        top_gain = self._relevant_and_gain(top_grade)[1].unsqueeze(1)
        gains = torch.where(binary_ideal_gains(relevant_count, length) > 0, top_gain, 0.0)
        if host_reads_are_free(one_grade):
            rows = (~one_grade).nonzero().squeeze(1)
            # a few rows are copied out and selected; many are selected in place
            if 0 < rows.numel() <= one_grade.numel() // 4:
                gains[rows] = self._top_gains(self.grades[rows], length)
            if rows.numel() <= one_grade.numel() // 4:
                return gains
        return torch.where(one_grade.unsqueeze(1), gains, self._top_gains(self.grades, length))

    def _top_gains(self, grades: Tensor, length: int) -> Tensor:
        # gains grow with grades, so the top grades give the top gains
        return self._relevant_and_gain(torch.topk(grades, length, dim=1).values)[1]

    def _single_relevant_grade(self, relevant_count: Tensor) -> tuple[Tensor, Tensor]:
        """(the largest grade, whether every relevant item has it) per row.

        When a row has a relevant item, its largest grade is relevant, and all
        R relevant grades equal it exactly when R items hold it: one max and
        one comparison, exact for every dtype, much cheaper than a top-k.
        """
        high = self.grades.amax(dim=1)
        holders = count_true(self.grades == high.unsqueeze(1))
        return high, (relevant_count == 0) | (holders == relevant_count)


class ItemIds:
    """Targets given as the ids of the relevant items: (Q, T) int, -1 = padding.

    A listed item has grade 1 (gain 1 under both gains); unless the relevance
    threshold is above 1, which leaves nothing relevant.
    """

    binary = True

    def __init__(self, item_ids: Tensor, num_items: int, rule: GainRule) -> None:
        self.rule = rule
        self.num_items = num_items
        # with nothing relevant, no id is listed
        self.item_ids = item_ids if rule.grade_one_is_relevant else torch.full_like(item_ids, -1)

    def at(self, items: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Tensor]:
        ids = self.item_ids if rows is None else self.item_ids[rows]
        relevant = (items.unsqueeze(-1) == ids.unsqueeze(1)).any(dim=-1)
        return relevant, relevant.to(torch.float64)

    def rows(self, rows: Tensor) -> tuple[Tensor, Tensor]:
        ids = self.item_ids[rows]
        relevant = torch.zeros(
            ids.shape[0], self.num_items + 1, dtype=torch.bool, device=ids.device
        )
        # padding (-1) lands in the extra last column, which is dropped
        relevant.scatter_(1, torch.where(ids < 0, self.num_items, ids), True)
        relevant = relevant[:, : self.num_items]
        return relevant, relevant.to(torch.float64)

    def take(self, rows: slice) -> ItemIds:
        return ItemIds(self.item_ids[rows], self.num_items, self.rule)

    def relevant_count(self, within: Tensor | None = None) -> Tensor:
        ids = self.item_ids.sort(dim=1).values
        counted = ids >= 0
        counted[:, 1:] &= ids[:, 1:] != ids[:, :-1]  # a repeated id counts once
        if within is not None:
            counted &= within.gather(1, ids.clamp(min=0))
        return counted.sum(dim=1)

    def ideal_gains(self, length: int, relevant_count: Tensor) -> Tensor:
        return binary_ideal_gains(relevant_count, length)


def binary_ideal_gains(relevant_count: Tensor, length: int) -> Tensor:
    positions = torch.arange(length, device=relevant_count.device)
    return (positions < relevant_count.unsqueeze(1)).to(torch.float64)


@dataclass(frozen=True)
class RankingInput:
    """Any layout, reduced to scores (Q, N) with an optional ``ranked`` mask."""

    scores: Tensor
    ranked: Tensor | None  # False: never enters the ranking (masked, or padding)
    relevance: Relevance

    @property
    def num_queries(self) -> int:
        return self.scores.shape[0]

    @property
    def num_items(self) -> int:
        return self.scores.shape[1]

    def rows(self, rows: slice) -> RankingInput:
        """The queries ``rows`` (views, no copy)."""
        ranked = None if self.ranked is None else self.ranked[rows]
        return RankingInput(self.scores[rows], ranked, self.relevance.take(rows))


@dataclass(frozen=True)
class Part:
    """Some queries of a batch: ``queries`` are their positions in the batch."""

    queries: slice | Tensor
    data: RankingInput


@dataclass(frozen=True)
class Batch:
    """A batch of ``num_queries`` queries in parts that together hold each query once.

    Dense and item-index inputs are one part. Grouped lists are padded to
    rows only with lists of similar length (one part per length class), so
    memory stays within twice the number of items whatever the lengths.
    """

    num_queries: int
    device: torch.device
    parts: tuple[Part, ...]


def normalize_input(
    preds: Tensor,
    target: Tensor,
    *,
    indexes: Tensor | None,
    mask: Tensor | None,
    target_format: str | None,
    rule: GainRule,
    validate_args: bool,
) -> Batch:
    """Check the inputs and bring any layout to :class:`Batch` (SPEC section 2)."""
    preds, target, indexes, mask = check_inputs(preds, target, indexes, mask, target_format)
    if preds.ndim == 1:
        return _grouped(preds, target, indexes, mask, target_format, rule, validate_args)
    if preds.ndim != 2:
        raise ValueError(
            "`preds` must be (Q, N) scores, or (M,) scores with `indexes` for the grouped "
            f"layout, got shape {tuple(preds.shape)}"
        )
    if indexes is not None:
        raise ValueError(
            "`indexes` is only for the grouped layout, where `preds` is 1-D; "
            f"got `preds` of shape {tuple(preds.shape)}"
        )
    if target_format is None:
        target_format = "dense" if target.shape == preds.shape else "indices"
    if target_format == "dense":
        if target.shape != preds.shape:
            raise ValueError(
                f"dense `target` must have the shape of `preds` {tuple(preds.shape)}, "
                f"got {tuple(target.shape)}"
            )
        if validate_args:
            V.check_values(preds, None, None, preds.shape[1])
            check_grades(target, rule, preds.shape[1])
        return _one_part(RankingInput(preds, mask, DenseGrades(target, rule)))

    # item indices
    if not V.is_integer_dtype(target.dtype):
        raise TypeError(
            "item-index `target` must be an integer tensor of item ids (Q,) or (Q, T) "
            f"(or a dense `target` of shape {tuple(preds.shape)}), got dtype {target.dtype} "
            f"and shape {tuple(target.shape)}"
        )
    if target.ndim == 1:
        target = target.unsqueeze(1)
    if target.ndim != 2 or target.shape[0] != preds.shape[0]:
        raise ValueError(
            f"item-index `target` must be (Q,) or (Q, T) with Q = {preds.shape[0]} rows of "
            f"`preds`, got shape {tuple(target.shape)}"
        )
    if validate_args:
        V.check_values(preds, None, target, preds.shape[1])
    ids = ItemIds(target.to(torch.int64), preds.shape[1], rule)
    return _one_part(RankingInput(preds, mask, ids))


def check_grades(
    grades: Tensor, rule: GainRule, list_length: int, query_of_item: Tensor | None = None
) -> None:
    """No NaN grade, and no gain (nor sum of a query's gains) that overflows float64.

    ``grades`` are (Q, N) rows, or flat (M,) with ``query_of_item`` (grouped).
    Reads the values (one max over the grades; the per-query sums only when
    the largest gain times the list length could overflow).
    """
    if grades.dtype == torch.bool or grades.numel() == 0:
        return
    top = grades.amax()
    if grades.is_floating_point() and bool(top.isnan()):
        raise ValueError("`target` must not contain NaN grades")
    top_gain = float(rule.gain_of(top.reshape(1))[0])
    if math.isfinite(top_gain * max(list_length, 1)):
        return
    gains = rule.gains(grades, rule.relevant(grades))
    if query_of_item is None:
        totals = gains.sum(dim=-1)
    else:
        queries = int(query_of_item.max()) + 1
        totals = gains.new_zeros(queries).index_add_(0, query_of_item, gains)
    if not bool(totals.isfinite().all()):
        raise ValueError(
            f"`target`: the {rule.gain} gain of grade {float(top):g} "
            f"({'2^g - 1' if rule.gain == 'exponential' else 'g'}), or the sum of a query's "
            "gains, overflows float64; use smaller grades"
            + (" or gain='linear'" if rule.gain == "exponential" else "")
        )


def check_inputs(
    preds: object,
    target: object,
    indexes: object,
    mask: object,
    target_format: str | None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """The checks of every layout that read no tensor value; returns the detached inputs."""
    preds = V.check_tensor("preds", preds).detach()
    target = V.check_tensor("target", target).detach()
    if indexes is not None:
        indexes = V.check_tensor("indexes", indexes).detach()
    if mask is not None:
        mask = V.check_tensor("mask", mask).detach()
        if mask.dtype != torch.bool:
            raise TypeError(f"`mask` must be a bool tensor, got dtype {mask.dtype}")
        if mask.shape != preds.shape:
            raise ValueError(
                f"`mask` must have the shape of `preds` {tuple(preds.shape)}, "
                f"got {tuple(mask.shape)}"
            )
    if target_format is not None:
        V.check_choice("target_format", target_format, V.TARGET_FORMATS)
    V.check_preds_dtype(preds)
    if target.is_complex():
        raise TypeError(f"`target` must hold real grades or integer item ids, got {target.dtype}")
    V.check_same_device(preds=preds, target=target, indexes=indexes, mask=mask)
    return preds, target, indexes, mask


def check_grouped(
    preds: Tensor, target: Tensor, indexes: Tensor | None, target_format: str | None
) -> Tensor:
    """The grouped layout's own checks (no tensor value read); returns ``indexes``."""
    if indexes is None:
        raise ValueError(
            "1-D `preds` is the grouped layout and needs `indexes` (M,) giving each item's query id"
        )
    if not V.is_integer_dtype(indexes.dtype):
        raise TypeError(f"`indexes` must be an integer tensor of query ids, got {indexes.dtype}")
    if target_format == "indices":
        raise ValueError("`target_format='indices'` needs 2-D `preds` (Q, N)")
    if target.shape != preds.shape or indexes.shape != preds.shape:
        raise ValueError(
            "grouped layout: `preds`, `target` and `indexes` must all be (M,), got shapes "
            f"{tuple(preds.shape)}, {tuple(target.shape)} and {tuple(indexes.shape)}"
        )
    return indexes


def _one_part(data: RankingInput) -> Batch:
    part = Part(slice(None), _at_least_one_item(data))
    return Batch(data.num_queries, data.scores.device, (part,))


def _grouped(
    preds: Tensor,
    target: Tensor,
    indexes: Tensor | None,
    mask: Tensor | None,
    target_format: str | None,
    rule: GainRule,
    validate_args: bool,
) -> Batch:
    """Flat (M,) triples with query ids -> padded rows, items in input order.

    Queries are ordered by id (``torch.unique``). Lists are padded only to
    lists of the same length class (lengths in (2^(j-1), 2^j]), one part per
    class, so 20,000 one-item lists beside one 20,000-item list cost 60,000
    slots, not 400 million.
    """
    indexes = check_grouped(preds, target, indexes, target_format)
    if validate_args:
        V.check_values(preds, None, None, 0)
    queries, query_of_item, sizes = torch.unique(indexes, return_inverse=True, return_counts=True)
    num_queries = queries.numel()
    if validate_args and num_queries:
        check_grades(target, rule, int(sizes.max()), query_of_item)
    device = preds.device
    length_class = torch.ceil(torch.log2(sizes.to(torch.float64))).to(torch.int64)
    # queries ordered by length class (then id); entries by query (then input order)
    query_order = torch.argsort(length_class, stable=True)
    rank_of_query = torch.empty_like(query_order)
    rank_of_query[query_order] = torch.arange(num_queries, device=device)
    entry_order = torch.argsort(rank_of_query[query_of_item], stable=True)
    sorted_sizes = sizes[query_order]
    starts = torch.cumsum(sorted_sizes, 0) - sorted_sizes
    _, queries_per_class = torch.unique_consecutive(length_class[query_order], return_counts=True)
    parts = []
    first_query = 0
    for count in queries_per_class.tolist():
        rows = query_order[first_query : first_query + count]
        lengths = sorted_sizes[first_query : first_query + count]
        width = int(lengths.max())
        first = int(starts[first_query])
        entries = entry_order[first : first + int(lengths.sum())]
        row = torch.repeat_interleave(torch.arange(count, device=device), lengths)
        column = torch.arange(entries.numel(), device=device) - (
            starts[first_query : first_query + count] - first
        ).repeat_interleave(lengths)
        scores = torch.full((count, width), lowest(preds.dtype), dtype=preds.dtype, device=device)
        scores[row, column] = preds[entries]
        grades = torch.zeros((count, width), dtype=target.dtype, device=device)
        grades[row, column] = target[entries]
        judged = torch.zeros((count, width), dtype=torch.bool, device=device)
        judged[row, column] = True
        ranked = judged.clone()
        if mask is not None:
            ranked[row, column] = mask[entries]
        # lists of one length (the usual batch of candidates) have no padding
        padded = int(lengths.min()) < width
        data = RankingInput(scores, ranked, DenseGrades(grades, rule, judged if padded else None))
        parts.append(Part(rows, data))
        first_query += count
    return Batch(num_queries, device, tuple(parts))


def _at_least_one_item(data: RankingInput) -> RankingInput:
    """Lists with no items at all get one padding item, so that every row has a position."""
    if data.num_items > 0:
        return data
    scores = torch.full(
        (data.num_queries, 1),
        lowest(data.scores.dtype),
        dtype=data.scores.dtype,
        device=data.scores.device,
    )
    ranked = torch.zeros_like(scores, dtype=torch.bool)
    relevance = data.relevance
    if isinstance(relevance, DenseGrades):
        grades = torch.zeros_like(scores, dtype=relevance.grades.dtype)
        # the padding item carries no judgment: never relevant, whatever the threshold
        return RankingInput(scores, ranked, DenseGrades(grades, relevance.rule, ranked))
    assert isinstance(relevance, ItemIds)  # only padding ids pass validation
    return RankingInput(scores, ranked, ItemIds(relevance.item_ids, 1, relevance.rule))


def lowest(dtype: torch.dtype) -> float | int:
    """A score no ranked item can beat: where masked items are parked before selection."""
    if dtype.is_floating_point:
        return -math.inf
    return int(torch.iinfo(dtype).min)


# ---------------------------------------------------------------------------
# 2. Ranking into tie groups
# ---------------------------------------------------------------------------


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


@dataclass(frozen=True)
class CutGroup:
    """Whole-row statistics of the tie group that the selection cut, for ``rows``."""

    rows: Tensor
    score: Tensor
    size: Tensor
    relevant: Tensor
    gain: Tensor


def rank(data: RankingInput, ties: str, depth: int | None) -> RankedList:
    """Rank every query and describe its first ``depth`` positions (all when None).

    With a finite ``depth`` only a top-(depth + 1) selection is taken. It is
    exact about which scores reach the top ``depth``; but when the tie group at
    position ``depth`` continues past it, which of its members made the cut is
    arbitrary, so those rows are completed from their whole row.
    """
    scores, mask = data.scores, data.ranked
    selectable = scores if mask is None else scores.masked_fill(~mask, lowest(scores.dtype))
    num_queries, num_items = scores.shape
    cut_group = None
    if depth is None or depth >= num_items:
        items = torch.arange(num_items, device=scores.device).expand(num_queries, num_items)
        candidates = _candidates(data, ties, selectable, items)
        _sort_within_ties(candidates, by_ranked=mask is not None)
    else:
        values, items = torch.topk(selectable, depth + 1, dim=1)
        is_cut = values[:, depth] == values[:, depth - 1]
        candidates = _candidates(data, ties, values[:, :depth], items[:, :depth])
        cut_group = _complete_cut_groups(data, ties, selectable, candidates, is_cut)
        # topk returns scores in order, but not ties in tie order nor masked items last
        if mask is not None or candidates.key is not None:
            _sort_within_ties(candidates, by_ranked=mask is not None)
    return _tie_groups(candidates, None if candidates.key is not None else cut_group)


def _candidates(data: RankingInput, ties: str, values: Tensor, items: Tensor) -> Candidates:
    ranked = (
        torch.ones_like(values, dtype=torch.bool)
        if data.ranked is None
        else data.ranked.gather(1, items)
    )
    relevant, gain = data.relevance.at(items)
    return Candidates(values, items, ranked, relevant, gain, tie_key(ties, items, relevant, gain))


def _complete_cut_groups(
    data: RankingInput, ties: str, selectable: Tensor, c: Candidates, is_cut: Tensor
) -> CutGroup | None:
    """Refill the slots of each cut tie group with its first members in tie order."""
    rows = rows_to_complete(is_cut)
    if rows is None:
        return None
    depth = c.values.shape[1]
    score = c.values[rows, -1].unsqueeze(1)
    members = selectable[rows] == score
    if data.ranked is not None:
        members &= data.ranked[rows]
    row_relevant, row_gain = data.relevance.rows(rows)
    row_items = torch.arange(data.num_items, device=score.device).expand_as(members)
    row_key = tie_key(ties, row_items, row_relevant, row_gain)
    fill_key = torch.where(members, 0.0 if row_key is None else row_key, -math.inf)
    best_key, best = torch.topk(fill_key, depth, dim=1)

    first_slot = count_true(c.values[rows] > score).unsqueeze(1)
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
    )


def _sort_within_ties(c: Candidates, by_ranked: bool) -> None:
    """Order by score, then ranked before masked, then the tie policy (all descending)."""
    keys = [c.values]
    if by_ranked:
        keys.append(c.ranked.to(torch.int8))
    if c.key is not None:
        keys.append(c.key)
    order = lexsort_desc(keys)
    c.values, c.items, c.ranked, c.relevant, c.gain = (
        t.gather(1, order) for t in (c.values, c.items, c.ranked, c.relevant, c.gain)
    )
    if c.key is not None:
        c.key = c.key.gather(1, order)


def lexsort_desc(keys: list[Tensor]) -> Tensor:
    """Row-wise permutation sorting by ``keys`` descending, the first key most significant."""
    order: Tensor | None = None
    for key in reversed(keys):
        current = key if order is None else key.gather(1, order)
        step = torch.sort(current, dim=1, descending=True, stable=True).indices
        order = step if order is None else order.gather(1, step)
    assert order is not None
    return order


def _tie_groups(c: Candidates, cut_group: CutGroup | None) -> RankedList:
    """Per-position statistics of each position's tie group."""
    ranked = c.ranked
    relevant = (c.relevant & ranked).to(torch.float64)
    gain = torch.where(ranked, c.gain, 0.0)
    num_queries, length = ranked.shape
    device = ranked.device

    # a new group wherever the score, the ranked flag or the tie key changes
    starts = torch.ones_like(ranked)
    starts[:, 1:] = (c.values[:, 1:] != c.values[:, :-1]) | (ranked[:, 1:] != ranked[:, :-1])
    if c.key is not None:
        starts[:, 1:] |= c.key[:, 1:] != c.key[:, :-1]
    group = torch.cumsum(starts, dim=1) - 1

    def total(values: Tensor) -> Tensor:
        return torch.zeros_like(values).scatter_add_(1, group, values)

    size, group_relevant, group_gain = total(torch.ones_like(gain)), total(relevant), total(gain)
    position = torch.arange(length, device=device).expand(num_queries, length)
    start = torch.full_like(group, length).scatter_reduce_(1, group, position, reduce="amin")

    if cut_group is not None:
        # "average": the cut group's totals come from its whole row
        rows = cut_group.rows
        in_group = ranked[rows] & (c.values[rows] == cut_group.score.unsqueeze(1))
        cut = group[rows].gather(1, in_group.to(torch.int8).argmax(dim=1, keepdim=True))
        # no ranked member at all (only masked items at that score): nothing to replace
        at_cut = (torch.arange(length, device=device) == cut) & (cut_group.size > 0).unsqueeze(1)
        for totals, whole_row in (
            (size, cut_group.size),
            (group_relevant, cut_group.relevant),
            (group_gain, cut_group.gain),
        ):
            totals[rows] = torch.where(
                at_cut, whole_row.unsqueeze(1).to(totals.dtype), totals[rows]
            )

    group_start = start.gather(1, group)
    relevant_so_far = torch.cumsum(relevant, dim=1)
    relevant_before = torch.where(
        group_start > 0,
        relevant_so_far.gather(1, (group_start - 1).clamp(min=0)),
        0.0,
    )
    return RankedList(
        ranked=ranked,
        group_start=group_start.to(torch.float64),
        group_size=size.gather(1, group),
        group_relevant=group_relevant.gather(1, group),
        group_gain=group_gain.gather(1, group),
        relevant_before=relevant_before,
    )


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


def host_reads_are_free(t: Tensor) -> bool:
    """Whether the kernel may read values of ``t`` on the host to save work.

    True on the CPU. On an accelerator a read would synchronise it with the
    host, so the kernel takes a path that needs no read (``validate_args=False``
    promises none).
    """
    return t.device.type == "cpu" and not ACCELERATOR_PATHS_ON_CPU


#: tests set it to run the accelerator (read-free) paths on the CPU
ACCELERATOR_PATHS_ON_CPU = False


# ---------------------------------------------------------------------------
# 3. From tie groups to rank statistics
# ---------------------------------------------------------------------------


class RankStats:
    """Expected per-position values of a ranked list, and their sums at any cutoff.

    Under "average" every value is the expectation over all orders of each tie
    group (SPEC section 3); under the other policies the groups hold
    interchangeable items, so the same formulas give the deterministic value.
    """

    def __init__(
        self,
        ranked_list: RankedList,
        relevant_count: Tensor,
        relevant_ranked: Tensor,
        relevance: Relevance,
        num_ranked: Tensor,
    ) -> None:
        self.list = ranked_list
        self.relevant_count = relevant_count.to(torch.float64)
        self.relevant_ranked = relevant_ranked.to(torch.float64)
        self.num_ranked = num_ranked.to(torch.float64)
        self._relevance = relevance
        self._relevant_count_int = relevant_count
        length = ranked_list.ranked.shape[1]
        self.length = length
        self.position = torch.arange(
            1, length + 1, dtype=torch.float64, device=ranked_list.ranked.device
        )

    # -- per-position expected values --------------------------------------

    @cached_property
    def relevance(self) -> Tensor:
        """P(the item at this position is relevant) = r_c / t_c."""
        g = self.list
        return torch.where(g.ranked, g.group_relevant / g.group_size, 0.0)

    @cached_property
    def gain(self) -> Tensor:
        g = self.list
        return torch.where(g.ranked, g.group_gain / g.group_size, 0.0)

    @cached_property
    def ap_term(self) -> Tensor:
        """E[rel_j * hits@j] / j: the closed form of SPEC section 3."""
        g = self.list
        r, t = g.group_relevant, g.group_size
        slope = torch.where(t > 1, (r - 1) / (t - 1).clamp(min=1), 0.0)
        expected_hits = g.relevant_before + 1 + (self.position - g.group_start - 1) * slope
        return self.relevance * expected_hits / self.position

    @cached_property
    def first_hit(self) -> Tensor:
        """P(the first relevant item is at this position)."""
        g = self.list
        r, t = g.group_relevant, g.group_size
        first_group = g.ranked & (g.relevant_before == 0) & (r > 0)
        i = self.position - g.group_start  # 1-based position inside the group
        # p_1 = r/t and p_{i+1} = p_i (t - i - r + 1) / (t - i): C(t-i, r-1) / C(t, r)
        step = (t - i - r + 1).clamp(min=0) / (t - i).clamp(min=1)
        step = torch.where(first_group & (t - i > 0), step, 1.0)
        before = torch.cumprod(
            torch.cat([torch.ones_like(step[:, :1]), step[:, :-1]], dim=1), dim=1
        )
        # positions before the first group contribute factor 1, so `before` restarts there
        return torch.where(first_group, (r / t) * before, 0.0)

    @cached_property
    def discount(self) -> Tensor:
        return 1.0 / torch.log2(self.position + 1)

    # -- cumulative sums, with a leading zero column: index k is "top k" ---------

    def _cumulative(self, values: Tensor) -> Tensor:
        return torch.cat([torch.zeros_like(values[:, :1]), torch.cumsum(values, dim=1)], dim=1)

    @cached_property
    def cum_hits(self) -> Tensor:
        return self._cumulative(self.relevance)

    @cached_property
    def cum_dcg(self) -> Tensor:
        return self._cumulative(self.gain * self.discount)

    @cached_property
    def cum_idcg(self) -> Tensor:
        # the ideal list needs its own selection over the targets: only for ndcg
        ideal = self._relevance.ideal_gains(self.length, self._relevant_count_int)
        discount = self.discount[: ideal.shape[1]]
        return self._cumulative(ideal * discount)

    @cached_property
    def cum_ap(self) -> Tensor:
        return self._cumulative(self.ap_term)

    @cached_property
    def cum_rr(self) -> Tensor:
        return self._cumulative(self.first_hit / self.position)

    @cached_property
    def cum_first_hit(self) -> Tensor:
        return self._cumulative(self.first_hit)

    def at(
        self,
        cutoff: Tensor,
        adaptive_k: bool,
        whole_list: bool = False,
        deepest: int | None = None,
    ) -> Cutoff:
        """Statistics at a per-query cutoff (Q, K) (float64, may exceed the list).

        ``whole_list``: the cutoff is the end of the list (``top_k=None``), so
        the ideal DCG is not cut: it covers every relevant item, retrieved or not.
        ``deepest``: the largest cutoff, when the host knows it (the largest k).
        """
        return Cutoff(self, cutoff, adaptive_k, whole_list, deepest)

    # -- sums over the top k, for a cutoff k (Q, K) ------------------------

    def _read(self, cumulative: Tensor, k: Tensor) -> Tensor:
        index = k.clamp(max=min(self.length, cumulative.shape[1] - 1)).to(torch.int64)
        return cumulative.gather(1, index)

    def hits_at(self, k: Tensor) -> Tensor:
        return self._read(self.cum_hits, k)

    def dcg_at(self, k: Tensor) -> Tensor:
        return self._read(self.cum_dcg, k)

    def idcg_at(self, k: Tensor, whole_list: bool) -> Tensor:
        if whole_list:
            return self.cum_idcg[:, -1:].expand_as(k)
        return self._read(self.cum_idcg, k)

    def ap_sum_at(self, k: Tensor) -> Tensor:
        return self._read(self.cum_ap, k)

    def reciprocal_rank_at(self, k: Tensor, deepest: int | None = None) -> Tensor:
        return self._read(self.cum_rr, k)

    def hit_probability_at(self, k: Tensor) -> Tensor:
        return self._read(self.cum_first_hit, k)

    # -- whole-list statistics ---------------------------------------------

    @cached_property
    def nonrelevant_ranked(self) -> Tensor:
        return self.num_ranked - self.relevant_ranked

    @cached_property
    def rank_sum(self) -> Tensor:
        """E[sum of the ranks of the relevant ranked items]."""
        return (self.relevance * self.position).sum(dim=1)

    @cached_property
    def ordered_pairs(self) -> Tensor:
        """E[(relevant, non-relevant) pairs with the relevant item first]; a tie counts 1/2."""
        g = self.list
        r, t = g.group_relevant, g.group_size
        nonrelevant_up_to_group_end = (g.group_start + t) - (g.relevant_before + r)
        below = self.nonrelevant_ranked.unsqueeze(1) - nonrelevant_up_to_group_end
        return (self.relevance * (below + (t - r) / 2)).sum(dim=1)


class ListStats(Protocol):
    """What a cutoff reads: :class:`RankStats` (from a ranked list) or
    :class:`ranking_plugins.rank_counts.CountStats` (from counted ranks)."""

    relevant_count: Tensor  # (Q,) float64, R
    relevant_ranked: Tensor  # (Q,) float64
    num_ranked: Tensor  # (Q,) float64

    @property
    def nonrelevant_ranked(self) -> Tensor: ...
    @property
    def rank_sum(self) -> Tensor: ...
    @property
    def ordered_pairs(self) -> Tensor: ...
    def hits_at(self, k: Tensor) -> Tensor: ...
    def dcg_at(self, k: Tensor) -> Tensor: ...
    def idcg_at(self, k: Tensor, whole_list: bool) -> Tensor: ...
    def ap_sum_at(self, k: Tensor) -> Tensor: ...
    def reciprocal_rank_at(self, k: Tensor, deepest: int | None = None) -> Tensor: ...
    def hit_probability_at(self, k: Tensor) -> Tensor: ...
    def at(
        self,
        cutoff: Tensor,
        adaptive_k: bool,
        whole_list: bool = False,
        deepest: int | None = None,
    ) -> Cutoff: ...


class Cutoff:
    """Rank statistics read at one cutoff per query and k: what a metric formula sees."""

    def __init__(
        self,
        stats: ListStats,
        k: Tensor,
        adaptive_k: bool,
        whole_list: bool,
        deepest: int | None = None,
    ) -> None:
        self.stats = stats
        self.k = k
        self.adaptive_k = adaptive_k
        self.whole_list = whole_list
        self.deepest = deepest  # an upper bound of k known on the host, if any

    @cached_property
    def hits(self) -> Tensor:
        return self.stats.hits_at(self.k)

    @cached_property
    def dcg(self) -> Tensor:
        return self.stats.dcg_at(self.k)

    @cached_property
    def idcg(self) -> Tensor:
        return self.stats.idcg_at(self.k, self.whole_list)

    @cached_property
    def ap_sum(self) -> Tensor:
        return self.stats.ap_sum_at(self.k)

    @cached_property
    def reciprocal_rank(self) -> Tensor:
        return self.stats.reciprocal_rank_at(self.k, self.deepest)

    @cached_property
    def hit_probability(self) -> Tensor:
        return self.stats.hit_probability_at(self.k)

    @cached_property
    def retrieved(self) -> Tensor:
        """Ranked items at or above the cutoff."""
        return torch.minimum(self.k, self.stats.num_ranked.unsqueeze(1))

    @cached_property
    def list_size(self) -> Tensor:
        """The k that precision divides by."""
        return self.retrieved if self.adaptive_k else self.k

    @property
    def relevant_count(self) -> Tensor:
        return self.stats.relevant_count.unsqueeze(1)
