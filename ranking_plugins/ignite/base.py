"""The base of every Ignite metric here: its options, state, update, compute and sync.

:class:`BaseRankingMetric` is an :class:`ignite.metrics.Metric` that builds one
:class:`~ranking_plugins.request.RankingRequest` in its constructor, evaluates
it on each batch of the engine's output and keeps an
:class:`~ranking_plugins.accumulator.Accumulator` in Ignite's attributes; the
public classes of :mod:`ranking_plugins.ignite` only name their metrics and
Ignite's arguments. What is refused at ``attach`` lives in
:mod:`ranking_plugins.ignite.engine_keys`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import ignite.distributed as idist
import torch
from ignite.exceptions import NotComputableError
from ignite.metrics.metric import (
    EpochWise,
    Metric,
    MetricUsage,
    reinit__is_reduced,
    sync_all_reduce,
)
from torch import Tensor
from typing_extensions import Unpack

from ranking_plugins.accumulator import Accumulator
from ranking_plugins.ignite.engine_keys import KeyWriter, refuse_shared_keys
from ranking_plugins.ignite.inputs import (
    check_same_shape,
    check_top_k,
    is_list_pair,
    judged_of,
    options_of,
    refuse_unknown,
    unpack,
)
from ranking_plugins.kernel import ITEM_KEYWORDS, AdapterItemKeywords, ItemInputs
from ranking_plugins.metrics import result_columns
from ranking_plugins.request import RankingRequest, TopK
from ranking_plugins.totals import ROWS


class PackageOptions(AdapterItemKeywords, total=False):
    """The options of :class:`ranking_plugins.options.Options`, keyword-only on every metric.

    Each has its default and meaning there; here ``empty_target_action``, when
    given, wins over ``ignore_zero_hits`` (True is ``"skip"``, False ``"neg"``).
    :class:`IgniteOptions` adds the two that Ignite's NDCG takes as arguments.
    """

    ties: str
    empty_target_action: str | None
    ap_denominator: str
    adaptive_k: bool
    weighted: bool
    rbp_persistence: float
    alpha: float
    beta: float
    fall_out_empty: str
    max_fpr: float | None
    target_format: str | None
    validate_args: bool
    #: also keep every query's values, for :meth:`BaseRankingMetric.compute_per_query`
    keep_per_query: bool


class IgniteOptions(PackageOptions, total=False):
    """:class:`PackageOptions` plus the two relevance options of Ignite's NDCG.

    ``relevance_threshold``: grades at or above it are relevant (default None:
    above 0, as Ignite's HitRate; :class:`NDCG` defaults to 1.0, as Ignite's NDCG).
    ``gain_function``: ``"exp_rank"`` (2^g - 1, Ignite's default, kept here where
    the package's is linear) or ``"linear_rank"`` (g).
    """

    relevance_threshold: float | None
    gain_function: str


_METRIC_INIT = inspect.signature(Metric.__init__).parameters


CPU = torch.device("cpu")


def identity(output: Any) -> Any:
    """Ignite's default ``output_transform``: the engine's output as it is."""
    return output


class BaseRankingMetric(Metric, KeyWriter):
    """Shared base of every metric of :mod:`ranking_plugins.ignite`: state, sync and output parsing.

    A subclass names what it computes in ``_metrics`` (names of
    :data:`ranking_plugins.metrics.METRICS`); nothing else differs between
    them. State is an :class:`~ranking_plugins.accumulator.Accumulator` in
    Ignite's attributes (``Accumulator.flat``): ``_sums``, one float64 ``(5, K)``
    tensor (:class:`ranking_plugins.totals.Totals`), and ``_exposure``, on ``device``.
    """

    _metrics: ClassVar[tuple[str, ...]] = ()
    required_output_keys = ("y_pred", "y")
    _state_dict_all_req_keys: tuple[str, ...] = ("_sums",)
    #: exposure metrics only: Σp, Σp², Σlog(1 - p) per k and item, then the
    #: number of queries, flat (``Accumulator.flat``); an empty tensor otherwise
    _exposure: Tensor

    def __init__(
        self,
        top_k: TopK = 10,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = identity,
        device: str | torch.device = CPU,
        skip_unrolling: bool = False,
        *,
        metrics: Sequence[str] | None = None,
        metrics_result_mode: str | None = None,
        **options: Unpack[IgniteOptions],
    ) -> None:
        # Every keyword a constructor does not name ends up here (the subclasses
        # hand on their ``**options``): refuse what the public class does not take.
        given = list(options)
        if metrics is not None:
            given.append("metrics")
        if metrics_result_mode is not None:
            given.append("metrics_result_mode")
        refuse_unknown(type(self), given)
        keep_per_query = options.pop("keep_per_query", False)
        if not isinstance(keep_per_query, bool):
            raise TypeError(f"`keep_per_query` must be a bool, got {keep_per_query!r}")
        self.keep_per_query = keep_per_query
        check_top_k(top_k)
        self._request = RankingRequest.create(
            self._metrics if metrics is None else metrics,
            top_k,
            options_of(ignore_zero_hits, options),
            items=ItemInputs.create(**{n: options[n] for n in ITEM_KEYWORDS if n in options}),  # type: ignore[literal-required]
        )
        self._request.check_exposure_size(type(self).__name__)
        self.top_k: list[int] | None = None if self._request.ks is None else list(self._request.ks)
        self.ignore_zero_hits = ignore_zero_hits
        if not isinstance(skip_unrolling, bool):
            raise TypeError(f"`skip_unrolling` must be a bool, got {skip_unrolling!r}")
        self._unroll = not skip_unrolling
        base_kwargs: dict[str, Any] = {}
        if "skip_unrolling" in _METRIC_INIT:
            base_kwargs["skip_unrolling"] = skip_unrolling
        if metrics_result_mode is not None and "metrics_result_mode" in _METRIC_INIT:
            base_kwargs["metrics_result_mode"] = metrics_result_mode
        super().__init__(output_transform, device=device, **base_kwargs)
        if self._request.identities:  # the item inputs live on the metric's device
            self._request = dataclasses.replace(
                self._request, items=self._request.items.to(self._device)
            )
            # a checkpoint keeps the exposure too (only these metrics have one)
            self._state_dict_all_req_keys = ("_sums", "_exposure")

    @property
    def keys(self) -> tuple[str, ...]:
        """The result keys, in output order (``"ndcg@5"``, ``"ndcg@10"``, ...)."""
        return self._request.keys

    def attach(
        self, engine: Any, name: str, usage: str | MetricUsage = EpochWise.usage_name
    ) -> None:
        """Ignite's ``attach``, refusing a key another metric on ``engine`` also writes.

        Raises ValueError naming both metrics and the key (Ignite would let one
        value silently replace the other in ``engine.state.metrics``).
        """
        refuse_shared_keys(engine, self, name)
        super().attach(engine, name, usage)

    def started(self, engine: Any) -> None:
        """Ignite's ``started`` (a reset), after checking the keys again.

        A metric attached after this one (one of another library, say) is only
        seen here, before the first batch rather than after the last.
        """
        refuse_shared_keys(engine, self, None)
        super().started(engine)

    @reinit__is_reduced
    def reset(self) -> None:
        empty = Accumulator.empty(self._request, self.keep_per_query, self._device)
        self._sums, self._exposure = empty.flat()
        self._per_query: list[Tensor] = []

    def _kept(self) -> Accumulator:
        """The states as one record (views of them; the per-query values of this process)."""
        per_query = None
        if self.keep_per_query:
            width = len(self._request.query_keys)
            empty = torch.empty(0, width, dtype=torch.float64, device=self._device)
            per_query = torch.cat([empty, *self._per_query])
        return Accumulator.from_flat(self._request, self._sums, self._exposure, per_query)

    @reinit__is_reduced
    def update(self, output: Any) -> None:
        """Add one batch: ``(y_pred, y)``, ``(y_pred, y, mask)`` or a dict (see the module)."""
        y_pred, y, mask, indexes = unpack(output, type(self).__name__)
        request = self._request
        if indexes is None:
            check_same_shape(y_pred, y, request.options.target_format)
        # The tensors go to the kernel as they are, so that several metrics on one
        # engine find this batch's ranking in the kernel's last-batch cache.
        judged = judged_of(output, type(self).__name__)
        evaluation = request.evaluate(y_pred, y, indexes=indexes, mask=mask, judged=judged)
        batch = Accumulator.of(evaluation, request, self.keep_per_query)
        sums, exposure = batch.flat()
        # Not in place: a state_dict taken (or loaded) mid-epoch holds this very
        # tensor, and must not change under the caller as later batches come.
        self._sums = self._sums + sums.to(self._device)
        self._exposure = self._exposure + exposure.to(self._device)
        if batch.per_query is not None:
            self._per_query.append(batch.per_query.to(self._device))

    def compute_per_query(self) -> dict[str, Tensor]:
        """Every query's value per result key, ``{"ndcg@10": (Q,) float64, ...}``.

        Needs ``keep_per_query=True``. With several processes every process
        must call it (it gathers with ``ignite.distributed``): the values come
        in update order, process 0's queries, then process 1's, and so on. A
        query that does not count (skipped as empty) is NaN. Pass two models'
        values to :func:`ranking_plugins.compare.compare` to test the
        difference. The per-query values are not part of ``state_dict``.
        """
        if not self.keep_per_query:
            raise RuntimeError(
                f"{type(self).__name__}.compute_per_query needs keep_per_query=True "
                "in the constructor (per-query values are not kept by default)"
            )
        width = len(self._request.query_keys)
        local = self._kept().per_query
        assert local is not None  # kept: checked above
        if idist.get_world_size() > 1:
            sizes = torch.as_tensor(idist.all_gather(local.shape[0])).tolist()
            parts = idist.all_gather_tensors_with_shapes(local, [[int(n), width] for n in sizes])
            local = torch.cat([part.to(local.device) for part in parts])
        return dict(zip(self._request.query_keys, local.unbind(1), strict=True))

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Ignite's ``load_state_dict``; the sums are then checked and put on ``device``."""
        super().load_state_dict(state_dict)
        sums = self._sums
        expected = (ROWS, len(self._request.query_keys))
        if not isinstance(sums, Tensor) or tuple(sums.shape) != expected:
            shape = tuple(sums.shape) if isinstance(sums, Tensor) else type(sums).__name__
            self.reset()
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the saved sums must have shape "
                f"{expected} (keys {list(self._request.query_keys)}), got {shape}; was the state "
                "saved from a metric with other metrics or ks?"
            )
        self._sums = sums.to(self._device, torch.float64)
        exposure, expected_size = self._exposure, Accumulator.exposure_size(self._request)
        if not isinstance(exposure, Tensor) or exposure.shape != (expected_size,):
            shape = tuple(exposure.shape) if isinstance(exposure, Tensor) else type(exposure)
            self.reset()
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the saved exposure must have "
                f"{expected_size} entries (3 x {len(self._request.ks or ())} ks x N items + 1), "
                f"got shape {shape}; was it saved from a metric with other ks or items?"
            )
        self._exposure = exposure.to(self._device, torch.float64)

    def iteration_completed(self, engine: Any) -> None:
        """Pass the (transformed) engine output to :meth:`update`.

        Unlike Ignite's default this keeps ``mask`` and ``indexes`` of a dict
        output. Two lists of per-query 1-D tensors ``([y_pred_1, ...], [y_1, ...])``
        are unrolled into one update per query (lists may then have different
        lengths), unless ``skip_unrolling=True``.
        """
        output = self._output_transform(engine.state.output)
        if self._unroll and is_list_pair(output):
            y_preds, ys = output
            if len(y_preds) != len(ys):
                raise ValueError(
                    f"{type(self).__name__}: unrolled engine output needs as many `y` as "
                    f"`y_pred` tensors, got {len(y_preds)} and {len(ys)}"
                )
            for y_pred, y in zip(y_preds, ys, strict=True):
                self.update((y_pred.unsqueeze(0), y.unsqueeze(0)))
        else:
            self.update(output)

    def _means(self) -> Tensor:
        """Mean per result key (NaN where no query counted); raises before any counted query.

        The catalogue-level metrics come from the accumulated exposure.
        """
        kept = self._kept()
        if not kept.seen:
            # Ignite's message first (its metrics raise the same error), then ours
            raise NotComputableError(
                f"{type(self).__name__} must have at least one example. No query was "
                "counted before `compute` (with ignore_zero_hits=True, queries without "
                "a relevant item do not count)"
            )
        return kept.values(self._request)

    @sync_all_reduce("_sums", "_exposure")
    def compute(self) -> Any:
        """A list of floats in ascending k order; a float when there is no k.

        Metrics that read the whole list (``RPrecision``, ``MeanRank``,
        ``AUC``), and any metric with ``top_k=None``, have no k axis, so they
        return one float rather than a list of one.
        """
        values: list[float] = self._means().tolist()
        per_k = result_columns(self._request.metrics[0], self._request.ks)[0][0] is not None
        return values if per_k else values[0]
