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
  a data loader yields one query's candidates together): only the sums are
  kept, a constant-size state whatever the number of updates. ``update``
  checks a batch and keeps a copy of it until the pending batches hold
  2^19 entries (``pending.PENDING_ENTRIES``: at most 26 bytes an entry, 13
  MiB, and about 100 MiB at the peak of their ranking on a CPU), then ranks
  them, consecutive batches whose lists all have one length in one kernel
  call (the numbers of ranking each alone, to the bit; a batch of lists of
  several lengths alone); ``compute``, ``sync``, ``forward``,
  ``merge_state``, ``state_dict`` and ``metric_state`` rank what is pending
  first. The checks that read no ranking (shapes, dtypes, NaN scores and
  grades) still refuse a batch at its ``update``; the few refusals only the
  ranking finds (a gain sum past float64) come where the pending batches are
  ranked, after the other batches are added. With
  ``empty_target_action="error"`` each batch is ranked at its ``update``,
  which then refuses an empty query. A query whose entries come in
  two batches counts as two queries; this is not detected (it would need every
  query id seen so far).

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

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from torch import Tensor
from typing_extensions import Unpack

from ranking_plugins.metrics import METRICS
from ranking_plugins.request import TopK
from ranking_plugins.torchmetrics.arguments import _refuse_unread_options, _retrieval_keywords
from ranking_plugins.torchmetrics.base import (
    BaseRankingMetric,
    RankingOptions,
)
from ranking_plugins.torchmetrics.base import (
    RankingMetric as RankingMetric,  # the base's earlier name, kept importable
)
from ranking_plugins.torchmetrics.curves import (
    RetrievalPrecisionRecallCurve,
    RetrievalRecallAtFixedPrecision,
)
from ranking_plugins.torchmetrics.functional import (
    TORCHMETRICS_DEFAULTS as TORCHMETRICS_DEFAULTS,  # importable from here, as before
)

try:  # also when the modules above were imported before: the extra is named
    import torchmetrics  # noqa: F401
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


# ------------------------------------------------------------- one metric each


class _SingleMetric(BaseRankingMetric):
    """One metric from :data:`ranking_plugins.metrics.METRICS`; subclasses name it."""

    metric_name: ClassVar[str]
    #: the options of :data:`METRIC_OPTIONS` that the metric reads (it refuses the others)
    metric_options: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(
        cls, metric: str = "", options: tuple[str, ...] = (), **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if metric:
            entry = METRICS[metric]
            cls.metric_name = metric
            cls.metric_options = options
            cls.higher_is_better = entry.higher_is_better
            cls.plot_lower_bound = entry.lower_bound
            cls.plot_upper_bound = entry.upper_bound

    def __init__(self, top_k: TopK = None, **options: Unpack[RankingOptions]) -> None:
        _refuse_unread_options(type(self).__name__, self.metric_options, list(options))
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


class NDCG(_SingleMetric, metric="ndcg", options=("gain",)):
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


class MAP(_SingleMetric, metric="map", options=("ap_denominator",)):
    """Mean average precision@k (``RetrievalMAP``; the denominator is R, trec_eval's map_cut).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import MAP
    >>> indexes = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    >>> preds = torch.tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2])
    >>> target = torch.tensor([False, False, True, False, True, False, True])
    >>> MAP()(preds, target, indexes=indexes)
    tensor(0.7917, dtype=torch.float64)
    """


class Precision(_SingleMetric, metric="precision", options=("adaptive_k",)):
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


class F1(_SingleMetric, metric="f1", options=("adaptive_k",)):
    """F1@k: 2·hits@k / (k + R).

    >>> import torch
    >>> from ranking_plugins.torchmetrics import F1
    >>> preds = torch.tensor([[0.9, 0.2, 0.5, 0.1]])
    >>> target = torch.tensor([[1, 0, 0, 1]])
    >>> F1(top_k=2)(preds, target)
    tensor(0.5000, dtype=torch.float64)
    """


class FallOut(_SingleMetric, metric="fall_out", options=("fall_out_empty",)):
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


class AUC(_SingleMetric, metric="auc", options=("max_fpr",)):
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
        _refuse_unread_options(type(self).__name__, self.metric_options, list(options))
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
