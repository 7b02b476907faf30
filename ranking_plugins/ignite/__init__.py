"""PyTorch-Ignite metrics: drop-in replacements for ``ignite.metrics.rec_sys``.

Switch ``from ignite.metrics.rec_sys import HitRate, NDCG`` to
``from ranking_plugins.ignite import HitRate, NDCG``: the constructor
arguments, their defaults and the returned lists are Ignite's, the numbers are
the same on inputs without tied scores, and every metric and option of this
package comes on top (``MRR``, ``MAP``, ``Precision``, ..., ``ties``, masks,
item-index and grouped targets, several metrics from one ranking with
:class:`RankingMetrics`).

>>> import torch
>>> from ignite.engine import Engine
>>> from ranking_plugins.ignite import MRR, RankingMetrics
>>> evaluator = Engine(lambda engine, batch: batch)
>>> MRR(top_k=[1, 2, 3, 4]).attach(evaluator, "mrr")
>>> RankingMetrics(["hit_rate", "ndcg"], top_k=[1, 3]).attach(evaluator, "ranking")
>>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
>>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
>>> state = evaluator.run([(y_pred, y)])
>>> state.metrics["mrr"]
[0.5, 0.75, 0.75, 0.75]
>>> {key: round(value, 4) for key, value in state.metrics.items() if key != "mrr"}
{'hit_rate@1': 0.5, 'hit_rate@3': 1.0, 'ndcg@1': 0.5, 'ndcg@3': 0.6934}

What every metric here reads from the engine's output (after
``output_transform``):

* ``(y_pred, y)``: scores and relevance, as Ignite's own metrics;
* ``(y_pred, y, mask)``: ``mask`` is a bool tensor shaped like ``y_pred``,
  False for items that were not candidates (already-seen items, say);
* a dict with the keys ``"y_pred"`` and ``"y"`` and optionally ``"mask"``,
  ``"indexes"`` and ``"judged"`` (which items carry a judgment, read by bpref,
  infap, unj, ...; see ``rank_metrics``) (other keys are ignored).

``y_pred`` is what the rest of the package calls ``preds`` and ``y`` its
``target``; every layout of :func:`ranking_plugins.rank_metrics` works:
dense grades ``(Q, N)``, relevant item ids ``(Q,)`` or ``(Q, T)`` padded
with ``-1``, or grouped ``(M,)`` lists with ``indexes``. For full-catalogue
evaluation ``y_pred`` may be an :class:`ranking_plugins.EmbeddingScores`
(query and item embeddings, never turned into a score matrix) with item-id
targets: return ``(EmbeddingScores(user_emb, item_emb, exclude=seen), y)``
from the evaluator's process function. In the grouped
layout every batch must hold complete queries: a query whose items arrive in
two batches counts as two queries (the per-query values are added up as
batches come, nothing is kept to regroup later).

State is four float64 rows per result (see :class:`ranking_plugins.totals.Totals`)
on ``device``, summed across processes by Ignite's ``sync_all_reduce``.
``update`` never reads a value back to the host when the metric lives on the
inputs' device and ``validate_args=False``; except in the grouped layout, where
turning flat lists into padded rows needs the number of queries and the
longest list (one synchronisation per batch; the TorchMetrics adapter keeps
grouped input until ``compute`` instead).

Several metrics attached to one engine rank each batch once when they share
the ranking options (``ties``, ``relevance_threshold``, ``gain_function``,
``target_format``, ``validate_args``) and the first one attached asks for the
largest k. With Ignite's own defaults :class:`NDCG` (grade >= 1 is relevant)
and :class:`HitRate` / :class:`MRR` (grade > 0) read the targets under
different rules and so rank separately; on binary or integer targets both
rules agree, and passing the same ``relevance_threshold`` to every metric, or
using one :class:`RankingMetrics`, gives one ranking per batch.

Where this module deliberately differs from Ignite:

* Ties: ``ties="average"`` (the default) gives the expected value over the
  orders of tied items; Ignite takes ``torch.topk``'s order (HitRate, MRR,
  MAP) or a stable sort (NDCG, the same as ``ties="first"``). Without ties
  the numbers are the same.
* A k larger than the number of items reads the list as padded with
  non-relevant items (trec_eval); Ignite's HitRate, MRR and MAP raise there.
* ``top_k`` may be any sequence of ints (repeats are dropped) or None (the
  whole list; ``compute()`` then returns a float, as the whole-list metrics
  ``RPrecision``, ``MeanRank`` and ``AUC`` always do).
* Sums are float64 (Ignite's are float32), so long runs can differ from
  Ignite's in the last float32 digits, ours being the exact ones.
* Besides ``(y_pred, y)``, a 3-tuple ``(y_pred, y, mask)`` and the ``mask``
  and ``indexes`` keys of a dict output are read; Ignite keeps only
  ``y_pred`` and ``y`` of a dict.
* NDCG: negative grades earn no gain, and a query whose ideal DCG is 0 counts
  as having no relevant item (this matters only with ``relevance_threshold``
  at or below 0).
* :class:`RankingMetrics` puts only its flat keys into
  ``engine.state.metrics`` (``metrics_result_mode="flatten"``; Ignite's
  default for dict results is ``"both"``).
* Two metrics that would write one key of ``engine.state.metrics`` (two
  :class:`RankingMetrics`, masked and unmasked, both writing ``"mrr@10"``;
  two metrics under one attach name) raise ValueError naming both and the
  key, at ``attach`` or when the run starts; Ignite lets the value computed
  last silently replace the other. ``RankingMetrics(prefix_keys=True)``
  writes ``"<attach name>/mrr@10"`` instead.
* The state is one tensor, ``_sums``: a ``state_dict`` of Ignite's own
  metrics cannot be loaded into these (nor the reverse).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor
from typing_extensions import Unpack

try:
    import ignite.distributed as idist
    from ignite.exceptions import NotComputableError
    from ignite.metrics.metric import (
        EpochWise,
        Metric,
        MetricUsage,
        reinit__is_reduced,
        sync_all_reduce,
    )
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ranking_plugins.ignite needs PyTorch-Ignite: "
        'pip install "ranking-plugins[ignite]" (or pip install pytorch-ignite)'
    ) from error

from ranking_plugins.accumulator import Accumulator
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

__all__ = [
    "AUC",
    "F1",
    "MAP",
    "MRR",
    "NDCG",
    "BaseRankingMetric",
    "FallOut",
    "HitRate",
    "IgniteOptions",
    "MeanRank",
    "PackageOptions",
    "Precision",
    "RPrecision",
    "RankingMetrics",
    "Recall",
]


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


_CPU = torch.device("cpu")


def _identity(output: Any) -> Any:
    return output


def _attached(engine: Any) -> list[tuple[Metric, str]]:
    """``(metric, attach name)`` of every metric attached to ``engine``, in any usage.

    Read from the ``completed`` handlers that ``Metric.attach`` registers (with
    the name as their last argument); Ignite keeps no other list of them.
    """
    found: dict[tuple[int, str], tuple[Metric, str]] = {}
    for handlers in getattr(engine, "_event_handlers", {}).values():
        for handler, args, _ in handlers:
            parent = getattr(handler, "_parent", None)  # a filtered event wraps the handler
            method = parent() if parent is not None else handler
            owner = getattr(method, "__self__", None)
            name = args[-1] if args else None
            if (
                isinstance(owner, Metric)
                and getattr(method, "__name__", None) == "completed"
                and isinstance(name, str)
            ):
                found.setdefault((id(owner), name), (owner, name))
    return list(found.values())


def _written_keys(metric: Metric, name: str) -> tuple[str, ...]:
    """The ``engine.state.metrics`` keys ``metric`` attached as ``name`` writes.

    Only the attach name for a metric of another library: the keys of its dict
    result are not known before it is computed.
    """
    return metric._written_keys(name) if isinstance(metric, BaseRankingMetric) else (name,)


def _describe_writer(metric: Metric, name: str) -> str:
    return f"{type(metric).__name__} attached as {name!r}"


def _refuse_shared_keys(engine: Any, metric: BaseRankingMetric, name: str | None) -> None:
    """A ValueError when ``metric`` and another metric on ``engine`` write the same key.

    Ignite lets the metric that completes last overwrite the other's value in
    ``engine.state.metrics``; two ``RankingMetrics`` (masked and unmasked, say)
    both write ``"mrr@10"``, and nothing shows which one is left. ``name`` is
    the name ``metric`` is being attached under (None: already attached).
    """
    writers = _attached(engine)
    if name is not None and all(m is not metric or n != name for m, n in writers):
        writers.append((metric, name))
    owners: dict[str, tuple[Metric, str]] = {}
    # this metric's own keys first, so that the message names it first
    for writer, attached in sorted(writers, key=lambda w: w[0] is not metric):
        for key in _written_keys(writer, attached):
            first = owners.setdefault(key, (writer, attached))
            same = first[0] is writer and first[1] == attached
            if same or (writer is not metric and first[0] is not metric):
                continue
            # a RankingMetrics writing its flat keys can put its attach name in them
            prefixable = [
                w for w in (first, (writer, attached)) if isinstance(w[0], RankingMetrics)
            ]
            prefixable = [w for w in prefixable if key in w[0]._flat_keys(w[1])]
            advice = (
                f"pass prefix_keys=True to the {_describe_writer(*prefixable[0])} (it then "
                f"writes {prefixable[0][1] + '/' + key!r}), or metrics_result_mode='named' "
                "(its dict under the attach name only)"
                if prefixable
                else "attach them under different names"
            )
            raise ValueError(
                f"{_describe_writer(*first)} and {_describe_writer(writer, attached)} both "
                f"write {key!r} into engine.state.metrics, so one value would silently replace "
                f"the other; {advice}"
            )


class BaseRankingMetric(Metric):
    """Shared base of every metric of this module: state, sync and output parsing.

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
        output_transform: Callable[[Any], Any] = _identity,
        device: str | torch.device = _CPU,
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

    def _written_keys(self, name: str) -> tuple[str, ...]:
        """The keys of ``engine.state.metrics`` this metric writes when attached as ``name``."""
        return (name,)

    def attach(
        self, engine: Any, name: str, usage: str | MetricUsage = EpochWise.usage_name
    ) -> None:
        """Ignite's ``attach``, refusing a key another metric on ``engine`` also writes.

        Raises ValueError naming both metrics and the key (Ignite would let one
        value silently replace the other in ``engine.state.metrics``).
        """
        _refuse_shared_keys(engine, self, name)
        super().attach(engine, name, usage)

    def started(self, engine: Any) -> None:
        """Ignite's ``started`` (a reset), after checking the keys again.

        A metric attached after this one (one of another library, say) is only
        seen here, before the first batch rather than after the last.
        """
        _refuse_shared_keys(engine, self, None)
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


