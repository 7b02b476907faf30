"""The TorchMetrics adapter's grouped layout: the entries it keeps until ``compute``.

A grouped batch (``indexes`` given, queries may span updates and processes)
is kept as "cat" states, one per field of :class:`GroupedBatch`, in fixed
storage dtypes (:data:`FLAT_STATES`), until ``compute`` ranks every query in
one kernel call.

The metrics of a MetricCollection see the same grouped batch one after the
other. The first keeps copies of it; the next ones keep the *same* copies
when their inputs are the same objects and prove equal to them
(:func:`shared_copies`), so a collection holds one copy of each batch. At
``compute`` the first metric ranks the concatenated copies and the next ones,
whose states hold the very same copy tensors in the same order, read that
ranking: one ranking per collection. The copies are this module's own (never
handed to user code that could rewrite them), so holding the same tensor
objects proves the same content. Both go through the package's one cache,
``ranking_plugins.batch_cache.last_batch`` (per thread, the last entry only, by
weak reference: nothing outlives the metrics' states).
"""

from __future__ import annotations

import hashlib
import math
import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.batch_cache import last_batch
from ranking_plugins.embeddings import EmbeddingInput
from ranking_plugins.kernel import ITEM_FIELDS, ItemInputs, RankedBatch
from ranking_plugins.options import Options
from ranking_plugins.request import RankingRequest


class GroupedBatch(NamedTuple):
    """A grouped batch as ``update`` gets it, each field kept as one "cat" state."""

    preds: Tensor
    target: Tensor
    indexes: Tensor
    mask: Tensor | None
    judged: Tensor | None


#: storage dtypes of the grouped layout's "cat" states: fixed, so that every
#: process gathers tensors of one dtype (also a process that never updated).
#: Scores are kept exactly: every floating-point dtype fits float64 and every
#: integer dtype but uint64 fits int64; a metric holds one kind or the other.
FLAT_STATES: dict[str, torch.dtype] = {
    "flat_preds": torch.float64,
    "flat_preds_int": torch.int64,
    "flat_target": torch.float64,
    "flat_indexes": torch.int64,
    "flat_mask": torch.bool,
}

#: how many kept grouped batches were not checked at ``update`` (``validate_args=False``):
#: a state beside the entries, so that it travels with them (a compute group's
#: members, the processes' gather); ``compute`` checks the scores again only then
UNCHECKED_STATE = "flat_unchecked"

#: the grouped layout's judged flags, one per entry: a "cat" state
#: only of the metrics that read a measure of judged items (bpref, infap, unj,
#: ...), so that the state (and the state_dict) of every other metric is
#: unchanged (those keep an unjudged entry's grade as not relevant, which is all
#: they read of the flag); an entry updated without ``judged`` is judged
JUDGED_STATE = "flat_judged"

#: the "cat" state of each field of :class:`GroupedBatch` but the scores, which go to
#: ``flat_preds`` or ``flat_preds_int`` by their kind
FIELD_STATES = {
    "target": "flat_target",
    "indexes": "flat_indexes",
    "mask": "flat_mask",
    "judged": JUDGED_STATE,
}

#: the storage dtype of each field (the scores': float64 or int64, by their kind)
_FIELD_DTYPES = {
    "target": torch.float64,
    "indexes": torch.int64,
    "mask": torch.bool,
    "judged": torch.bool,
}

_UINT64 = getattr(torch, "uint64", None)  # torch >= 2.3


def stored_form(
    batch: GroupedBatch, device: torch.device, fields: tuple[str, ...]
) -> dict[str, Tensor]:
    """Copies of ``fields`` of a grouped batch as the states keep them; a missing mask
    or judged: all True.

    Always copies: a tensor already of the storage dtype would otherwise be kept
    as given, and the caller may rewrite its buffer before ``compute``.
    """
    preds = batch.preds
    storage = torch.int64 if validation.is_integer_dtype(preds.dtype) else torch.float64
    found = {}
    for field in fields:
        value = getattr(batch, field)
        dtype = storage if field == "preds" else _FIELD_DTYPES[field]
        found[field] = (
            torch.ones(preds.shape, dtype=torch.bool, device=device)
            if value is None
            else value.detach().to(device=device, dtype=dtype, copy=True)
        )
    return found


# -- the copies and their ranking, kept in the package's one cache slot -----------


