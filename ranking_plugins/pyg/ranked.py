"""PyG's ranked lists as the kernel's statistics, without ranking them again.

A ``pred_index_mat`` row is a ranked list already: each place holds one item
at a rank of its own, so every place is a tie group of one item (no tie
policy can change anything), and the kernel's description of the list
(:class:`RankedList`) follows from which places hold ground truth alone.
:func:`list_stats` builds that description and the kernel's
:class:`RankStats` over it, :func:`top_items` the same naming each place's
item; the metric table reads them as it reads any ranking: the same fields
as the kernel's ranking of those lists given as scores, so the same numbers
(``tests/test_pyg.py`` compares both to the bit).

What is left per update is finding which listed places hold an edge
(:func:`listed_hits`): a byte table of the edges, a block of examples at a
time, read at the listed places, instead of sorting anything of the lists'
size; and, for the metrics of exposure alone, counting the listed items
(:func:`listed_exposure`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property

import torch
from torch import Tensor

from ranking_plugins.kernel import (
    LOG_ABSENT,
    DenseGrades,
    Exposure,
    GainRule,
    ItemIds,
    RankedBatch,
    RankedList,
    RankStats,
    host_reads_are_free,
)

#: the lookup table of :func:`listed_hits` holds at most this many bytes (one per
#: entry), read at random: a larger one leaves the cache and costs more; an update
#: whose examples need more than :data:`MAX_TABLE_BLOCKS` tables of it (a catalogue
#: of millions of items) is looked up by sorting instead, as PyG does
TABLE_BYTES = 1 << 23
MAX_TABLE_BLOCKS = 64


def listed_hits(ranked: Tensor, rows: Tensor, cols: Tensor, span: int) -> Tensor:
    """(Q, w) bool: whether the item listed at each place is an edge of its example.
    ``span``: above every item id of both. An item listed twice in a row is a hit at
    both places (PyG counts both)."""
    num_examples = ranked.shape[0]
    block = max(1, TABLE_BYTES // max(span, 1))
    blocks = -(-num_examples // block)
    if rows.numel() == 0 or ranked.numel() == 0:
        return torch.zeros(ranked.shape, dtype=torch.bool, device=ranked.device)
    if not host_reads_are_free(ranked) or blocks > MAX_TABLE_BLOCKS:
        return _edge_at(ranked, rows, cols, span) >= 0
    return _by_table(ranked, rows, cols, span, block)


def _by_table(ranked: Tensor, rows: Tensor, cols: Tensor, span: int, block: int) -> Tensor:
    """Each block of examples: its edges marked in a (block, span) table, read at the
    listed places, then unmarked (the table is reused block after block)."""
    num_examples, width = ranked.shape
    device = ranked.device
    if block < num_examples:
        rows, order = rows.sort(stable=True)
        cols = cols[order]
        starts = torch.arange(0, num_examples + block, block, device=device)
        bounds = torch.searchsorted(rows, starts).tolist()
    else:
        bounds = [0, rows.numel()]
    keys = rows * span + cols
    rows_per_table = min(block, num_examples)
    table = torch.zeros(rows_per_table * span, dtype=torch.uint8, device=device)
    offsets = torch.arange(rows_per_table, device=device).mul_(span).repeat_interleave(width)
    listed = ranked.reshape(-1)
    out = torch.empty(num_examples * width, dtype=torch.uint8, device=device)
    for i, low in enumerate(range(0, num_examples, block)):
        at = keys[bounds[i] : bounds[i + 1]] - low * span
        places = slice(low * width, min(low + block, num_examples) * width)
        table.index_fill_(0, at, 1)
        listed_at = listed[places] + offsets[: places.stop - places.start]
        torch.index_select(table, 0, listed_at, out=out[places])
        table.index_fill_(0, at, 0)
    return out.view(num_examples, width).bool()


def _edge_at(ranked: Tensor, rows: Tensor, cols: Tensor, span: int) -> Tensor:
    """(Q, w) int64: the edge (its index in ``rows``/``cols``) at each listed place, -1
    where none: the places' (example, item) keys searched among the edges' sorted keys."""
    num_examples = ranked.shape[0]
    if rows.numel() == 0:
        return torch.full(ranked.shape, -1, dtype=torch.int64, device=ranked.device)
    offsets = torch.arange(num_examples, device=ranked.device).mul_(span).unsqueeze(1)
    listed = (ranked + offsets).view(-1)
    keys, order = (rows * span + cols).sort()
    at = torch.searchsorted(keys, listed).clamp_(max=keys.numel() - 1)
    found = keys[at] == listed
    return torch.where(found, order[at], -1).view(ranked.shape)


def hit_weights(
    ranked: Tensor, hits: Tensor, rows: Tensor, cols: Tensor, weight: Tensor, span: int
) -> Tensor:
    """(Q, w) float64: the weight of the edge at each hit, 0 elsewhere: only the hits'
    (example, item) keys, a few of the places, are searched among the edges' keys."""
    out = torch.zeros(hits.shape, dtype=torch.float64, device=hits.device)
    example, place = hits.nonzero(as_tuple=True)
    if example.numel() == 0:
        return out
    keys, order = (rows * span + cols).sort()
    at = torch.searchsorted(keys, example * span + ranked[example, place])
    out[example, place] = weight.to(torch.float64)[order[at]]
    return out