class _AtK(BaseRankingMetric):
    """An @k metric: Ignite's positional arguments, ``top_k=10`` by default."""

    def __init__(
        self,
        top_k: TopK = 10,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = _identity,
        device: str | torch.device = _CPU,
        skip_unrolling: bool = False,
        **options: Unpack[IgniteOptions],
    ) -> None:
        super().__init__(
            top_k, ignore_zero_hits, output_transform, device, skip_unrolling, **options
        )


class _WholeList(BaseRankingMetric):
    """A metric of the whole ranked list: no ``top_k``, ``compute()`` returns a float."""

    def __init__(
        self,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = _identity,
        device: str | torch.device = _CPU,
        skip_unrolling: bool = False,
        **options: Unpack[IgniteOptions],
    ) -> None:
        super().__init__(
            None, ignore_zero_hits, output_transform, device, skip_unrolling, **options
        )


class HitRate(_AtK):
    """Hit rate@k: the fraction of queries with a relevant item in the top k.

    Ignite's ``HitRate`` (``top_k=1`` by default, as there), plus this
    package's options (:class:`IgniteOptions`). ``compute()`` returns a list in
    ascending k order. Under ``ties="average"`` a query's hit is the
    probability that a relevant item lands in the top k.

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> HitRate(top_k=[1, 2, 3, 4], ignore_zero_hits=False).attach(evaluator, "hit_rate")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    >>> evaluator.run([(y_pred, y)]).metrics["hit_rate"]
    [0.0, 0.5, 0.5, 0.5]
    """

    _metrics = ("hit_rate",)

    def __init__(
        self,
        top_k: TopK = 1,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = _identity,
        device: str | torch.device = _CPU,
        skip_unrolling: bool = False,
        **options: Unpack[IgniteOptions],
    ) -> None:
        super().__init__(
            top_k, ignore_zero_hits, output_transform, device, skip_unrolling, **options
        )


