"""Every metric, described once, as data (SPEC section 4).

Each :class:`Metric` says whether it takes a cutoff k, which direction is
better, and how its per-query value follows from the rank statistics at a
cutoff (:class:`ranking_plugins.kernel.Cutoff`); the formulas themselves are
in :mod:`ranking_plugins.metric_formulas`. The functional API and every
adapter read :data:`METRICS`; adding a metric is adding one entry.
:mod:`ranking_plugins.per_query` reads them off a batch's rank statistics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ranking_plugins.kernel import Cutoff, Exposure, ItemInputs, personalisation
from ranking_plugins.metric_formulas import (
    R_MULTIPLE_METRICS,
    R_MULTIPLES,
    RECALL_LEVEL_METRICS,
    RECALL_LEVELS,
    MetricValue,
    RatioParts,
    _alpha_dcg,
    _alpha_ndcg,
    _ap_ia,
    _arp,
    _auc,
    _auroc,
    _bin_g,
    _bpref,
    _coverage,
    _dcg,
    _diversity,
    _eleven_point,
    _entropy,
    _err,
    _err_ia,
    _f1,
    _fall_out,
    _fall_out_empty_lacks,
    _g,
    _gini,
    _hit_rate,
    _infap,
    _iprec_at,
    _judged,
    _map,
    _mean_rank,
    _mrr,
    _ndcg,
    _ndcg_rel,
    _nerr_ia,
    _nnrbp,
    _novelty,
    _novelty_inputs_problem,
    _nrbp,
    _num_nonrel_judged_ret,
    _num_rel,
    _num_rel_ret,
    _num_ret,
    _p_ia,
    _precision,
    _precision_at_r_multiple,
    _r_precision,
    _RatioValue,
    _rbp,
    _rbp_resid,
    _recall,
    _relative_precision,
    _rndcg,
    _set_map,
    _subtopic_recall,
    _tail_share,
    _unjudged,
    _utility,
)
from ranking_plugins.options import Options

DEFAULT_OPTIONS = Options()


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One metric: its name, its direction and how its value follows from a cutoff."""

    name: str
    higher_is_better: bool
    #: the per-query value and whether it is defined (None for a catalogue-level metric)
    value: Callable[[Cutoff, Options], MetricValue] | None
    #: the parts of a value that is a ratio (``value`` divides them): the reader divides
    #: a call's ratios together
    ratio: Callable[[Cutoff, Options], RatioParts] | None = None
    #: a catalogue-level metric's value at each k (K,), from the accumulated exposure
    catalogue: Callable[[Exposure, Tensor], Tensor] | None = None
    #: the item inputs it reads (exactly one of them; see ``ItemInputs``)
    needs: tuple[str, ...] = ()
    #: why the given item inputs cannot give its value (None: they can), beyond their
    #: own checks (novelty's -log2 p(i) needs every popularity > 0)
    inputs_problem: Callable[[ItemInputs], str | None] | None = None
    #: it reads where the first relevant item lies, nothing else (a request of such
    #: metrics alone needs no ranked list under "average": ``kernel/statistics/first_hits.py``)
    first_hit: bool = False
    #: it reads which items the top k holds (the exposure metrics)
    exposure: bool = False
    #: where the metric is read: at each k (``"k"``), at R (``"relevant_count"``,
    #: r_precision) or at the end of the list (``"whole_list"``)
    cutoff: str = "k"
    #: it reads which items are judged: whole lists, judged items counted too
    judgments: bool = False
    #: it reads subtopic judgments (a (Q, N, S) grade target): whole ranked lists
    #: that name their items
    intents: bool = False
    #: its relevant items are those of positive gain (trec_eval's ndcg_rel, Rndcg): a
    #: ``relevance_threshold`` <= 0, which makes grades <= 0 relevant with gain 0, is refused
    relevant_by_gain: bool = False
    #: its exact value under ``ties="average"`` is computed partly on the host
    #: (``kernel/statistics/tie_orders.py``): on an accelerator it synchronises with it
    host_under_average: bool = False
    #: trec_eval reads the grades themselves and leaves it alone under -l (its relevance
    #: level): in trec_eval's layout the command evaluates it without the threshold
    trec_eval_graded: bool = False
    #: trec_eval counts its relevant documents at -l although its gains ignore the level:
    #: in trec_eval's layout a query with no grade at the level has no relevant document
    #: (m_Rndcg.c's num_rel)
    trec_eval_counts_at_level: bool = False
    #: the recall levels whose interpolated precision it reads (trec_eval prints nan where
    #: a level's cutoff is 0 hits of an empty list: m_iprec_at_recall.c, m_11pt_avg.c)
    recall_levels: tuple[float, ...] = ()
    #: value of an empty query under empty_target_action="neg" (its worst value)
    empty_neg: float = 0.0
    #: what its empty query lacks under the options (None: a relevant item), for the
    #: error of ``empty_target_action="error"``
    empty_lacks: Callable[[Options], str] | None = None
    lower_bound: float = 0.0
    upper_bound: float | None = 1.0

    @property
    def at_k(self) -> bool:
        """Whether the metric takes a cutoff k (otherwise ``top_k`` does not apply)."""
        return self.cutoff == "k"

    def empty_value(self, action: str) -> float:
        """The value an empty query counts under ``empty_target_action`` "neg" or "pos"."""
        return self.empty_neg if action == "neg" else 1.0


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(name="hit_rate", higher_is_better=True, value=_hit_rate, first_hit=True),
        Metric(name="mrr", higher_is_better=True, value=_mrr, first_hit=True),
        Metric(
            name="precision",
            higher_is_better=True,
            value=_RatioValue(_precision),
            ratio=_precision,
        ),
        Metric(name="recall", higher_is_better=True, value=_RatioValue(_recall), ratio=_recall),
        Metric(name="f1", higher_is_better=True, value=_RatioValue(_f1), ratio=_f1),
        Metric(name="map", higher_is_better=True, value=_RatioValue(_map), ratio=_map),
        Metric(
            name="ndcg",
            higher_is_better=True,
            value=_RatioValue(_ndcg),
            ratio=_ndcg,
            trec_eval_graded=True,
        ),
        Metric(
            name="fall_out",
            higher_is_better=False,
            value=_fall_out,
            empty_neg=1.0,
            empty_lacks=_fall_out_empty_lacks,
        ),
        Metric(
            name="r_precision",
            higher_is_better=True,
            value=_RatioValue(_r_precision),
            ratio=_r_precision,
            cutoff="relevant_count",
        ),
        Metric(
            name="mean_rank",
            higher_is_better=False,
            value=_mean_rank,
            cutoff="whole_list",
            lower_bound=1.0,
            upper_bound=None,
        ),
        Metric(name="auc", higher_is_better=True, value=_auc, cutoff="whole_list"),
        Metric(name="auroc", higher_is_better=True, value=_auroc, host_under_average=True),
        Metric(
            name="num_ret",
            higher_is_better=True,
            value=_num_ret,
            cutoff="whole_list",
            upper_bound=None,
        ),
        Metric(
            name="num_rel",
            higher_is_better=True,
            value=_num_rel,
            cutoff="whole_list",
            upper_bound=None,
        ),
        Metric(
            name="num_rel_ret",
            higher_is_better=True,
            value=_num_rel_ret,
            cutoff="whole_list",
            upper_bound=None,
        ),
        Metric(name="relative_precision", higher_is_better=True, value=_relative_precision),
        Metric(name="set_map", higher_is_better=True, value=_set_map, cutoff="whole_list"),
        Metric(
            name="utility",
            higher_is_better=True,
            value=_utility,
            cutoff="whole_list",
            lower_bound=-math.inf,
            upper_bound=None,
        ),
        Metric(name="dcg", higher_is_better=True, value=_dcg, upper_bound=None),
        Metric(name="rbp", higher_is_better=True, value=_rbp, trec_eval_graded=True),
        Metric(name="bin_g", higher_is_better=True, value=_bin_g, cutoff="whole_list"),
        Metric(name="err", higher_is_better=True, value=_err, host_under_average=True),
        *(
            Metric(
                name=name,
                higher_is_better=True,
                value=_iprec_at(index),
                cutoff="whole_list",
                host_under_average=True,
                recall_levels=(RECALL_LEVELS[index],),
            )
            for index, name in enumerate(RECALL_LEVEL_METRICS)
        ),
        *(
            Metric(
                name=name,
                higher_is_better=True,
                value=_precision_at_r_multiple(multiple),
                cutoff="whole_list",
            )
            for name, multiple in zip(R_MULTIPLE_METRICS, R_MULTIPLES, strict=True)
        ),
        Metric(
            name="11pt_avg",
            higher_is_better=True,
            value=_eleven_point,
            cutoff="whole_list",
            host_under_average=True,
            recall_levels=RECALL_LEVELS,
        ),
        # -- judged measures
        Metric(
            name="bpref",
            higher_is_better=True,
            value=_bpref,
            cutoff="whole_list",
            judgments=True,
        ),
        Metric(
            name="infap",
            higher_is_better=True,
            value=_infap,
            cutoff="whole_list",
            judgments=True,
            host_under_average=True,
        ),
        Metric(
            name="num_nonrel_judged_ret",
            higher_is_better=False,
            value=_num_nonrel_judged_ret,
            cutoff="whole_list",
            upper_bound=None,
            judgments=True,
        ),
        Metric(name="unj", higher_is_better=False, value=_unjudged, judgments=True),
        Metric(name="judged", higher_is_better=True, value=_judged, judgments=True),
        Metric(
            name="rbp_resid",
            higher_is_better=False,
            value=_rbp_resid,
            cutoff="whole_list",
            judgments=True,
        ),
        Metric(
            name="g",
            higher_is_better=True,
            value=_g,
            cutoff="whole_list",
            host_under_average=True,
            trec_eval_graded=True,
        ),
        Metric(
            name="ndcg_rel",
            higher_is_better=True,
            value=_ndcg_rel,
            cutoff="whole_list",
            relevant_by_gain=True,
            trec_eval_graded=True,
        ),
        Metric(
            name="rndcg",
            higher_is_better=True,
            value=_rndcg,
            cutoff="whole_list",
            relevant_by_gain=True,
            trec_eval_graded=True,
            trec_eval_counts_at_level=True,
        ),
        # -- diversity: subtopic judgments
        *(
            Metric(
                name=name,
                higher_is_better=True,
                value=value,
                cutoff=cutoff,
                intents=True,
                # the greedy ideal list and the tied groups' expectations are sized on the host
                host_under_average=True,
                upper_bound=upper,
            )
            for name, value, cutoff, upper in (
                ("alpha_ndcg", _alpha_ndcg, "k", 1.0),
                ("alpha_dcg", _alpha_dcg, "k", None),
                ("err_ia", _err_ia, "k", None),
                ("nerr_ia", _nerr_ia, "k", 1.0),
                ("nrbp", _nrbp, "whole_list", None),
                ("nnrbp", _nnrbp, "whole_list", 1.0),
                ("p_ia", _p_ia, "k", 1.0),
                ("ap_ia", _ap_ia, "whole_list", 1.0),
                ("subtopic_recall", _subtopic_recall, "k", 1.0),
            )
        ),
        Metric(
            name="coverage", higher_is_better=True, value=None, catalogue=_coverage, exposure=True
        ),
        Metric(name="gini", higher_is_better=False, value=None, catalogue=_gini, exposure=True),
        Metric(
            name="entropy",
            higher_is_better=True,
            value=None,
            catalogue=_entropy,
            exposure=True,
            upper_bound=None,
        ),
        Metric(
            name="personalisation",
            higher_is_better=True,
            value=None,
            catalogue=personalisation,
            exposure=True,
        ),
        Metric(
            name="novelty",
            higher_is_better=True,
            value=_novelty,
            needs=("item_popularity",),
            inputs_problem=_novelty_inputs_problem,
            exposure=True,
            upper_bound=None,
        ),
        Metric(
            name="arp",
            higher_is_better=False,
            value=_arp,
            needs=("item_popularity",),
            exposure=True,
            upper_bound=None,
        ),
        Metric(
            name="tail_share",
            higher_is_better=True,
            value=_tail_share,
            needs=("tail_items",),
            exposure=True,
        ),
        Metric(
            name="diversity",
            higher_is_better=True,
            value=_diversity,
            needs=("item_features", "item_categories"),
            exposure=True,
            upper_bound=2.0,  # 1 - cosine: up to 2 for opposite features
        ),
    )
}

