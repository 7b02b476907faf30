"""``torchmetrics.functional.retrieval``'s functions, computed by this package's kernel.

The same names and signatures, so that switching is the import line::

    from torchmetrics.functional.retrieval import retrieval_normalized_dcg
    from ranking_plugins.torchmetrics.functional import retrieval_normalized_dcg

Each function takes one query's ``preds`` and ``target`` (of one shape, any
number of dimensions, read flattened, as in TorchMetrics) and returns a 0-d
float64 tensor on their device; ``top_k`` also takes a sequence of ks (the
values stacked in that order). The numbers are those of the TorchMetrics
adapters (:mod:`ranking_plugins.torchmetrics`) with their defaults: a linear
gain, tied scores averaged (``ties="average"``) and a query without relevant
items counting 0 (``empty_target_action="neg"``, TorchMetrics' value there).
Where TorchMetrics' value differs by policy (MAP@k's denominator, scores ≤ 0,
fall-out of a query without relevant items, AUROC of a query without
non-relevant items, ...), :doc:`migration_torchmetrics` shows both. For
several metrics, ks or queries in one kernel pass, and for every option, use
:func:`ranking_plugins.rank_metrics`.

Inputs: where TorchMetrics refuses ``preds`` and ``target`` that the kernel
refuses too, the error is TorchMetrics' ``ValueError`` and its message comes
first. The kernel takes more than TorchMetrics: integer scores, and graded
targets for every metric (a grade > 0 is relevant); an empty ``preds`` is a
query without relevant items.

This module needs only torch (TorchMetrics need not be installed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.functional import rank_metrics
from ranking_plugins.metrics import get_metrics, result_key
from ranking_plugins.request import TopK

__all__ = [
    "retrieval_auroc",
    "retrieval_average_precision",
    "retrieval_fall_out",
    "retrieval_hit_rate",
    "retrieval_normalized_dcg",
    "retrieval_precision",
    "retrieval_precision_recall_curve",
    "retrieval_r_precision",
    "retrieval_recall",
    "retrieval_reciprocal_rank",
]

#: TorchMetrics' defaults, kept by its adapters (these functions and the classes of
#: :mod:`ranking_plugins.torchmetrics`) whatever the package's: its gain is linear too;
#: RetrievalFallOut computes the fall-out of a query without relevant items, and calls
#: one without non-relevant items empty
TORCHMETRICS_DEFAULTS: dict[str, Any] = {"gain": "linear", "fall_out_empty": "no_nonrelevant"}
#: TorchMetrics' functions give 0 for a query without relevant items
_EMPTY_TARGET_ACTION = "neg"


def _one_query(preds: object, target: object) -> tuple[Tensor, Tensor]:
    """``preds`` and ``target`` as one query's ``(1, N)`` dense batch.

    A shape mismatch is refused before the kernel sees it: two shapes would be
    read as the item-index layout, which these functions do not take.
    """
    preds, target = (
        validation.check_tensor("preds", preds),
        validation.check_tensor("target", target),
    )
    if preds.shape != target.shape:
        raise ValueError(
            "`preds` and `target` must be of the same shape: one query's scores and "
            f"grades, got {tuple(preds.shape)} and {tuple(target.shape)}"
        )
    if preds.dim() == 0:
        raise ValueError(
            "`preds` and `target` must be non-empty and non-scalar tensors: one query's "
            "items, got 0-d tensors"
        )
    return preds.reshape(1, -1), target.reshape(1, -1)


def torchmetrics_dtype_refusal(preds: Tensor, target: Tensor) -> str | None:
    """TorchMetrics' message for inputs it refuses by dtype, else None (its
    ``_check_retrieval_functional_inputs``, less the checks that read values; the
    adapter classes' check ends with it too)."""
    if target.dtype not in (torch.bool, torch.long, torch.int) and not target.is_floating_point():
        return "`target` must be a tensor of booleans, integers or floats"
    if not preds.is_floating_point():
        return "`preds` must be a tensor of floats"
    return None