class NDCG(BaseRankingMetric):
    """Normalised discounted cumulative gain@k, with Ignite's arguments in Ignite's order.

    ``top_k`` is required and ``relevance_threshold`` defaults to 1.0, as in
    Ignite's ``NDCG``: grades below the threshold earn no gain.
    ``gain_function`` is ``"exp_rank"`` (2^g - 1, Ignite's default, which this class
    keeps; the package's other entry points default to the linear gain) or
    ``"linear_rank"`` (g). A query whose ideal DCG is 0 has no relevant item
    (``ignore_zero_hits``).

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> NDCG(top_k=[1, 2, 3, 4]).attach(evaluator, "ndcg")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    >>> [round(v, 4) for v in evaluator.run([(y_pred, y)]).metrics["ndcg"]]
    [0.0, 0.3869, 0.3869, 0.6509]
    """

    _metrics = ("ndcg",)

    def __init__(
        self,
        top_k: TopK,
        ignore_zero_hits: bool = True,
        relevance_threshold: float | None = 1.0,
        gain_function: str = "exp_rank",
        output_transform: Callable[[Any], Any] = _identity,
        device: str | torch.device = _CPU,
        skip_unrolling: bool = False,
        **options: Unpack[PackageOptions],
    ) -> None:
        super().__init__(
            top_k,
            ignore_zero_hits,
            output_transform,
            device,
            skip_unrolling,
            relevance_threshold=relevance_threshold,
            gain_function=gain_function,
            **options,
        )


