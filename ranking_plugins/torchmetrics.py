"""TorchMetrics adapters: drop-in replacements for ``torchmetrics.retrieval``.

Each class is a :class:`torchmetrics.Metric`. ``update(preds, target,
indexes=None, mask=None)`` takes every layout of the package:

* dense ``(Q, N)`` scores with ``(Q, N)`` grades, or item indices ``(Q,)`` /
  ``(Q, T)``: the batch is ranked at once and only float64 sums are kept
  (Σw, Σw·x, Σw·x², Σw² per result key), a constant-size state summed across
  processes;
* grouped (``indexes`` given, TorchMetrics' retrieval input): a query may be
  spread over several updates and processes, so the flat triples are kept in
  ``"cat"`` states and every query is ranked in one vectorised kernel call at
  :meth:`~BaseRankingMetric.compute`. Scores are kept exactly: floating-point
  scores as float64, integer scores as int64 (a timestamp above 2^53 is not
  rounded), so one metric takes either kind of scores in this layout, not both.
  Memory grows with every update: 8 + 8 + 8 + 1 bytes per entry (score,
  grade, query id, mask), on the metric's device, until ``reset``; a metric
  that reads a measure of judged items (bpref, infap, unj, ...) keeps one more
  byte per entry, its ``judged`` flag.
* grouped with ``whole_queries=True`` (each batch holds whole queries, as when
  a data loader yields one query's candidates together): the batch is ranked
  at once and only the sums are kept, a constant-size state whatever the
  number of updates. A query whose entries come in two batches counts as two
  queries; this is not detected (it would need every query id seen so far).

The states keep their dtypes whatever is done to the module: ``.to(dtype)``,
``.half()``, ``set_dtype`` (and Lightning's ``precision="bf16-true"``, which
casts a module's metrics) move them between devices but never cast them, so
the sums stay float64.

``compute()`` returns a scalar tensor for one k and a dict ``{"ndcg@5": ...,
"ndcg@10": ...}`` for several (:class:`RankingMetrics` always returns a dict).
:meth:`~BaseRankingMetric.compute_standard_error` returns the standard error of
each mean in the same form.

>>> import torch
>>> from ranking_plugins.torchmetrics import NDCG
>>> metric = NDCG(top_k=[1, 3])
>>> metric.update(torch.tensor([[0.9, 0.2, 0.5]]), torch.tensor([[0, 1, 1]]))
>>> metric.update(torch.tensor([[0.1, 0.7, 0.3]]), torch.tensor([[0, 1, 0]]))
>>> metric.compute()
{'ndcg@1': tensor(0.5000, dtype=torch.float64), 'ndcg@3': tensor(0.8467, dtype=torch.float64)}

Several of these metrics with the same options in one
:class:`torchmetrics.MetricCollection` rank each batch once: the rank
statistics of the last batch are reused when the same batch comes again
(see :mod:`ranking_plugins.request`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import sys
import threading
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor
from typing_extensions import Unpack

from ranking_plugins import _validation as V
from ranking_plugins.accumulator import Accumulator
from ranking_plugins.embeddings import EmbeddingInput
from ranking_plugins.kernel import (
    ITEM_FIELDS,
    ITEM_KEYWORDS,
    AdapterItemKeywords,
    ItemInputs,
    check_grouped,
    check_inputs,
    check_judged,
    host_reads_are_free,
)
from ranking_plugins.metrics import (
    METRICS,
    EmptyQueryError,
    Evaluation,
    RankedBatch,
    result_columns,
)
from ranking_plugins.options import OPTION_NAMES, OptionKeywords, Options
from ranking_plugins.request import RankingRequest, TopK
from ranking_plugins.torchmetrics_functional import check_max_k, torchmetrics_dtype_refusal
from ranking_plugins.totals import AGGREGATIONS, Aggregation, Totals

try:
    from torchmetrics import Metric
    from torchmetrics.utilities.data import dim_zero_cat
    from torchmetrics.utilities.plot import plot_curve
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ranking_plugins.torchmetrics needs TorchMetrics; install it with "
        '`pip install "ranking-plugins[torchmetrics]"`'
    ) from error

__all__ = [
    "AUC",
    "F1",
    "MAP",
    "MRR",
    "NDCG",
    "BaseRankingMetric",
    "FallOut",
    "HitRate",
    "MeanRank",
    "Precision",
    "RPrecision",
    "RankingMetrics",
    "RankingOptions",
    "Recall",
    "RetrievalAUROC",
    "RetrievalFallOut",
    "RetrievalHitRate",
    "RetrievalMAP",
    "RetrievalMRR",
    "RetrievalNormalizedDCG",
    "RetrievalPrecision",
    "RetrievalPrecisionRecallCurve",
    "RetrievalRPrecision",
    "RetrievalRecall",
    "RetrievalRecallAtFixedPrecision",
]


class RankingOptions(OptionKeywords, AdapterItemKeywords, total=False):
    """Keywords every metric of this module takes (see :class:`BaseRankingMetric`).

    The options of :class:`ranking_plugins.options.Options` (``gain`` defaults
    to ``"linear"`` here, as in TorchMetrics), ``ignore_index``, and the
    keywords of :class:`torchmetrics.Metric`.
    """

    ignore_index: int | None
    whole_queries: bool
    keep_per_query: bool
    aggregation: Aggregation
    # torchmetrics.Metric keywords
    compute_on_cpu: bool
    dist_sync_on_step: bool
    process_group: Any
    dist_sync_fn: Callable[..., Any] | None
    distributed_available_fn: Callable[[], bool] | None
    sync_on_compute: bool
    compute_with_cache: bool


#: storage dtypes of the grouped layout's "cat" states: fixed, so that every
#: process gathers tensors of one dtype (also a process that never updated).
#: Scores are kept exactly: every floating-point dtype fits float64 and every
#: integer dtype but uint64 fits int64; a metric holds one kind or the other.
_FLAT_STATES: dict[str, torch.dtype] = {
    "flat_preds": torch.float64,
    "flat_preds_int": torch.int64,
    "flat_target": torch.float64,
    "flat_indexes": torch.int64,
    "flat_mask": torch.bool,
}

#: the grouped layout's judged flags (issue 13), one per entry: a "cat" state
#: only of the metrics that read a measure of judged items (bpref, infap, unj,
#: ...), so that the state (and the state_dict) of every other metric is
#: unchanged (those keep an unjudged entry's grade as not relevant, which is all
#: they read of the flag); an entry updated without ``judged`` is judged
_JUDGED_STATE = "flat_judged"

#: TorchMetrics' defaults, kept here whatever the package's (its gain is linear too;
#: RetrievalFallOut computes the fall-out of a query without relevant items, and calls
#: one without non-relevant items empty)
TORCHMETRICS_DEFAULTS: dict[str, Any] = {"gain": "linear", "fall_out_empty": "no_nonrelevant"}

_UINT64 = getattr(torch, "uint64", None)  # torch >= 2.3

_MIXED_SCORES = (
    "`preds`: the grouped layout (`indexes`) of one metric takes either floating-point "
    "or integer scores, not both: {found}. Converting one kind to the other could "
    "merge or reorder scores, so cast every batch's `preds` to one dtype before `update`"
)


class BaseRankingMetric(Metric):
    """Shared base: several metrics at several cutoffs, one kernel pass per update.

    Args:
        metrics: metric names from :data:`ranking_plugins.metrics.METRICS`.
        top_k: a cutoff, a sequence of cutoffs, or None (the whole list).
        ignore_index: entries whose target equals it are dropped, as in
            ``torchmetrics.retrieval``: never ranked and not counted in R.
        whole_queries: grouped layout only: every batch holds whole queries,
            so ``update`` ranks it at once and keeps only the sums (constant
            memory). False (the default, TorchMetrics' behaviour): a query may
            span updates and processes, so entries are kept until ``compute``.
        keep_per_query: also keep every query's values (a float64 ``(Q, K)``
            "cat" state, gathered across processes like the grouped entries),
            for :meth:`~BaseRankingMetric.compute_per_query` and the paired
            tests of :mod:`ranking_plugins.compare`. Memory grows by 8 bytes per
            query and result key until ``reset``. True whenever ``aggregation``
            is not the mean.
        aggregation: how :meth:`~BaseRankingMetric.compute` aggregates the
            per-query values, as TorchMetrics' ``aggregation``: ``"mean"`` (the
            default: running sums, a constant-size state), ``"median"`` (the
            lower median of an even count, :func:`torch.median`'s), ``"min"``,
            ``"max"``, or a callable ``f(values, dim=None)`` returning one number,
            given each result key's 1-D float64 values of the queries that count.
            Any but the mean keeps the per-query values (``keep_per_query``),
            synchronised across processes; NaN where no query counts (TorchMetrics:
            0.0). The catalogue-level metrics (``coverage``, ...) are not per query
            and ignore it; :meth:`~BaseRankingMetric.compute_standard_error` stays
            the mean's.
        options: the fields of :class:`~ranking_plugins.options.Options`, by
            keyword (its docstring lists each with its default and meaning),
            ``gain`` defaulting to ``"linear"`` here (g, TorchMetrics' and
            trec_eval's). With ``validate_args=False``, ``update`` never
            synchronises the host with the device.
        item_popularity, tail_items, item_features, item_categories: the item
            inputs of the exposure metrics (``novelty``, ``arp``, ``tail_share``,
            ``diversity``), one entry per catalogue item, given once; they move
            with the metric's device. ``num_items``: the catalogue's size, needed
            when ``coverage``, ``gini``, ``entropy`` or ``personalisation`` is
            asked without any of them (the exposure state is one count per item
            and k, summed across processes).
        kwargs: the keywords of :class:`torchmetrics.Metric` (``compute_on_cpu``,
            ``dist_sync_on_step``, ``process_group``, ``sync_on_compute``, ...).
    """

    #: properties TorchScript must not compile (``torch.jit.script(metric)``, which
    #: works on every TorchMetrics metric): TorchMetrics' own, and ``totals``
    __jit_unused_properties__: ClassVar[list[str]] = [
        *Metric.__jit_unused_properties__,
        "totals",
    ]

    is_differentiable: bool = False
    higher_is_better: bool | None = True
    full_state_update: bool = False
    plot_lower_bound: float | None = 0.0
    plot_upper_bound: float | None = 1.0

    #: return a dict even for a single result key
    _always_dict: ClassVar[bool] = False

    flat_preds: list[Tensor]
    flat_preds_int: list[Tensor]
    flat_target: list[Tensor]
    flat_indexes: list[Tensor]
    flat_mask: list[Tensor]

    def __init__(
        self,
        metrics: str | Sequence[str],
        top_k: TopK = None,
        *,
        ignore_index: int | None = None,
        whole_queries: bool = False,
        keep_per_query: bool = False,
        aggregation: Aggregation = "mean",
        **kwargs: Any,
    ) -> None:
        # this package's options; the rest are torchmetrics.Metric's keywords
        given = {name: kwargs.pop(name) for name in OPTION_NAMES if name in kwargs}
        items = ItemInputs.create(
            **{name: kwargs.pop(name) for name in ITEM_KEYWORDS if name in kwargs}
        )
        super().__init__(**kwargs)
        _check_arguments(
            top_k,
            given.get("empty_target_action", "neg"),
            ignore_index,
            given.get("adaptive_k", False),
            aggregation,
        )
        self.request = RankingRequest.create(
            metrics,
            top_k,
            Options.create(type(self).__name__, **{**TORCHMETRICS_DEFAULTS, **given}),
            items=items,
        )
        if not isinstance(whole_queries, bool):
            raise TypeError(f"`whole_queries` must be a bool, got {whole_queries!r}")
        if not isinstance(keep_per_query, bool):
            raise TypeError(f"`keep_per_query` must be a bool, got {keep_per_query!r}")
        if not _is_mean(aggregation) and self.request.options.weighted:
            raise ValueError(
                f"`aggregation`={_aggregation_name(aggregation)} takes no `weighted=True`: "
                "queries are weighted (by R) only in the mean; leave `weighted` False or "
                "use aggregation='mean'"
            )
        self.ignore_index = ignore_index
        self.whole_queries = whole_queries
        # every per-query value is needed by any aggregation but the mean
        self.keep_per_query = keep_per_query or not _is_mean(aggregation)
        self.aggregation = aggregation
        self.keys = self.request.keys
        self._query_keys = self.request.query_keys  # the columns of the sums
        # The name of the sums state carries a digest of what is computed.
        # MetricCollection merges metrics whose states have the same names and
        # equal values into one compute group; MRR@10 and HitRate@10 sums can
        # be equal by chance on a first batch, so their states must differ by
        # name, while two metrics that compute the same thing may share one.
        self._sums_name = "sums_" + _digest(self.request, ignore_index) + _items_digest(items)
        self.add_state(
            self._sums_name,
            default=torch.zeros(4, len(self._query_keys), dtype=torch.float64),
            dist_reduce_fx="sum",
        )
        self._add_exposure_state(items)
        # the judged flags only where a measure of judged items reads them
        # (every process has the state, whether or not `judged` is ever given)
        self._keeps_judged = self.request.judgments
        for name in self._flat_dtypes():
            self.add_state(name, default=[], dist_reduce_fx="cat")
        # named by the same digest as the sums, so that a MetricCollection groups
        # only metrics that keep the same per-query values
        self._per_query_name = "per_query_" + self._sums_name[len("sums_") :]
        if self.keep_per_query:
            self.add_state(self._per_query_name, default=[], dist_reduce_fx="cat")
        self._seed_flat_states()

    # ------------------------------------------------------------------ state

    def _add_exposure_state(self, items: ItemInputs) -> None:
        """The exposure metrics' state: Σp, Σp², Σlog(1 - p) per k and item (see
        :class:`~ranking_plugins.kernel.statistics.exposure.Exposure`) and the
        number of queries, summed across processes; the item inputs as buffers,
        so that they follow the metric's device."""
        self._exposure_name: str | None = None
        self._items: tuple[torch.device, ItemInputs] | None = None
        if not self.request.identities:
            return
        for field in ITEM_FIELDS:
            value = getattr(items, field)
            if value is not None:
                self.register_buffer("_item_" + field, value, persistent=False)
        self._item_size = items.size
        if not self.request.catalogue:  # per-query metrics only: the sums suffice
            return
        self.request.check_exposure_size(type(self).__name__)
        empty = self.request.empty_exposure()
        assert empty is not None  # checked just above
        self._exposure_name = "exposure_" + self._sums_name[len("sums_") :]
        packed = Accumulator.empty(self.request).flat()[1]  # Accumulator.flat's form
        self.add_state(self._exposure_name, default=packed, dist_reduce_fx="sum")

    def _item_inputs(self) -> ItemInputs:
        """The item inputs on the metric's device (rebuilt only when it moved)."""
        if self._items is None or self._items[0] != self.device:
            tensors = {f: getattr(self, "_item_" + f, None) for f in ITEM_FIELDS}
            self._items = (self.device, ItemInputs(**tensors, size=self._item_size))
        return self._items[1]

    def _current_request(self) -> RankingRequest:
        if not self.request.identities:
            return self.request
        return dataclasses.replace(self.request, items=self._item_inputs())

    def _kept(self) -> Accumulator:
        """The states as one record (views of them): sums, exposure, per-query values."""
        exposure = (
            torch.zeros(0, dtype=torch.float64, device=self.device)
            if self._exposure_name is None
            else getattr(self, self._exposure_name)
        )
        per_query = None
        if self.keep_per_query:
            width = len(self._query_keys)
            per_query = dim_zero_cat(getattr(self, self._per_query_name)).reshape(-1, width)
        return Accumulator.from_flat(
            self.request, getattr(self, self._sums_name), exposure, per_query
        )

    def _seed_flat_states(self) -> None:
        """Start every "cat" list with an empty tensor of its storage dtype.

        A process that never receives a grouped batch then still gathers
        tensors of the right dtype (TorchMetrics would otherwise make up a
        float32 placeholder for an empty list).
        """
        for name, dtype in self._flat_dtypes().items():
            getattr(self, name).append(torch.empty(0, dtype=dtype, device=self.device))
        if self.keep_per_query:
            getattr(self, self._per_query_name).append(
                torch.empty(0, len(self._query_keys), dtype=torch.float64, device=self.device)
            )

    def reset(self) -> None:
        """Forget every update (the state returns to zero sums and empty lists)."""
        super().reset()
        self._seed_flat_states()

    def _storage_dtypes(self) -> dict[str, torch.dtype]:
        exposure = (
            {}
            if self._exposure_name is None
            else {
                self._exposure_name: torch.float64,
            }
        )
        dtypes = {self._sums_name: torch.float64, **self._flat_dtypes(), **exposure}
        if self.keep_per_query:
            dtypes[self._per_query_name] = torch.float64
        return dtypes

    def _apply(
        self, fn: Callable[[Tensor], Tensor], exclude_state: Sequence[str] = ""
    ) -> torch.nn.Module:
        """Move the states with the module, never cast them.

        ``nn.Module.to(dtype)``, ``.half()``, ``.type()`` and TorchMetrics'
        ``set_dtype`` all come through here (Lightning's ``precision="bf16-true"``
        calls ``.to(torch.bfloat16)`` on the whole module). Every state of this
        metric keeps its storage dtype (float64 sums, exact scores, int64 query
        ids) and only follows the device; so do the cached results.
        """
        if exclude_state:
            return super()._apply(_device_only(fn), exclude_state)
        return super()._apply(_device_only(fn))

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        """TorchMetrics' loading, then every state back in its storage dtype on this device.

        A state saved in a lower precision (by a version that let a cast reach
        the sums, say) is widened again; what it already lost stays lost.
        """
        judged_missing = (
            self._keeps_judged
            and prefix + _JUDGED_STATE not in state_dict
            and prefix + "flat_mask" in state_dict
        )
        if self._exposure_name is not None:
            # saved as two states (the sums, then `_queries`) before Accumulator.flat's form
            name = prefix + self._exposure_name
            queries = state_dict.pop(name + "_queries", None)
            if queries is not None and name in state_dict:
                sums = state_dict[name]
                state_dict[name] = torch.cat([sums.flatten(), queries.reshape(1).to(sums)])
        super()._load_from_state_dict(state_dict, prefix, *args)  # pops the states' keys
        if judged_missing:
            # saved before the grouped layout kept judged flags, when it took no
            # `judged`: every kept entry is judged
            entries = sum(t.numel() for t in self.flat_mask)
            setattr(self, _JUDGED_STATE, [torch.ones(entries, dtype=torch.bool)])
        for name, dtype in self._storage_dtypes().items():
            value = getattr(self, name)
            if isinstance(value, Tensor):
                setattr(self, name, value.to(self.device, dtype))
            else:
                setattr(self, name, [t.to(self.device, dtype) for t in value])

    @property
    def totals(self) -> Totals:
        """The running sums of the dense and item-index updates (this process only)."""
        return Totals(self._query_keys, getattr(self, self._sums_name))

    # ----------------------------------------------------------------- update

    def update(
        self,
        preds: Tensor | EmbeddingInput,
        target: Tensor,
        indexes: Tensor | None = None,
        mask: Tensor | None = None,
        judged: Tensor | None = None,
    ) -> None:
        """Add one batch.

        Args:
            preds: scores, higher ranks first: ``(Q, N)``; with ``indexes``,
                any shape, flattened as TorchMetrics does; or
                :class:`ranking_plugins.EmbeddingScores` (query and item embeddings,
                the whole catalogue scored chunk by chunk) with item-id targets, or
                :class:`ranking_plugins.ShardedEmbeddingScores` (a catalogue sharded
                across processes: every process calls ``update`` alike).
            target: grades ``(Q, N)``, relevant item ids ``(Q,)`` / ``(Q, T)``
                padded with ``-1``, or with ``indexes`` grades of ``preds``' shape.
            indexes: the query id of each entry (grouped layout).
            mask: bool, ``preds``' shape; False marks items that were not
                retrieved (never ranked, but a relevant one still counts in R).
            judged: which items carry a judgment (None: every item), read by
                bpref, infap, unj, ... (issue 13): bool of ``preds``' shape, or
                the judged item ids ``(Q, J)`` with item-id targets. In the
                grouped layout a metric that reads a measure of judged items
                keeps one flag per entry until ``compute`` (an update without
                ``judged``: every entry judged); any other metric keeps an
                unjudged entry's grade as one that is not relevant (an
                unjudged item is never relevant).
        """
        if indexes is None:
            self._update_ranked(preds, target, mask, judged)
        elif isinstance(preds, EmbeddingInput):
            raise ValueError("`indexes` (grouped layout) does not apply to EmbeddingScores")
        else:
            self._update_flat(preds, target, indexes, mask, judged)

    def _update_ranked(
        self,
        preds: Tensor | EmbeddingInput,
        target: Tensor,
        mask: Tensor | None,
        judged: Tensor | None = None,
    ) -> None:
        if self.ignore_index is not None:
            target, mask = _drop_ignored(
                preds, target, mask, self.ignore_index, self.request.options.target_format
            )
        extra = {} if judged is None else {"judged": judged}
        evaluation = _evaluate(self._current_request(), preds, target, mask=mask, **extra)
        self._add(evaluation)

    def _add(self, evaluation: Evaluation) -> None:
        """One ranked batch into the states (:class:`Accumulator`'s flat form)."""
        batch = Accumulator.of(evaluation, self.request, self.keep_per_query)
        sums, exposure = batch.flat()
        getattr(self, self._sums_name).add_(sums)
        if self._exposure_name is not None:
            getattr(self, self._exposure_name).add_(exposure.to(self.device))
        if batch.per_query is not None:
            getattr(self, self._per_query_name).append(batch.per_query)

    def _update_flat(
        self,
        preds: Tensor,
        target: Tensor,
        indexes: Tensor,
        mask: Tensor | None,
        judged: Tensor | None = None,
    ) -> None:
        tensors = (preds, target, indexes) + (() if mask is None else (mask,))
        if (
            all(isinstance(t, Tensor) for t in tensors)
            and preds.ndim > 1
            and all(t.shape == preds.shape for t in tensors)
        ):
            # TorchMetrics' retrieval input: any shape, flattened
            if judged is not None:  # checked against the shape given, then flattened
                judged = V.check_tensor("judged", judged)
                check_judged(judged, preds, target, "grouped")
                judged = judged.flatten()
            preds, target, indexes = preds.flatten(), target.flatten(), indexes.flatten()
            mask = None if mask is None else mask.flatten()
        _check_flat(preds, target, indexes, mask, self.request.options.target_format)
        # checked, but kept as given: the next metric of a collection is proved
        # to get the same batch by the objects it is given
        check_judged(judged, preds, target, "grouped")
        if self.request.identities:  # the request's message, at update rather than compute
            _evaluate(self.request, preds, target, indexes=indexes, mask=mask)
        if preds.dtype == _UINT64:
            raise TypeError(
                "`preds`: uint64 scores cannot be kept exactly in the grouped layout "
                "(`indexes`); use int64 (or a floating-point dtype)"
            )
        if self.whole_queries:
            self._update_whole_queries(preds, target, indexes, mask, judged)
            return
        integer = V.is_integer_dtype(preds.dtype)
        scores, other = (
            (self.flat_preds_int, self.flat_preds)
            if integer
            else (self.flat_preds, self.flat_preds_int)
        )
        if preds.numel() and any(t.numel() for t in other):  # sizes only: no sync
            kinds = ("floating-point", "integer") if integer else ("integer", "floating-point")
            raise ValueError(
                _MIXED_SCORES.format(
                    found=f"got {kinds[1]} `preds` ({preds.dtype}) after {kinds[0]} ones"
                )
            )
        if self.request.options.validate_args:
            V.check_values(preds, target, None, 0)
        inputs = (preds, target, indexes, mask, judged)
        count = 5 if self._keeps_judged else 4  # copies kept: the judged flags too?
        if judged is not None and not self._keeps_judged:
            # an unjudged item is never relevant: its grade kept as one that is
            # not (this metric's own copies, shared with no other metric)
            target = _unjudged_grades(target, judged, self.request.options, self.ignore_index)
            own = _stored_form((preds, target, indexes, mask, None), self.device)
            for state, copy in zip((scores, *self._flat_lists()[2:]), own, strict=True):
                state.append(copy)
            return
        # proving a batch equal to the kept copies reads values: with
        # validate_args=False only where that costs no device sync
        may_read = self.request.options.validate_args or host_reads_are_free(preds)
        copies = _shared_copies.take(inputs, self.device) if may_read else None
        if copies is None or len(copies) < count:
            # none kept, or kept by a metric without the judged flags: made
            # here (only the missing ones) and kept for the next metric
            copies = (copies or ()) + _stored_form(inputs, self.device, len(copies or ()), count)
            _shared_copies.keep(inputs, self.device, copies)
        lists = (scores, *self._flat_lists()[2:])
        for state, copy in zip(lists, copies[:count], strict=True):
            state.append(copy)

    def _update_whole_queries(
        self,
        preds: Tensor,
        target: Tensor,
        indexes: Tensor,
        mask: Tensor | None,
        judged: Tensor | None = None,
    ) -> None:
        """A grouped batch of whole queries, ranked now into the sums (``whole_queries``)."""
        if self.ignore_index is not None:
            # dropped as ``compute`` drops them from the kept entries
            keep = target != self.ignore_index
            preds, target, indexes = preds[keep], target[keep], indexes[keep]
            mask = None if mask is None else mask[keep]
            judged = None if judged is None else judged[keep]
        if preds.numel() == 0:
            return
        extra = {} if judged is None else {"judged": judged}
        evaluation = _evaluate(self.request, preds, target, indexes=indexes, mask=mask, **extra)
        self._add(evaluation)

    def _flat_dtypes(self) -> dict[str, torch.dtype]:
        """The grouped layout's "cat" states and their storage dtypes: :data:`_FLAT_STATES`,
        then the judged flags where a metric reads them."""
        if not self._keeps_judged:
            return _FLAT_STATES
        return {**_FLAT_STATES, _JUDGED_STATE: torch.bool}

    def _flat_lists(self) -> tuple[list[Tensor], ...]:
        """The grouped layout's "cat" states, in :meth:`_flat_dtypes` order."""
        return tuple(getattr(self, name) for name in self._flat_dtypes())

    # ---------------------------------------------------------------- compute

    def _check_compute_group(self) -> None:
        """Refuse the values a ``MetricCollection`` compute group cannot give.

        In a group, TorchMetrics updates only the first metric and sets its
        states, by name, on the others (``compute_groups=[[...]]`` forms groups
        of any metrics). The grouped layout's entries are states of one name in
        every metric of this module, kept as given: a metric of the group reads
        them as its own, so its values stay right. What else the first metric
        keeps (the sums of dense, item-index and whole-query batches, its
        per-query values, its exposure) is named by what it computes, so it
        arrives here under a name this metric does not read (a *foreign*
        state). Foreign states holding batches while this metric's own hold
        none: those batches reached only the first metric (``forward``, which
        TorchMetrics calls on every metric of a group, fills both).
        """
        foreign = {
            name: value
            for name, value in vars(self).items()
            if name not in self._defaults and name.startswith(_NAMED_STATES)
        }
        if not foreign:
            return
        own = {
            name: getattr(self, name) for name in self._defaults if name.startswith(_NAMED_STATES)
        }
        problem = None
        if _holds_batches(foreign) and not _holds_batches(own):
            problem = (
                "the first metric keeps only the sums of its own values for dense, item-index "
                "or `whole_queries` batches"
            )
        elif _JUDGED_STATE in foreign and not bool(dim_zero_cat(foreign[_JUDGED_STATE]).all()):
            problem = (
                "the first metric kept judged flags, which this metric would have applied to "
                "the grades it keeps"
            )
        elif self._keeps_judged and _state_size(getattr(self, _JUDGED_STATE)) != _state_size(
            self.flat_mask
        ):
            problem = "this metric reads judged flags that the first metric did not keep"
        if problem is None:
            return
        named = ", ".join(f"`{name}`" for name in sorted(foreign))
        raise ValueError(
            f"`compute_groups`: {type(self).__name__} ({', '.join(self.keys)}) is in a "
            "MetricCollection compute group whose first metric computes other values (its "
            f"states {named} were set on this metric). TorchMetrics updates only the first "
            f"metric of a group, and {problem}, not this metric's. Let TorchMetrics form the "
            "groups, `MetricCollection(metrics)` (compute_groups=True, the default; the "
            "metrics of a collection still rank each batch once), or group only metrics with "
            "the same values and options; with `indexes` (entries kept until compute) any "
            "metrics of this module may share a group"
        )

    def _all_kept(self) -> Accumulator:
        """The states plus the grouped queries, ranked here in one kernel call."""
        self._check_compute_group()
        kept = self._kept()
        evaluation = self._grouped_evaluation()
        if evaluation is None:
            return kept
        return kept.merge(Accumulator.of(evaluation, self.request, self.keep_per_query))

    def _grouped_evaluation(self) -> Evaluation | None:
        """The kept grouped entries ranked in one kernel call; None when there are none."""
        float_preds = dim_zero_cat(self.flat_preds)
        int_preds = dim_zero_cat(self.flat_preds_int)
        if float_preds.numel() and int_preds.numel():  # from different processes
            raise ValueError(
                _MIXED_SCORES.format(
                    found=f"{float_preds.numel()} floating-point and {int_preds.numel()} "
                    "integer scores were gathered"
                )
            )
        preds = int_preds if int_preds.numel() else float_preds
        if preds.numel() == 0:
            return None
        lists = self._flat_lists()
        ranked = _shared_rankings.lookup(lists, self.request, self.ignore_index)
        if ranked is None:
            target = dim_zero_cat(self.flat_target)
            indexes = dim_zero_cat(self.flat_indexes)
            mask = dim_zero_cat(self.flat_mask)
            judged = dim_zero_cat(getattr(self, _JUDGED_STATE)) if self._keeps_judged else None
            if self.ignore_index is not None:
                # dropped here, not in ``update``, which must not read values
                keep = target != self.ignore_index
                preds, target, indexes, mask = preds[keep], target[keep], indexes[keep], mask[keep]
                judged = None if judged is None else judged[keep]
                if preds.numel() == 0:
                    return None
            ranked = _rank(self.request, preds, target, indexes=indexes, mask=mask, judged=judged)
            _shared_rankings.store(lists, self.request, self.ignore_index, ranked)
        return _read(self.request, ranked)

    def compute(self) -> Tensor | dict[str, Tensor]:
        """The mean (or the ``aggregation``) of every result key (float64; NaN where no
        query counted).

        The catalogue-level metrics (``coverage``, ``gini``, ``entropy``,
        ``personalisation``) come from the accumulated exposure.
        """
        return self._format(self._all_kept().values(self.request, self.aggregation))

    def compute_standard_error(self) -> Tensor | dict[str, Tensor]:
        """Standard error of each mean (sample standard deviation / √n), as :meth:`compute`.

        Synchronised across processes like :meth:`compute`. NaN with fewer than
        two counted queries.
        """
        with self.sync_context(
            dist_sync_fn=self.dist_sync_fn,
            should_sync=self._to_sync,
            should_unsync=self._should_unsync,
        ):
            # the catalogue-level metrics have none: NaN
            return self._format(self._all_kept().standard_error(self.request))

    def compute_per_query(self) -> dict[str, Tensor]:
        """Every query's value per result key, ``{"ndcg@10": (Q,) float64, ...}``.

        Needs ``keep_per_query=True``. Synchronised across processes like
        :meth:`compute`. The queries come in update order (with several
        processes: process 0's, then process 1's, ...), then the queries of
        grouped updates (kept until now unless ``whole_queries``), in the
        order of their sorted ``indexes``. A query that does not count
        (skipped as empty) is NaN. Two models evaluated on the same data in
        the same order give values that :func:`ranking_plugins.compare.compare`
        pairs query by query.
        """
        if not self.keep_per_query:
            raise RuntimeError(
                f"{type(self).__name__}.compute_per_query needs keep_per_query=True "
                "in the constructor (per-query values are not kept by default)"
            )
        with self.sync_context(
            dist_sync_fn=self.dist_sync_fn,
            should_sync=self._to_sync,
            should_unsync=self._should_unsync,
        ):
            kept = self._all_kept().per_query
        assert kept is not None  # kept: checked above
        return dict(zip(self._query_keys, kept.unbind(1), strict=True))

    def _format(self, values: Tensor) -> Tensor | dict[str, Tensor]:
        if len(self.keys) == 1 and not self._always_dict:
            return values[0]
        _refuse_lightning_log(self)
        return dict(zip(self.keys, values.unbind(0), strict=True))

    # ------------------------------------------------------------------- plot

    def plot(
        self,
        val: Tensor
        | Sequence[Tensor]
        | dict[str, Tensor]
        | Sequence[dict[str, Tensor]]
        | None = None,
        ax: Any = None,
    ) -> Any:
        """Plot the metric against k (one curve per metric), or a single value.

        ``val`` is a result of :meth:`compute` (computed when omitted). With
        several cutoffs every metric becomes a curve over k (a metric without
        a cutoff, such as ``auc``, a flat line); a single value, or a list of
        results over time, is drawn by TorchMetrics' standard plot.

        Returns:
            ``(figure, axes)``, as every TorchMetrics ``plot``.
        """
        val = val if val is not None else self.compute()
        ks = self.request.ks
        if not isinstance(val, dict) or ks is None or len(ks) < 2:
            return self._plot(val, ax)
        x_values: list[Tensor] = []
        y_values: list[Tensor] = []
        labels: list[str | int] = []
        k_axis = torch.tensor(ks, dtype=torch.float64)
        for metric in self.request.metrics:
            # one value per k, or one for a metric without a cutoff: a flat line
            column = torch.stack([val[key] for _, key in result_columns(metric, ks)])
            y_values.append(column.detach().to("cpu", torch.float64).expand(len(ks)))
            x_values.append(k_axis)
            labels.append(metric.name)
        fig, ax = plot_curve(
            (x_values, y_values, x_values),  # (x, y, thresholds): the ks
            ax=ax,
            label_names=("k", "value"),
            name=type(self).__name__,
            labels=labels,
        )
        ax.set_xticks(list(ks))
        return fig, ax


#: the base's earlier name, one letter from :class:`RankingMetrics`; kept so that
#: code importing it keeps working
RankingMetric = BaseRankingMetric


def _refuse_lightning_log(metric: BaseRankingMetric) -> None:
    """A clear error where Lightning's ``self.log(name, metric)`` computes a metric of several keys.

    Lightning logs one number per name: a metric logged by ``self.log`` (and
    by ``self.log_dict(collection)``, which logs each metric of a
    ``MetricCollection``) must compute a tensor, and Lightning's own error,
    at the epoch's end, says so without the way out. Its logged metric calls
    ``compute`` from a few frames up, holding this metric as its ``value``.
    """
    frame: types.FrameType | None = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return
        owner = frame.f_locals.get("self")
        if type(owner).__name__ == "_ResultMetric" and getattr(owner, "value", None) is metric:
            break
        frame = frame.f_back
    else:
        return
    name = getattr(getattr(owner, "meta", None), "name", "?")
    keys = ", ".join(repr(key) for key in metric.keys)
    raise ValueError(
        f"Lightning logs one number per name, and {type(metric).__name__} logged as {name!r} "
        f"computes {len(metric.keys)} ({keys}): `self.log(name, metric)` and "
        "`self.log_dict(collection)` take metrics of one key. Log its values at the epoch's end "
        "instead, `self.log_dict(metrics.compute())` then `metrics.reset()` (a "
        "MetricCollection's compute() gives every key of its metrics), use one k per metric "
        "object, or log them all with ranking_plugins.lightning.RankingMetricsCallback"
    )


# ------------------------------------------------- TorchMetrics' errors, its words first
#
# Where ``torchmetrics.retrieval`` and this package both refuse an input, the error
# is TorchMetrics' type (ValueError) and starts with its message; what this package
# says about it follows.

_TOP_K_FORMS = "a positive int, a non-empty sequence of positive ints, or None for the whole list"


def _check_arguments(
    top_k: object,
    empty_target_action: object,
    ignore_index: object,
    adaptive_k: object,
    aggregation: object = "mean",
) -> None:
    """The constructor arguments ``torchmetrics.retrieval`` checks, in its order, each
    by the package's rule (:mod:`ranking_plugins._validation`) in TorchMetrics' words."""
    problem = V.choice_problem(empty_target_action, V.EMPTY_TARGET_ACTIONS)
    if problem is not None:
        raise ValueError(
            f"Argument `empty_target_action` received a wrong value `{empty_target_action}`. "
            f"`empty_target_action` {problem.text}"
        )
    if ignore_index is not None and (
        isinstance(ignore_index, bool) or not isinstance(ignore_index, int)
    ):
        raise ValueError(
            "Argument `ignore_index` must be an integer or None. "
            f"`ignore_index` must be an int or None, got {ignore_index!r}"
        )
    if not (
        callable(aggregation) or (isinstance(aggregation, str) and aggregation in AGGREGATIONS)
    ):
        raise ValueError(
            "Argument `aggregation` must be one of `mean`, `median`, `min`, `max` or a custom "
            f"callable function which takes tensor of values, but got {aggregation}. "
            f"`aggregation` must be one of {list(AGGREGATIONS)} or a callable "
            f"f(values, dim=None), got {aggregation!r}"
        )
    problem = V.top_k_problem(top_k)
    # a non-int k inside a sequence: TorchMetrics takes no sequence, the package's error
    if problem is not None and problem.kind != "item":
        raise ValueError(
            f"`top_k` has to be a positive integer or None, got {top_k!r}; "
            f"`top_k` {problem.text} (ranking_plugins takes {_TOP_K_FORMS})"
        )
    problem = V.flag_problem(adaptive_k)
    if problem is not None:
        raise ValueError(f"`adaptive_k` has to be a boolean: `adaptive_k` {problem.text}")


def _is_mean(aggregation: object) -> bool:
    """Whether ``aggregation`` is the mean, the running sums' (not a callable, whatever it does)."""
    return isinstance(aggregation, str) and aggregation == "mean"


def _aggregation_name(aggregation: object) -> str:
    return repr(aggregation) if isinstance(aggregation, str) else "a callable"


class _EmptyTargetError(EmptyQueryError):
    """``empty_target_action="error"`` met an empty query (no relevant item; for
    fall-out, by default here, no non-relevant one).

    TorchMetrics' message, then the kernel's (which names the query and the
    metric); ``metric``, ``query`` and ``lacks`` are the kernel error's.
    """

    def __init__(self, error: EmptyQueryError) -> None:
        self.metric, self.query, self.lacks = error.metric, error.query, error.lacks
        target = "negative" if error.lacks == "non-relevant item" else "positive"
        ValueError.__init__(
            self, f"`compute` method was provided with a query with no {target} target. {error}"
        )


def _evaluate(request: RankingRequest, preds: Any, target: Tensor, **inputs: Any) -> Any:
    """``request.evaluate``, with TorchMetrics' message on an empty query under "error"."""
    return _read(request, _rank(request, preds, target, **inputs))


def _rank(request: RankingRequest, preds: Any, target: Tensor, **inputs: Any) -> RankedBatch:
    try:
        return request.rank(preds, target, **inputs)
    except EmptyQueryError as error:
        raise _EmptyTargetError(error) from error


def _read(request: RankingRequest, ranked: RankedBatch) -> Evaluation:
    try:
        return request.read(ranked)
    except EmptyQueryError as error:
        raise _EmptyTargetError(error) from error


# ------------------------------------- the grouped layout, once per MetricCollection
#
# The metrics of a MetricCollection see the same grouped batch one after the
# other. The first keeps copies of it; the next ones keep the *same* copies
# when their inputs are the same objects and prove equal to them, so a
# collection holds one copy of each batch. At ``compute`` the first metric
# ranks the concatenated copies and the next ones, whose states hold the very
# same copy tensors in the same order, read that ranking: one ranking per
# collection. The copies are this module's own (never handed to user code
# that could rewrite them), so holding the same tensor objects proves the
# same content. Per thread, and only the last batch and the last ranking are
# kept, by weak reference: nothing outlives the metrics' states.


#: a grouped batch as ``update`` gets it: (scores, grades, query ids, mask, judged)
_GroupedInputs = tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor | None]


