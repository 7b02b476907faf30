"""The TorchMetrics adapter's metric: its state, ``update`` and ``compute``.

The public classes are in :mod:`ranking_plugins.torchmetrics` (whose docstring
describes the layouts and states); this module is their shared base,
:class:`BaseRankingMetric`. Its state is an
:class:`~ranking_plugins.accumulator.Accumulator` in TorchMetrics' states (the
sums and the packed exposure, summed across processes; the per-query values,
concatenated) plus the grouped layout's kept entries
(:mod:`ranking_plugins.torchmetrics.grouped`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.accumulator import Accumulator
from ranking_plugins.embeddings import EmbeddingInput
from ranking_plugins.kernel import (
    ITEM_FIELDS,
    ITEM_KEYWORDS,
    AdapterItemKeywords,
    ItemInputs,
    check_judged,
    host_reads_are_free,
)
from ranking_plugins.metrics import result_columns
from ranking_plugins.options import OPTION_NAMES, OptionKeywords, Options
from ranking_plugins.per_query import Evaluation
from ranking_plugins.request import RankingRequest, TopK
from ranking_plugins.torchmetrics.arguments import _aggregation_name, _check_arguments, _is_mean
from ranking_plugins.torchmetrics.errors import (
    _MIXED_SCORES,
    _check_flat,
    _kernel_evaluate,
    _kernel_rank,
    _kernel_read,
)
from ranking_plugins.torchmetrics.functional import TORCHMETRICS_DEFAULTS
from ranking_plugins.torchmetrics.grouped import (
    _NAMED_STATES,
    _UINT64,
    FIELD_STATES,
    FLAT_STATES,
    JUDGED_STATE,
    UNCHECKED_STATE,
    GroupedBatch,
    _digest,
    _drop_ignored,
    _holds_batches,
    _items_digest,
    _state_size,
    _unjudged_grades,
    keep_ranking,
    kept_ranking,
    shared_copies,
    stored_form,
)
from ranking_plugins.torchmetrics.pending import PendingRanking
from ranking_plugins.torchmetrics.wrappers import (
    _calling_wrapper,
    _for_wrapper,
    _refuse_lightning_log,
)
from ranking_plugins.totals import ROWS, Aggregation, Totals

try:
    from torchmetrics import Metric
    from torchmetrics.utilities.data import dim_zero_cat
    from torchmetrics.utilities.plot import plot_curve
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ranking_plugins.torchmetrics needs TorchMetrics; install it with "
        '`pip install "ranking-plugins[torchmetrics]"`'
    ) from error


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


class BaseRankingMetric(PendingRanking):
    """Shared base: several metrics at several cutoffs, one kernel pass per update.

    Args:
        metrics: metric names from :data:`ranking_plugins.metrics.METRICS`.
        top_k: a cutoff, a sequence of cutoffs, or None (the whole list); None
            inside a sequence adds the whole list (``[10, None]``).
        ignore_index: entries whose target equals it are dropped, as in
            ``torchmetrics.retrieval``: never ranked and not counted in R.
        whole_queries: grouped layout only: every batch holds whole queries,
            so only the sums are kept (constant memory): ``update`` checks a
            batch and keeps it pending until the pending batches hold
            :data:`~ranking_plugins.torchmetrics.pending.PENDING_ENTRIES`
            entries (2^19: 13 MiB, about 100 MiB at the peak of their ranking),
            then ranks them together, with
            the numbers of ranking each alone; whatever reads the states
            (``compute``, ``sync``, ``forward``, ``state_dict``, ...) ranks them
            first. False (the default, TorchMetrics' behaviour): a query may
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
            default=torch.zeros(ROWS, len(self._query_keys), dtype=torch.float64),
            dist_reduce_fx="sum",
        )
        self._add_exposure_state(items)
        # the judged flags only where a measure of judged items reads them
        # (every process has the state, whether or not `judged` is ever given)
        self._keeps_judged = self.request.judgments
        for name in self._flat_dtypes():
            self.add_state(name, default=[], dist_reduce_fx="cat")
        self.add_state(UNCHECKED_STATE, default=torch.tensor(0), dist_reduce_fx="sum")
        # named by the same digest as the sums, so that a MetricCollection groups
        # only metrics that keep the same per-query values
        self._per_query_name = "per_query_" + self._sums_name[len("sums_") :]
        if self.keep_per_query:
            self.add_state(self._per_query_name, default=[], dist_reduce_fx="cat")
        # the whole-query batches not ranked yet (:mod:`.pending`), named by the same
        # digest: a compute group shares them only between metrics of the same sums
        self._pending_name = "pending_" + self._sums_name[len("sums_") :]
        if whole_queries:
            self.add_state(self._pending_name, default=[], dist_reduce_fx="cat")
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
        exposure = None if self._exposure_name is None else getattr(self, self._exposure_name)
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
        dtypes = {
            self._sums_name: torch.float64,
            **self._flat_dtypes(),
            UNCHECKED_STATE: torch.int64,
            **exposure,
        }
        if self.keep_per_query:
            dtypes[self._per_query_name] = torch.float64
        return dtypes

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        """TorchMetrics' loading, then every state back in its storage dtype on this device.

        A state saved in a lower precision (by a version that let a cast reach
        the sums, say) is widened again; what it already lost stays lost.
        """
        judged_missing = (
            self._keeps_judged
            and prefix + JUDGED_STATE not in state_dict
            and prefix + "flat_mask" in state_dict
        )
        if prefix + "flat_mask" in state_dict and prefix + UNCHECKED_STATE not in state_dict:
            # saved before the count was kept: the entries are checked again at compute
            state_dict[prefix + UNCHECKED_STATE] = torch.tensor(1)
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
            setattr(self, JUDGED_STATE, [torch.ones(entries, dtype=torch.bool)])
        self._restore_dtypes()

    @property
    def totals(self) -> Totals:
        """The running sums of the dense, item-index and whole-query updates (this process
        only)."""
        self._rank_pending()
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
                bpref, infap, unj, ...: bool of ``preds``' shape, or
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
        evaluation = _kernel_evaluate(self._current_request(), preds, target, mask=mask, **extra)
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
        flattened = (
            all(isinstance(t, Tensor) for t in tensors)
            and preds.ndim > 1
            and all(t.shape == preds.shape for t in tensors)
        )
        if flattened:
            # TorchMetrics' retrieval input: any shape, flattened
            if judged is not None:  # checked against the shape given, then flattened
                judged = validation.check_tensor("judged", judged)
                check_judged(judged, preds, target, "grouped")
                judged = judged.flatten()
            preds, target, indexes = preds.flatten(), target.flatten(), indexes.flatten()
            mask = None if mask is None else mask.flatten()
        _check_flat(preds, target, indexes, mask, self.request.options.target_format)
        if not flattened:
            # checked (once: a flattened one was above), but kept as given: the next
            # metric of a collection is proved to get the same batch by its objects
            check_judged(judged, preds, target, "grouped")
        # the request's refusal of this layout, at update rather than compute
        self.request.check_layout(preds, indexes)
        if preds.dtype == _UINT64:
            raise TypeError(
                "`preds`: uint64 scores cannot be kept exactly in the grouped layout "
                "(`indexes`); use int64 (or a floating-point dtype)"
            )
        if self.whole_queries:
            self._update_whole_queries(preds, target, indexes, mask, judged)
            return
        integer = validation.is_integer_dtype(preds.dtype)
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
            validation.check_values(preds, target, None, 0)
        else:
            getattr(self, UNCHECKED_STATE).add_(1)
        batch = GroupedBatch(preds, target, indexes, mask, judged)
        fields = self._kept_fields()
        if judged is not None and not self._keeps_judged:
            # an unjudged item is never relevant: its grade kept as one that is
            # not (this metric's own copies, shared with no other metric)
            target = _unjudged_grades(target, judged, self.request.options, self.ignore_index)
            own = batch._replace(target=target, judged=None)
            self._append(stored_form(own, self.device, fields), scores)
            return
        # proving a batch equal to the kept copies reads values: with
        # validate_args=False only where that costs no device sync
        may_read = self.request.options.validate_args or host_reads_are_free(preds)
        self._append(shared_copies(batch, self.device, fields, may_read), scores)

    def _append(self, copies: dict[str, Tensor], scores: list[Tensor]) -> None:
        """One grouped batch's copies onto the "cat" states, field by field; ``scores``:
        the list of the scores' kind (floating-point or integer)."""
        for field, copy in copies.items():
            (scores if field == "preds" else getattr(self, FIELD_STATES[field])).append(copy)

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
        if self.request.options.empty_target_action == "error":
            # ranked now, so that an empty query is refused by the update that holds it
            extra = {} if judged is None else {"judged": judged}
            evaluation = _kernel_evaluate(
                self.request, preds, target, indexes=indexes, mask=mask, **extra
            )
            self._add(evaluation)
            return
        if self.request.options.validate_args:  # the ranking's own checks of the scores
            validation.check_values(preds, target, None, 0)
        self._hold(preds, target, indexes, mask, judged)

    def _flat_dtypes(self) -> dict[str, torch.dtype]:
        """The grouped layout's "cat" states and their storage dtypes: :data:`FLAT_STATES`,
        then the judged flags where a metric reads them."""
        if not self._keeps_judged:
            return FLAT_STATES
        return {**FLAT_STATES, JUDGED_STATE: torch.bool}

    def _flat_lists(self) -> tuple[list[Tensor], ...]:
        """The grouped layout's "cat" states, in :meth:`_flat_dtypes` order."""
        return tuple(getattr(self, name) for name in self._flat_dtypes())

    def _kept_fields(self) -> tuple[str, ...]:
        """The fields of :class:`GroupedBatch` kept per entry: the judged flags only
        where a measure of judged items reads them."""
        return GroupedBatch._fields if self._keeps_judged else GroupedBatch._fields[:-1]

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
        elif JUDGED_STATE in foreign and not bool(dim_zero_cat(foreign[JUDGED_STATE]).all()):
            problem = (
                "the first metric kept judged flags, which this metric would have applied to "
                "the grades it keeps"
            )
        elif self._keeps_judged and _state_size(getattr(self, JUDGED_STATE)) != _state_size(
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
        kept, evaluation = self._kept_and_grouped()
        if evaluation is None:
            return kept
        return kept.merge(Accumulator.of(evaluation, self.request, self.keep_per_query))

    def _kept_and_grouped(self) -> tuple[Accumulator, Evaluation | None]:
        """The states, and the grouped queries ranked in one kernel call (None: none kept)."""
        self._rank_pending()
        self._check_compute_group()
        return self._kept(), self._grouped_evaluation()

    def _grouped_evaluation(self, request: RankingRequest | None = None) -> Evaluation | None:
        """The kept grouped entries ranked in one kernel call for ``request`` (this
        metric's when None); None when there are none."""
        request = self.request if request is None else request
        floats, ints = _state_size(self.flat_preds), _state_size(self.flat_preds_int)
        if floats and ints:  # from different processes
            raise ValueError(
                _MIXED_SCORES.format(
                    found=f"{floats} floating-point and {ints} integer scores were gathered"
                )
            )
        if not (floats or ints):
            return None
        # only the kind that holds scores is concatenated
        preds = dim_zero_cat(self.flat_preds_int if ints else self.flat_preds)
        # each metric's lists start with its own empty tensor: empties carry nothing
        kept = tuple(tuple(t for t in tensors if t.numel()) for tensors in self._flat_lists())
        ranked = kept_ranking(kept, request, self.ignore_index)
        if ranked is None:
            target = dim_zero_cat(self.flat_target)
            indexes = dim_zero_cat(self.flat_indexes)
            mask = dim_zero_cat(self.flat_mask)
            judged = dim_zero_cat(getattr(self, JUDGED_STATE)) if self._keeps_judged else None
            if self.ignore_index is not None:
                # dropped here, not in ``update``, which must not read values
                keep = target != self.ignore_index
                preds, target, indexes, mask = preds[keep], target[keep], indexes[keep], mask[keep]
                judged = None if judged is None else judged[keep]
                if preds.numel() == 0:
                    return None
            # scores checked at every update that kept them (read only when checking:
            # a check reads values anyway); the grades' checks need whole queries
            checked = request.options.validate_args and not bool(getattr(self, UNCHECKED_STATE))
            ranked = _kernel_rank(
                request,
                preds,
                target,
                indexes=indexes,
                mask=mask,
                judged=judged,
                scores_checked=checked,
            )
            keep_ranking(kept, request, self.ignore_index, ranked)
        return _kernel_read(request, ranked)

    def compute(self) -> Tensor | dict[str, Tensor]:
        """The mean (or the ``aggregation``) of every result key (float64; NaN where no
        query counted).

        The catalogue-level metrics (``coverage``, ``gini``, ``entropy``,
        ``personalisation``) come from the accumulated exposure.
        """
        kept, evaluation = self._kept_and_grouped()
        if evaluation is None:
            return self._format(kept.values(self.request, self.aggregation))
        # the grouped queries' mean reads only the sums it needs: not a whole batch record
        return self._format(kept.values_with(evaluation, self.request, self.aggregation))

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

    def _wrap_compute(self, compute: Callable[..., Any]) -> Callable[..., Any]:
        """TorchMetrics' ``compute`` (synchronised, cached), then its value as the
        TorchMetrics wrapper computing this metric needs it (:func:`_for_wrapper`),
        checked before the cache, which a second ``compute`` returns."""
        cached = super()._wrap_compute(compute)

        @functools.wraps(compute)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            wrapper = _calling_wrapper()
            return _for_wrapper(self, cached(*args, **kwargs), wrapper)

        return wrapped

    def _format(self, values: Tensor) -> Tensor | dict[str, Tensor]:
        if len(self.keys) == 1 and not self._always_dict:
            return values[0]
        _refuse_lightning_log(self, self.keys)
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


__all__ = ["BaseRankingMetric", "RankingMetric", "RankingOptions"]