@dataclass
class _CopiesEntry:
    """A grouped batch's copies as an adapter keeps them (its own tensors, by weak
    reference), for the next metric given the same input objects."""

    inputs: tuple[object, ...]  # weak references to the inputs (None kept as None)
    device: torch.device
    copies: dict[str, weakref.ref[Tensor]]


@dataclass
class _KeptEntry:
    """The ranking of an adapter's kept tensors (its own copies, never handed to user
    code, so holding the very same tensor objects proves the same content)."""

    kept: tuple[tuple[weakref.ref[Tensor], ...], ...]
    ranking: tuple[object, ...]
    depth: int | None
    extra: object  # what else changes the ranking (the adapter's ``ignore_index``)
    ranked: RankedBatch


def _kept_copies(
    inputs: tuple[Tensor | None, ...], device: torch.device
) -> dict[str, Tensor] | None:
    """The copies kept of ``inputs`` (the same objects) on ``device``, all alive;
    unproved: the caller compares them with the inputs."""
    entry = last_batch.held(_CopiesEntry)
    if entry is None or entry.device != device:
        return None
    if len(entry.inputs) != len(inputs) or not all(
        (kept() if isinstance(kept, weakref.ref) else kept) is given
        for kept, given in zip(entry.inputs, inputs, strict=True)
    ):
        return None
    copies = {name: ref() for name, ref in entry.copies.items()}
    alive = {name: copy for name, copy in copies.items() if copy is not None}
    return alive if len(alive) == len(copies) else None


def _keep_copies(
    inputs: tuple[Tensor | None, ...], device: torch.device, copies: dict[str, Tensor]
) -> None:
    refs = tuple(None if t is None else weakref.ref(t) for t in inputs)
    kept = {name: weakref.ref(copy) for name, copy in copies.items()}
    last_batch.hold(_CopiesEntry(refs, device, kept))


def kept_ranking(
    kept: tuple[tuple[Tensor, ...], ...], request: RankingRequest, extra: object
) -> RankedBatch | None:
    """The ranking of these very tensors under ``request``'s ranking, deep enough."""
    entry = last_batch.held(_KeptEntry)
    if entry is None or entry.extra != extra:
        return None
    if not request.reads(entry.ranking, entry.depth):
        return None
    if [len(t) for t in kept] != [len(r) for r in entry.kept]:
        return None
    for tensors, refs in zip(kept, entry.kept, strict=True):
        if not all(ref() is t for t, ref in zip(tensors, refs, strict=True)):
            return None
    return entry.ranked


def keep_ranking(
    kept: tuple[tuple[Tensor, ...], ...],
    request: RankingRequest,
    extra: object,
    ranked: RankedBatch,
) -> None:
    if not ranked.reusable:  # ranked block by block when read: nothing to keep
        return
    refs = tuple(tuple(weakref.ref(t) for t in tensors) for tensors in kept)
    depth = None if ranked.whole_lists else request.depth
    last_batch.hold(_KeptEntry(refs, request.ranking_key, depth, extra, ranked))


def shared_copies(
    batch: GroupedBatch, device: torch.device, fields: tuple[str, ...], may_read: bool
) -> dict[str, Tensor]:
    """The copies of ``fields`` to keep: those the previous metric kept of the same
    input objects where they prove equal to them (``may_read``: whether comparing,
    which reads values, is allowed), the others made here and kept for the next."""
    kept = _kept_copies(batch, device) if may_read else None
    if kept is not None:
        fresh = stored_form(batch, device, tuple(kept))  # dropped once compared
        if not all(_same(fresh[field], copy) for field, copy in kept.items()):
            kept = None
    kept = kept or {}
    missing = tuple(field for field in fields if field not in kept)
    if missing:
        # none kept, or kept by a metric without the judged flags: made here
        # (only the missing ones) and kept for the next metric
        kept = {**kept, **stored_form(batch, device, missing)}
        _keep_copies(batch, device, kept)
    return {field: kept[field] for field in fields}


