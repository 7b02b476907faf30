"""The item-index layout: scores (Q, N) and the ids of each query's relevant items."""

from __future__ import annotations

import torch
from torch import Tensor

from ranking_plugins import _validation as V
from ranking_plugins.kernel.inputs.parts import (
    Batch,
    RankingInput,
    nan_check_deferred,
    one_part,
)
from ranking_plugins.kernel.inputs.relevance import GainRule, ItemIds


def item_ids(
    preds: Tensor,
    target: Tensor,
    mask: Tensor | None,
    rule: GainRule,
    validate_args: bool,
    judged: Tensor | None = None,
) -> Batch:
    """Checked (Q, N) scores and (Q,) or (Q, T) item ids (-1: padding) as one part.

    ``judged``: (Q, J) ids of the judged items (-1: padding), or None: every item.
    """
    if not V.is_integer_dtype(target.dtype):
        raise TypeError(
            "item-index `target` must be an integer tensor of item ids (Q,) or (Q, T) "
            f"(or a dense `target` of shape {tuple(preds.shape)}), got dtype {target.dtype} "
            f"and shape {tuple(target.shape)}"
        )
    if target.ndim == 1:
        target = target.unsqueeze(1)
    if target.ndim != 2 or target.shape[0] != preds.shape[0]:
        raise ValueError(
            f"item-index `target` must be (Q,) or (Q, T) with Q = {preds.shape[0]} rows of "
            f"`preds`, got shape {tuple(target.shape)}"
        )
    deferred = nan_check_deferred(preds, mask, validate_args)
    if deferred:
        V.check_item_ids("target", target, preds.shape[1])
    elif validate_args:
        V.check_values(preds, None, target, preds.shape[1])
    ids = ItemIds(target.to(torch.int64), preds.shape[1], rule, judged)
    return one_part(RankingInput(preds, mask, ids, deferred))
