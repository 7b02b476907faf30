"""The input checks of every layout, kept apart from the layouts' conversions.

The tensor layouts (dense grades, item ids, grouped), ``judged`` and the
item inputs of the exposure metrics (:func:`check_item_inputs`); the scores
given as embeddings are checked beside their classes
(:mod:`~ranking_plugins.kernel.catalogue.checks`). Checks that read no tensor
value always run; those that read values (:func:`check_grades`, the range of
item ids in :func:`item_ids_in_catalogue`) run only with ``validate_args=True``.

Item ids (targets, ``judged``, ``exclude``), in every layout: an integer
(Q,) or (Q, T) tensor, ``-1`` for padding (:func:`check_item_id_matrix`).
An id outside ``[0, N)`` is an error with ``validate_args=True``; without
it, it names no item and is padding, never an item's score read through a
clamp (:func:`item_ids_in_catalogue`, computed on the device: no host read).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.inputs.relevance import GainRule


def check_inputs(
    preds: object,
    target: object,
    indexes: object,
    mask: object,
    target_format: str | None,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """The checks of every layout that read no tensor value; returns the detached inputs."""
    preds = detached("preds", preds)
    target = detached("target", target)
    if indexes is not None:
        indexes = detached("indexes", indexes)
    if mask is not None:
        mask = detached("mask", mask)
        if mask.dtype != torch.bool:
            raise TypeError(f"`mask` must be a bool tensor, got dtype {mask.dtype}")
        if mask.shape != preds.shape:
            raise ValueError(
                f"`mask` must have the shape of `preds` {tuple(preds.shape)}, "
                f"got {tuple(mask.shape)}"
            )
    validation.check_preds_dtype(preds)
    if target.is_complex():
        raise TypeError(f"`target` must hold real grades or integer item ids, got {target.dtype}")
    validation.check_same_device(preds=preds, target=target, indexes=indexes, mask=mask)
    return preds, target, indexes, mask


def detached(name: str, value: object) -> Tensor:
    """``value`` checked as a tensor (:func:`~ranking_plugins._validation.check_tensor`),
    without autograd history: the metrics take no gradient. A tensor that has none is
    taken as it is (a detach is one more operation for the host to dispatch)."""
    tensor = validation.check_tensor(name, value)
    return tensor.detach() if tensor.requires_grad else tensor


def check_grouped(
    preds: Tensor, target: Tensor, indexes: Tensor | None, target_format: str | None
) -> Tensor:
    """The grouped layout's own checks (no tensor value read); returns ``indexes``."""
    if indexes is None:
        raise ValueError(
            "1-D `preds` is the grouped layout and needs `indexes` (M,) giving each item's query id"
        )
    if not validation.is_integer_dtype(indexes.dtype):
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
    query_of_item: Callable[[], Tensor] | None = None,
    largest: Callable[[], Tensor] | None = None,
) -> None:
    """No NaN grade, and no gain (nor sum of a query's gains) that overflows float64.

    ``grades`` are (Q, N) rows, or flat (M,) with ``query_of_item`` (grouped),
    which gives each entry's query (made only when the sums are read).
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
    if validation.is_integer_dtype(grades.dtype) and _gains_bounded(
        grades.dtype, rule, list_length
    ):
        return
    top = grades.amax() if largest is None else largest().amax()
    # one read for both checks: the gain of a NaN grade is NaN, and only its
    top_gain = _largest_gain(top, rule)
    if math.isnan(top_gain):
        raise ValueError(validation.NAN_GRADES)
    if math.isfinite(top_gain * max(list_length, 1)):
        return
    gains = rule.gains(grades, rule.relevant(grades), by_this_rule=True)
    if query_of_item is None:
        totals = gains.sum(dim=-1)
    else:
        query = query_of_item()
        totals = gains.new_zeros(int(query.max()) + 1).index_add_(0, query, gains)
    if not bool(totals.isfinite().all()):
        raise ValueError(
            f"`target`: the {rule.gain} gain of grade {float(top):g} "
            f"({'2^g - 1' if rule.gain == 'exponential' else 'g'}), or the sum of a query's "
            "gains, overflows float64; use smaller grades"
            + (" or gain='linear'" if rule.gain == "exponential" else "")
        )


def _largest_gain(top: Tensor, rule: GainRule) -> float:
    """The gain of the largest grade ``top`` (0-d), read on the host: NaN for a NaN grade."""
    if rule.gain == "linear":
        # the linear gain is the grade clamped at 0, which the host takes without the
        # device's two operations: float() of a grade is its float64 value exactly
        value = float(top)
        return value if math.isnan(value) else max(value, 0.0)
    return float(rule.gain_of(top.reshape(1)))


def _gains_bounded(dtype: torch.dtype, rule: GainRule, list_length: int) -> bool:
    """Whether the gain of ``dtype``'s largest value, times ``list_length``, is finite."""
    largest = torch.tensor([torch.iinfo(dtype).max], dtype=dtype)
    return math.isfinite(float(rule.gain_of(largest)[0]) * max(list_length, 1))