def _stored_form(
    inputs: _GroupedInputs, device: torch.device, start: int = 0, stop: int = 4
) -> tuple[Tensor, ...]:
    """Copies of a grouped batch as the states keep them, fields ``start`` to ``stop``
    of (scores, grades, query ids, mask, judged flags); a missing mask or judged:
    all True.

    Always copies: a tensor already of the storage dtype would otherwise be kept
    as given, and the caller may rewrite its buffer before ``compute``.
    """
    preds = inputs[0]
    storage = torch.int64 if V.is_integer_dtype(preds.dtype) else torch.float64
    dtypes = (storage, torch.float64, torch.int64, torch.bool, torch.bool)
    return tuple(
        torch.ones(preds.shape, dtype=torch.bool, device=device)
        if inputs[i] is None
        else inputs[i].detach().to(device=device, dtype=dtypes[i], copy=True)  # type: ignore[union-attr]
        for i in range(start, stop)
    )


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


#: the states named by what a metric computes (a digest), and the judged flags, which
#: only some metrics keep: a MetricCollection group may set another metric's on this one
_NAMED_STATES = ("sums_", "exposure_", "per_query_", _JUDGED_STATE)


def _holds_batches(states: dict[str, Any]) -> bool:
    """Whether sums (not zero) or per-query values (not empty) hold any batch."""
    return any(
        bool(value.any()) if name.startswith(("sums_", "exposure_")) else _state_size(value) > 0
        for name, value in states.items()
        if name != _JUDGED_STATE
    )