#: the forms of ``top_k`` the package takes, where TorchMetrics takes one k or None
TOP_K_FORMS = (
    "a positive int, a non-empty sequence of positive ints, or None for the whole list "
    "(also inside a sequence: [10, None])"
)


def _check_top_k(top_k: object, name: str = "top_k", items_in_package_words: bool = False) -> None:
    """The package's rule for ``top_k`` (one k or several), in TorchMetrics' words.
    ``items_in_package_words``: a wrong k inside a sequence (which TorchMetrics does not
    take) is left to the package's own check and its words."""
    problem = validation.top_k_problem(top_k)
    if problem is None or (items_in_package_words and problem.kind == "item"):
        return
    raise ValueError(
        f"`{name}` has to be a positive integer or None, got {top_k!r}; "
        f"`{name}` {problem.text} (ranking_plugins takes {TOP_K_FORMS})"
    )


def _check_adaptive_k(adaptive_k: object) -> None:
    problem = validation.flag_problem(adaptive_k)
    if problem is not None:
        raise ValueError(f"`adaptive_k` has to be a boolean: `adaptive_k` {problem.text}")


def check_max_k(max_k: object) -> None:
    """The curves' ``max_k``: a positive int, or None (every k of the longest list)."""
    if max_k is not None:
        problem = validation.positive_int_problem(max_k)
        if problem is not None:
            raise ValueError(
                f"`max_k` has to be a positive integer or None: `max_k` {problem.text}"
            )


def _one_query_values(
    metrics: Sequence[str],
    preds: object,
    target: object,
    top_k: TopK,
    adaptive_k: bool = False,
    max_fpr: float | None = None,
) -> list[Tensor]:
    """Every value of ``metrics`` at ``top_k`` for one query, metric by metric, each in
    the order of ``top_k``, from one kernel pass."""
    preds, target = _one_query(preds, target)
    try:
        results = rank_metrics(
            preds,
            target,
            metrics,
            top_k,
            adaptive_k=adaptive_k,
            max_fpr=max_fpr,
            empty_target_action=_EMPTY_TARGET_ACTION,
            **TORCHMETRICS_DEFAULTS,
        )
    except (TypeError, ValueError) as error:
        refused = torchmetrics_dtype_refusal(preds, target)
        if refused is None:
            raise
        raise ValueError(f"{refused}. {error}") from error
    if top_k is None or validation.is_single_k(top_k):
        return list(results.values())
    # the kernel's keys come in ascending k, once each; the caller's order here (None:
    # the whole list, the bare name's key)
    ks = [None if k is None else int(k) for k in top_k]  # type: ignore[union-attr]
    return [
        torch.stack([results[result_key(metric, k)] for k in ks])
        for metric in get_metrics(list(metrics))
    ]


def _one(name: str, preds: Tensor, target: Tensor, top_k: TopK, adaptive_k: bool = False) -> Tensor:
    _check_top_k(top_k)
    return _one_query_values([name], preds, target, top_k, adaptive_k)[0]


def retrieval_average_precision(preds: Tensor, target: Tensor, top_k: TopK = None) -> Tensor:
    """Average precision@k of one query (``retrieval_average_precision``).

    AP@k divides by R, the query's relevant items (trec_eval's ``map_cut``);
    TorchMetrics divides by the relevant items found within the top k.

    >>> import torch
    >>> from ranking_plugins.torchmetrics.functional import retrieval_average_precision
    >>> preds = torch.tensor([0.5, 0.3, 0.2, 0.1])
    >>> target = torch.tensor([False, True, False, True])
    >>> retrieval_average_precision(preds, target)
    tensor(0.5000, dtype=torch.float64)
    >>> retrieval_average_precision(preds, target, top_k=2)  # TorchMetrics: 0.5
    tensor(0.2500, dtype=torch.float64)
    """
    return _one("map", preds, target, top_k)


