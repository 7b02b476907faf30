"""What every input layout becomes: a :class:`Batch` of :class:`RankingInput` parts."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ranking_plugins.kernel.inputs.relevance import DenseGrades, ItemIds, Relevance


@dataclass(frozen=True)
class RankingInput:
    """Any layout, reduced to scores (Q, N) with an optional ``ranked`` mask."""

    scores: Tensor
    ranked: Tensor | None  # False: never enters the ranking (masked, or padding)
    relevance: Relevance
    #: validate_args=True left the NaN check of the scores to the ranking, whose
    #: own passes meet every score (a row's NaN comes first out of a top-k or a
    #: descending sort); only when no mask can hide a score from those passes
    nan_unchecked: bool = False
    #: validate_args=False: NaN scores may reach the ranking and nothing rejects
    #: them; the accelerator's paths then rank each NaN as the CPU's sort and
    #: top-k do (above every number, never tied with another NaN)
    nan_possible: bool = False
    #: the score columns are one padding item of lists with no item at all
    #: (:func:`_at_least_one_item`), not a catalogue item
    padding_only: bool = False

    @property
    def num_queries(self) -> int:
        return self.scores.shape[0]

    @property
    def num_items(self) -> int:
        return self.scores.shape[1]

    @property
    def catalogue_size(self) -> int:
        """The catalogue items the score columns stand for: 0 for the padding item."""
        return 0 if self.padding_only else self.num_items

    def rows(self, rows: slice) -> RankingInput:
        """The queries ``rows`` (views, no copy)."""
        ranked = None if self.ranked is None else self.ranked[rows]
        return RankingInput(
            self.scores[rows],
            ranked,
            self.relevance.take(rows),
            self.nan_unchecked,
            self.nan_possible,
            self.padding_only,
        )


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


def lowest(dtype: torch.dtype) -> float | int:
    """A score no ranked item can beat: where masked items are parked before selection."""
    if dtype.is_floating_point:
        return -math.inf
    return int(torch.iinfo(dtype).min)


def nan_check_deferred(preds: Tensor, mask: Tensor | None, validate_args: bool) -> bool:
    """Whether the NaN check of ``preds`` is left to the ranking's own passes.

    Only floating-point scores can hold NaN; a user's mask parks masked scores
    below every other before selection, hiding a NaN there, so then the check
    stays a pass of its own (:func:`~ranking_plugins._validation.check_values`).
    """
    return validate_args and mask is None and preds.is_floating_point()


def nan_possible(preds: Tensor, validate_args: bool) -> bool:
    """Whether ``preds`` may hold NaN that no check rejects (:attr:`RankingInput.nan_possible`)."""
    return not validate_args and preds.is_floating_point()


def one_part(data: RankingInput) -> Batch:
    """A batch of one part holding every query (the dense and item-index layouts)."""
    part = Part(slice(None), _at_least_one_item(data))
    return Batch(data.num_queries, data.scores.device, (part,))


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
        padding = DenseGrades(grades, relevance.rule, ranked)
        return RankingInput(scores, ranked, padding, padding_only=True)
    assert isinstance(relevance, ItemIds)  # only padding ids pass validation
    ids = ItemIds(relevance.item_ids, 1, relevance.rule)
    return RankingInput(scores, ranked, ids, padding_only=True)