def _state_size(state: Tensor | list[Tensor]) -> int:
    """The entries of a state, a tensor or a "cat" list (one after a sync)."""
    return state.numel() if isinstance(state, Tensor) else sum(t.numel() for t in state)


def _same(a: Tensor, b: Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))


class _SharedCopies(threading.local):
    """The copies of the last grouped batch, for the next metric given the same inputs."""

    def __init__(self) -> None:
        self.inputs: tuple[object, ...] = ()
        self.copies: tuple[weakref.ref[Tensor], ...] = ()

    def take(self, inputs: _GroupedInputs, device: torch.device) -> tuple[Tensor, ...] | None:
        """The kept copies if ``inputs`` are the same objects and still equal to them.

        Four copies, or five (the judged flags too) when a metric that keeps
        them made or completed them.
        """
        if len(self.inputs) != len(inputs) + 1 or self.inputs[-1] != device:
            return None
        if not all(_alive(kept) is given for kept, given in zip(self.inputs, inputs, strict=False)):
            return None
        copies = tuple(ref() for ref in self.copies)
        kept = tuple(c for c in copies if c is not None)
        if len(kept) != len(copies):
            return None
        fresh = _stored_form(inputs, device, 0, len(kept))  # dropped once compared
        return kept if all(_same(a, b) for a, b in zip(fresh, kept, strict=True)) else None

    def keep(
        self,
        inputs: _GroupedInputs,
        device: torch.device,
        copies: tuple[Tensor, ...],
    ) -> None:
        refs = tuple(None if t is None else weakref.ref(t) for t in inputs)
        self.inputs = (*refs, device)
        self.copies = tuple(weakref.ref(t) for t in copies)


