"""Where ``torchmetrics.retrieval`` and this package both refuse something, the error is
TorchMetrics' type and starts with its message; what this package says follows.

The checks ``update`` runs on the grouped layout (:func:`_check_flat`, the kernel's,
worded), and the kernel's calls at ``compute`` (:func:`_kernel_rank`,
:func:`_kernel_read`), which turn an empty query under ``empty_target_action="error"``
into TorchMetrics' error.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel import RankedBatch, check_grouped, check_inputs
from ranking_plugins.per_query import EmptyQueryError, Evaluation
from ranking_plugins.request import RankingRequest
from ranking_plugins.torchmetrics.functional import torchmetrics_dtype_refusal

_MIXED_SCORES = (
    "`preds`: the grouped layout (`indexes`) of one metric takes either floating-point "
    "or integer scores, not both: {found}. Converting one kind to the other could "
    "merge or reorder scores, so cast every batch's `preds` to one dtype before `update`"
)


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


def _kernel_evaluate(request: RankingRequest, preds: Any, target: Tensor, **inputs: Any) -> Any:
    """``request.evaluate``, with TorchMetrics' message on an empty query under "error"
    (a (Q, N, S) target: subtopic judgments, split as ``request.evaluate`` splits them)."""
    target, intents = request.split_intents(preds, target, inputs.get("indexes"))
    return _kernel_read(request, _kernel_rank(request, preds, target, **inputs), intents)


def _kernel_rank(request: RankingRequest, preds: Any, target: Tensor, **inputs: Any) -> RankedBatch:
    try:
        return request.rank(preds, target, **inputs)
    except EmptyQueryError as error:
        raise _EmptyTargetError(error) from error


def _kernel_read(
    request: RankingRequest, ranked: RankedBatch, intents: Tensor | None = None
) -> Evaluation:
    try:
        return request.read(ranked, intents)
    except EmptyQueryError as error:
        raise _EmptyTargetError(error) from error


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
        check_grouped(preds, target, validation.check_tensor("indexes", indexes), target_format)
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
