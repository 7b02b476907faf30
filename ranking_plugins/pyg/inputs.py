"""PyG's link-prediction inputs checked, and score matrices' targets: glue, no formula.

PyG hands a metric ``pred_index_mat``, each example's top items already
ranked (``(Q, w)`` item ids, best first), and the ground truth as COO edges
``edge_label_index`` (``(2, E)``: example, item) with optional weights.
:func:`check_pred_index_mat` and :func:`check_edges` check them; ranked ids
are then read as the lists they are (:mod:`ranking_plugins.pyg.ranked`).

A floating ``pred_index_mat`` is a score matrix ``(Q, N)`` over the whole
catalogue instead (:func:`dense_grades` gives its targets): ties are then the
package's ``ties`` policy's.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ranking_plugins import _validation as validation


def is_score_matrix(pred_index_mat: Tensor) -> bool:
    """Whether ``pred_index_mat`` holds scores (floating) rather than ranked item ids."""
    return pred_index_mat.is_floating_point()


def check_pred_index_mat(
    pred_index_mat: object, num_items: int | None, validate_args: bool
) -> Tensor:
    """A ``(Q, w)`` integer matrix of item ids in ``[0, num_items)``, or a ``(Q, N)``
    float score matrix; NaN scores are the kernel's to refuse."""
    validation.check_tensor("pred_index_mat", pred_index_mat)
    assert isinstance(pred_index_mat, Tensor)
    if pred_index_mat.ndim != 2:
        raise validation.ArgumentError(
            "pred_index_mat",
            "must be 2-D: the top item ids of every example (batch_size, k), or a score "
            f"matrix (batch_size, num_items), got shape {tuple(pred_index_mat.shape)}",
        )
    if pred_index_mat.dtype == torch.bool or pred_index_mat.is_complex():
        raise validation.ArgumentError(
            "pred_index_mat",
            f"must hold integer item ids or real scores, got dtype {pred_index_mat.dtype}",
        )
    if is_score_matrix(pred_index_mat):
        if num_items is not None and pred_index_mat.shape[1] != num_items:
            raise validation.ArgumentError(
                "pred_index_mat",
                f"as a score matrix must have one column per catalogue item ({num_items}), "
                f"got {pred_index_mat.shape[1]}",
            )
        return pred_index_mat
    if validate_args and pred_index_mat.numel() > 0:
        low, high = (int(t) for t in torch.aminmax(pred_index_mat))
        if low < 0 or (num_items is not None and high >= num_items):
            bound = "" if num_items is None else f" and below the {num_items} catalogue items"
            raise validation.ArgumentError(
                "pred_index_mat",
                f"must hold item ids >= 0{bound}, got ids from {low} to {high}",
            )
    return pred_index_mat


def check_edges(
    edge_label_index: object,
    edge_label_weight: object,
    num_examples: int,
    num_items: int | None,
    validate_args: bool,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """The edges' example rows, item columns and weights, checked.

    A tuple ``(rows, cols)`` is taken as PyG takes it. Rows must be examples of
    the batch, columns item ids; an edge given twice is refused (PyG counts it
    twice in the label count but once in the hits)."""
    if isinstance(edge_label_index, tuple):
        if len(edge_label_index) != 2:
            raise validation.ArgumentError(
                "edge_label_index", f"as a tuple must be (rows, cols), got {len(edge_label_index)}"
            )
        rows, cols = (validation.check_tensor("edge_label_index", t) for t in edge_label_index)
    else:
        index = validation.check_tensor("edge_label_index", edge_label_index)
        if index.ndim != 2 or index.shape[0] != 2:
            raise validation.ArgumentError(
                "edge_label_index",
                "must be a (2, num_ground_truth_indices) tensor in COO format (example, item), "
                f"got shape {tuple(index.shape)}",
            )
        rows, cols = index[0], index[1]
    if rows.ndim != 1 or rows.shape != cols.shape:
        raise validation.ArgumentError(
            "edge_label_index",
            f"must hold as many rows as columns, got shapes {tuple(rows.shape)} "
            f"and {tuple(cols.shape)}",
        )
    for t in (rows, cols):
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise validation.ArgumentError(
                "edge_label_index", f"must hold integer indices, got dtype {t.dtype}"
            )
    weight = None
    if edge_label_weight is not None:
        weight = validation.check_tensor("edge_label_weight", edge_label_weight)
        if weight.shape != rows.shape:
            raise validation.ArgumentError(
                "edge_label_weight",
                f"must hold one weight per edge {tuple(rows.shape)}, got shape "
                f"{tuple(weight.shape)}",
            )
    if validate_args and rows.numel() > 0:
        low, high = (int(t) for t in torch.aminmax(rows))
        if low < 0 or high >= num_examples:
            raise validation.ArgumentError(
                "edge_label_index",
                f"row 0 must hold examples of the batch, in [0, {num_examples}), "
                f"got {low} to {high}",
            )
        low, high = (int(t) for t in torch.aminmax(cols))
        if low < 0 or (num_items is not None and high >= num_items):
            bound = "" if num_items is None else f" and below the {num_items} catalogue items"
            raise validation.ArgumentError(
                "edge_label_index",
                f"row 1 must hold item ids >= 0{bound}, got ids from {low} to {high}",
            )
        if weight is not None and bool(torch.isnan(weight).any()):
            raise validation.ArgumentError("edge_label_weight", "must not hold NaN")
        keys = (rows.to(torch.int64) * (high + 1) + cols.to(torch.int64)).sort().values
        if bool((keys[1:] == keys[:-1]).any()):
            raise validation.ArgumentError(
                "edge_label_index", "must not hold an (example, item) edge twice"
            )
    return rows.to(torch.int64), cols.to(torch.int64), weight


def positive_edges(
    rows: Tensor, cols: Tensor, weight: Tensor | None
) -> tuple[Tensor, Tensor, Tensor | None]:
    """PyG's rule: an edge of weight <= 0 is no ground truth."""
    if weight is None:
        return rows, cols, None
    keep = weight > 0
    return rows[keep], cols[keep], weight[keep]


def dense_grades(scores: Tensor, rows: Tensor, cols: Tensor, weight: Tensor | None) -> Tensor:
    """The (Q, N) grades of a score matrix: the edges' weights (or 1), 0 elsewhere."""
    dtype = torch.float64 if weight is not None else torch.float32
    grades = torch.zeros(scores.shape, dtype=dtype, device=scores.device)
    values = torch.ones(rows.shape, dtype=dtype) if weight is None else weight.to(dtype)
    grades[rows.to(scores.device), cols.to(scores.device)] = values.to(scores.device)
    return grades


__all__ = [
    "check_edges",
    "check_pred_index_mat",
    "dense_grades",
    "is_score_matrix",
    "positive_edges",
]
