"""PyG's ``LinkPred*`` metrics on the rank kernel: state and PyG's glue only.

Each class takes PyG's constructor (``k`` and the class's own arguments,
``weighted`` where PyG has it) plus the package's options by keyword
(:class:`~ranking_plugins.options.Options`), builds one
:class:`~ranking_plugins.request.RankingRequest` and keeps an
:class:`~ranking_plugins.accumulator.Accumulator` in TorchMetrics states
(summed across processes). ``update`` converts PyG's inputs
(:mod:`ranking_plugins.pyg.inputs`) and asks the kernel; the formulas are the
metric table's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.accumulator import Accumulator
from ranking_plugins.kernel import Exposure, ItemInputs
from ranking_plugins.options import Options
from ranking_plugins.per_query import Evaluation
from ranking_plugins.pyg import inputs as I
from ranking_plugins.pyg import ranked as P
from ranking_plugins.request import RankingRequest

try:
    from torchmetrics import Metric
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'ranking_plugins.pyg needs torchmetrics: pip install "ranking-plugins[pyg]"'
    ) from error

#: PyG's conventions where the package's defaults differ: MAP@k divides by min(k, R),
#: NDCG's gain is the weight itself, precision divides by k, and an example without
#: ground truth is left out of the mean
PYG_DEFAULTS: dict[str, Any] = {
    "ap_denominator": "min_k_relevant",
    "gain": "linear",
    "adaptive_k": False,
    "empty_target_action": "skip",
}

EdgeIndex = Tensor | tuple[Tensor, Tensor]


def _options(owner: str, options: Mapping[str, Any]) -> Options:
    return Options.create(owner, **{**PYG_DEFAULTS, **options})


def _check_k(owner: str, k: object) -> int:
    problem = validation.positive_int_problem(k)
    if problem is not None:
        # PyG's words first, then the package's
        raise validation.ArgumentError(
            "k", f"needs to be a positive integer in '{owner}': {problem.text}"
        )
    assert isinstance(k, int)
    return k


class _LinkPredMetric(Metric):
    """The shared state and glue of every ``LinkPred*`` metric."""

    is_differentiable: bool = False
    full_state_update: bool = False
    higher_is_better: bool | None = True
    #: the metric table's name of this metric
    metric: ClassVar[str]
    #: whether PyG's class takes ``weighted``
    weightable: ClassVar[bool] = False

    sums: Tensor
    exposure: Tensor

    def __init__(self, k: int, weighted: bool = False, **options: Any):
        super().__init__()
        owner = type(self).__name__
        self.k = _check_k(owner, k)
        validation.check("weighted", validation.flag_problem(weighted))
        if weighted and not self.weightable:
            raise validation.ArgumentError("weighted", f"is not an argument of {owner}, got True")
        self.weighted = weighted
        self.options = _options(owner, options)
        self.request = self._make_request(self._items())
        sums, exposure = Accumulator.empty(self.request).flat()
        self.add_state("sums", sums, dist_reduce_fx="sum")
        self.add_state("exposure", exposure, dist_reduce_fx="sum")

    # -- what a subclass says --------------------------------------------------------

    def _items(self) -> ItemInputs:
        """The catalogue's item inputs (none for the accuracy metrics)."""
        return ItemInputs.create()

    def _make_request(self, items: ItemInputs) -> RankingRequest:
        return RankingRequest.create(self.metric, self.k, self.options, items=items)

    @property
    def num_items(self) -> int | None:
        """N, where the metric knows its catalogue."""
        return self.request.items.num_items

    # -- PyG's interface -------------------------------------------------------------

    def update(
        self,
        pred_index_mat: Tensor,
        edge_label_index: EdgeIndex,
        edge_label_weight: Tensor | None = None,
    ) -> None:
        """One batch: ``pred_index_mat`` the top item ids of every example, best first
        ``(batch_size, w)`` (read down to ``k``), or a float score matrix
        ``(batch_size, num_items)``; the ground truth as COO edges
        ``(2, E)`` (example, item), with ``edge_label_weight`` ``(E,)`` for a
        weighted metric (weights <= 0 are no ground truth, as in PyG)."""
        validate = self.options.validate_args
        pred = I.check_pred_index_mat(pred_index_mat, self.num_items, validate)
        rows, cols, weight = I.check_edges(
            edge_label_index, edge_label_weight, pred.shape[0], self.num_items, validate
        )
        if self.weighted and weight is None:
            raise validation.ArgumentError(
                "edge_label_weight",
                f"is a required argument for weighted '{type(self).__name__}' metrics",
            )
        weight = weight if self.weighted else None
        self._update_checked(pred, *I.positive_edges(rows, cols, weight))

    def _update_checked(
        self, pred: Tensor, rows: Tensor, cols: Tensor, weight: Tensor | None
    ) -> None:
        evaluation = evaluate_links(self.request, pred, rows, cols, weight)
        if evaluation is not None:
            self._add(Accumulator.of(evaluation, self.request))

    def _add(self, kept: Accumulator) -> None:
        sums, exposure = kept.flat()
        self.sums += sums.to(self.sums.device)
        self.exposure += exposure.to(self.exposure.device)

    def _add_shared(self, kept: Accumulator) -> None:
        """A collection's shared update: what TorchMetrics' ``update`` wrapper records too."""
        self._computed = None
        self._update_count += 1
        self._add(kept)

    def _kept(self) -> Accumulator:
        return Accumulator.from_flat(self.request, self.sums, self.exposure)

    def compute(self) -> Tensor:
        """The mean over the examples that count (float64); 0 before any, as in PyG."""
        value = self._kept().values(self.request)[0]
        return torch.nan_to_num(value, nan=0.0)

    def __repr__(self) -> str:
        weighted = ", weighted=True" if self.weighted else ""
        return f"{type(self).__name__}(k={self.k}{weighted})"