def _unjudged_grades(
    target: Tensor, judged: Tensor, options: Options, ignore_index: int | None
) -> Tensor:
    """``target`` (float64) with the grade of every unjudged entry replaced by one that
    is not relevant, for a metric that keeps no judged flags.

    An unjudged item is never relevant (its gain 0), whatever its grade; of a
    metric that reads no measure of judged items nothing else depends on the
    flag, so a grade that is not relevant under the metric's threshold says the
    same: 0, or below a threshold at or under 0. An entry ``ignore_index``
    drops keeps its grade, and no replaced grade equals ``ignore_index``.
    """
    threshold = options.relevance_threshold
    grade = 0 if threshold is None or threshold > 0 else math.floor(threshold) - 1
    if grade == ignore_index:
        grade -= 1
    unjudged = ~judged
    if ignore_index is not None:
        unjudged &= target != ignore_index
    return torch.where(unjudged, grade, target.to(torch.float64))


#: the states named by what a metric computes (a digest; the pending batches of
#: ``whole_queries`` too), and the judged flags, which only some metrics keep: a
#: MetricCollection group may set another metric's on this one
_NAMED_STATES = ("sums_", "exposure_", "per_query_", "pending_", JUDGED_STATE)


def _holds_batches(states: dict[str, Any]) -> bool:
    """Whether sums (not zero) or per-query values (not empty) hold any batch."""
    return any(
        bool(value.any()) if name.startswith(("sums_", "exposure_")) else _state_size(value) > 0
        for name, value in states.items()
        if name != JUDGED_STATE
    )


def _state_size(state: Tensor | list[Tensor]) -> int:
    """The entries of a state, a tensor or a "cat" list (one after a sync)."""
    return state.numel() if isinstance(state, Tensor) else sum(t.numel() for t in state)


def _same(a: Tensor, b: Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))


def _items_digest(items: ItemInputs) -> str:
    """A suffix for the state names that tells apart metrics given other item inputs."""
    tensors = [getattr(items, f) for f in ITEM_FIELDS]
    if all(t is None for t in tensors) and items.size is None:
        return ""
    content = hashlib.sha1(repr(items.size).encode())
    for t in tensors:
        # the bytes through a uint8 view: numpy has no bfloat16 (bfloat16 item_features
        # raised a TypeError here); the same bytes as before for every other dtype
        raw = None if t is None else t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
        content.update(b"-" if raw is None else raw.numpy().tobytes())
    return "_" + content.hexdigest()[:8]


def _digest(request: RankingRequest, ignore_index: int | None) -> str:
    """A short stable name for everything that changes the numbers."""
    # validate_args changes no number
    content = repr((request.keys, request.options.replace(validate_args=True), ignore_index))
    return hashlib.sha1(content.encode()).hexdigest()[:12]


def _drop_ignored(
    preds: Tensor | EmbeddingInput,
    target: Tensor,
    mask: Tensor | None,
    ignore_index: int,
    target_format: str | None,
) -> tuple[Tensor, Tensor | None]:
    """``ignore_index`` applied to one batch of the dense or item-index layout.

    Dense grades: an ignored entry is masked out and its grade set to 0, which
    is dropping it (never ranked, not counted in R); (Q, N, S) subtopic grades: an item
    ignored in every subtopic is dropped, an entry ignored in some is grade 0 there.
    Item indices: an ignored
    id becomes padding (-1). Computed afresh on every update: nothing is kept
    between batches, so a buffer rewritten in place is never read stale.
    """
    if not isinstance(target, Tensor):
        return target, mask  # the kernel names what is wrong
    if isinstance(preds, EmbeddingInput):
        return target.masked_fill(target == ignore_index, -1), mask  # item ids
    if not isinstance(preds, Tensor):
        return target, mask
    if mask is not None and not (isinstance(mask, Tensor) and mask.dtype == torch.bool):
        return target, mask
    ignored = target == ignore_index
    if target.ndim == 3 and target.shape[:2] == preds.shape:
        # subtopic grades: an ignored entry is no judgment (grade 0); an item ignored in
        # every subtopic is dropped, as a dense one
        dropped = ignored.all(dim=2)
        keep = ~dropped if mask is None else mask & ~dropped
        return target.masked_fill(ignored, 0), keep
    dense = target.shape == preds.shape if target_format is None else target_format == "dense"
    if dense:
        keep = ~ignored if mask is None else mask & ~ignored
        return target.masked_fill(ignored, 0), keep
    return target.masked_fill(ignored, -1), mask


__all__ = [
    "FIELD_STATES",
    "FLAT_STATES",
    "JUDGED_STATE",
    "UNCHECKED_STATE",
    "GroupedBatch",
    "shared_copies",
    "stored_form",
]