def check_judged(
    judged: object, preds: Tensor, target: Tensor, layout: str, validate_args: bool = True
) -> Tensor | None:
    """The ``judged`` input of a layout, detached; None: every item is judged.

    Dense and grouped: a bool tensor shaped like ``preds``. Item ids: an integer
    tensor (Q,) or (Q, J) of judged item ids, -1 for padding (their range is
    read, as the target's, only with ``validate_args``).
    """
    if judged is None:
        return None
    judged = detached("judged", judged)
    validation.check_same_device(preds=preds, judged=judged)
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
    """``judged`` as judged item ids (Q,) or (Q, J), -1 for padding: int64 (Q, J)."""
    judged = check_item_id_matrix(
        "judged",
        judged,
        num_queries,
        columns="J",
        hint=" (with item-index targets, the ids of the judged items, not a bool mask)",
    )
    return item_ids_in_catalogue("judged", judged, num_items, validate_args)


# -- item ids: every layout's targets, judged ids and exclusions ---------------


def check_item_id_matrix(
    name: str,
    ids: Tensor,
    num_queries: int,
    *,
    columns: str = "T",
    one_per_row: bool = True,
    hint: str = "",
) -> Tensor:
    """Integer item ids (Q,) or (Q, ``columns``), -1 for padding: int64 (Q, ``columns``).

    The one check of an item-id matrix (the item-index targets of every layout,
    ``judged`` ids, ``exclude``); reads no value (their range is
    :func:`item_ids_in_catalogue`'s). ``one_per_row=False``: only (Q, X) is
    taken (``exclude``). ``hint``: what the layout adds to the type error.
    """
    shapes = f"(Q,) or (Q, {columns})" if one_per_row else f"(Q, {columns})"
    if not validation.is_integer_dtype(ids.dtype):
        raise TypeError(
            f"`{name}` must be an integer tensor of item ids {shapes}, -1 for padding{hint}; "
            f"got dtype {ids.dtype} and shape {tuple(ids.shape)}"
        )
    if ids.ndim == 1 and one_per_row:
        ids = ids.unsqueeze(1)
    if ids.ndim != 2 or ids.shape[0] != num_queries:
        raise ValueError(
            f"`{name}` must be {shapes} item ids with Q = {num_queries} queries, "
            f"got shape {tuple(ids.shape)}"
        )
    return ids.to(torch.int64)


def item_ids_in_catalogue(name: str, ids: Tensor, num_items: int, validate_args: bool) -> Tensor:
    """``ids`` (Q, T) int64 for a catalogue (or list) of ``num_items`` items.

    With ``validate_args`` an id outside [0, ``num_items``) other than the -1
    padding is an error (two values read). Without it, such an id names no
    item, so it is padding, made so on the device (no host read), the same
    for every layout (SPEC section 5): clamped into range it would read
    another item's score, and left as it is it would index past the scores.
    """
    if validate_args:
        validation.check_item_ids(name, ids, num_items)
        return ids
    return torch.where((ids >= 0) & (ids < num_items), ids, -1)


