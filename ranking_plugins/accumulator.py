"""What an adapter keeps of its batches, written once for every adapter.

An :class:`Accumulator` is a small immutable record of three parts:

* the :class:`~ranking_plugins.totals.Totals` of the per-query metrics
  (Σw, Σw·x, Σw·x², Σw² per result key);
* the :class:`~ranking_plugins.kernel.Exposure` of the catalogue-level
  metrics (``coverage``, ``gini``, ``entropy``, ``personalisation``), when the
  request asks one;
* every query's values, a ``(Q, K)`` float64 matrix, when kept (any
  aggregation but the mean, ``keep_per_query``).

The first two are plain sums: :meth:`Accumulator.flat` gives them as two
float64 tensors, the totals and the exposure packed flat (what a framework
sums across processes: TorchMetrics' ``dist_reduce_fx="sum"``, Ignite's
``all_reduce``), and :meth:`Accumulator.from_flat` reads them back. The per-query values are
concatenated instead (TorchMetrics' ``"cat"``, Ignite's ``all_gather``).
:meth:`Accumulator.values` gives every key of the request, catalogue-level
metrics included; an adapter that reports ``totals.mean()`` alone would give
NaN for those.

A minimal adapter::

    request = RankingRequest.create(["ndcg", "coverage"], 10, Options.create(), items=...)
    kept = Accumulator.empty(request)
    for preds, target in batches:
        kept = kept.merge(Accumulator.of(request.evaluate(preds, target), request))
    values = kept.values(request)  # in request.keys order
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ranking_plugins.kernel import Exposure
from ranking_plugins.per_query import Evaluation
from ranking_plugins.request import RankingRequest
from ranking_plugins.totals import Aggregation, Totals, aggregate, per_query_matrix


@dataclass(frozen=True)
class Accumulator:
    """Totals, exposure and (when kept) per-query values of the batches seen."""

    totals: Totals
    exposure: Exposure | None
    per_query: Tensor | None

    @classmethod
    def empty(
        cls,
        request: RankingRequest,
        keep_per_query: bool = False,
        device: torch.device | str | None = None,
    ) -> Accumulator:
        """Nothing seen yet: zero sums, zero exposure, no query."""
        keys = request.query_keys
        per_query = (
            torch.empty(0, len(keys), dtype=torch.float64, device=device)
            if keep_per_query
            else None
        )
        return cls(Totals.zeros(keys, device), request.empty_exposure(device), per_query)

    @classmethod
    def of(
        cls, evaluation: Evaluation, request: RankingRequest, keep_per_query: bool = False
    ) -> Accumulator:
        """One evaluated batch (device ops only: nothing is read back to the host)."""
        keys = request.query_keys
        totals = Totals.of(evaluation, keys, request.options.weighted)
        exposure = evaluation.exposure if request.catalogue else None
        if exposure is None and request.catalogue:
            exposure = request.empty_exposure(totals.sums.device)
        per_query = per_query_matrix(evaluation, keys) if keep_per_query else None
        return cls(totals, exposure, per_query)

    def merge(self, other: Accumulator) -> Accumulator:
        """Both accumulators' batches: sums added, per-query values ``other``'s after ours."""
        totals = self.totals.merge(other.totals)
        exposure = self._merged_exposure(other.exposure)
        per_query = self.per_query
        if per_query is not None and other.per_query is not None:
            per_query = torch.cat([per_query, other.per_query.to(per_query)])
        return Accumulator(totals, exposure, per_query)

    def _merged_exposure(self, other: Exposure | None) -> Exposure | None:
        """This exposure with ``other`` added (moved to this one's device)."""
        exposure = self.exposure
        if exposure is None or other is None:
            return exposure
        device = self.totals.sums.device
        return exposure.merge(Exposure(other.sums.to(device), other.queries.to(device)))

    # ---------------------------------------------------------------- flat forms

    def flat(self) -> tuple[Tensor, Tensor]:
        """The sums as two float64 tensors that a framework adds across processes:
        the totals' ``(5, K)`` rows, and the exposure packed flat (its ``3 x ks x N``
        sums, then its number of queries; empty without a catalogue-level metric)."""
        sums = self.totals.sums
        if self.exposure is None:
            return sums, sums.new_zeros(0)
        exposure = torch.cat([self.exposure.sums.flatten(), self.exposure.queries.reshape(1)])
        return sums, exposure

    @staticmethod
    def exposure_size(request: RankingRequest) -> int:
        """The length of :meth:`flat`'s exposure for ``request``."""
        exposure = request.empty_exposure()
        return 0 if exposure is None else exposure.sums.numel() + 1

    @classmethod
    def from_flat(
        cls,
        request: RankingRequest,
        sums: Tensor,
        exposure: Tensor | None,
        per_query: Tensor | None = None,
    ) -> Accumulator:
        """The record of :meth:`flat`'s two tensors (and the per-query values, when kept);
        views of them, not copies. ``exposure`` is read only where the request has a
        catalogue-level metric (None: it has none)."""
        empty = request.empty_exposure()
        if empty is not None and exposure is None:
            raise ValueError("`exposure`: the request's catalogue-level metrics need their sums")
        return cls(
            Totals(request.query_keys, sums),
            None
            if empty is None or exposure is None
            else Exposure(exposure[:-1].view_as(empty.sums), exposure[-1]),
            per_query,
        )

    # ------------------------------------------------------------------ values

    def values(self, request: RankingRequest, aggregation: Aggregation = "mean") -> Tensor:
        """Every key of ``request`` in its order: each per-query key's mean (or
        ``aggregation`` of the kept per-query values), and the catalogue-level
        metrics from the exposure. NaN where no query counted."""
        if isinstance(aggregation, str) and aggregation == "mean":
            per_key = self.totals.mean()
        else:
            if self.per_query is None:
                raise ValueError(
                    f"`aggregation={aggregation!r}` needs the per-query values: keep them "
                    "(keep_per_query=True)"
                )
            per_key = aggregate(self.per_query, aggregation).to(self.totals.sums.device)
        return request.assemble(per_key, self.exposure)

    def values_with(
        self, evaluation: Evaluation, request: RankingRequest, aggregation: Aggregation = "mean"
    ) -> Tensor:
        """``self.merge(Accumulator.of(evaluation, request, keep)).values(request,
        aggregation)`` to the bit (``keep``: whether this record keeps per-query values).

        The mean takes the batch's sums that it reads only (:meth:`Totals.mean_with`):
        on an accelerator each operation is a launch."""
        if not (isinstance(aggregation, str) and aggregation == "mean"):
            batch = Accumulator.of(evaluation, request, self.per_query is not None)
            return self.merge(batch).values(request, aggregation)
        batch_exposure = evaluation.exposure if request.catalogue else None
        if batch_exposure is None and request.catalogue:
            batch_exposure = request.empty_exposure(self.totals.sums.device)
        per_key = self.totals.mean_with(evaluation, request.options.weighted)
        return request.assemble(per_key, self._merged_exposure(batch_exposure))

    def standard_error(self, request: RankingRequest) -> Tensor:
        """Every key's standard error of the mean; NaN for the catalogue-level metrics."""
        return request.assemble(self.totals.standard_error(), None, catalogue=False)

    @property
    def seen(self) -> bool:
        """Whether a query counted or an exposure holds one (reads a value on the host)."""
        counted = bool((self.totals.weight > 0).any())
        return counted or (self.exposure is not None and bool(self.exposure.queries > 0))


__all__ = ["Accumulator"]