def _alive(ref: object) -> object:
    return ref() if isinstance(ref, weakref.ref) else ref


class _SharedRankings(threading.local):
    """The ranking of the last grouped state computed, for metrics holding the same copies."""

    def __init__(self) -> None:
        self.entries: tuple[tuple[weakref.ref[Tensor], ...], ...] = ()
        self.ranking: tuple[object, ...] = ()
        self.ignore_index: int | None = None
        self.depth: int | None = None
        self.ranked: RankedBatch | None = None

    @staticmethod
    def _entries(lists: tuple[list[Tensor], ...]) -> tuple[tuple[Tensor, ...], ...]:
        # each metric's lists start with its own empty tensor: empties carry nothing
        return tuple(tuple(t for t in tensors if t.numel()) for tensors in lists)

    def lookup(
        self, lists: tuple[list[Tensor], ...], request: RankingRequest, ignore_index: int | None
    ) -> RankedBatch | None:
        if self.ranked is None or self.ignore_index != ignore_index:
            return None
        if not request.reads(self.ranking, self.depth):
            return None
        entries = self._entries(lists)
        if [len(e) for e in entries] != [len(e) for e in self.entries]:
            return None
        for tensors, refs in zip(entries, self.entries, strict=True):
            if not all(ref() is t for t, ref in zip(tensors, refs, strict=True)):
                return None
        return self.ranked

    def store(
        self,
        lists: tuple[list[Tensor], ...],
        request: RankingRequest,
        ignore_index: int | None,
        ranked: RankedBatch,
    ) -> None:
        if not ranked.reusable:  # ranked block by block when read: nothing to keep
            self.ranked = None
            return
        self.entries = tuple(
            tuple(weakref.ref(t) for t in tensors) for tensors in self._entries(lists)
        )
        self.ranking = request.ranking_key
        self.ignore_index = ignore_index
        self.depth = None if ranked.whole_lists else request.depth
        self.ranked = ranked


