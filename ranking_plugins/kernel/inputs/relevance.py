"""What the kernel knows about a batch's targets, whatever their layout.

:class:`GainRule` says which grades are relevant and what gain they earn;
:class:`Relevance` is what ranking and statistics ask of the targets, answered
by :class:`DenseGrades` (a grade for every item) and :class:`ItemIds` (the ids
of the relevant items).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from ranking_plugins.kernel.flags import (
    Comparison,
    compare_rows,
    count_compared,
    count_true,
    counts_fit_in_float,
)
from ranking_plugins.kernel.host_reads import host_reads_are_free


@dataclass(frozen=True)
class GainRule:
    """Which grades are relevant and what gain a relevant grade earns (SPEC section 4)."""

    relevance_threshold: float | None  # finite; None: grade > 0 is relevant
    gain: str  # "exponential" | "linear"

    def relevant(self, grades: Tensor) -> Tensor:
        """grade > 0, or grade >= threshold, compared exactly in the grades' own dtype."""
        if grades.dtype == torch.bool:
            return self._relevant_bool(grades)
        test = self.relevance_test(grades.dtype)
        if test is None:  # above every value of the dtype
            return torch.zeros_like(grades, dtype=torch.bool)
        compare, bound = test
        return compare(grades, bound)

    def relevance_test(self, dtype: torch.dtype) -> tuple[Comparison, object] | None:
        """``(compare, bound)``: a grade of (non-bool) ``dtype`` is relevant when
        ``compare(grade, bound)``; None when no grade of the dtype is."""
        if self.relevance_threshold is None:
            return torch.gt, 0
        bound = least_at_or_above(self.relevance_threshold, dtype)
        return None if bound is None else (torch.ge, bound)

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
        gain = torch.exp2(g).sub_(1)  # exact at 0 and at every integer grade
        if not grades.is_floating_point():
            return gain  # integers: none strictly between 0 and 1, no mask to build
        cancels = (g > 0) & (g < 1)
        if host_reads_are_free(cancels) and not bool(cancels.any()):
            return gain  # no grade strictly between 0 and 1 (0/1 grades): no expm1 to take
        return torch.where(cancels, torch.expm1(g * math.log(2)), gain)

    def gains(self, grades: Tensor, relevant: Tensor, by_this_rule: bool = False) -> Tensor:
        """float64 gains; non-relevant and negative grades earn nothing.

        ``by_this_rule``: ``relevant`` is :meth:`relevant` of ``grades`` (no
        judgments applied). Then integer grades under "grade > 0 is relevant"
        need no mask: :meth:`gain_of` earns 0 at every grade at or below 0 (a
        float grade of -0.0 would keep its sign, so floats take the mask).
        """
        gain = self.gain_of(grades)
        if by_this_rule and self.relevance_threshold is None and not grades.is_floating_point():
            return gain
        return torch.where(relevant, gain, 0.0)


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

    def rows(self, rows: Tensor | slice) -> tuple[Tensor, Tensor]:
        """(relevant, gain) of every item of the queries ``rows``, shape (len(rows), N)."""
        ...

    def relevant_count(self, within: Tensor | None = None) -> Tensor:
        """R: relevant items per query, int64 (Q,); only those where ``within`` if given."""
        ...

    def any_relevant(self) -> Tensor | None:
        """(Q,) bool: R > 0, where known without counting R; None: count it."""
        ...

    def ideal_gains(self, length: int, relevant_count: Callable[[], Tensor]) -> Tensor:
        """The ``length`` largest gains of each query (all items), descending, float64.

        ``relevant_count()``: R, :meth:`relevant_count` (read only where it helps)."""
        ...

    def take(self, rows: slice) -> Relevance:
        """The targets of the queries ``rows`` only."""
        ...

    # -- judgments: read only by the measures of incomplete judgments --

    def judgment_at(self, items: Tensor) -> tuple[Tensor, Tensor]:
        """(judged, pooled) of ``items`` (item indices per query), bool each.

        pooled: the item carries a judgment entry (trec_eval: it is in the
        qrels); judged: pooled with a grade of 0 or more (a negative grade is
        trec_eval's "in the pool but not judged").
        """
        ...

    def judged_nonrelevant_count(self) -> Tensor:
        """(Q,) int64: judged items (grade >= 0) that are not relevant, over all items."""
        ...


