"""The item-index layout: scores (Q, N) and the ids of each query's relevant items."""

from __future__ import annotations

from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.inputs.checks import check_item_targets, item_ids_in_catalogue
from ranking_plugins.kernel.inputs.parts import (
    Batch,
    RankingInput,
    nan_check_deferred,
    nan_possible,
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
    target = check_item_targets(target, preds)
    # out of range: an error, or padding without validate_args (one rule for every layout)
    target = item_ids_in_catalogue("target", target, preds.shape[1], validate_args)
    deferred = nan_check_deferred(preds, mask, validate_args)
    if validate_args and not deferred:
        validation.check_values(preds, None, None, preds.shape[1])
    ids = ItemIds(target, preds.shape[1], rule, judged)
    return one_part(RankingInput(preds, mask, ids, deferred, nan_possible(preds, validate_args)))