class MRR(_AtK):
    """Mean reciprocal rank@k, as Ignite's (0.6) ``MRR``: ``top_k=10`` by default.

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> MRR(top_k=[1, 2, 3, 4]).attach(evaluator, "mrr")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    >>> evaluator.run([(y_pred, y)]).metrics["mrr"]
    [0.5, 0.75, 0.75, 0.75]
    """

    _metrics = ("mrr",)


class MAP(_AtK):
    """Mean average precision@k, as Ignite's (0.6) ``MAP``: ``top_k=10`` by default.

    As there, AP@k divides by min(k, R) (``ap_denominator="min_k_relevant"``,
    RecBole's choice); ``ap_denominator="relevant"`` divides by R (trec_eval's
    ``map_cut``).

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> MAP(top_k=[1, 2, 3, 4]).attach(evaluator, "map")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    >>> [round(v, 4) for v in evaluator.run([(y_pred, y)]).metrics["map"]]
    [0.5, 0.625, 0.625, 0.75]
    """

    _metrics = ("map",)

    def __init__(
        self,
        top_k: TopK = 10,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = _identity,
        device: str | torch.device = _CPU,
        skip_unrolling: bool = False,
        **options: Unpack[IgniteOptions],
    ) -> None:
        options.setdefault("ap_denominator", "min_k_relevant")
        super().__init__(
            top_k, ignore_zero_hits, output_transform, device, skip_unrolling, **options
        )


class Precision(_AtK):
    """Precision@k: relevant items in the top k, divided by k (``adaptive_k`` caps k)."""

    _metrics = ("precision",)


class Recall(_AtK):
    """Recall@k: relevant items in the top k, divided by the query's relevant items."""

    _metrics = ("recall",)


class F1(_AtK):
    """F1@k: 2·hits@k / (k + R), the harmonic mean of precision@k and recall@k."""

    _metrics = ("f1",)


class FallOut(_AtK):
    """Fall-out@k: non-relevant items in the top k over all ranked non-relevant ones.

    Lower is better; a query without a relevant item counts 1 with
    ``ignore_zero_hits=False``.
    """

    _metrics = ("fall_out",)


class RPrecision(_WholeList):
    """R-precision: hits in the top R over R, R the query's number of relevant items."""

    _metrics = ("r_precision",)