def evaluate_links(
    request: RankingRequest,
    pred: Tensor,
    rows: Tensor,
    cols: Tensor,
    weight: Tensor | None,
    links: P.Links | None = None,
) -> Evaluation | None:
    """The per-example values of ``request``'s accuracy metrics for one update (None: no
    example). A score matrix is ranked as it is; ranked ids are read as the lists they
    are (:mod:`ranking_plugins.pyg.ranked`; ``links``: theirs, when made already)."""
    if pred.shape[0] == 0:
        return None
    if I.is_score_matrix(pred):
        return request.evaluate(pred, I.dense_grades(pred, rows, cols, weight))
    if links is None:
        links = P.Links(pred, rows, cols, request.depth)
    return request.read(P.list_stats(links, weight, request.options.rule, request.depth))


class LinkPredPrecision(_LinkPredMetric):
    """Precision@k: the relevant share of the top k (divided by k).

    >>> import torch
    >>> metric = LinkPredPrecision(k=2)
    >>> metric.update(torch.tensor([[0, 1], [2, 0]]), torch.tensor([[0, 1, 1], [1, 3, 2]]))
    >>> metric.compute()
    tensor(0.5000, dtype=torch.float64)
    """

    metric = "precision"


class LinkPredRecall(_LinkPredMetric):
    """Recall@k: the share of each example's ground truth in its top k.

    ``weighted=True`` (PyG's share of the ground truth's weight) is not in the
    package's metric table yet and is refused.
    """

    metric = "recall"

    def __init__(self, k: int, weighted: bool = False, **options: Any):
        if weighted is True:
            raise validation.ArgumentError(
                "weighted",
                "is not supported by ranking_plugins.pyg.LinkPredRecall yet (the share of "
                "the ground truth's weight in the top k has no entry in the metric table); "
                "use torch_geometric.metrics.LinkPredRecall(weighted=True)",
            )
        super().__init__(k, weighted, **options)


class LinkPredF1(_LinkPredMetric):
    """F1@k: 2·hits / (k + R)."""

    metric = "f1"