_shared_copies = _SharedCopies()
_shared_rankings = _SharedRankings()


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


def _check_flat(
    preds: object,
    target: object,
    indexes: object,
    mask: object,
    target_format: str | None,
) -> None:
    """The kernel's checks of the grouped layout that read no tensor value.

    They run in ``update`` (which only stores the triples); the kernel runs
    them again at ``compute``. The messages are the kernel's; where
    ``torchmetrics.retrieval`` refuses the same ``(preds, target, indexes)``,
    the error is its ValueError and its message comes first.
    """
    try:
        preds, target, _, mask = check_inputs(preds, target, indexes, mask, target_format)
        if preds.ndim != 1:
            raise ValueError(
                "`indexes` is only for the grouped layout, where `preds` is 1-D; "
                f"got `preds` of shape {tuple(preds.shape)}"
            )
        check_grouped(preds, target, V.check_tensor("indexes", indexes), target_format)
    except (TypeError, ValueError) as error:
        refused = None if mask is not None else _torchmetrics_refusal(preds, target, indexes)
        if refused is None:
            raise
        raise ValueError(f"{refused}. {error}") from error


def _torchmetrics_refusal(preds: object, target: object, indexes: object) -> str | None:
    """TorchMetrics' message for grouped inputs it refuses by shape or dtype, else None.

    Its checks (``_check_retrieval_inputs``), in its order, less those that read
    values; only asked when this package refuses the inputs too, and not for a
    ``mask``, which TorchMetrics does not take.
    """
    if not (isinstance(preds, Tensor) and isinstance(target, Tensor)):
        return None
    if not isinstance(indexes, Tensor):
        return None
    if any(t.is_nested or t.layout != torch.strided for t in (preds, target, indexes)):
        return None  # not a tensor TorchMetrics reads either: the package's message stands
    if indexes.shape != preds.shape or preds.shape != target.shape:
        return "`indexes`, `preds` and `target` must be of the same shape"
    if indexes.dtype is not torch.long:
        return "`indexes` must be a tensor of long integers"
    return torchmetrics_dtype_refusal(preds, target)