def retrieval_reciprocal_rank(preds: Tensor, target: Tensor, top_k: TopK = None) -> Tensor:
    """Reciprocal rank@k of one query: 1 / the rank of its first relevant item, 0 if none
    is within k (``retrieval_reciprocal_rank``).

    >>> import torch
    >>> from ranking_plugins.torchmetrics.functional import retrieval_reciprocal_rank
    >>> preds = torch.tensor([0.5, 0.3, 0.2, 0.1])
    >>> target = torch.tensor([False, True, False, True])
    >>> retrieval_reciprocal_rank(preds, target)
    tensor(0.5000, dtype=torch.float64)
    >>> retrieval_reciprocal_rank(preds, target, top_k=1)
    tensor(0., dtype=torch.float64)
    """
    return _one("mrr", preds, target, top_k)


def retrieval_normalized_dcg(preds: Tensor, target: Tensor, top_k: TopK = None) -> Tensor:
    """Normalised DCG@k of one query, linear gain (``retrieval_normalized_dcg``).

    ``target`` holds graded relevance; tied scores share their gains, as in
    TorchMetrics.

    >>> import torch
    >>> from ranking_plugins.torchmetrics.functional import retrieval_normalized_dcg
    >>> preds = torch.tensor([0.1, 0.2, 0.3, 4.0, 70.0])
    >>> target = torch.tensor([10, 0, 0, 1, 5])
    >>> retrieval_normalized_dcg(preds, target)
    tensor(0.6957, dtype=torch.float64)
    """
    return _one("ndcg", preds, target, top_k)


def retrieval_hit_rate(preds: Tensor, target: Tensor, top_k: TopK = None) -> Tensor:
    """Hit rate@k of one query: 1 if a relevant item is in the top k (``retrieval_hit_rate``).

    >>> import torch
    >>> from ranking_plugins.torchmetrics.functional import retrieval_hit_rate
    >>> preds = torch.tensor([0.5, 0.3, 0.2, 0.1])
    >>> target = torch.tensor([False, True, False, True])
    >>> retrieval_hit_rate(preds, target, top_k=[1, 2])
    tensor([0., 1.], dtype=torch.float64)
    """
    return _one("hit_rate", preds, target, top_k)


def retrieval_precision(
    preds: Tensor, target: Tensor, top_k: TopK = None, adaptive_k: bool = False
) -> Tensor:
    """Precision@k of one query: relevant items in the top k over k (``retrieval_precision``).

    ``top_k=None`` reads the whole list; ``adaptive_k=True`` divides by
    min(k, the number of items) instead of k.

    >>> import torch
    >>> from ranking_plugins.torchmetrics.functional import retrieval_precision
    >>> preds = torch.tensor([0.5, 0.3, 0.2, 0.1])
    >>> target = torch.tensor([False, True, False, True])
    >>> retrieval_precision(preds, target, top_k=2)
    tensor(0.5000, dtype=torch.float64)
    >>> retrieval_precision(preds, target, top_k=5)
    tensor(0.4000, dtype=torch.float64)
    >>> retrieval_precision(preds, target, top_k=5, adaptive_k=True)
    tensor(0.5000, dtype=torch.float64)
    """
    _check_adaptive_k(adaptive_k)
    return _one("precision", preds, target, top_k, adaptive_k)


def retrieval_recall(preds: Tensor, target: Tensor, top_k: TopK = None) -> Tensor:
    """Recall@k of one query: relevant items in the top k over R (``retrieval_recall``).

    >>> import torch
    >>> from ranking_plugins.torchmetrics.functional import retrieval_recall
    >>> preds = torch.tensor([0.5, 0.3, 0.2, 0.1])
    >>> target = torch.tensor([False, True, False, True])
    >>> retrieval_recall(preds, target, top_k=2)
    tensor(0.5000, dtype=torch.float64)
    """
    return _one("recall", preds, target, top_k)


def retrieval_fall_out(preds: Tensor, target: Tensor, top_k: TopK = None) -> Tensor:
    """Fall-out@k of one query: non-relevant items in the top k over the non-relevant
    items; lower is better (``retrieval_fall_out``).

    A query without relevant items has its fall-out, as in TorchMetrics and
    :class:`ranking_plugins.torchmetrics.FallOut`; one without non-relevant
    items counts 1 here (its worst value, the empty query under ``"neg"``),
    0 in TorchMetrics.

    >>> import torch
    >>> from ranking_plugins.torchmetrics.functional import retrieval_fall_out
    >>> preds = torch.tensor([0.5, 0.3, 0.2, 0.1])
    >>> target = torch.tensor([False, True, False, True])
    >>> retrieval_fall_out(preds, target, top_k=1)
    tensor(0.5000, dtype=torch.float64)
    """
    return _one("fall_out", preds, target, top_k)


