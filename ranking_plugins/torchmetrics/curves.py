"""TorchMetrics' curve classes: precision@k and recall@k for k = 1 ... ``max_k``.

The values of ``RankingMetrics(["precision", "recall"], top_k=range(1, max_k + 1))``,
from one ranking per query, returned as TorchMetrics' curve classes return them;
public as ``ranking_plugins.torchmetrics.RetrievalPrecisionRecallCurve`` and
``RetrievalRecallAtFixedPrecision``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor

from ranking_plugins.accumulator import Accumulator
from ranking_plugins.embeddings import EmbeddingInput
from ranking_plugins.metrics import recall_at_fixed_precision, result_columns
from ranking_plugins.per_query import Evaluation
from ranking_plugins.request import RankingRequest
from ranking_plugins.torchmetrics.arguments import (
    _check_arguments,
    _refuse_unread_options,
    _retrieval_keywords,
)
from ranking_plugins.torchmetrics.base import BaseRankingMetric
from ranking_plugins.torchmetrics.functional import check_max_k
from ranking_plugins.totals import Aggregation

try:
    from torchmetrics.utilities.data import dim_zero_cat
    from torchmetrics.utilities.plot import plot_curve
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ranking_plugins.torchmetrics needs TorchMetrics; install it with "
        '`pip install "ranking-plugins[torchmetrics]"`'
    ) from error


class RetrievalPrecisionRecallCurve(BaseRankingMetric):
    """Precision@k and recall@k for k = 1 ... ``max_k``, averaged over queries, with
    ``torchmetrics.retrieval.RetrievalPrecisionRecallCurve``'s signature.

    ``compute()`` returns ``(precision, recall, top_k)``: float64 tensors of
    ``max_k`` values and ``top_k = [1, ..., max_k]``; they are the values of
    ``RankingMetrics(["precision", "recall"], top_k=range(1, max_k + 1))``.
    ``adaptive_k=True``: precision@k of a query of n < k items divides by n.
    ``max_k=None``: every k up to the longest query's length (after
    ``ignore_index``), as TorchMetrics; that length is known only at
    ``compute``, so the queries are kept until then (the grouped layout with
    ``indexes``, not ``whole_queries`` nor ``keep_per_query``).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import RetrievalPrecisionRecallCurve
    >>> indexes = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    >>> preds = torch.tensor([0.4, 0.01, 0.5, 0.6, 0.2, 0.3, 0.5])
    >>> target = torch.tensor([True, False, False, True, True, False, True])
    >>> precision, recall, top_k = RetrievalPrecisionRecallCurve(max_k=4)(preds, target, indexes)
    >>> precision
    tensor([1.0000, 0.5000, 0.6667, 0.5000], dtype=torch.float64)
    >>> recall
    tensor([0.5000, 0.5000, 1.0000, 1.0000], dtype=torch.float64)
    >>> top_k
    tensor([1, 2, 3, 4])
    """

    #: the two curves, in ``compute``'s order (a class annotation of its own also
    #: keeps ``torch.jit.script`` from reading the base's, which it cannot parse)
    curve_metrics: ClassVar[tuple[str, str]] = ("precision", "recall")

    def __init__(
        self,
        max_k: int | None = None,
        adaptive_k: bool = False,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        aggregation: str | Callable[..., Tensor] = "mean",
        **kwargs: Any,
    ) -> None:
        _check_arguments(None, empty_target_action, ignore_index, adaptive_k)
        check_max_k(max_k)
        _refuse_unread_options(type(self).__name__, ("adaptive_k",), list(kwargs))
        keywords = _retrieval_keywords(empty_target_action, ignore_index, aggregation)
        top_k = None if max_k is None else range(1, max_k + 1)
        super().__init__(
            list(self.curve_metrics), top_k, adaptive_k=adaptive_k, **keywords, **kwargs
        )
        self.max_k = max_k
        self.adaptive_k = adaptive_k
        # (an aggregation but the mean keeps per-query values too: those of the queries
        # ranked at compute, which is what it needs)
        if max_k is None and (self.whole_queries or kwargs.get("keep_per_query", False)):
            raise ValueError(
                "`max_k=None` (every k up to the longest query) keeps the queries until "
                "`compute`, where that length is known: it takes neither "
                "`whole_queries=True` nor `keep_per_query=True`; give `max_k`"
            )

    def update(
        self,
        preds: Tensor | EmbeddingInput,
        target: Tensor,
        indexes: Tensor | None = None,
        mask: Tensor | None = None,
        judged: Tensor | None = None,
    ) -> None:
        """Add one batch, as :meth:`BaseRankingMetric.update`."""
        if self.max_k is None and indexes is None:
            raise ValueError(
                "Argument `indexes` cannot be None with `max_k=None`: the longest query is "
                "found among the grouped entries at `compute`; give `max_k` for `(Q, N)` scores"
            )
        super().update(preds, target, indexes, mask, judged)

    def compute(self) -> tuple[Tensor, Tensor, Tensor]:  # type: ignore[override]
        """``(precision, recall, top_k)``, each of ``max_k`` entries (NaN where no query
        counted; no entry with ``max_k=None`` before any update)."""
        if self.max_k is None:
            return self._longest_query_curves()
        values = super().compute()
        assert isinstance(values, dict)  # two metrics: always a dict
        return self._curves(values, self.request)

    @staticmethod
    def _curves(
        values: dict[str, Tensor], request: RankingRequest
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The precision and recall columns of ``values``, in k order, and the ks."""
        assert request.ks is not None
        precision, recall = (
            torch.stack([values[key] for _, key in result_columns(metric, request.ks)])
            for metric in request.metrics
        )
        top_k = torch.tensor(request.ks, device=precision.device)
        return precision, recall, top_k

    def _longest_query_curves(self) -> tuple[Tensor, Tensor, Tensor]:
        """``max_k=None``: the kept queries ranked once more at k = 1 ... the longest's length."""
        found = self._longest_query_evaluation()
        if found is None:
            return self._no_curves()
        request, evaluation = found
        kept = Accumulator.of(evaluation, request, keep_per_query=self.keep_per_query)
        found_values = kept.values(request, self.aggregation)
        values = dict(zip(request.keys, found_values.unbind(0), strict=True))
        return self._curves(values, request)

    def _no_curves(self) -> tuple[Tensor, Tensor, Tensor]:
        """``max_k=None`` before any kept entry: curves of no point."""
        empty = torch.zeros(0, dtype=torch.float64, device=self.device)
        return empty, empty.clone(), torch.zeros(0, dtype=torch.long, device=self.device)

    def _longest_query_evaluation(self) -> tuple[RankingRequest, Evaluation] | None:
        """``max_k=None``: the request at k = 1 ... the longest kept query's length and the
        kept queries ranked for it; None without a kept entry."""
        self._check_compute_group()
        indexes = dim_zero_cat(self.flat_indexes)
        counted = dim_zero_cat(self.flat_mask)  # a masked entry is not in the list
        if self.ignore_index is not None:
            counted = counted & (dim_zero_cat(self.flat_target) != self.ignore_index)
        indexes = indexes[counted]
        if indexes.numel() == 0:
            return None
        longest = int(torch.unique(indexes, return_counts=True)[1].max())
        request = RankingRequest.create(
            list(self.curve_metrics),
            range(1, longest + 1),
            self.request.options,
        )
        evaluation = self._grouped_evaluation(request)
        assert evaluation is not None
        return request, evaluation

    def plot(  # type: ignore[override]
        self, curve: tuple[Tensor, Tensor, Tensor] | None = None, ax: Any = None
    ) -> Any:
        """Plot precision against recall, one point per k (``curve``: a result of
        :meth:`compute`, computed when omitted). Returns ``(figure, axes)``."""
        precision, recall, top_k = curve if curve is not None else self.compute()
        return plot_curve(
            (recall.cpu(), precision.cpu(), top_k.cpu()),
            ax=ax,
            label_names=("Recall", "Precision"),
            name=type(self).__name__,
        )