class LinkPredMAP(_LinkPredMetric):
    """MAP@k, PyG's convention by default: AP divided by min(k, R).

    ``ap_denominator="relevant"`` divides by R, as trec_eval's ``map_cut`` does.
    """

    metric = "map"


class LinkPredNDCG(_LinkPredMetric):
    """NDCG@k; ``weighted=True``: each ground-truth edge's weight is its gain."""

    metric = "ndcg"
    weightable = True


class LinkPredMRR(_LinkPredMetric):
    """MRR@k: 1 / the rank of the first relevant item within k, else 0."""

    metric = "mrr"


class LinkPredHitRatio(_LinkPredMetric):
    """Hit ratio@k: 1 when a relevant item is in the top k."""

    metric = "hit_rate"


# ---------------------------------------------------------------- item exposure


class _ExposureMetric(_LinkPredMetric):
    """A metric of which items each top k holds (no relevance): ranked ids are read
    as the lists they are (:func:`ranking_plugins.pyg.ranked.top_items`)."""

    def update(
        self,
        pred_index_mat: Tensor,
        edge_label_index: EdgeIndex | None = None,
        edge_label_weight: Tensor | None = None,
    ) -> None:
        """One batch of top item ids ``(batch_size, w)`` or a float score matrix
        ``(batch_size, num_items)``; the ground truth is not read."""
        pred = I.check_pred_index_mat(pred_index_mat, self.num_items, self.options.validate_args)
        if pred.shape[0] == 0:
            return
        if I.is_score_matrix(pred):
            target = torch.zeros(pred.shape, dtype=torch.float32, device=pred.device)
            self._add(Accumulator.of(self.request.evaluate(pred, target), self.request))
            return
        assert self.num_items is not None
        self._add_lists(pred[:, : self.k], self.num_items)

    def _add_lists(self, ranked: Tensor, num_items: int) -> None:
        stats = P.top_items(ranked, num_items, self.options.rule)
        self._add(Accumulator.of(self.request.read(stats), self.request))


class LinkPredCoverage(_ExposureMetric):
    """Coverage@k: the share of the ``num_dst_nodes`` items in some example's top k."""

    metric = "coverage"

    def __init__(self, k: int, num_dst_nodes: int, **options: Any):
        validation.check("num_dst_nodes", validation.positive_int_problem(num_dst_nodes))
        self.num_dst_nodes = num_dst_nodes
        super().__init__(k, **options)

    def _items(self) -> ItemInputs:
        return ItemInputs.create(num_items=self.num_dst_nodes)

    def _add_lists(self, ranked: Tensor, num_items: int) -> None:
        # a catalogue-level metric alone: the lists' exposure is all it reads
        exposure = P.listed_exposure(ranked, num_items)
        # added where it lies in the flat state (Accumulator.flat: the sums, then the
        # number of queries): no copy of catalogue size to make
        state = self.exposure[:-1].view(exposure.sums.shape)
        state += exposure.sums.to(state.device)
        self.exposure[-1] += exposure.queries.to(state.device)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k}, num_dst_nodes={self.num_dst_nodes})"


class LinkPredDiversity(_ExposureMetric):
    """Diversity@k: 1 - the share of the top k's pairs in one ``category``."""

    metric = "diversity"

    def __init__(self, k: int, category: Tensor, **options: Any):
        self.category_ids = validation.check_tensor("category", category)
        super().__init__(k, **options)

    def _items(self) -> ItemInputs:
        return ItemInputs.create(item_categories=self.category_ids)


class LinkPredAveragePopularity(_ExposureMetric):
    """The mean ``popularity`` of the top-k items (ARP@k); lower is better."""

    metric = "arp"
    higher_is_better = False

    def __init__(self, k: int, popularity: Tensor, **options: Any):
        self.popularity = validation.check_tensor("popularity", popularity)
        super().__init__(k, **options)

    def _items(self) -> ItemInputs:
        return ItemInputs.create(item_popularity=self.popularity)