def check_item_targets(target: Tensor, preds: Tensor) -> Tensor:
    """The item-index layout's ``target`` for (Q, N) ``preds``: int64 (Q, T), range unread."""
    return check_item_id_matrix(
        "target",
        target,
        preds.shape[0],
        hint=f" (or dense grades of the shape of `preds` {tuple(preds.shape)})",
    )


def check_dense(preds: Tensor, target: Tensor) -> None:
    """The dense layout: a grade for every item, ``target`` shaped like ``preds``."""
    if target.shape != preds.shape:
        raise ValueError(
            f"dense `target` must have the shape of `preds` {tuple(preds.shape)}, "
            f"got {tuple(target.shape)}"
        )


# -- the item inputs of the exposure metrics ------------------------------------


def check_item_inputs(
    item_popularity: Tensor | None,
    tail_items: Tensor | None,
    item_features: Tensor | None,
    item_categories: Tensor | None,
    num_items: int | None,
) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    """The item inputs of the exposure metrics, for ``ItemInputs.create``.

    Each given input (naming it in the error), and that they agree on N.
    Returns the inputs detached, the popularity as float64 (None: not given).
    """
    problem = None if num_items is None else validation.positive_int_problem(num_items)
    if problem is not None:
        raise validation.ArgumentError("num_items", problem.or_none().text)
    popularity = tail = features = categories = None
    if item_popularity is not None:
        validation.check_tensor("item_popularity", item_popularity)
        if item_popularity.ndim != 1 or item_popularity.dtype == torch.bool:
            raise ValueError(
                "`item_popularity` must be a 1-D tensor of numbers (N,), one per item, "
                f"got shape {tuple(item_popularity.shape)} and dtype {item_popularity.dtype}"
            )
        popularity = item_popularity.detach().to(torch.float64)
        if not bool(torch.isfinite(popularity).all()) or bool((popularity < 0).any()):
            raise ValueError(
                "`item_popularity` must be finite and non-negative (an interaction "
                "count or share per item)"
            )
    if tail_items is not None:
        validation.check_tensor("tail_items", tail_items)
        if tail_items.ndim != 1 or tail_items.dtype != torch.bool:
            raise ValueError(
                "`tail_items` must be a 1-D bool tensor (N,), True for the long-tail "
                f"items, got shape {tuple(tail_items.shape)} and dtype {tail_items.dtype} "
                "(from popularity: `tail_items=item_popularity <= threshold`)"
            )
        tail = tail_items.detach()
    if item_features is not None:
        validation.check_tensor("item_features", item_features)
        if item_features.ndim != 2 or not item_features.is_floating_point():
            raise ValueError(
                "`item_features` must be a 2-D floating-point tensor (N, d), one row "
                f"per item, got shape {tuple(item_features.shape)} and dtype "
                f"{item_features.dtype}"
            )
        features = item_features.detach()  # made float64 once, as unit vectors
        if not bool(torch.isfinite(features).all()):
            raise ValueError("`item_features` must be finite")
    if item_categories is not None:
        validation.check_tensor("item_categories", item_categories)
        if item_categories.ndim != 1 or not validation.is_integer_dtype(item_categories.dtype):
            raise ValueError(
                "`item_categories` must be a 1-D integer tensor (N,), one category "
                f"per item, got shape {tuple(item_categories.shape)} and dtype "
                f"{item_categories.dtype}"
            )
        categories = item_categories.detach()
    given = {
        name: t.shape[0]
        for name, t in (
            ("item_popularity", popularity),
            ("tail_items", tail),
            ("item_features", features),
            ("item_categories", categories),
        )
        if t is not None
    }
    if num_items is not None:
        given["num_items"] = num_items
    if len(set(given.values())) > 1:
        sizes = ", ".join(f"`{name}` has {n}" for name, n in given.items())
        raise ValueError(f"the item inputs must describe the same N items: {sizes}")
    return popularity, tail, features, categories