class RetrievalRecallAtFixedPrecision(RetrievalPrecisionRecallCurve):
    """The largest recall@k whose precision@k is >= ``min_precision``, and that k, with
    ``torchmetrics.retrieval.RetrievalRecallAtFixedPrecision``'s signature.

    ``compute()`` returns ``(max_recall, best_k)`` from the curves of
    :class:`RetrievalPrecisionRecallCurve`: among equal recalls the largest k,
    and ``(0, max_k)`` where no k reaches ``min_precision`` or the recall is 0,
    as TorchMetrics. The choice is a comparison with a threshold, so the curves
    it reads are TorchMetrics' own numbers: each query's precision and recall
    in float32, aggregated in float32 over the queries in the order of their
    ``indexes`` (a precision of exactly 2/5 averaged in float64 can fall an ulp
    below ``min_precision=0.4``, where TorchMetrics' float32 one reaches it).
    ``max_recall`` is that float32 value, as float64. On scores without ties
    the pair is TorchMetrics' on every input. Every query's values are kept
    until ``compute`` (``keep_per_query``; 8 bytes per query and k, twice).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import RetrievalRecallAtFixedPrecision
    >>> indexes = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    >>> preds = torch.tensor([0.4, 0.01, 0.5, 0.6, 0.2, 0.3, 0.5])
    >>> target = torch.tensor([True, False, False, True, True, False, True])
    >>> RetrievalRecallAtFixedPrecision(min_precision=0.8)(preds, target, indexes)
    (tensor(0.5000, dtype=torch.float64), tensor(1))
    """

    def __init__(
        self,
        min_precision: float = 0.0,
        max_k: int | None = None,
        adaptive_k: bool = False,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        **kwargs: Any,
    ) -> None:
        # the queries' own values, for TorchMetrics' float32 curves (with max_k=None
        # they come from the kept entries, ranked at compute)
        if max_k is not None:
            kwargs["keep_per_query"] = True
        super().__init__(max_k, adaptive_k, empty_target_action, ignore_index, **kwargs)
        if not (isinstance(min_precision, float) and 0.0 <= min_precision <= 1.0):
            raise ValueError(
                f"`min_precision` has to be a positive float between 0 and 1, got {min_precision!r}"
            )
        self.min_precision = min_precision

    def compute(self) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        """``(max_recall, best_k)``."""
        precision, recall, top_k = self._torchmetrics_curves()
        best_recall, best_k = recall_at_fixed_precision(
            precision, recall, top_k, self.min_precision
        )
        return best_recall.to(torch.float64), best_k

    def _torchmetrics_curves(self) -> tuple[Tensor, Tensor, Tensor]:
        """The curves as TorchMetrics computes them: every query's values in float32
        (its ``relevant / topk``; hits/k rounded once to float64, then to float32, is
        the same number), stacked ``(Q, max_k)`` and aggregated in float32 over the
        queries that count (none: zeros, TorchMetrics' value)."""
        if self.max_k is None:
            found = self._longest_query_evaluation()
            if found is None:
                return self._no_curves()
            request, evaluation = found
            per_query = Accumulator.of(evaluation, request, keep_per_query=True).per_query
        else:
            request, per_query = self.request, self._all_kept().per_query
        assert per_query is not None and request.ks is not None  # kept; ks given
        # a skipped query is NaN in every column: left out, as TorchMetrics does
        values = per_query[~per_query.isnan().any(dim=1)].to(torch.float32)
        keys = request.query_keys
        precision, recall = (
            _aggregate_curve(
                values[:, [keys.index(key) for _, key in result_columns(metric, request.ks)]],
                self.aggregation,
            )
            for metric in request.metrics
        )
        top_k = torch.arange(1, len(request.ks) + 1, device=precision.device)
        return precision, recall, top_k

    def plot(  # type: ignore[override]
        self, val: Tensor | Sequence[Tensor] | None = None, ax: Any = None
    ) -> Any:
        """Plot the recall (``val``: a recall or a list of them over time; this
        metric's when omitted), as TorchMetrics. Returns ``(figure, axes)``."""
        return self._plot(val if val is not None else self.compute()[0], ax)


def _aggregate_curve(values: Tensor, aggregation: Aggregation) -> Tensor:
    """TorchMetrics' aggregation of its per-query curves: over dim 0 of the ``(Q, K)``
    float32 stack, by the same torch call (a float32 sum's rounding depends on it);
    zeros where no query counts."""
    if values.shape[0] == 0:
        return values.new_zeros(values.shape[1])
    if not isinstance(aggregation, str):
        return aggregation(values, dim=0)
    if aggregation == "mean":
        return values.mean(dim=0)
    if aggregation == "median":
        return values.median(dim=0).values
    return values.min(dim=0).values if aggregation == "min" else values.max(dim=0).values


__all__ = ["RetrievalPrecisionRecallCurve", "RetrievalRecallAtFixedPrecision"]