class LinkPredPersonalization(_ExposureMetric):
    """Personalization@k: 1 - the mean overlap ``|L_a ∩ L_b| / k`` over every pair of
    examples, from each item's exposure count (no pair is visited).

    Every example counts by default; ``max_src_nodes`` keeps only the first ones
    (PyG's default, 4096, approximates). ``batch_size`` (PyG's pair batch) is
    accepted and unused. The state is the exposure of the items seen, coalesced at
    each update: memory grows with the distinct items, not with the examples.
    """

    metric = "personalisation"

    ids: list[Tensor]
    item_sums: list[Tensor]
    examples: Tensor

    def __init__(
        self,
        k: int,
        max_src_nodes: int | None = None,
        batch_size: int = 2**16,
        **options: Any,
    ):
        if max_src_nodes is not None:
            validation.check("max_src_nodes", validation.positive_int_problem(max_src_nodes))
        validation.check("batch_size", validation.positive_int_problem(batch_size))
        self.max_src_nodes = max_src_nodes
        self.batch_size = batch_size
        super().__init__(k, **options)
        self.add_state("ids", default=[], dist_reduce_fx="cat")
        self.add_state("item_sums", default=[], dist_reduce_fx="cat")
        self.add_state("examples", torch.zeros((), dtype=torch.int64), dist_reduce_fx="sum")

    def _items(self) -> ItemInputs:
        return ItemInputs.create(num_items=1)  # the catalogue is the items seen

    @property
    def num_items(self) -> int | None:
        return None

    def update(
        self,
        pred_index_mat: Tensor,
        edge_label_index: EdgeIndex | None = None,
        edge_label_weight: Tensor | None = None,
    ) -> None:
        pred = I.check_pred_index_mat(pred_index_mat, None, self.options.validate_args)
        if self.max_src_nodes is not None:
            pred = pred[: max(0, self.max_src_nodes - int(self.examples))]
        if pred.shape[0] == 0:
            return
        self.examples += pred.shape[0]
        if not I.is_score_matrix(pred):
            # the catalogue of this update: the items it lists, numbered in id order
            ids, places = torch.unique(pred[:, : self.k], return_inverse=True)
            self._keep(P.listed_exposure(places, ids.numel()), ids)
            return
        ids = torch.arange(pred.shape[1], device=pred.device)
        target = torch.zeros(pred.shape, dtype=torch.float32, device=pred.device)
        evaluation = self._catalogue_request(ids).evaluate(pred, target)
        assert evaluation.exposure is not None
        self._keep(evaluation.exposure, ids)

    def _catalogue_request(self, ids: Tensor) -> RankingRequest:
        """The request over the catalogue of the items ``ids`` only."""
        return self._make_request(ItemInputs.create(num_items=ids.numel()))

    def _keep(self, exposure: Exposure, ids: Tensor) -> None:
        device = self.examples.device
        # items along dim 0: TorchMetrics concatenates "cat" states along it across processes
        flat = exposure.sums.flatten(0, 1).T.to(device)  # (n, 3 * K)
        self.ids, self.item_sums = [*self.ids, ids.to(device)], [*self.item_sums, flat]
        self.ids, self.item_sums = _coalesce(self.ids, self.item_sums)

    def compute(self) -> Tensor:
        """Over every pair of the examples seen; 0 with fewer than two, as in PyG."""
        ids, sums = _coalesce(self.ids, self.item_sums)
        if not ids or self.examples < 2:
            return torch.zeros((), dtype=torch.float64, device=self.examples.device)
        exposure = Exposure(sums[0].T.reshape(3, 1, -1), self.examples.to(torch.float64))
        kept = Accumulator(self._kept().totals, exposure, None)
        return torch.nan_to_num(kept.values(self.request)[0], nan=0.0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k})"