def _drop_ignored(
    preds: Tensor | EmbeddingInput,
    target: Tensor,
    mask: Tensor | None,
    ignore_index: int,
    target_format: str | None,
) -> tuple[Tensor, Tensor | None]:
    """``ignore_index`` applied to one batch of the dense or item-index layout.

    Dense grades: an ignored entry is masked out and its grade set to 0, which
    is dropping it (never ranked, not counted in R). Item indices: an ignored
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
    dense = target.shape == preds.shape if target_format is None else target_format == "dense"
    ignored = target == ignore_index
    if dense:
        keep = ~ignored if mask is None else mask & ~ignored
        return target.masked_fill(ignored, 0), keep
    return target.masked_fill(ignored, -1), mask


def _device_only(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """``fn`` (a function ``nn.Module._apply`` hands on) without its casts.

    A tensor that ``fn`` would give another dtype only follows the device ``fn``
    would send it to (read off an empty tensor of its dtype); any other tensor
    gets ``fn`` itself. ``functools.wraps`` keeps ``fn``'s name, which
    TorchMetrics reads to recognise ``half()``, ``float()`` and the like.
    """

    @functools.wraps(fn)
    def move(tensor: Tensor) -> Tensor:
        probe = fn(tensor.new_empty(0))
        if probe.dtype == tensor.dtype:
            return fn(tensor)
        return tensor.to(device=probe.device)

    return move


# ------------------------------------------------------------- one metric each


class _SingleMetric(BaseRankingMetric):
    """One metric from :data:`ranking_plugins.metrics.METRICS`; subclasses name it."""

    metric_name: ClassVar[str]

    def __init_subclass__(cls, metric: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if metric:
            entry = METRICS[metric]
            cls.metric_name = metric
            cls.higher_is_better = entry.higher_is_better
            cls.plot_lower_bound = entry.lower_bound
            cls.plot_upper_bound = entry.upper_bound

    def __init__(self, top_k: TopK = None, **options: Unpack[RankingOptions]) -> None:
        super().__init__(self.metric_name, top_k, **options)


class _WholeListMetric(_SingleMetric):
    """A metric read on the whole list (no cutoff, so no ``top_k``)."""

    def __init__(self, **options: Unpack[RankingOptions]) -> None:
        if "top_k" in options:
            # torchmetrics.Metric's error for a keyword it does not take, then ours
            raise ValueError(
                "Unexpected keyword arguments: `top_k`. "
                f"{type(self).__name__}() takes no `top_k`: it reads the whole ranked list"
            )
        super().__init__(None, **options)


class HitRate(_SingleMetric, metric="hit_rate"):
    """Hit rate@k: 1 if a relevant item is in the top k (``RetrievalHitRate``).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import HitRate
    >>> metric = HitRate(top_k=2)
    >>> indexes = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    >>> preds = torch.tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2])
    >>> target = torch.tensor([False, False, True, False, True, False, True])
    >>> metric(preds, target, indexes=indexes)
    tensor(1., dtype=torch.float64)
    """


class MRR(_SingleMetric, metric="mrr"):
    """Mean reciprocal rank@k (``RetrievalMRR``).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import MRR
    >>> indexes = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    >>> preds = torch.tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2])
    >>> target = torch.tensor([False, False, True, False, True, False, True])
    >>> MRR()(preds, target, indexes=indexes)
    tensor(0.7500, dtype=torch.float64)
    """


class NDCG(_SingleMetric, metric="ndcg"):
    """Normalised discounted cumulative gain@k (``RetrievalNormalizedDCG``).

    The gain is linear (the grade) by default, as in TorchMetrics; pass
    ``gain="exponential"`` for 2^g - 1.

    >>> import torch
    >>> from ranking_plugins.torchmetrics import NDCG
    >>> indexes = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    >>> preds = torch.tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2])
    >>> target = torch.tensor([False, False, True, False, True, False, True])
    >>> NDCG()(preds, target, indexes=indexes)
    tensor(0.8467, dtype=torch.float64)
    """


class MAP(_SingleMetric, metric="map"):
    """Mean average precision@k (``RetrievalMAP``; the denominator is R, trec_eval's map_cut).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import MAP
    >>> indexes = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    >>> preds = torch.tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2])
    >>> target = torch.tensor([False, False, True, False, True, False, True])
    >>> MAP()(preds, target, indexes=indexes)
    tensor(0.7917, dtype=torch.float64)
    """


class Precision(_SingleMetric, metric="precision"):
    """Precision@k: relevant items in the top k over k (``RetrievalPrecision``).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import Precision
    >>> preds = torch.tensor([[0.9, 0.2, 0.5, 0.1]])
    >>> target = torch.tensor([[1, 0, 0, 1]])
    >>> Precision(top_k=[1, 2])(preds, target)
    {'precision@1': tensor(1., dtype=torch.float64), \
'precision@2': tensor(0.5000, dtype=torch.float64)}
    """


class Recall(_SingleMetric, metric="recall"):
    """Recall@k: relevant items in the top k over R (``RetrievalRecall``).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import Recall
    >>> preds = torch.tensor([[0.9, 0.2, 0.5, 0.1]])
    >>> target = torch.tensor([[1, 0, 0, 1]])
    >>> Recall(top_k=2)(preds, target)
    tensor(0.5000, dtype=torch.float64)
    """


class F1(_SingleMetric, metric="f1"):
    """F1@k: 2·hits@k / (k + R).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import F1
    >>> preds = torch.tensor([[0.9, 0.2, 0.5, 0.1]])
    >>> target = torch.tensor([[1, 0, 0, 1]])
    >>> F1(top_k=2)(preds, target)
    tensor(0.5000, dtype=torch.float64)
    """


class FallOut(_SingleMetric, metric="fall_out"):
    """Fall-out@k: non-relevant items in the top k over the non-relevant ones; lower is better.

    As ``RetrievalFallOut``, a query without relevant items counts its fall-out
    (it needs only non-relevant items), and a query without *non-relevant*
    items is the empty one, counted as 1 (its worst value) under the default
    ``"neg"``, as RetrievalFallOut's default ``"pos"`` does (its ``"neg"``
    counts 0). ``fall_out_empty="no_relevant"`` makes a query without relevant
    items the empty one, as every other metric and the rest of the package.

    >>> import torch
    >>> from ranking_plugins.torchmetrics import FallOut
    >>> preds = torch.tensor([[0.9, 0.2, 0.5, 0.1]])
    >>> target = torch.tensor([[1, 0, 0, 1]])
    >>> FallOut(top_k=2)(preds, target)
    tensor(0.5000, dtype=torch.float64)
    """


class RPrecision(_WholeListMetric, metric="r_precision"):
    """R-precision: relevant items in the top R over R (``RetrievalRPrecision``).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import RPrecision
    >>> preds = torch.tensor([[0.9, 0.2, 0.5, 0.1]])
    >>> target = torch.tensor([[1, 0, 0, 1]])
    >>> RPrecision()(preds, target)
    tensor(0.5000, dtype=torch.float64)
    """


class MeanRank(_WholeListMetric, metric="mean_rank"):
    """Mean rank of the ranked relevant items (1 = best); lower is better.

    A query without a ranked relevant item counts as 0 under the default
    ``empty_target_action="neg"``; pass ``"skip"`` to leave it out.

    >>> import torch
    >>> from ranking_plugins.torchmetrics import MeanRank
    >>> preds = torch.tensor([[0.9, 0.2, 0.5, 0.1]])
    >>> target = torch.tensor([[1, 0, 0, 1]])
    >>> MeanRank(empty_target_action="skip")(preds, target)
    tensor(2.5000, dtype=torch.float64)
    """


class AUC(_SingleMetric, metric="auc"):
    """Per-query ROC AUC, as ``RetrievalAUROC(top_k, max_fpr)``.

    Without ``top_k``: ``auc``, the AUC of the whole ranked list (a query whose
    ranked items are all relevant is undefined, handled by ``empty_target_action``).
    With ``top_k``: ``auroc``, TorchMetrics' AUC of the top k items, 0 where they
    hold relevant items only or none. ``max_fpr`` (an option): the area up to that
    false positive rate, McClish-standardised, as TorchMetrics' ``max_fpr``.

    >>> import torch
    >>> from ranking_plugins.torchmetrics import AUC
    >>> preds = torch.tensor([[0.9, 0.2, 0.5, 0.1]])
    >>> target = torch.tensor([[1, 0, 0, 1]])
    >>> AUC()(preds, target)
    tensor(0.5000, dtype=torch.float64)
    >>> AUC(top_k=3)(preds, target)
    tensor(1., dtype=torch.float64)
    """

    def __init__(self, top_k: TopK = None, **options: Unpack[RankingOptions]) -> None:
        # the top k's AUC is another metric (auroc); the whole list's stays auc
        BaseRankingMetric.__init__(self, "auc" if top_k is None else "auroc", top_k, **options)


class RankingMetrics(BaseRankingMetric):
    """Several metrics at several cutoffs in one state, one kernel pass per update.

    ``compute()`` always returns a dict ``{"mrr@5": tensor, ...}``, metric by
    metric, each in ascending k (bare names for metrics without a cutoff).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import RankingMetrics
    >>> metric = RankingMetrics(["mrr", "hit_rate"], top_k=[1, 2])
    >>> preds = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> metric.update(preds, torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]]))
    >>> metric.compute()
    {'mrr@1': tensor(0.5000, dtype=torch.float64), 'mrr@2': tensor(0.7500, dtype=torch.float64), \
'hit_rate@1': tensor(0.5000, dtype=torch.float64), 'hit_rate@2': tensor(1., dtype=torch.float64)}
    """

    _always_dict: ClassVar[bool] = True

    def __init__(
        self,
        metrics: str | Sequence[str] = ("hit_rate", "mrr", "ndcg"),
        top_k: TopK = None,
        **options: Unpack[RankingOptions],
    ) -> None:
        super().__init__(metrics, top_k, **options)
        entries = self.request.metrics
        directions = {m.higher_is_better for m in entries}
        uppers = [m.upper_bound for m in entries]
        # TorchMetrics guards these class constants against assignment; here
        # they follow the metrics chosen (None when their directions differ).
        self.__dict__.update(
            higher_is_better=directions.pop() if len(directions) == 1 else None,
            plot_lower_bound=min(m.lower_bound for m in entries),
            plot_upper_bound=None if None in uppers else max(u for u in uppers if u is not None),
        )


# --------------------------------------------- TorchMetrics' names and signatures
#
# ``from ranking_plugins.torchmetrics import RetrievalMRR`` in place of
# ``from torchmetrics.retrieval import RetrievalMRR``: each takes the arguments of
# TorchMetrics' class, positional ones in its order, and is the class above
# (``isinstance(RetrievalMRR(), MRR)``); ``top_k`` also takes several ks.


def _retrieval_keywords(
    empty_target_action: str, ignore_index: int | None, aggregation: object, **given: object
) -> dict[str, Any]:
    """The keywords of the class above. The AUROC arguments are forwarded only away
    from TorchMetrics' defaults, so that a class that does not take them refuses
    them by name and one that does gets them; every class takes ``aggregation``."""
    keywords: dict[str, Any] = {
        "empty_target_action": empty_target_action,
        "ignore_index": ignore_index,
        "aggregation": aggregation,
    }
    keywords.update({name: value for name, value in given.items() if value is not None})
    return keywords


class RetrievalMRR(MRR):
    """:class:`MRR` with ``torchmetrics.retrieval.RetrievalMRR``'s signature."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        top_k: TopK = None,
        aggregation: str | Callable[..., Tensor] = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            top_k, **_retrieval_keywords(empty_target_action, ignore_index, aggregation), **kwargs
        )