class ListedGrades(DenseGrades):
    """The grades of the listed places (columns: places of the list), with R and the
    ideal list of every edge of the example, listed or not (as PyG's label count)."""

    def __init__(
        self,
        grades: Tensor,
        rule: GainRule,
        relevant: Tensor,
        edge_grades: Callable[[], DenseGrades],
    ) -> None:
        super().__init__(grades, rule)
        self._relevant = relevant
        self._edge_grades = edge_grades

    def relevant_count(self, within: Tensor | None = None) -> Tensor:
        if within is None:
            return self._relevant
        return super().relevant_count(within)

    def any_relevant(self) -> Tensor | None:
        return self._relevant > 0

    def ideal_gains(self, length: int, relevant_count: Callable[[], Tensor]) -> Tensor:
        return self._edge_grades().ideal_gains(length, relevant_count)

    def take(self, rows: slice) -> ListedGrades:
        edges = self._edge_grades
        return ListedGrades(
            self.grades[rows], self.rule, self._relevant[rows], lambda: edges().take(rows)
        )


def edge_grade_rows(num_examples: int, rows: Tensor, grades: Tensor, fill: float | bool) -> Tensor:
    """(Q, T) each example's edge grades, then ``fill`` (T: the most edges of an example)."""
    device = grades.device
    rows, order = rows.sort(stable=True)
    counts = torch.bincount(rows, minlength=num_examples)
    first = torch.cumsum(counts, 0) - counts
    place = torch.arange(rows.numel(), device=device) - first[rows]
    width = int(counts.max()) if num_examples > 0 and rows.numel() > 0 else 0
    out = torch.full((num_examples, width), fill, dtype=grades.dtype, device=device)
    out[rows, place] = grades[order]
    return out


def _untied_list(
    listed: Tensor,
    relevant: Tensor,
    gain: Tensor,
    items: Tensor,
    width: int,
    relevant_before: Tensor | None = None,
) -> RankedList:
    """The kernel's description of lists whose every place is its own tie group, the
    first ``width`` places listed (the rest padding, one group at the end, as the
    kernel describes masked places)."""
    num_examples, length = relevant.shape
    device = relevant.device
    position = torch.arange(length, dtype=torch.float64, device=device)
    if width < length:
        start = position.clamp(max=width).expand(num_examples, length)
        size = torch.where(position < width, 1.0, float(length - width))
        size = size.expand(num_examples, length)
    else:
        start = position.expand(num_examples, length)
        size = torch.ones_like(position).expand(num_examples, length)
    if relevant_before is None:
        relevant_before = torch.cumsum(relevant, dim=1).sub_(relevant)
    tied_rows = (
        torch.zeros(0, dtype=torch.int64, device=device) if host_reads_are_free(relevant) else None
    )
    return RankedList(
        ranked=listed,
        group_start=start,
        group_size=size,
        group_relevant=relevant,
        group_gain=gain,
        relevant_before=relevant_before,
        items=items,
        shared_ties=True,
        tied_rows=tied_rows,
    )


def _listed_places(num_examples: int, width: int, length: int, device: torch.device) -> Tensor:
    listed = torch.zeros(length, dtype=torch.bool, device=device)
    listed[:width] = True
    return listed.expand(num_examples, length)


class Links:
    """One update's ranked lists ``(Q, w)`` (cut at the deepest place read) and its
    edges, on the lists' device; the hits are found once, for every reader."""

    def __init__(self, ranked: Tensor, rows: Tensor, cols: Tensor, depth: int | None) -> None:
        self.ranked = ranked if depth is None else ranked[:, :depth]
        self.rows, self.cols = rows.to(ranked.device), cols.to(ranked.device)
        highest = [int(t.max()) for t in (self.ranked, self.cols) if t.numel() > 0]
        #: above every item id of the lists and the edges
        self.span = max(highest, default=0) + 1

    @cached_property
    def hits(self) -> Tensor:
        """(Q, w) bool: :func:`listed_hits`."""
        return listed_hits(self.ranked, self.rows, self.cols, self.span)


