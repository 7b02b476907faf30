"""Inputs: any layout, checked and brought to one shape (SPEC section 2).

:func:`normalize_input` is the one dispatch between the tensor layouts, one
module each: :mod:`~ranking_plugins.kernel.inputs.dense` (a grade for every
item), :mod:`~ranking_plugins.kernel.inputs.item_ids` (the ids of the relevant
items) and :mod:`~ranking_plugins.kernel.inputs.grouped` (flat triples with
query ids). Each returns a :class:`Batch` of :class:`RankingInput` parts:
scores (Q, N), an optional ``ranked`` mask and a :class:`Relevance` that
answers questions about the targets. Scores given as embeddings
(:mod:`~ranking_plugins.kernel.catalogue.chunked`) are never a matrix: they
are walked in chunks and counted, straight to statistics.
"""

from __future__ import annotations

from torch import Tensor

from ranking_plugins.kernel.inputs.checks import (
    check_grades,
    check_grouped,
    check_inputs,
    check_judged,
)
from ranking_plugins.kernel.inputs.dense import dense
from ranking_plugins.kernel.inputs.grouped import grouped
from ranking_plugins.kernel.inputs.item_ids import item_ids
from ranking_plugins.kernel.inputs.parts import Batch, Part, RankingInput, lowest
from ranking_plugins.kernel.inputs.relevance import (
    DenseGrades,
    GainRule,
    ItemIds,
    Relevance,
    least_at_or_above,
)


def normalize_input(
    preds: Tensor,
    target: Tensor,
    *,
    indexes: Tensor | None,
    mask: Tensor | None,
    target_format: str | None,
    rule: GainRule,
    validate_args: bool,
    judged: Tensor | None = None,
    depth: int | None = None,
    scores_checked: bool = False,
    first_hits: bool = False,
) -> Batch:
    """Check the inputs and bring any layout to :class:`Batch` (SPEC section 2).

    ``judged``: which items carry a judgment, in the layout's own form
    (:func:`~ranking_plugins.kernel.inputs.checks.check_judged`); None: every item.
    ``depth``: how deep the batch will be ranked (None: whole lists), where dense
    grades may select their own top as deep (:class:`DenseGrades`).
    ``scores_checked``: grouped scores already checked for NaN (see :func:`grouped`).
    ``first_hits``: the metrics read where the first relevant item lies, nothing else:
    dense grades then select no ideal list.
    """
    preds, target, indexes, mask = check_inputs(preds, target, indexes, mask, target_format)
    if preds.ndim == 1:
        indexes = check_grouped(preds, target, indexes, target_format)
        judged = check_judged(judged, preds, target, "grouped", validate_args)
        return grouped(preds, target, indexes, mask, rule, validate_args, judged, scores_checked)
    if preds.ndim != 2:
        raise ValueError(
            "`preds` must be (Q, N) scores, or (M,) scores with `indexes` for the grouped "
            f"layout, got shape {tuple(preds.shape)}"
        )
    if indexes is not None:
        raise ValueError(
            "`indexes` is only for the grouped layout, where `preds` is 1-D; "
            f"got `preds` of shape {tuple(preds.shape)}"
        )
    if target_format is None:
        target_format = "dense" if target.shape == preds.shape else "indices"
    if target_format == "dense":
        judged = check_judged(judged, preds, target, "dense", validate_args)
        return dense(preds, target, mask, rule, validate_args, judged, depth, first_hits)
    judged = check_judged(judged, preds, target, "indices", validate_args)
    return item_ids(preds, target, mask, rule, validate_args, judged)


__all__ = [
    "Batch",
    "DenseGrades",
    "GainRule",
    "ItemIds",
    "Part",
    "RankingInput",
    "Relevance",
    "check_grades",
    "check_grouped",
    "check_inputs",
    "least_at_or_above",
    "lowest",
    "normalize_input",
]
