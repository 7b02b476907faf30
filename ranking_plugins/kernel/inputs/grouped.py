"""The grouped layout: flat (M,) scores, grades and query ids, one entry per item."""

from __future__ import annotations

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.inputs.checks import check_grades
from ranking_plugins.kernel.inputs.parts import (
    Batch,
    Part,
    RankingInput,
    lowest,
    nan_check_deferred,
)
from ranking_plugins.kernel.inputs.relevance import DenseGrades, GainRule


def grouped(
    preds: Tensor,
    target: Tensor,
    indexes: Tensor,
    mask: Tensor | None,
    rule: GainRule,
    validate_args: bool,
    judged_items: Tensor | None = None,
    scores_checked: bool = False,
) -> Batch:
    """Flat (M,) triples with query ids -> padded rows, items in input order.

    The shapes and ``indexes`` are checked already (``check_grouped``).
    Queries are ordered by id (``torch.unique``; no sort when ``indexes`` never
    decreases). Lists are padded only to
    lists of the same length class (lengths in (2^(j-1), 2^j]), one part per
    class, so 20,000 one-item lists beside one 20,000-item list cost 60,000
    slots, not 400 million.

    ``scores_checked``: ``preds`` were checked for NaN when an adapter kept
    them; the grades' checks, which need whole queries, still run here.
    """
    if mask is not None and host_reads_are_free(mask) and bool(mask.all()):
        # every item ranked (the adapters keep a mask of True where the user gave none):
        # without a mask the ranking sorts by score alone, not by score and flag
        mask = None
    # padding is parked below every score, never over a NaN: the ranking meets them all
    check_scores = validate_args and not scores_checked
    deferred = nan_check_deferred(preds, mask, check_scores)
    if check_scores and not deferred:
        validation.check_values(preds, None, None, 0)
    device = preds.device
    # input already gathered by query (the command's collections): no sort needed
    in_order = bool((indexes[1:] >= indexes[:-1]).all())
    if in_order:
        queries, sizes = torch.unique_consecutive(indexes, return_counts=True)
        by_query = None

        def query_of_item() -> Tensor:  # only where the grades' sums are checked
            return torch.repeat_interleave(torch.arange(sizes.numel(), device=device), sizes)

    else:
        queries, inverse, sizes = torch.unique(indexes, return_inverse=True, return_counts=True)
        by_query = torch.argsort(inverse, stable=True)  # entries by query, in input order

        def query_of_item() -> Tensor:
            return inverse

    num_queries = queries.numel()
    if validate_args and num_queries:
        check_grades(target, rule, int(sizes.max()), query_of_item)
    length_class = torch.ceil(torch.log2(sizes.to(torch.float64))).to(torch.int64)
    if num_queries and int(sizes.max()) * num_queries <= 2 * preds.numel():
        length_class.zero_()  # padding every list to the longest at most doubles the slots
    # queries ordered by length class (then id)
    query_order = torch.argsort(length_class, stable=True)
    query_start = torch.cumsum(sizes, 0) - sizes  # where a query's entries begin, by query
    _, queries_per_class = torch.unique_consecutive(length_class[query_order], return_counts=True)
    parts = []
    first_query = 0
    for count in queries_per_class.tolist():
        rows = query_order[first_query : first_query + count]
        lengths = sizes[rows]
        width = int(lengths.max())
        # lists of one length (the usual batch of candidates) have no padding
        padded = int(lengths.min()) < width
        whole = by_query is None and count == num_queries  # every item, in order
        if whole and not padded:
            # every item, in order, in lists of one length: the rows are a view, no copy
            scores, grades = preds.reshape(count, width), target.reshape(count, width)
            ranked = None if mask is None else mask.reshape(count, width)
            judged = None if judged_items is None else judged_items.reshape(count, width)
        else:
            scores, grades, ranked, judged = _padded_rows(
                (preds, target, mask, judged_items),
                lengths,
                query_start[rows],
                by_query,
                whole,
                width,
                padded,
            )
        relevance = DenseGrades(
            grades, rule, judged if padded or judged_items is not None else None
        )
        data = RankingInput(scores, ranked, relevance, deferred)
        parts.append(Part(rows, data))
        first_query += count
    return Batch(num_queries, device, tuple(parts))


def _padded_rows(
    flat: tuple[Tensor, Tensor, Tensor | None, Tensor | None],
    lengths: Tensor,
    starts: Tensor,
    by_query: Tensor | None,
    whole: bool,
    width: int,
    padded: bool,
) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    """One length class's queries as rows of ``width``: scores, grades, ranked, judged.

    ``flat`` = (preds, target, mask, judged_items); the queries' entries begin at
    ``starts`` in the order ``by_query`` gives (input order when None); ``whole``:
    they are every item, in order. Padding takes the lowest score, grade 0, and
    is neither ranked nor judged.
    """
    preds, target, mask, judged_items = flat
    device = preds.device
    count = lengths.numel()
    row = torch.repeat_interleave(torch.arange(count, device=device), lengths)
    class_start = (torch.cumsum(lengths, 0) - lengths).repeat_interleave(lengths)
    column = torch.arange(row.numel(), device=device) - class_start
    entries = starts.repeat_interleave(lengths) + column
    if by_query is not None:
        entries = by_query[entries]
    at = (row * width + column, (count, width), None if whole else entries)
    scores = _padded(preds, lowest(preds.dtype), *at)
    grades = _padded(target, 0, *at)
    real = _padded(torch.ones_like(preds, dtype=torch.bool), False, *at)
    ranked: Tensor | None = None  # no mask and no padding: every item is ranked,
    if mask is not None:  # and the ranking sorts by score alone (not by a flag too)
        ranked = _padded(mask, False, *at)
    elif padded:
        ranked = real.clone()
    judged = real if judged_items is None else _padded(judged_items, False, *at)
    return scores, grades, ranked, judged


def _padded(
    values: Tensor, fill: float, slot: Tensor, shape: tuple[int, int], entries: Tensor | None
) -> Tensor:
    """``values[entries]`` (all of them when None) placed at flat ``slot``s of a filled matrix."""
    out = torch.full((shape[0] * shape[1],), fill, dtype=values.dtype, device=values.device)
    out[slot] = values if entries is None else values[entries]
    return out.view(shape)
