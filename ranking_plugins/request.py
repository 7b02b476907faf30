"""What to compute, validated once: the object every entry point builds first.

A :class:`RankingRequest` holds the metrics, the cutoffs and every option,
checked when it is made (so an adapter fails in its constructor, not at the
first batch). :meth:`RankingRequest.evaluate` runs the kernel on one batch.

Several metric objects that see the same batch (a TorchMetrics
``MetricCollection`` of MRR, NDCG and HitRate, or three Ignite metrics
attached to one engine) should not rank it three times. Ranking does not
depend on the metric, so the rank statistics of the last batch are kept
(one entry per thread) and reused when the same tensors, unchanged, come
again with the same ranking options and a depth that is deep enough.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Real

import torch
from torch import Tensor

from ranking_plugins import _validation as V
from ranking_plugins.embeddings import EmbeddingScores, embedding_stats
from ranking_plugins.kernel import TIES, GainRule, ListStats, normalize_input
from ranking_plugins.metrics import (
    Evaluation,
    Metric,
    Options,
    get_metrics,
    rank_depth,
    rank_stats,
    read_metrics,
    result_key,
)

TopK = int | Sequence[int] | None


@dataclass(frozen=True)
class RankingRequest:
    """Metrics, cutoffs and options, validated; build it with :meth:`create`."""

    metrics: tuple[Metric, ...]
    ks: tuple[int, ...] | None
    ties: str = "average"
    empty_target_action: str = "neg"
    rule: GainRule = field(default_factory=lambda: GainRule(None, "exponential"))
    options: Options = field(default_factory=Options)
    adaptive_k: bool = False
    weighted: bool = False
    target_format: str | None = None
    validate_args: bool = True

    @classmethod
    def create(
        cls,
        metrics: str | Sequence[str],
        top_k: TopK,
        *,
        ties: str = "average",
        relevance_threshold: float | None = None,
        empty_target_action: str = "neg",
        gain: str = "exponential",
        ap_denominator: str = "relevant",
        adaptive_k: bool = False,
        weighted: bool = False,
        target_format: str | None = None,
        validate_args: bool = True,
    ) -> RankingRequest:
        """Check every argument (naming it in the error) and build the request."""
        metric_list = get_metrics(metrics)
        ks = V.normalize_top_k(top_k)
        V.check_choice("ties", ties, TIES)
        V.check_choice("empty_target_action", empty_target_action, V.EMPTY_TARGET_ACTIONS)
        V.check_choice("gain", gain, V.GAINS)
        V.check_choice("ap_denominator", ap_denominator, V.AP_DENOMINATORS)
        if target_format is not None:
            V.check_choice("target_format", target_format, V.TARGET_FORMATS)
        if relevance_threshold is not None and (
            isinstance(relevance_threshold, bool) or not isinstance(relevance_threshold, Real)
        ):
            raise TypeError(
                f"`relevance_threshold` must be a number or None, got {relevance_threshold!r}"
            )
        for name, flag in (
            ("adaptive_k", adaptive_k),
            ("weighted", weighted),
            ("validate_args", validate_args),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"`{name}` must be a bool, got {flag!r}")
        threshold = None if relevance_threshold is None else float(relevance_threshold)
        return cls(
            metrics=tuple(metric_list),
            ks=ks,
            ties=ties,
            empty_target_action=empty_target_action,
            rule=GainRule(threshold, gain),
            options=Options(ap_denominator=ap_denominator),
            adaptive_k=adaptive_k,
            weighted=weighted,
            target_format=target_format,
            validate_args=validate_args,
        )

    @property
    def keys(self) -> tuple[str, ...]:
        """The result keys in output order, metric by metric, each in ascending k."""
        keys: list[str] = []
        for metric in self.metrics:
            column_ks: Sequence[int | None] = (
                self.ks if metric.at_k and self.ks is not None else [None]
            )
            keys.extend(result_key(metric, k) for k in column_ks)
        return tuple(keys)

    def evaluate(
        self,
        preds: Tensor | EmbeddingScores,
        target: Tensor,
        *,
        indexes: Tensor | None = None,
        mask: Tensor | None = None,
    ) -> Evaluation:
        """Per-query values of every metric at every k for one batch (no gradient).

        ``preds`` is a score tensor, or :class:`EmbeddingScores` with item-index targets.
        """
        depth = rank_depth(self.metrics, self.ks)
        inputs = (preds, target, indexes, mask)
        ranking = (self.target_format, self.rule, self.ties, self.validate_args)
        stats = _last_batch.lookup(inputs, ranking, depth)
        if stats is None and isinstance(preds, EmbeddingScores):
            _embeddings_only(indexes=indexes, mask=mask, target_format=self.target_format)
            stats = embedding_stats(
                preds,
                target,
                ties=self.ties,
                rule=self.rule,
                validate_args=self.validate_args,
            )
            _last_batch.store(inputs, ranking, None, stats)
        if stats is None:
            with torch.no_grad():
                data = normalize_input(
                    V.check_tensor("preds", preds).detach(),
                    V.check_tensor("target", target).detach(),
                    indexes=indexes,
                    mask=mask,
                    target_format=self.target_format,
                    rule=self.rule,
                    validate_args=self.validate_args,
                )
                stats = rank_stats(data, self.ties, depth)
            _last_batch.store(inputs, ranking, depth, stats)
        with torch.no_grad():
            return read_metrics(
                stats,
                self.metrics,
                self.ks,
                empty_target_action=self.empty_target_action,
                adaptive_k=self.adaptive_k,
                options=self.options,
            )


def _embeddings_only(
    *, indexes: Tensor | None, mask: Tensor | None, target_format: str | None
) -> None:
    if mask is not None:
        raise ValueError(
            "`mask` does not apply to EmbeddingScores: list the items to leave out of "
            "the ranking in EmbeddingScores(..., exclude=item_ids)"
        )
    if indexes is not None:
        raise ValueError("`indexes` (grouped layout) does not apply to EmbeddingScores")
    if target_format == "dense":
        raise ValueError("EmbeddingScores needs item-index targets, not `target_format='dense'`")


def _version(value: Tensor | EmbeddingScores) -> object:
    """Changes whenever the value is modified in place."""
    if isinstance(value, EmbeddingScores):
        return tuple(t._version for t in value.tensors())
    return value._version


Input = Tensor | EmbeddingScores
#: how an input is remembered: a weak reference and its version, or None
Held = tuple[weakref.ref[Input], object] | None


def hold(inputs: tuple[Input | None, ...]) -> tuple[Held, ...]:
    """Remember ``inputs`` without keeping them alive (see :func:`still_held`)."""
    return tuple(None if t is None else (weakref.ref(t), _version(t)) for t in inputs)


def still_held(inputs: tuple[Input | None, ...], held: tuple[Held, ...]) -> bool:
    """Whether ``inputs`` are the very objects :func:`hold` remembered, unmodified since."""
    if len(inputs) != len(held):
        return False
    for value, remembered in zip(inputs, held, strict=True):
        if value is None or remembered is None:
            if value is not None or remembered is not None:
                return False
            continue
        ref, version = remembered
        if ref() is not value or _version(value) != version:
            return False
    return True


class _LastBatch(threading.local):
    """The rank statistics of the last batch seen by this thread.

    A hit needs the very same tensor objects, unmodified since (their
    ``_version`` counter), the same ranking options, and a list ranked at
    least as deep as now asked. Tensors are held weakly: a freed batch is
    never matched again, and nothing but the (small) statistics is kept alive.
    """

    def __init__(self) -> None:
        self.inputs: tuple[Held, ...] = ()
        self.ranking: tuple[object, ...] = ()
        self.depth: int | None = 0
        self.stats: ListStats | None = None

    def lookup(
        self, inputs: tuple[Input | None, ...], ranking: tuple[object, ...], depth: int | None
    ) -> ListStats | None:
        if self.stats is None or ranking != self.ranking:
            return None
        if self.depth is not None and (depth is None or depth > self.depth):
            return None
        return self.stats if still_held(inputs, self.inputs) else None

    def store(
        self,
        inputs: tuple[Input | None, ...],
        ranking: tuple[object, ...],
        depth: int | None,
        stats: ListStats,
    ) -> None:
        if not all(t is None or isinstance(t, (Tensor, EmbeddingScores)) for t in inputs):
            return
        tensors = [
            part
            for t in inputs
            if t is not None
            for part in (t.tensors() if isinstance(t, EmbeddingScores) else (t,))
        ]
        if any(t.is_inference() for t in tensors):
            # tensors made under torch.inference_mode (Lightning's evaluation
            # loops) have no version counter: an in-place change could not be
            # seen, so their ranking is not kept
            return
        self.inputs = hold(inputs)
        self.ranking = ranking
        self.depth = depth
        self.stats = stats

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]


_last_batch = _LastBatch()

__all__ = ["RankingRequest", "TopK"]