class RetrievalNormalizedDCG(NDCG):
    """:class:`NDCG` with ``torchmetrics.retrieval.RetrievalNormalizedDCG``'s signature."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        top_k: TopK = None,
        aggregation: str | Callable[..., Tensor] = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            top_k, **_retrieval_keywords(empty_target_action, ignore_index, aggregation), **kwargs
        )


class RetrievalMAP(MAP):
    """:class:`MAP` with ``torchmetrics.retrieval.RetrievalMAP``'s signature."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        top_k: TopK = None,
        aggregation: str | Callable[..., Tensor] = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            top_k, **_retrieval_keywords(empty_target_action, ignore_index, aggregation), **kwargs
        )


class RetrievalHitRate(HitRate):
    """:class:`HitRate` with ``torchmetrics.retrieval.RetrievalHitRate``'s signature."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        top_k: TopK = None,
        aggregation: str | Callable[..., Tensor] = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            top_k, **_retrieval_keywords(empty_target_action, ignore_index, aggregation), **kwargs
        )


class RetrievalPrecision(Precision):
    """:class:`Precision` with ``torchmetrics.retrieval.RetrievalPrecision``'s signature."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        top_k: TopK = None,
        adaptive_k: bool = False,
        aggregation: str | Callable[..., Tensor] = "mean",
        **kwargs: Any,
    ) -> None:
        keywords = _retrieval_keywords(empty_target_action, ignore_index, aggregation)
        super().__init__(top_k, adaptive_k=adaptive_k, **keywords, **kwargs)


