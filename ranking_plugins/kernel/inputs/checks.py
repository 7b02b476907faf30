"""The input checks of every layout, kept apart from the layouts' conversions.

Checks that read no tensor value always run; :func:`check_grades` reads
values and runs only with ``validate_args=True``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ranking_plugins import _validation as V
from ranking_plugins.kernel.inputs.relevance import GainRule


def check_inputs(
    preds: object,
    target: object,
    indexes: object,
    mask: object,
    target_format: str | None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """The checks of every layout that read no tensor value; returns the detached inputs."""
    preds = V.check_tensor("preds", preds).detach()
    target = V.check_tensor("target", target).detach()
    if indexes is not None:
        indexes = V.check_tensor("indexes", indexes).detach()
    if mask is not None:
        mask = V.check_tensor("mask", mask).detach()
        if mask.dtype != torch.bool:
            raise TypeError(f"`mask` must be a bool tensor, got dtype {mask.dtype}")
        if mask.shape != preds.shape:
            raise ValueError(
                f"`mask` must have the shape of `preds` {tuple(preds.shape)}, "
                f"got {tuple(mask.shape)}"
            )
    V.check_preds_dtype(preds)
    if target.is_complex():
        raise TypeError(f"`target` must hold real grades or integer item ids, got {target.dtype}")
    V.check_same_device(preds=preds, target=target, indexes=indexes, mask=mask)
    return preds, target, indexes, mask


def check_grouped(
    preds: Tensor, target: Tensor, indexes: Tensor | None, target_format: str | None
) -> Tensor:
    """The grouped layout's own checks (no tensor value read); returns ``indexes``."""
    if indexes is None:
        raise ValueError(
            "1-D `preds` is the grouped layout and needs `indexes` (M,) giving each item's query id"
        )
    if not V.is_integer_dtype(indexes.dtype):
        raise TypeError(f"`indexes` must be an integer tensor of query ids, got {indexes.dtype}")
    if target_format == "indices":
        raise ValueError("`target_format='indices'` needs 2-D `preds` (Q, N)")
    if target.shape != preds.shape or indexes.shape != preds.shape:
        raise ValueError(
            "grouped layout: `preds`, `target` and `indexes` must all be (M,), got shapes "
            f"{tuple(preds.shape)}, {tuple(target.shape)} and {tuple(indexes.shape)}"
        )
    return indexes


def check_grades(
    grades: Tensor,
    rule: GainRule,
    list_length: int,
    query_of_item: Tensor | None = None,
    largest: Callable[[], Tensor] | None = None,
) -> None:
    """No NaN grade, and no gain (nor sum of a query's gains) that overflows float64.

    ``grades`` are (Q, N) rows, or flat (M,) with ``query_of_item`` (grouped).
    Reads the values (one max over the grades; the per-query sums only when
    the largest gain times the list length could overflow), unless the dtype
    alone proves every sum finite (bool; integer grades whose largest value's
    gain times the list length is finite: int8 and uint8 under either gain,
    every integer dtype under the linear gain): no NaN, no overflow, no read.

    ``largest``: gives the largest grade of each row of (Q, N) grades, called
    only when the check reads values (:meth:`DenseGrades.largest
    <ranking_plugins.kernel.inputs.relevance.DenseGrades.largest>` reads them
    with the counts the ranking needs anyway, instead of a pass of its own).
    """
    if grades.dtype == torch.bool or grades.numel() == 0:
        return
    if V.is_integer_dtype(grades.dtype) and _gains_bounded(grades.dtype, rule, list_length):
        return
    top = (grades.amax() if largest is None else largest().amax()).reshape(())
    if grades.is_floating_point() and bool(top.isnan()):
        raise ValueError(V.NAN_GRADES)
    top_gain = float(rule.gain_of(top.reshape(1))[0])
    if math.isfinite(top_gain * max(list_length, 1)):
        return
    gains = rule.gains(grades, rule.relevant(grades))
    if query_of_item is None:
        totals = gains.sum(dim=-1)
    else:
        queries = int(query_of_item.max()) + 1
        totals = gains.new_zeros(queries).index_add_(0, query_of_item, gains)
    if not bool(totals.isfinite().all()):
        raise ValueError(
            f"`target`: the {rule.gain} gain of grade {float(top):g} "
            f"({'2^g - 1' if rule.gain == 'exponential' else 'g'}), or the sum of a query's "
            "gains, overflows float64; use smaller grades"
            + (" or gain='linear'" if rule.gain == "exponential" else "")
        )


def _gains_bounded(dtype: torch.dtype, rule: GainRule, list_length: int) -> bool:
    """Whether the gain of ``dtype``'s largest value, times ``list_length``, is finite."""
    largest = torch.tensor([torch.iinfo(dtype).max], dtype=dtype)
    return math.isfinite(float(rule.gain_of(largest)[0]) * max(list_length, 1))


def check_embedding_inputs(
    *, indexes: Tensor | None, mask: Tensor | None, target_format: str | None
) -> None:
    """The arguments of the tensor layouts that do not apply to ``EmbeddingScores``."""
    if mask is not None:
        raise ValueError(
            "`mask` does not apply to EmbeddingScores: list the items to leave out of "
            "the ranking in EmbeddingScores(..., exclude=item_ids)"
        )
    if indexes is not None:
        raise ValueError("`indexes` (grouped layout) does not apply to EmbeddingScores")
    if target_format == "dense":
        raise ValueError("EmbeddingScores needs item-index targets, not `target_format='dense'`")


def check_judged(
    judged: object, preds: Tensor, target: Tensor, layout: str, validate_args: bool = True
) -> Tensor | None:
    """The ``judged`` input of a layout (issue 13), detached; None: every item is judged.

    Dense and grouped: a bool tensor shaped like ``preds``. Item ids: an integer
    tensor (Q,) or (Q, J) of judged item ids, -1 for padding (their range is
    read, as the target's, only with ``validate_args``).
    """
    if judged is None:
        return None
    judged = V.check_tensor("judged", judged).detach()
    V.check_same_device(preds=preds, judged=judged)
    if layout == "indices":
        return check_judged_ids(judged, preds.shape[0], preds.shape[1], validate_args)
    if judged.dtype != torch.bool:
        raise TypeError(
            f"`judged` must be a bool tensor (True: the item carries a judgment), "
            f"got dtype {judged.dtype}"
        )
    if judged.shape != preds.shape:
        raise ValueError(
            f"`judged` must have the shape of `preds` {tuple(preds.shape)}, "
            f"got {tuple(judged.shape)}"
        )
    return judged


def check_judged_ids(
    judged: Tensor, num_queries: int, num_items: int, validate_args: bool = True
) -> Tensor:
    """``judged`` as judged item ids (Q,) or (Q, J), -1 for padding: int64 (Q, J).

    The ids' range is read (a value read) only with ``validate_args``.
    """
    if not V.is_integer_dtype(judged.dtype):
        raise TypeError(
            "with item-index targets, `judged` must be an integer tensor of the judged "
            f"item ids (Q,) or (Q, J), -1 for padding; got dtype {judged.dtype}"
        )
    if judged.ndim == 1:
        judged = judged.unsqueeze(1)
    if judged.ndim != 2 or judged.shape[0] != num_queries:
        raise ValueError(
            f"with item-index targets, `judged` must be (Q,) or (Q, J) with Q = "
            f"{num_queries} queries, got shape {tuple(judged.shape)}"
        )
    if validate_args:
        V.check_item_ids("judged", judged, num_items)
    return judged.to(torch.int64)
