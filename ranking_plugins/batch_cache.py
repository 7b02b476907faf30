"""The package's one cache: the last batch each thread saw, for the next metric object.

Ranking does not depend on the metric, so the ranking of the last batch is
kept (one entry per thread) and reused when inputs proved equal to it come
again with the same ranking options and a depth that is deep enough.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor

from ranking_plugins.embeddings import EmbeddingScores
from ranking_plugins.kernel import RankedBatch, host_reads_are_free

EntryT = TypeVar("EntryT")

Input = Tensor | EmbeddingScores | None


def _snapshot(value: Input) -> object:
    """A copy of what ``value``'s scores (or targets) depend on, to compare with later."""
    if isinstance(value, EmbeddingScores):
        return (value.chunk_size, tuple(t.detach().clone() for t in value.tensors()))
    return None if value is None else value.detach().clone()


def _same_content(value: Input, snapshot: object) -> bool:
    if isinstance(value, EmbeddingScores):
        return (value.chunk_size, len(value.tensors())) == (
            snapshot[0],  # type: ignore[index]
            len(snapshot[1]),  # type: ignore[index]
        ) and all(
            _same_content(t, copy)
            for t, copy in zip(value.tensors(), snapshot[1], strict=True)  # type: ignore[index]
        )
    if value is None or snapshot is None:
        return value is None and snapshot is None
    assert isinstance(snapshot, Tensor)
    return (
        value.dtype == snapshot.dtype
        and value.shape == snapshot.shape
        and value.device == snapshot.device
        and torch.equal(value, snapshot)
    )


def _comparable(value: Input, validate_args: bool) -> bool:
    """Whether the content of ``value`` may be proved equal to a snapshot.

    Comparing reads a value on the host: free on the CPU, allowed on an
    accelerator only when ``validate_args=True`` (which reads values anyway).
    A custom ``score_fn`` may change without any tensor changing (a model's
    weights), so its scores are never reused.
    """
    if isinstance(value, EmbeddingScores):
        return value.score_fn is None and (validate_args or host_reads_are_free(value.query_emb))
    if value is None:
        return True
    if not isinstance(value, Tensor) or value.is_nested or value.layout != torch.strided:
        return False  # not an input the kernel takes: it will say so
    return validate_args or host_reads_are_free(value)


@dataclass
class _Entry:
    preds: weakref.ref[Tensor | EmbeddingScores]
    ranking: tuple[object, ...]
    depth: int | None  # ranked this deep (None: whole lists)
    ranked: RankedBatch
    snapshot: tuple[object, ...] | None  # copies of the inputs, when kept
    seen_again: bool  # the same ``preds`` object came again while this entry was kept


class LastBatch(threading.local):
    """The last batch seen by this thread, for reuse by the next metric object: the
    package's one cache (one entry per thread, replaced by the next batch).

    Several metric objects that read the same batch (a ``MetricCollection``
    of MRR, NDCG and HitRate, three Ignite metrics on one engine) rank it
    once. Each kind of entry owns the one slot in turn:

    * the ranking of a batch of user inputs (:meth:`lookup`, :meth:`store`),
      reused only when the inputs are *proved* unchanged: equal, element by
      element, to copies taken when it was made. An object identity or a
      version counter proves nothing (writes through a numpy array or
      ``.data`` bump no counter). Copies cost a pass over the batch, so they
      are taken only once the same ``preds`` object has come twice in a row
      (several metrics per batch); a single metric never pays for them. While
      taken, one copy of the last batch is kept alive until the next one;
    * an adapter's own entries (:meth:`held`, :meth:`hold`): the TorchMetrics
      adapter keeps there the copies of a grouped batch and their ranking
      (:mod:`ranking_plugins.torchmetrics.grouped`).

    Measured by ``benchmarks/bench_aggregation.py --cache`` (RESULTS.md).
    """

    def __init__(self) -> None:
        self.entry: object = None

    def lookup(
        self,
        inputs: tuple[Input, ...],
        ranking: tuple[object, ...],
        depth: int | None,
        validate_args: bool,
    ) -> RankedBatch | None:
        entry = self.entry
        if not isinstance(entry, _Entry) or entry.preds() is not inputs[0]:
            return None
        entry.seen_again = True
        if entry.snapshot is None or ranking != entry.ranking:
            return None
        if entry.depth is not None and (depth is None or depth > entry.depth):
            return None
        if not all(_comparable(value, validate_args) for value in inputs):
            return None
        same = all(_same_content(v, s) for v, s in zip(inputs, entry.snapshot, strict=True))
        return entry.ranked if same else None

    def store(
        self,
        inputs: tuple[Input, ...],
        ranking: tuple[object, ...],
        depth: int | None,
        ranked: RankedBatch,
    ) -> None:
        preds = inputs[0]
        if not isinstance(preds, (Tensor, EmbeddingScores)):
            return
        old = self.entry if isinstance(self.entry, _Entry) else None
        same_batch = old is not None and old.preds() is preds
        keep_copies = old is not None and old.seen_again
        snapshot = tuple(_snapshot(value) for value in inputs) if keep_copies else None
        self.entry = _Entry(weakref.ref(preds), ranking, depth, ranked, snapshot, same_batch)

    def held(self, kind: type[EntryT]) -> EntryT | None:
        """The entry in the slot if it is of ``kind`` (an adapter's own entry type)."""
        return self.entry if isinstance(self.entry, kind) else None

    def hold(self, entry: object) -> None:
        """Put an adapter's own entry in the slot, in place of whatever was there."""
        self.entry = entry

    def clear(self) -> None:
        self.entry = None


#: the cache of this process, one slot per thread
last_batch = LastBatch()

__all__ = ["LastBatch", "last_batch"]