def _coalesce(ids: Sequence[Tensor], sums: Sequence[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    """The items' sums, one column per distinct item (the sums of its repeats)."""
    if len(ids) == 0:
        return [], []
    if isinstance(ids, Tensor):  # after a sync TorchMetrics hands the concatenation
        ids, sums = [ids], [sums]
    all_ids = torch.cat(list(ids))
    all_sums = torch.cat(list(sums))
    distinct, where = torch.unique(all_ids, return_inverse=True)
    merged = all_sums.new_zeros(distinct.numel(), all_sums.shape[1]).index_add_(0, where, all_sums)
    return [distinct], [merged]


# ---------------------------------------------------------------- the collection


class LinkPredMetricCollection(torch.nn.ModuleDict):
    """PyG's collection: keys ``"{Weighted}{ClassName}@{k}"`` (or the dict's), one
    update shared: the accuracy metrics of one weighting read one ranking."""

    def __init__(self, metrics: Sequence[_LinkPredMetric] | Mapping[str, _LinkPredMetric]) -> None:
        super().__init__()
        if isinstance(metrics, Sequence):
            metrics = {
                f"{'Weighted' if m.weighted else ''}{type(m).__name__}@{m.k}": m for m in metrics
            }
        if len(metrics) == 0:
            raise validation.ArgumentError("metrics", "must hold at least one metric")
        for name, metric in metrics.items():
            if not isinstance(metric, _LinkPredMetric):
                raise validation.ArgumentError(
                    "metrics",
                    f"must hold ranking_plugins.pyg metrics, got {type(metric).__name__} "
                    f"for {name!r}",
                )
            self[name] = metric

    def members(self) -> list[_LinkPredMetric]:
        """The metrics, in order."""
        return [cast(_LinkPredMetric, metric) for metric in self.values()]

    @property
    def max_k(self) -> int:
        return max(metric.k for metric in self.members())

    @property
    def weighted(self) -> bool:
        return any(metric.weighted for metric in self.members())

    def update(  # type: ignore[override]
        self,
        pred_index_mat: Tensor,
        edge_label_index: EdgeIndex,
        edge_label_weight: Tensor | None = None,
    ) -> None:
        """Every metric's update; edges of weight <= 0 dropped for all, as in PyG."""
        if self.weighted and edge_label_weight is None:
            raise validation.ArgumentError(
                "edge_label_weight",
                f"is a required argument for weighted '{type(self).__name__}' metrics",
            )
        accuracy = [m for m in self.members() if not isinstance(m, _ExposureMetric)]
        validate = all(m.options.validate_args for m in self.members())
        pred = I.check_pred_index_mat(pred_index_mat, None, validate)
        rows, cols, weight = I.check_edges(
            edge_label_index, edge_label_weight, pred.shape[0], None, validate
        )
        rows, cols, weight = I.positive_edges(rows, cols, weight)
        # one ranking per (weighting, options): the metrics' (name, k) pairs together
        groups: dict[tuple[bool, Options], list[_LinkPredMetric]] = {}
        for metric in accuracy:
            groups.setdefault((metric.weighted, metric.options), []).append(metric)
        links = None if I.is_score_matrix(pred) else P.Links(pred, rows, cols, self.max_k)
        for (weighted, options), members in groups.items():
            pairs = list(dict.fromkeys((m.metric, m.k) for m in members))
            request = RankingRequest.create(pairs, options=options)
            w = weight if weighted else None
            evaluation = evaluate_links(request, pred, rows, cols, w, links)
            if evaluation is None:
                continue
            for metric in members:
                metric._add_shared(Accumulator.of(evaluation, metric.request))
        for metric in self.members():
            if isinstance(metric, _ExposureMetric):
                metric.update(pred_index_mat)

    def compute(self) -> dict[str, Tensor]:
        return dict(zip(self.keys(), (m.compute() for m in self.members()), strict=True))

    def reset(self) -> None:
        for metric in self.members():
            metric.reset()


__all__ = [
    "PYG_DEFAULTS",
    "LinkPredAveragePopularity",
    "LinkPredCoverage",
    "LinkPredDiversity",
    "LinkPredF1",
    "LinkPredHitRatio",
    "LinkPredMAP",
    "LinkPredMRR",
    "LinkPredMetricCollection",
    "LinkPredNDCG",
    "LinkPredPersonalization",
    "LinkPredPrecision",
    "LinkPredRecall",
]