@dataclass(frozen=True)
class GradeSummary:
    """Per row of (Q, N) grades: what ranking statistics read of the whole row."""

    relevant: Tensor  # int64 (Q,): relevant items (R)
    largest: Tensor  # (Q,) the largest grade, in the grades' dtype
    holders: Tensor  # int64 (Q,): items holding the largest grade

    def take(self, rows: slice) -> GradeSummary:
        return GradeSummary(self.relevant[rows], self.largest[rows], self.holders[rows])


class DenseGrades:
    """Targets given as a grade for every item: (Q, N) bool, int or float.

    ``judged`` (bool, same shape, optional): False marks positions that carry
    no judgment (the padding of grouped lists); they are never relevant,
    whatever the threshold.
    """

    def __init__(
        self,
        grades: Tensor,
        rule: GainRule,
        judged: Tensor | None = None,
        summary: GradeSummary | None = None,
        select_depth: int | None = None,
        ideal_read: bool = True,
    ) -> None:
        if grades.dtype == torch.bool and (rule.grade_zero_is_relevant or judged is not None):
            # not every relevant item has gain 1 any more: grades 0/1 as numbers
            grades = grades.to(torch.uint8)
        self.grades = grades
        self.rule = rule
        self.judged = judged
        self.binary = grades.dtype == torch.bool
        self._summary = summary  # read once, when first asked (:meth:`summary`)
        self._largest: Tensor | None = None  # each row's largest grade (:meth:`largest`)
        self._top: Tensor | None = None  # the top gains selected (:meth:`ideal_gains`)
        #: how deep the scores will be ranked (None: whole rows): an ideal list (ndcg@k)
        #: is selected to that depth at most, so :meth:`largest` may select it instead
        self.select_depth = select_depth
        #: False: no statistic reads the ideal list (the first-hit metrics alone), so
        #: :meth:`largest` takes the row maxima alone, selecting no top grades
        self.ideal_read = ideal_read
        self._top_grades: Tensor | None = None  # that selection's grades (:meth:`largest`)
        #: the whole rows' (relevant, gain), kept on an accelerator where the ranking made
        #: them: R and the ideal list then cost one reduction each (:meth:`_whole_rows`)
        self._whole: tuple[Tensor, Tensor] | None = None

    def summary(self) -> GradeSummary | None:
        """Each row's relevant count, largest grade and how many items hold it.

        One walk over the grades in row blocks that stay in cache (a max and
        two comparisons on each), instead of a pass over the whole matrix for
        each; None where the counts come from elsewhere (bool grades, unjudged
        positions) or would not be exact as float sums (rows of 2^24 items).
        """
        grades = self.grades
        if self._summary is not None or self.binary or self.judged is not None:
            return self._summary
        num_rows, width = grades.shape
        if width == 0 or not counts_fit_in_float(width):
            return None
        rows = compare_rows(width, grades)
        known = self._largest  # the row maxima, when :meth:`largest` took them already
        test = self.rule.relevance_test(grades.dtype)
        if rows >= num_rows and not host_reads_are_free(grades):
            # an accelerator, one block: no cache to stay in, and each operation of
            # the blocks' float flags is a launch; three reductions, the same counts
            high = grades.amax(dim=1) if known is None else known
            relevant = (
                torch.zeros(num_rows, dtype=torch.int64, device=grades.device)
                if test is None
                else test[0](grades, test[1]).sum(dim=1)
            )
            holders = (grades == high.unsqueeze(1)).sum(dim=1)
            self._summary = GradeSummary(relevant, high, holders)
            return self._summary
        device = grades.device
        buffer = torch.empty((min(rows, num_rows), width), dtype=torch.float32, device=device)
        high = torch.empty(num_rows, dtype=grades.dtype, device=device) if known is None else known
        relevant = torch.zeros(num_rows, dtype=torch.float32, device=device)
        holders = torch.empty_like(relevant)
        for low in range(0, num_rows, rows):
            block, at = grades[low : low + rows], slice(low, low + rows)
            if known is None:
                torch.amax(block, dim=1, out=high[at])
            if test is not None:
                count_compared(test[0], block, test[1], buffer, relevant[at])
            count_compared(torch.eq, block, high[at].unsqueeze(1), buffer, holders[at])
        self._summary = GradeSummary(relevant.to(torch.int64), high, holders.to(torch.int64))
        return self._summary

    def largest(self) -> Tensor:
        """The largest grade of each row (Q,), from :meth:`summary` where it has them.

        Integer grades (graded labels, whose ndcg selects the ideal list and needs
        no counts) take a max of their own when nothing was counted yet: the counts
        are then made only if a metric reads them, and their walk reuses the max.
        """
        integers = not self.binary and not self.grades.is_floating_point()
        # float grades (graded labels as Ignite and TorchMetrics users pass them) too,
        # where their top is found through block maxima: a top-k over whole rows would
        # cost more than the counts' walk; and on an accelerator, where one top-k is
        # one launch and the counts' walk three, and an ideal list reuses the selection
        depth = self.select_depth
        floats = (
            not self.binary
            and self.grades.is_floating_point()
            and depth is not None
            and (through_blocks(self.grades, depth) or not host_reads_are_free(self.grades))
        )
        if (
            (integers or floats)
            and self._summary is None
            and self._largest is None
            and self.judged is None
        ):
            num_items = self.grades.shape[1]
            if self.ideal_read and depth is not None and 0 < depth < num_items:
                # a ranking to a depth reads an ideal list to that depth at most (ndcg@k):
                # its selection gives the maxima too, one pass over the grades for both
                top = top_grades(self.grades, depth)
                self._top_grades, self._largest = top, top[:, 0]
            else:
                self._largest = self.grades.amax(dim=1)
        if self._largest is not None:
            return self._largest
        summary = self.summary()
        return self.grades.amax(dim=1) if summary is None else summary.largest

    def relevant_items(self) -> Tensor:
        """(Q, N) bool: whether each item is relevant (unjudged positions never are)."""
        relevant = self.rule.relevant(self.grades)
        return relevant if self.judged is None else relevant & self.judged

    def _relevant_and_gain(
        self, grades: Tensor, judged: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        relevant = self.rule.relevant(grades)
        if judged is not None:
            relevant &= judged
        if self.binary:  # a relevant bool grade is 1, whose gain is 1 under both gains
            return relevant, relevant.to(torch.float64)
        return relevant, self.rule.gains(grades, relevant, by_this_rule=judged is None)

    def at(self, items: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Tensor]:
        grades = self.grades if rows is None else self.grades[rows]
        judged = None
        if self.judged is not None:
            judged = (self.judged if rows is None else self.judged[rows]).gather(1, items)
        return self._relevant_and_gain(grades.gather(1, items), judged)

    def rows(self, rows: Tensor | slice) -> tuple[Tensor, Tensor]:
        if isinstance(rows, slice) and rows == slice(None):
            if self._whole is not None:
                return self._whole
            whole = self._relevant_and_gain(self.grades, self.judged)  # no view to make
            if not host_reads_are_free(self.grades):
                self._whole = whole
            return whole
        judged = None if self.judged is None else self.judged[rows]
        return self._relevant_and_gain(self.grades[rows], judged)

    def take(self, rows: slice) -> DenseGrades:
        judged = None if self.judged is None else self.judged[rows]
        summary = None if self._summary is None else self._summary.take(rows)
        return DenseGrades(self.grades[rows], self.rule, judged, summary)

    def relevant_count(self, within: Tensor | None = None) -> Tensor:
        if within is None and self._summary is None and self._whole is not None:
            return count_true(self._whole[0])  # judged positions applied already
        # the summary's walk saves passes on the CPU; on an accelerator R alone is two
        # launches and the summary's three reductions five (its maxima and their holders
        # are read for an ideal list from the counts, which only the CPU's paths make)
        summary = None
        if within is None and (self._summary is not None or host_reads_are_free(self.grades)):
            summary = self.summary()
        if summary is not None:
            return summary.relevant
        relevant = self.rule.relevant(self.grades)
        if self.judged is not None:
            relevant &= self.judged
        return count_true(relevant if within is None else relevant & within)

    def any_relevant(self) -> Tensor | None:
        # relevance grows with the grade: a row holds a relevant grade exactly when its
        # largest grade is one; known when the grades' check took the maxima alone
        if self._summary is not None or self._largest is None or self.judged is not None:
            return None
        return self.rule.relevant(self._largest)

    def _judgments(self, grades: Tensor, pooled: Tensor | None) -> tuple[Tensor, Tensor]:
        judged = grades >= 0 if grades.dtype != torch.bool else torch.ones_like(grades)
        if pooled is None:
            return judged, torch.ones_like(judged)
        return judged & pooled, pooled

    def judgment_at(self, items: Tensor) -> tuple[Tensor, Tensor]:
        pooled = None if self.judged is None else self.judged.gather(1, items)
        return self._judgments(self.grades.gather(1, items), pooled)

    def judged_nonrelevant_count(self) -> Tensor:
        judged, _ = self._judgments(self.grades, self.judged)
        relevant, _ = self._relevant_and_gain(self.grades, self.judged)
        return count_true(judged & ~relevant)

    def ideal_gains(self, length: int, relevant_count: Callable[[], Tensor]) -> Tensor:
        if self.binary:
            return binary_ideal_gains(relevant_count(), length)
        length = min(length, self.grades.shape[1])
        if self.judged is not None:
            # unjudged positions may hold any grade: select among relevant gains
            gains = self._relevant_and_gain(self.grades, self.judged)[1]
            return torch.topk(gains, length, dim=1).values
        if self._summary is None or not host_reads_are_free(self.grades):
            # R is not counted (no metric read it): the selection alone, which a
            # shortcut through R (below) would cost a pass over the grades more than.
            # On an accelerator the shortcut saves no selection either (no read says
            # which rows may take it), and its operations are launches: the same gains.
            # Kept at its deepest: ndcg@k's IDCG, then its largest gain, select once.
            if self._top is None or self._top.shape[1] < length:
                chosen = self._top_grades
                if self._whole is not None and self._gain_grows_exactly():
                    # the top gains are the gains of the top grades, bit for bit
                    self._top = torch.topk(self._whole[1], length, dim=1).values
                elif chosen is not None and chosen.shape[1] >= length:
                    self._top = self._relevant_and_gain(chosen)[1]  # selected by largest()
                else:
                    self._top = self._top_gains(self.grades, length)
            return self._top if self._top.shape[1] == length else self._top[:, :length]
        return self._ideal_from_counts(length, relevant_count())

    def _ideal_from_counts(self, length: int, relevant_count: Tensor) -> Tensor:
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

    def _gain_grows_exactly(self) -> bool:
        """Whether the gain of a grade never falls as the grade grows, as computed: the
        linear gain (a clamp), integer grades' 2^g - 1 (exact); not ``expm1`` below 1."""
        return self.rule.gain == "linear" or not self.grades.is_floating_point()

    def _top_gains(self, grades: Tensor, length: int) -> Tensor:
        # gains grow with grades, so the top grades give the top gains
        return self._relevant_and_gain(top_grades(grades, length))[1]

    def _single_relevant_grade(self, relevant_count: Tensor) -> tuple[Tensor, Tensor]:
        """(the largest grade, whether every relevant item has it) per row.

        When a row has a relevant item, its largest grade is relevant, and all
        R relevant grades equal it exactly when R items hold it: one max and
        one comparison, exact for every dtype, much cheaper than a top-k.
        """
        summary = self.summary()
        if summary is None:
            high = self.grades.amax(dim=1)
            holders = count_true(self.grades == high.unsqueeze(1))
        else:
            high, holders = summary.largest, summary.holders
        return high, (relevant_count == 0) | (holders == relevant_count)


#: columns per block of :func:`top_grades` (32 int64 grades: four cache lines)
_BLOCK = 32

#: blocks per chosen one below which a plain top-k is cheaper (the blocks' second
#: selection costs more than it saves)
_BLOCKS_PER_CHOSEN = 16

#: block maxima per row block of :func:`top_grades` on the CPU: its buffers stay
#: small enough to be reused: whole-matrix ones are fresh pages at every call,
#: whose page faults cost as much as the selections (benchmarks/bench_kernel.py)
_MAXIMA_ELEMENTS = 1 << 17


def through_blocks(grades: Tensor, k: int) -> bool:
    """Whether :func:`top_grades` finds the top ``k`` of ``grades`` through block maxima.

    Not on an accelerator, where the blocks' half dozen operations are as many
    launches and one ``topk`` is one.
    """
    blocks = grades.shape[1] // _BLOCK
    return (
        k >= 1
        and grades.dtype != torch.bool
        and blocks >= _BLOCKS_PER_CHOSEN * k
        and host_reads_are_free(grades)
    )


def top_grades(grades: Tensor, k: int) -> Tensor:
    """The ``k`` largest grades of each row of (Q, N) grades, descending:
    ``torch.topk(grades, k, dim=1).values``, at under half its cost on long rows.

    Rows much longer than ``k`` are cut into blocks of 32 columns; the k
    blocks with the largest maxima hold the k largest grades (a grade of any
    other block is at most each of their k maxima), so one max per block and a
    top-k among those k * 32 grades (and the last, shorter block's) replace a
    top-k over the whole row. Float grades too: a block's max is NaN where it
    holds one, and ``topk`` ranks NaN above every number, so a NaN grade is
    chosen as ``topk`` over the row would choose it.
    """
    num_rows, num_items = grades.shape
    blocks = num_items // _BLOCK
    if not through_blocks(grades, k):
        return torch.topk(grades, k, dim=1).values
    whole = blocks * _BLOCK
    by_block = grades[:, :whole].unflatten(1, (blocks, _BLOCK))
    width = k * _BLOCK + num_items - whole  # the chosen blocks and the last, shorter one
    rows = max(1, min(num_rows, compare_rows(blocks, grades, _MAXIMA_ELEMENTS)))
    device, dtype = grades.device, grades.dtype
    maxima = torch.empty((rows, blocks), dtype=dtype, device=device)
    chosen = (torch.empty((rows, k), dtype=dtype, device=device), _index(rows, k, device))
    columns = _index(rows, k * _BLOCK, device)
    candidates = torch.empty((rows, width), dtype=dtype, device=device)
    offsets = torch.arange(_BLOCK, device=device)
    top = torch.empty((num_rows, k), dtype=dtype, device=device)
    places = _index(rows, k, device)
    for low in range(0, num_rows, rows):
        n = min(rows, num_rows - low)
        at = slice(low, low + n)
        torch.amax(by_block[at], dim=2, out=maxima[:n])
        picked = (chosen[0][:n], chosen[1][:n])
        torch.topk(maxima[:n], k, dim=1, sorted=False, out=picked)
        start = chosen[1][:n].unsqueeze(2) * _BLOCK
        torch.add(start, offsets, out=columns[:n].unflatten(1, (k, _BLOCK)))
        torch.gather(grades[at], 1, columns[:n], out=candidates[:n, : k * _BLOCK])
        if whole < num_items:
            candidates[:n, k * _BLOCK :] = grades[at, whole:]
        torch.topk(candidates[:n], k, dim=1, out=(top[at], places[:n]))
    return top


def _index(rows: int, width: int, device: torch.device) -> Tensor:
    return torch.empty((rows, width), dtype=torch.int64, device=device)


class ItemIds:
    """Targets given as the ids of the relevant items: (Q, T) int, -1 = padding.

    A listed item has grade 1 (gain 1 under both gains); unless the relevance
    threshold is above 1, which leaves nothing relevant.
    """

    binary = True

    def __init__(
        self,
        item_ids: Tensor,
        num_items: int,
        rule: GainRule,
        judged_ids: Tensor | None = None,
    ) -> None:
        self.rule = rule
        self.num_items = num_items
        self.listed_ids = item_ids
        # with nothing relevant, no id is listed
        self.item_ids = item_ids if rule.grade_one_is_relevant else torch.full_like(item_ids, -1)
        #: (Q, J) the ids of the judged items (-1: padding); None: every item is judged.
        #: A listed (relevant) item is judged whether or not it is repeated here.
        self.judged_ids = judged_ids

    def at(self, items: Tensor, rows: Tensor | slice | None = None) -> tuple[Tensor, Tensor]:
        ids = self.item_ids if rows is None else self.item_ids[rows]
        relevant = (items.unsqueeze(-1) == ids.unsqueeze(1)).any(dim=-1)
        return relevant, relevant.to(torch.float64)

    def rows(self, rows: Tensor | slice) -> tuple[Tensor, Tensor]:
        ids = self.item_ids[rows]
        relevant = torch.zeros(
            ids.shape[0], self.num_items + 1, dtype=torch.bool, device=ids.device
        )
        # padding (-1) lands in the extra last column, which is dropped
        relevant.scatter_(1, torch.where(ids < 0, self.num_items, ids), True)
        relevant = relevant[:, : self.num_items]
        return relevant, relevant.to(torch.float64)

    def take(self, rows: slice) -> ItemIds:
        judged = None if self.judged_ids is None else self.judged_ids[rows]
        return ItemIds(self.listed_ids[rows], self.num_items, self.rule, judged)

    def judgment_at(self, items: Tensor) -> tuple[Tensor, Tensor]:
        if self.judged_ids is None:
            judged = torch.ones_like(items, dtype=torch.bool)
        else:
            ids = torch.cat([self.listed_ids, self.judged_ids], dim=1)
            judged = (items.unsqueeze(-1) == ids.unsqueeze(1)).any(dim=-1)
        return judged, judged

    def judged_nonrelevant_count(self) -> Tensor:
        relevant = self.relevant_count()
        if self.judged_ids is None:
            return self.num_items - relevant
        # the distinct ids judged (listed or in ``judged_ids``), less the relevant ones
        ids = torch.cat([self.listed_ids, self.judged_ids], dim=1).sort(dim=1).values
        counted = ids >= 0
        counted[:, 1:] &= ids[:, 1:] != ids[:, :-1]
        return counted.sum(dim=1) - relevant

    def relevant_count(self, within: Tensor | None = None) -> Tensor:
        ids = self.item_ids.sort(dim=1).values
        counted = ids >= 0
        counted[:, 1:] &= ids[:, 1:] != ids[:, :-1]  # a repeated id counts once
        if within is not None:
            counted &= within.gather(1, ids.clamp(min=0))
        return counted.sum(dim=1)

    def any_relevant(self) -> Tensor | None:
        return None

    def ideal_gains(self, length: int, relevant_count: Callable[[], Tensor]) -> Tensor:
        return binary_ideal_gains(relevant_count(), length)


def binary_ideal_gains(relevant_count: Tensor, length: int) -> Tensor:
    positions = torch.arange(length, device=relevant_count.device)
    return (positions < relevant_count.unsqueeze(1)).to(torch.float64)