class MeanRank(_WholeList):
    """Mean rank of the ranked relevant items (1 = best; lower is better).

    Keep ``ignore_zero_hits=True`` (the default): with False a query without a
    ranked relevant item counts 0, the best value.
    """

    _metrics = ("mean_rank",)


class AUC(_WholeList):
    """Per-query AUC: the fraction of (relevant, non-relevant) pairs ranked in order.

    ``weighted=True`` weights each query by its relevant items (RecBole's GAUC).

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> AUC().attach(evaluator, "auc")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    >>> evaluator.run([(y_pred, y)]).metrics["auc"]
    0.625
    """

    _metrics = ("auc",)


class RankingMetrics(BaseRankingMetric):
    """Several metrics at several ks from one ranking per batch, as one flat dict.

    ``compute()`` returns ``{"mrr@10": float, ..., "auc": float}`` (at-k
    metrics in ascending k, whole-list metrics under their bare name).
    Attached to an engine, every key becomes its own entry of
    ``engine.state.metrics`` (``metrics_result_mode="flatten"``; pass
    ``"both"`` to also keep the dict under the attached name, Ignite's default).
    ``prefix_keys=True`` writes each as ``"<attach name>/mrr@10"``, so that
    two of them (masked and unmasked, say) can share an engine; without it,
    attaching one whose keys another metric on the engine also writes raises
    ValueError.
    A key no query counted for is NaN; ``NotComputableError`` is raised only
    when no key has a counted query.

    >>> import torch
    >>> from ignite.engine import Engine
    >>> evaluator = Engine(lambda engine, batch: batch)
    >>> metrics = RankingMetrics(["mrr", "recall", "auc"], top_k=[1, 2])
    >>> metrics.attach(evaluator, "ranking")
    >>> y_pred = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    >>> y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    >>> evaluator.run([(y_pred, y)]).metrics
    {'mrr@1': 0.5, 'mrr@2': 0.75, 'recall@1': 0.5, 'recall@2': 0.75, 'auc': 0.625}
    """

    def __init__(
        self,
        metrics: str | Sequence[str] = ("hit_rate", "mrr", "ndcg"),
        top_k: TopK = 10,
        ignore_zero_hits: bool = True,
        output_transform: Callable[[Any], Any] = _identity,
        device: str | torch.device = _CPU,
        skip_unrolling: bool = False,
        metrics_result_mode: str = "flatten",
        prefix_keys: bool = False,
        **options: Unpack[IgniteOptions],
    ) -> None:
        if not isinstance(prefix_keys, bool):
            raise TypeError(f"`prefix_keys` must be a bool, got {prefix_keys!r}")
        self.prefix_keys = prefix_keys
        super().__init__(
            top_k,
            ignore_zero_hits,
            output_transform,
            device,
            skip_unrolling,
            metrics=[metrics] if isinstance(metrics, str) else metrics,
            metrics_result_mode=metrics_result_mode,
            **options,
        )

    @sync_all_reduce("_sums", "_exposure")
    def compute(self) -> dict[str, float]:
        """``{"metric@k": mean, ...}``; NaN for a key no query counted for."""
        values: list[float] = self._means().tolist()
        return dict(zip(self._request.keys, values, strict=True))

    def _result_mode(self) -> str:
        return str(getattr(self, "_metrics_result_mode", "flatten"))

    def _flat_keys(self, name: str) -> tuple[str, ...]:
        """The keys written one by one (none with ``metrics_result_mode="named"``)."""
        if self._result_mode() == "named":
            return ()
        return tuple(f"{name}/{key}" if self.prefix_keys else key for key in self.keys)

    def _written_keys(self, name: str) -> tuple[str, ...]:
        named = (name,) if self._result_mode() != "flatten" else ()
        return (*self._flat_keys(name), *named)

    def completed(self, engine: Any, name: str) -> None:
        """Ignite's ``completed``; with ``prefix_keys=True`` each flat key starts with ``name/``."""
        if not self.prefix_keys:
            super().completed(engine, name)
            return
        result = self.compute()
        for key, value in zip(self._flat_keys(name), result.values(), strict=False):
            engine.state.metrics[key] = value
        if self._result_mode() != "flatten":
            engine.state.metrics[name] = result