def retrieval_r_precision(preds: Tensor, target: Tensor) -> Tensor:
    """R-precision of one query: relevant items in the top R over R (``retrieval_r_precision``).

    >>> import torch
    >>> from ranking_plugins.torchmetrics.functional import retrieval_r_precision
    >>> preds = torch.tensor([0.5, 0.3, 0.2, 0.1])
    >>> target = torch.tensor([False, True, False, True])
    >>> retrieval_r_precision(preds, target)
    tensor(0.5000, dtype=torch.float64)
    """
    return _one_query_values(["r_precision"], preds, target, None)[0]


def retrieval_auroc(
    preds: Tensor, target: Tensor, top_k: int | None = None, max_fpr: float | None = None
) -> Tensor:
    """ROC AUC of one query: the share of (relevant, non-relevant) pairs ranked in
    order, ties counting a half (``retrieval_auroc``).

    A query with relevant items only has no AUC: it counts 0, as in TorchMetrics.
    ``top_k``: the AUC of the top k items (``auroc@k``: 0 where they hold one
    class, as TorchMetrics); ``max_fpr``: the partial AUC up to that false positive
    rate with McClish's correction, as TorchMetrics.

    >>> import torch
    >>> from ranking_plugins.torchmetrics.functional import retrieval_auroc
    >>> preds = torch.tensor([0.5, 0.3, 0.2, 0.1])
    >>> target = torch.tensor([False, True, False, True])
    >>> retrieval_auroc(preds, target)
    tensor(0.2500, dtype=torch.float64)
    """
    _check_top_k(top_k)
    metric = "auc" if top_k is None else "auroc"
    return _one_query_values([metric], preds, target, top_k, max_fpr=max_fpr)[0]


def retrieval_precision_recall_curve(
    preds: Tensor, target: Tensor, max_k: int | None = None, adaptive_k: bool = False
) -> tuple[Tensor, Tensor, Tensor]:
    """Precision@k and recall@k of one query for k = 1 ... ``max_k``
    (``retrieval_precision_recall_curve``).

    Returns ``(precision, recall, top_k)``, each of ``max_k`` entries (the
    number of items when None); ``top_k`` holds each k, min(k, the number of
    items) with ``adaptive_k=True``. Both curves come from one kernel pass:
    :func:`retrieval_precision` and :func:`retrieval_recall` at each k.

    >>> import torch
    >>> from ranking_plugins.torchmetrics.functional import retrieval_precision_recall_curve
    >>> preds = torch.tensor([0.5, 0.3, 0.2, 0.1])
    >>> target = torch.tensor([False, True, False, True])
    >>> precision, recall, top_k = retrieval_precision_recall_curve(preds, target, max_k=4)
    >>> precision
    tensor([0.0000, 0.5000, 0.3333, 0.5000], dtype=torch.float64)
    >>> recall
    tensor([0.0000, 0.5000, 0.5000, 1.0000], dtype=torch.float64)
    >>> top_k
    tensor([1, 2, 3, 4])
    """
    _check_adaptive_k(adaptive_k)
    check_max_k(max_k)
    size = _one_query(preds, target)[0].shape[-1]
    ks = list(range(1, (size if max_k is None else max_k) + 1))
    if not ks:  # no item and no max_k: curves of no point
        empty = torch.zeros(0, dtype=torch.float64, device=preds.device)
        return empty, empty.clone(), torch.zeros(0, dtype=torch.long, device=preds.device)
    precision, recall = _one_query_values(["precision", "recall"], preds, target, ks, adaptive_k)
    top_k = torch.tensor(ks, device=precision.device)
    # the k each precision divides by: adaptive_k's min(k, items), the kernel's rule
    return precision, recall, top_k.clamp(max=size) if adaptive_k else top_k