def list_stats(
    links: Links, weight: Tensor | None, rule: GainRule, depth: int | None
) -> RankedBatch:
    """The accuracy statistics of the ranked lists of ``links`` against its edges
    (grade: ``weight``, or 1), read down to ``depth`` (None: the whole lists)."""
    num_examples, width = links.ranked.shape
    device = links.ranked.device
    rows = links.rows
    length = width if depth is None else depth
    width = min(width, length)
    hits = links.hits[:, :width]
    if weight is None:
        grades = torch.zeros((num_examples, length), dtype=torch.bool, device=device)
        grades[:, :width] = hits
        edge_grades = torch.ones(rows.shape, dtype=torch.bool, device=device)
        fill: float | bool = False
    else:
        edge_grades = weight.to(device, torch.float64)
        grades = torch.zeros((num_examples, length), dtype=torch.float64, device=device)
        ranked = links.ranked[:, :width]
        grades[:, :width] = hit_weights(ranked, hits, rows, links.cols, edge_grades, links.span)
        fill = 0.0
    relevant_edges = rule.relevant(edge_grades)
    relevant_count = torch.bincount(rows[relevant_edges], minlength=num_examples)

    def edge_rows() -> DenseGrades:
        return DenseGrades(edge_grade_rows(num_examples, rows, edge_grades, fill), rule)

    relevance = ListedGrades(grades, rule, relevant_count, edge_rows)
    relevant, gain = relevance.rows(slice(None))
    listed = _listed_places(num_examples, width, length, device)
    relevant_f = relevant.to(torch.float64)
    gain = relevant_f if relevance.binary else gain
    items = torch.arange(length, device=device).expand(num_examples, length)
    places = _untied_list(listed, relevant_f, gain, items, width)
    num_ranked = torch.full((num_examples,), width, dtype=torch.int64, device=device)
    stats = RankStats(
        places,
        relevant_count,
        lambda: relevance.relevant_count(listed),
        relevance,
        num_ranked,
        length,
    )
    return RankedBatch(num_examples, device, ((slice(None), stats),))


def top_items(ranked: Tensor, num_items: int, rule: GainRule) -> RankedBatch:
    """The statistics of item exposure of ranked lists ``(Q, k)`` of catalogue items
    ``[0, num_items)``: which item holds each place (no relevance is read)."""
    num_examples, width = ranked.shape
    device = ranked.device
    # nothing is relevant: no relevant item before any place either
    nothing = torch.zeros((num_examples, width), dtype=torch.float64, device=device)
    listed = _listed_places(num_examples, width, width, device)
    places = _untied_list(listed, nothing, nothing, ranked.to(torch.int64), width, nothing)
    relevance = ItemIds(torch.full((num_examples, 1), -1, device=device), num_items, rule)
    num_ranked = torch.full((num_examples,), width, dtype=torch.int64, device=device)
    stats = RankStats(places, relevance.relevant_count, None, relevance, num_ranked, num_items)
    return RankedBatch(num_examples, device, ((slice(None), stats),), identities=True)


def listed_exposure(ranked: Tensor, num_items: int) -> Exposure:
    """The :class:`Exposure` of ranked lists ``(Q, k)`` of catalogue items
    ``[0, num_items)`` at one cutoff, the lists' width: what
    :meth:`~ranking_plugins.kernel.TopItems.exposure` sums over :func:`top_items`,
    whose every membership is 0 or 1 there (a place is its own tie group), without
    the per-place shares: each item's count of places, p² = p, and Σlog(1 - p) -inf
    where an item is listed."""
    counts = torch.bincount(ranked.reshape(-1), minlength=num_items).to(torch.float64)
    sums = counts.expand(3, 1, num_items).clone()  # Σp, and Σp² = Σp
    sums[LOG_ABSENT] = torch.where(counts > 0, -math.inf, 0.0)
    queries = torch.full((), float(ranked.shape[0]), dtype=torch.float64, device=ranked.device)
    return Exposure(sums, queries)


__all__ = [
    "MAX_TABLE_BLOCKS",
    "TABLE_BYTES",
    "Links",
    "ListedGrades",
    "edge_grade_rows",
    "hit_weights",
    "list_stats",
    "listed_exposure",
    "listed_hits",
    "top_items",
]