#: the metrics whose exact value under ``ties="average"`` is computed partly on the host
HOST_UNDER_AVERAGE = tuple(name for name, m in METRICS.items() if m.host_under_average)

#: the catalogue-level metrics: one value per k from the accumulated exposure
CATALOGUE_METRICS = tuple(name for name, m in METRICS.items() if m.catalogue is not None)


def metric_names(which: Callable[[Metric], bool]) -> str:
    """The names of the table's metrics that ``which`` selects, for a message ("a, b, c")."""
    return ", ".join(name for name, metric in METRICS.items() if which(metric))


def get_metrics(metrics: str | Sequence[str]) -> list[Metric]:
    """Look metric names up in :data:`METRICS`, keeping order and dropping repeats."""
    names = [metrics] if isinstance(metrics, str) else metrics
    if isinstance(names, Sequence) and not isinstance(names, str):
        names = list(names)
    else:
        raise TypeError(f"`metrics` must be a metric name or a sequence of names, got {names!r}")
    if not names:
        raise ValueError(f"`metrics` must name at least one of {list(METRICS)}")
    found: list[Metric] = []
    for name in names:
        if not isinstance(name, str) or name not in METRICS:
            raise ValueError(f"`metrics`: unknown metric {name!r}; expected one of {list(METRICS)}")
        if METRICS[name] not in found:
            found.append(METRICS[name])
    return found