class RetrievalRecall(Recall):
    """:class:`Recall` with ``torchmetrics.retrieval.RetrievalRecall``'s signature."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        top_k: TopK = None,
        aggregation: str | Callable[..., Tensor] = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            top_k, **_retrieval_keywords(empty_target_action, ignore_index, aggregation), **kwargs
        )


class RetrievalFallOut(FallOut):
    """:class:`FallOut` with ``torchmetrics.retrieval.RetrievalFallOut``'s signature
    (and its default ``empty_target_action="pos"``)."""

    def __init__(
        self,
        empty_target_action: str = "pos",
        ignore_index: int | None = None,
        top_k: TopK = None,
        aggregation: str | Callable[..., Tensor] = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            top_k, **_retrieval_keywords(empty_target_action, ignore_index, aggregation), **kwargs
        )


class RetrievalRPrecision(RPrecision):
    """:class:`RPrecision` with ``torchmetrics.retrieval.RetrievalRPrecision``'s signature."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        aggregation: str | Callable[..., Tensor] = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(
            **_retrieval_keywords(empty_target_action, ignore_index, aggregation), **kwargs
        )


class RetrievalAUROC(AUC):
    """:class:`AUC` with ``torchmetrics.retrieval.RetrievalAUROC``'s signature."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: int | None = None,
        top_k: int | None = None,
        max_fpr: float | None = None,
        aggregation: str | Callable[..., Tensor] = "mean",
        **kwargs: Any,
    ) -> None:
        keywords = _retrieval_keywords(
            empty_target_action, ignore_index, aggregation, top_k=top_k, max_fpr=max_fpr
        )
        super().__init__(**keywords, **kwargs)


# ------------------------------------------------------------------ the curves
#
# Precision@k and recall@k for k = 1 ... max_k: the values of
# ``RankingMetrics(["precision", "recall"], top_k=range(1, max_k + 1))``, from one
# ranking per query, returned as TorchMetrics' curve classes return them.


def _recall_at_fixed_precision(
    precision: Tensor, recall: Tensor, top_k: Tensor, min_precision: float
) -> tuple[Tensor, Tensor]:
    """TorchMetrics' choice on a curve: the largest recall among the ks whose precision
    is >= ``min_precision``, and the largest such k; ``(0, len(top_k))`` where no k
    reaches it or the largest recall is 0."""
    reached = precision >= min_precision  # NaN (no query counted) reaches nothing
    last = torch.tensor(len(top_k), dtype=top_k.dtype, device=top_k.device)
    if not bool(reached.any()):
        return torch.zeros((), dtype=recall.dtype, device=recall.device), last
    best = recall[reached].max()
    if best == 0:
        return best, last
    return best, top_k[reached & (recall == best)].max()


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
        if max_k is None and not (isinstance(aggregation, str) and aggregation == "mean"):
            # ranked again at compute by this class, which averages: refused rather
            # than a mean under another aggregation's name
            raise ValueError(
                f"`aggregation={aggregation!r}` needs a `max_k` here: with `max_k=None` the "
                "curves are averaged over queries"
            )
        keywords = _retrieval_keywords(empty_target_action, ignore_index, aggregation)
        top_k = None if max_k is None else range(1, max_k + 1)
        super().__init__(
            list(self.curve_metrics), top_k, adaptive_k=adaptive_k, **keywords, **kwargs
        )
        self.max_k = max_k
        self.adaptive_k = adaptive_k
        if max_k is None and (self.whole_queries or self.keep_per_query):
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
        self._check_compute_group()
        indexes = dim_zero_cat(self.flat_indexes)
        counted = dim_zero_cat(self.flat_mask)  # a masked entry is not in the list
        if self.ignore_index is not None:
            counted = counted & (dim_zero_cat(self.flat_target) != self.ignore_index)
        indexes = indexes[counted]
        if indexes.numel() == 0:
            empty = torch.zeros(0, dtype=torch.float64, device=self.device)
            return empty, empty.clone(), torch.zeros(0, dtype=torch.long, device=self.device)
        longest = int(torch.unique(indexes, return_counts=True)[1].max())
        request = RankingRequest.create(
            list(self.curve_metrics),
            range(1, longest + 1),
            self.request.options,
        )
        # the base ranks the kept entries for ``self.request``: this one for this call
        kept, self.request = self.request, request
        try:
            evaluation = self._grouped_evaluation()
        finally:
            self.request = kept
        assert evaluation is not None
        means = Accumulator.of(evaluation, request).values(request)
        values = dict(zip(request.keys, means.unbind(0), strict=True))
        return self._curves(values, request)

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

    ``compute()`` returns ``(max_recall, best_k)`` from the averaged curves of
    :class:`RetrievalPrecisionRecallCurve`: among equal recalls the largest k,
    and ``(0, max_k)`` where no k reaches ``min_precision`` or the recall is 0,
    as TorchMetrics.

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
        super().__init__(max_k, adaptive_k, empty_target_action, ignore_index, **kwargs)
        if not (isinstance(min_precision, float) and 0.0 <= min_precision <= 1.0):
            raise ValueError(
                f"`min_precision` has to be a positive float between 0 and 1, got {min_precision!r}"
            )
        self.min_precision = min_precision

    def compute(self) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        """``(max_recall, best_k)``."""
        return _recall_at_fixed_precision(*super().compute(), self.min_precision)

    def plot(  # type: ignore[override]
        self, val: Tensor | Sequence[Tensor] | None = None, ax: Any = None
    ) -> Any:
        """Plot the recall (``val``: a recall or a list of them over time; this
        metric's when omitted), as TorchMetrics. Returns ``(figure, axes)``."""
        return self._plot(val if val is not None else self.compute()[0], ax)
