"""Each query's value of every metric at every k, read off a batch's rank statistics.

:func:`read_metrics` applies the formulas of :data:`~ranking_plugins.metrics.METRICS`
to the statistics of a :class:`ranking_plugins.kernel.RankedBatch` (made by
:func:`ranking_plugins.kernel.rank_inputs`), part by part, then
``empty_target_action`` once on the whole (queries, results) table; the totals
(:mod:`ranking_plugins.totals`) take that table whole.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ranking_plugins.kernel import (
    NO_ITEM_INPUTS,
    Cutoff,
    Exposure,
    ItemInputs,
    ListStats,
    RankedBatch,
    TopItems,
    Unranked,
    broadcast_shape,
    intent_stats,
)
from ranking_plugins.metrics import (
    DEFAULT_OPTIONS,
    Metric,
    MetricValue,
    rank_depth,
    result_columns,
)
from ranking_plugins.options import Options


@dataclass(frozen=True)
class PerQuery:
    """Per-query values of one metric at one k; ``counted`` is False for skipped queries."""

    values: Tensor  # (Q,) float64, NaN where not counted
    counted: Tensor  # (Q,) bool


class ResultTable(Mapping[str, PerQuery]):
    """Every result of one read as two (Q, K) matrices, a column per key in order:
    each key's :class:`PerQuery` is a view of its column, made when read, and the
    totals take the matrices whole (:func:`result_matrices`)."""

    def __init__(
        self,
        keys: tuple[str, ...],
        values: Tensor,
        counted: Tensor | None,
        every_counted: bool = False,
    ) -> None:
        self.keys_in_order = keys
        self.per_query = values  # (Q, K) float64, NaN where not counted
        #: ``counted`` is True everywhere (known without reading it): a mean needs no mask
        self.every_counted = every_counted
        assert counted is not None or every_counted, "a table counts its queries"
        self._counted = counted
        self._column = {key: column for column, key in enumerate(keys)}

    @property
    def counted(self) -> Tensor:
        """(Q, K) bool; where every query counts, made when first read (a mean does not)."""
        if self._counted is None:
            self._counted = torch.ones(
                self.per_query.shape, dtype=torch.bool, device=self.per_query.device
            )
        return self._counted

    def __getitem__(self, key: str) -> PerQuery:
        column = self._column[key]
        return PerQuery(self.per_query[:, column], self.counted[:, column])

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys_in_order)

    def __len__(self) -> int:
        return len(self.keys_in_order)


def result_matrices(
    results: Mapping[str, PerQuery], keys: tuple[str, ...]
) -> tuple[Tensor, Tensor]:
    """(values, counted) (Q, len(keys)) of ``keys``: a table's own matrices when it holds
    those keys in that order, else its columns stacked."""
    if isinstance(results, ResultTable) and results.keys_in_order == keys:
        return results.per_query, results.counted
    values = torch.stack([results[key].values for key in keys], dim=1)
    counted = torch.stack([results[key].counted for key in keys], dim=1)
    return values, counted


@dataclass(frozen=True)
class Evaluation:
    results: Mapping[str, PerQuery]
    #: (Q,) float64: R, the weight of ``weighted=True`` (:attr:`relevant_count`); or a
    #: function giving it, called when first read (counting R is a pass over dense
    #: targets that the metrics may not have needed)
    relevant_count_of: Tensor | Callable[[], Tensor]
    #: the batch's item exposure, when a catalogue-level metric was asked
    exposure: Exposure | None = None

    @property
    def relevant_count(self) -> Tensor:
        """(Q,) float64: R, the weight of ``weighted=True``."""
        if not isinstance(self.relevant_count_of, Tensor):
            object.__setattr__(self, "relevant_count_of", self.relevant_count_of())
        assert isinstance(self.relevant_count_of, Tensor)
        return self.relevant_count_of


def read_metrics(
    ranked: RankedBatch | ListStats,
    metrics: Sequence[Metric],
    ks: tuple[int, ...] | None,
    options: Options = DEFAULT_OPTIONS,
    items: ItemInputs = NO_ITEM_INPUTS,
    intents: Tensor | None = None,
) -> Evaluation:
    """Every metric at every k, per query, from statistics at least ``rank_depth`` deep.

    With a catalogue-level metric, also the batch's :class:`Exposure`
    (``items``: the item inputs of the exposure metrics, on the statistics' device).
    ``intents``: (Q, N, S) bool, each item's relevance per subtopic, read by the
    diversity measures (from whole ranked lists that name their items).
    """
    if not isinstance(ranked, RankedBatch):  # the statistics of one whole batch
        device = ranked.num_ranked.device
        ranked = RankedBatch(ranked.num_ranked.shape[0], device, ((slice(None), ranked),))
    exposures: list[Exposure] = []
    depth = rank_depth(metrics, ks)
    # one part (the whole batch): R is counted only if read (Evaluation.relevant_count);
    # several: each part's R now, so that no part's statistics outlive its reading
    whole = len(ranked.parts) == 1 and isinstance(ranked.parts[0][0], slice)
    read = [
        (
            queries,
            _read_part(
                stats.rank(depth) if isinstance(stats, Unranked) else stats,
                metrics,
                ks,
                options,
                items,
                exposures,
                later=whole,
                intents=None if intents is None else intents[queries],
            ),
        )
        for queries, stats in ranked.parts
    ]
    exposure = None
    for part_exposure in exposures:
        exposure = part_exposure if exposure is None else exposure.merge(part_exposure)
    relevant_count: Tensor | Callable[[], Tensor]
    if len(read) == 1 and isinstance(read[0][0], slice):  # one part: the whole batch
        values, relevant_count = read[0][1]
    else:
        values = {}
        counts = torch.zeros(ranked.num_queries, dtype=torch.float64, device=ranked.device)
        relevant_count = counts
        for queries, (part_values, part_relevant) in read:
            assert isinstance(part_relevant, Tensor)  # counted by each part (not ``later``)
            counts[queries] = part_relevant
            for name, (value, defined) in part_values.items():
                if name not in values:
                    shape = (ranked.num_queries, value.shape[1])
                    values[name] = (
                        torch.zeros(shape, dtype=torch.float64, device=ranked.device),
                        torch.zeros(shape, dtype=torch.bool, device=ranked.device),
                    )
                values[name][0][queries] = value
                values[name][1][queries] = defined
    per_query_metrics: list[Metric] = []
    blocks: list[MetricValue] = []
    for metric in metrics:
        if metric.value is None:  # catalogue-level: from the exposure, at the end
            continue
        if metric.name in values:
            blocks.append(values[metric.name])
        else:  # no part (no query)
            width = len(result_columns(metric, ks))
            value = torch.zeros(0, width, dtype=torch.float64, device=ranked.device)
            blocks.append((value, value.bool()))
        per_query_metrics.append(metric)
    # every metric at every k as one (Q, columns) matrix: the empty-target action is a few
    # operations a call, not a few per metric (on an accelerator each is a kernel launch)
    table = _empty_action_table(
        per_query_metrics, blocks, ks, options, ranked.num_queries, ranked.device
    )
    return Evaluation(table, relevant_count, exposure)


def read_catalogue(
    exposure: Exposure, metrics: Sequence[Metric], ks: tuple[int, ...]
) -> dict[str, Tensor]:
    """The catalogue-level metrics at every k from accumulated exposure (NaN without queries)."""
    k = torch.tensor(ks, dtype=torch.float64, device=exposure.sums.device)
    values: dict[str, Tensor] = {}
    for metric in metrics:
        if metric.catalogue is None:
            continue
        value = metric.catalogue(exposure, k)
        value = torch.where(exposure.queries > 0, value, torch.nan)
        for column, (_, key) in enumerate(result_columns(metric, ks)):
            values[key] = value[column]
    return values


def _read_part(
    stats: ListStats,
    metrics: Sequence[Metric],
    ks: tuple[int, ...] | None,
    options: Options,
    items: ItemInputs = NO_ITEM_INPUTS,
    exposures: list[Exposure] | None = None,
    later: bool = False,
    intents: Tensor | None = None,
) -> tuple[dict[str, MetricValue], Tensor | Callable[[], Tensor]]:
    """(value, defined) (Q, columns) of every metric by name, and R, for one part.

    ``later``: R may be a function that counts it, where no metric read it
    (:meth:`ListStats.relevant_count_later`).

    With a catalogue-level metric, the part's :class:`Exposure` is appended to ``exposures``.
    """
    num_queries = stats.num_ranked.shape[0]
    device = stats.num_ranked.device
    adaptive_k = options.adaptive_k

    def at_k() -> Cutoff:
        # built on the host and copied without waiting on the device
        assert ks is not None
        k = torch.tensor(ks, dtype=torch.float64).to(device, non_blocking=True)
        return stats.at(k.expand(num_queries, len(ks)), adaptive_k, deepest=max(ks))

    builders: dict[str, Callable[[], Cutoff]] = {
        "k": at_k,
        "relevant_count": lambda: stats.at(stats.relevant_count.unsqueeze(1), adaptive_k),
        # the list's end made only when read (an operation the calls at k do not need)
        "whole_list": lambda: stats.at(stats.num_ranked.unsqueeze(1), adaptive_k, whole_list=True),
    }
    # each cutoff built once, when a metric reads it: a Cutoff caches what it computes,
    # so two equal ones (the k of top_k=None is the whole list) would compute it twice
    cutoffs: dict[str, Cutoff] = {}

    def cutoff(kind: str) -> Cutoff:
        kind = "whole_list" if kind == "k" and ks is None else kind
        if kind not in cutoffs:
            cutoffs[kind] = builders[kind]()
        return cutoffs[kind]

    if any(metric.exposure for metric in metrics):
        assert ks is not None, "the request asks a cutoff of exposure metrics"
        top_list = stats.top_list
        if top_list is None or top_list.items is None or stats.num_items is None:
            raise ValueError("the exposure metrics need a ranking that lists the items")
        cutoffs_k = torch.tensor(ks, dtype=torch.float64).to(device, non_blocking=True)
        top_items = TopItems(top_list, stats.num_ranked, stats.num_items, cutoffs_k, items)
        cutoff("k").top_items = top_items
        if exposures is not None and any(metric.catalogue for metric in metrics):
            exposures.append(top_items.exposure())
    if any(metric.intents for metric in metrics):
        top_list = stats.top_list
        if intents is None or top_list is None or top_list.items is None:
            raise ValueError("the diversity measures need subtopic judgments and ranked items")
        found = intent_stats(top_list, intents, options.alpha)
        for metric in metrics:
            if metric.intents:
                cutoff(metric.cutoff).intents = found
    stats.expect(
        [metric.name for metric in metrics if metric.value is not None],
        deepest=max(ks) if ks else None,
    )
    values = read_values(metrics, cutoff, options)
    return values, stats.relevant_count_later() if later else stats.relevant_count


#: the stacked ratios' shape, numerator and denominator dtypes and devices
_GroupKey = tuple[torch.Size, torch.dtype, torch.dtype, torch.device, torch.device]


def read_values(
    metrics: Sequence[Metric], cutoff: Callable[[str], Cutoff], options: Options
) -> dict[str, MetricValue]:
    """(value, defined) of every per-query metric by name, at its cutoff.

    The metrics given as ratios (``Metric.ratio``) of one shape and dtypes are divided
    together: one comparison, division and ``where`` over their stacked parts instead of
    one each (on an accelerator each is a kernel launch); each quotient is the same
    division of the same two numbers, so the same bits.
    """
    values: dict[str, MetricValue] = {}
    groups: dict[_GroupKey, list[tuple[str, Tensor, Tensor, Tensor | None]]] = {}
    for metric in metrics:
        if metric.value is None:
            continue
        if metric.ratio is None:
            values[metric.name] = metric.value(cutoff(metric.cutoff), options)
            continue
        numerator, denominator, defined = metric.ratio(cutoff(metric.cutoff), options)
        shape = broadcast_shape(numerator.shape, denominator.shape)
        key = (shape, numerator.dtype, denominator.dtype, numerator.device, denominator.device)
        groups.setdefault(key, []).append((metric.name, numerator, denominator, defined))
    for (shape, *_), group in groups.items():
        if len(group) == 1:
            name, numerator, denominator, defined = group[0]
            positive = denominator > 0
            value = torch.where(positive, numerator / denominator, 0.0)
            values[name] = (value, positive if defined is None else defined)
            continue
        # a part that two metrics share (recall's and map's R) is expanded once
        expanded: dict[int, Tensor] = {}
        numerators = torch.stack([_expanded(part[1], shape, expanded) for part in group])
        denominators = torch.stack([_expanded(part[2], shape, expanded) for part in group])
        positives = denominators > 0
        quotients = torch.where(positives, numerators / denominators, 0.0)
        # ``denominator > 0`` is read only by a metric defined where it holds (ndcg)
        read = any(part[3] is None for part in group)
        rows: list[Tensor | None] = list(positives.unbind()) if read else [None] * len(group)
        for (name, _, _, defined), value, row in zip(group, quotients.unbind(), rows, strict=True):
            shown = defined if defined is not None else row
            assert shown is not None
            values[name] = (value, shown)
    return values


def _expanded(tensor: Tensor, shape: torch.Size, made: dict[int, Tensor]) -> Tensor:
    """``tensor`` broadcast to ``shape`` (no operation where it has that shape), once for
    each tensor (``made``: those expanded already, by ``id``, while the tensors live)."""
    if tensor.shape == shape:
        return tensor
    if id(tensor) not in made:
        made[id(tensor)] = tensor.expand(shape)
    return made[id(tensor)]


class EmptyQueryError(ValueError):
    """``empty_target_action="error"`` met a query where ``metric`` is undefined.

    ``query`` is its position in the batch; a caller that knows the queries by
    other names (the command: by query id) reads it and says so itself.
    """

    def __init__(
        self, metric: str, query: int, name: str | None = None, lacks: str = "relevant item"
    ) -> None:
        self.metric = metric
        self.query = query
        self.lacks = lacks
        shown = repr(name) if name is not None else str(query)
        super().__init__(
            f"`empty_target_action='error'`: query {shown} has no {lacks} "
            f"(or none ranked), so {metric} is undefined for it"
        )


def _empty_action_table(
    metrics: Sequence[Metric],
    blocks: Sequence[MetricValue],
    ks: tuple[int, ...] | None,
    options: Options,
    num_queries: int,
    device: torch.device,
) -> ResultTable:
    """The metrics' (value, defined) blocks (Q, columns), in order, as one
    :class:`ResultTable` after ``empty_target_action``."""
    keys = tuple(key for metric in metrics for _, key in result_columns(metric, ks))
    if not blocks:  # only catalogue-level metrics: nothing per query
        none = torch.zeros(num_queries, 0, dtype=torch.float64, device=device)
        return ResultTable(keys, none, none.bool())
    # one block is the table itself: no copy to make
    value = blocks[0][0] if len(blocks) == 1 else torch.cat([block[0] for block in blocks], dim=1)
    defined = blocks[0][1] if len(blocks) == 1 else torch.cat([b[1] for b in blocks], dim=1)
    action = options.empty_target_action
    # per column: the value of an undefined query, and whether that query counts
    fills: list[float] = []
    counts: list[bool] = []
    for metric, block in zip(metrics, blocks, strict=True):
        if metric.exposure:
            # no relevance involved: a query counts unless its top k is too short
            # for the metric (no item; one item for diversity), and then is left out
            fill, count = math.nan, False
        elif action in ("error", "skip"):
            fill, count = math.nan, False
        else:
            fill, count = metric.empty_value(action), True
        fills += [fill] * block[0].shape[1]
        counts += [count] * block[0].shape[1]
    if action == "error" and not bool(defined.all()):
        for metric, (_, block_defined) in zip(metrics, blocks, strict=True):
            if not metric.exposure:
                _check_defined(metric, block_defined, options)
    if action == "error" and not any(m.exposure for m in metrics):
        return ResultTable(keys, value, defined)  # every query defined
    if all(_same_float(fill, fills[0]) for fill in fills):
        value = torch.where(defined, value, fills[0])
    else:
        fill_row = torch.tensor(fills, dtype=value.dtype).to(value.device, non_blocking=True)
        value = torch.where(defined, value, fill_row)
    if all(counts):
        return ResultTable(keys, value, None, every_counted=True)
    if any(counts):
        counting = torch.tensor(counts).to(defined.device, non_blocking=True)
        return ResultTable(keys, value, defined | counting)
    return ResultTable(keys, value, defined)


def _check_defined(metric: Metric, defined: Tensor, options: Options) -> None:
    """``empty_target_action="error"``: raise for the first query where ``metric`` is
    undefined, at the first of its ks that has one."""
    if not bool(defined.all()):
        lacks = "relevant item" if metric.empty_lacks is None else metric.empty_lacks(options)
        column = (~defined).any(dim=0).nonzero()[0, 0]
        query = int((~defined[:, column]).nonzero()[0, 0])
        raise EmptyQueryError(metric.name, query, lacks=lacks)


def _same_float(a: float, b: float) -> bool:
    """Whether two fill values are the same number (NaN is NaN)."""
    return a == b or (math.isnan(a) and math.isnan(b))


__all__ = [
    "EmptyQueryError",
    "Evaluation",
    "PerQuery",
    "ResultTable",
    "read_catalogue",
    "read_metrics",
    "result_matrices",
]
