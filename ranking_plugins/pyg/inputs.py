"""PyG's link-prediction inputs in the kernel's layouts: glue, no formula.

PyG hands a metric ``pred_index_mat``, each example's top items already
ranked (``(Q, w)`` item ids, best first), and the ground truth as COO edges
``edge_label_index`` (``(2, E)``: example, item) with optional weights. The
kernel reads scores, so a ranked list becomes strictly decreasing scores
(``w``, ``w - 1``, ..., 1: no ties, the list's own order), and:

* for the accuracy metrics, dense rows (:func:`ranked_lists`): each
  example's listed items, then its relevant items that are not listed, with
  ``mask=False`` (never ranked, but counted in R and in the ideal DCG, as
  PyG's label count does): Q·(w + the most unlisted of an example) entries,
  no catalogue-wide row;
* for the exposure metrics, blocks of rows over the union of their items
  (:func:`union_blocks`): column j of a block is catalogue item ``ids[j]``, so
  the item inputs are those rows of the catalogue's.

A floating ``pred_index_mat`` is a score matrix ``(Q, N)`` over the whole
catalogue instead (:func:`dense_grades` gives its targets): ties are then the
package's ``ties`` policy's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from ranking_plugins import _validation as validation

#: a block of the exposure path holds at most this many (row, column) entries: the
#: blocks' entries sum to about Q·w·(rows per block), so smaller blocks do less work
#: until the per-block overhead dominates
BLOCK_ELEMENTS = 1 << 18


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
        low, high = int(pred_index_mat.min()), int(pred_index_mat.max())
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
        low, high = int(rows.min()), int(rows.max())
        if low < 0 or high >= num_examples:
            raise validation.ArgumentError(
                "edge_label_index",
                f"row 0 must hold examples of the batch, in [0, {num_examples}), "
                f"got {low} to {high}",
            )
        low, high = int(cols.min()), int(cols.max())
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


@dataclass(frozen=True)
class ListedRows:
    """One update as dense rows with a mask (``rank_metrics``' ``mask``): the listed
    items first, then the example's relevant items that are not listed (masked out),
    then padding (masked, grade 0)."""

    preds: Tensor
    target: Tensor
    mask: Tensor


def _list_scores(num_examples: int, width: int, device: torch.device) -> Tensor:
    """(Q, w) strictly decreasing scores: the ranked lists' own order, no ties."""
    scores = torch.arange(width, 0, -1, dtype=torch.float32, device=device)
    return scores.expand(num_examples, width)


def ranked_lists(ranked: Tensor, rows: Tensor, cols: Tensor, weight: Tensor | None) -> ListedRows:
    """Each example's listed items (grade: its edge's weight, or 1; 0 without an
    edge), then its relevant items that are not listed (masked out), so that they
    count in R and in the ideal DCG as PyG's label count does."""
    device = ranked.device
    num_examples, width = ranked.shape
    ranked = ranked.to(torch.int64)
    rows, cols = rows.to(device), cols.to(device)
    grade_dtype = torch.float64 if weight is not None else torch.float32
    span = max(int(ranked.max()) if ranked.numel() else 0, int(cols.max()) if cols.numel() else 0)
    span += 1
    listed_keys = (torch.arange(num_examples, device=device).unsqueeze(1) * span + ranked).view(-1)
    edge_keys = rows * span + cols
    edge_grades = (
        torch.ones(edge_keys.shape, dtype=grade_dtype, device=device)
        if weight is None
        else weight.to(device, grade_dtype)
    )
    grades = torch.zeros(listed_keys.shape, dtype=grade_dtype, device=device)
    unlisted = torch.ones(edge_keys.shape, dtype=torch.bool, device=device)
    if edge_keys.numel() > 0 and listed_keys.numel() > 0:
        sorted_edges, order = edge_keys.sort()
        at = torch.searchsorted(sorted_edges, listed_keys).clamp(max=sorted_edges.numel() - 1)
        found = sorted_edges[at] == listed_keys
        grades = torch.where(found, edge_grades[order[at]], grades)
        sorted_listed = listed_keys.sort().values
        at = torch.searchsorted(sorted_listed, edge_keys).clamp(max=sorted_listed.numel() - 1)
        unlisted = sorted_listed[at] != edge_keys
    # the unlisted edges, by example, each at its place after the example's list
    extra_rows, order = rows[unlisted].sort(stable=True)
    extra_grades = edge_grades[unlisted][order]
    counts = torch.bincount(extra_rows, minlength=num_examples)
    first = torch.cumsum(counts, 0) - counts
    place = torch.arange(extra_rows.numel(), device=device) - first[extra_rows]
    extra = int(counts.max()) if num_examples > 0 else 0
    shape = (num_examples, width + extra)
    preds = torch.zeros(shape, dtype=torch.float32, device=device)
    preds[:, :width] = _list_scores(num_examples, width, device)
    mask = torch.zeros(shape, dtype=torch.bool, device=device)
    mask[:, :width] = True
    target = torch.zeros(shape, dtype=grade_dtype, device=device)
    target[:, :width] = grades.view(num_examples, width)
    target[extra_rows, width + place] = extra_grades
    return ListedRows(preds, target, mask)


def dense_grades(scores: Tensor, rows: Tensor, cols: Tensor, weight: Tensor | None) -> Tensor:
    """The (Q, N) grades of a score matrix: the edges' weights (or 1), 0 elsewhere."""
    dtype = torch.float64 if weight is not None else torch.float32
    grades = torch.zeros(scores.shape, dtype=dtype, device=scores.device)
    values = torch.ones(rows.shape, dtype=dtype) if weight is None else weight.to(dtype)
    grades[rows.to(scores.device), cols.to(scores.device)] = values.to(scores.device)
    return grades


@dataclass(frozen=True)
class UnionBlock:
    """Rows of ranked lists over the union of their items: column j is item ``ids[j]``."""

    scores: Tensor  # (q, U): the lists' scores where listed
    listed: Tensor  # (q, U) bool: the mask, False where a row does not list the item
    ids: Tensor  # (U,) catalogue ids, ascending (so that index order is the catalogue's)


def union_blocks(ranked: Tensor) -> Iterator[UnionBlock]:
    """``ranked`` (Q, w) item ids in blocks of rows, each over its items' union,
    each block at most :data:`BLOCK_ELEMENTS` entries (bounded memory)."""
    num_examples, width = ranked.shape
    rows_per_block = max(1, math.isqrt(BLOCK_ELEMENTS // max(width, 1)))
    scores = _list_scores(1, width, ranked.device)
    for start in range(0, num_examples, rows_per_block):
        block = ranked[start : start + rows_per_block].to(torch.int64)
        ids, columns = torch.unique(block, return_inverse=True)
        shape = (block.shape[0], ids.numel())
        block_scores = torch.zeros(shape, dtype=torch.float32, device=ranked.device)
        block_scores.scatter_(1, columns, scores.expand_as(block))
        listed = torch.zeros(shape, dtype=torch.bool, device=ranked.device)
        listed.scatter_(1, columns, True)
        yield UnionBlock(block_scores, listed, ids)


__all__ = [
    "BLOCK_ELEMENTS",
    "ListedRows",
    "UnionBlock",
    "check_edges",
    "check_pred_index_mat",
    "dense_grades",
    "is_score_matrix",
    "positive_edges",
    "ranked_lists",
    "union_blocks",
]