def result_key(metric: Metric, k: int | None) -> str:
    """The key of a metric's result at cutoff ``k``: ``"<metric>@<k>"``, or its bare name
    for a metric without a cutoff or ``k=None`` (read on the whole list)."""
    return metric.name if k is None or not metric.at_k else f"{metric.name}@{k}"


def key_metric(key: str) -> Metric | None:
    """The metric of a :func:`result_key` (``"ndcg@10"``: ndcg), None for another string."""
    return METRICS.get(key.partition("@")[0])


def result_columns(
    metric: Metric, ks: tuple[int, ...] | None
) -> tuple[tuple[int | None, str], ...]:
    """The cutoff and :func:`result_key` of each of a metric's results, in output order:
    one per k of ``ks``, or one (k None) without a cutoff or with ``top_k=None``."""
    column_ks: tuple[int | None, ...] = ks if metric.at_k and ks is not None else (None,)
    return tuple((k, result_key(metric, k)) for k in column_ks)


def rank_depth(metrics: Sequence[Metric], ks: tuple[int, ...] | None) -> int | None:
    """How deep the ranked list must go: the largest k, or None for the whole list."""
    if ks is None or any(not m.at_k or m.judgments or m.intents for m in metrics):
        return None
    return max(ks)


def recall_at_fixed_precision(
    precision: Tensor, recall: Tensor, top_k: Tensor, min_precision: float
) -> tuple[Tensor, Tensor]:
    """TorchMetrics' choice on a precision-recall curve over the ks ``top_k``
    (``RetrievalRecallAtFixedPrecision``): the largest recall among the ks whose
    precision is >= ``min_precision``, and the largest such k; ``(0, len(top_k))``
    where no k reaches it or the largest recall is 0. A pure function of the
    averaged curves.

    >>> precision, recall = torch.tensor([1.0, 0.5, 0.6]), torch.tensor([0.5, 0.5, 1.0])
    >>> recall_at_fixed_precision(precision, recall, torch.tensor([1, 2, 3]), 0.8)
    (tensor(0.5000), tensor(1))
    """
    reached = precision >= min_precision  # NaN (no query counted) reaches nothing
    last = torch.tensor(len(top_k), dtype=top_k.dtype, device=top_k.device)
    if not bool(reached.any()):
        return torch.zeros((), dtype=recall.dtype, device=recall.device), last
    best = recall[reached].max()
    if best == 0:
        return best, last
    return best, top_k[reached & (recall == best)].max()


__all__ = [
    "CATALOGUE_METRICS",
    "METRICS",
    "Metric",
    "get_metrics",
    "key_metric",
    "rank_depth",
    "recall_at_fixed_precision",
    "result_columns",
    "result_key",
]
