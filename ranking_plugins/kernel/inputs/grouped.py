"""The grouped layout: flat (M,) scores, grades and query ids, one entry per item."""

from __future__ import annotations

import torch
from torch import Tensor

from ranking_plugins import _validation as V
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
) -> Batch:
    """Flat (M,) triples with query ids -> padded rows, items in input order.

    The shapes and ``indexes`` are checked already (``check_grouped``).
    Queries are ordered by id (``torch.unique``). Lists are padded only to
    lists of the same length class (lengths in (2^(j-1), 2^j]), one part per
    class, so 20,000 one-item lists beside one 20,000-item list cost 60,000
    slots, not 400 million.
    """
    # padding is parked below every score, never over a NaN: the ranking meets them all
    deferred = nan_check_deferred(preds, mask, validate_args)
    if validate_args and not deferred:
        V.check_values(preds, None, None, 0)
    queries, query_of_item, sizes = torch.unique(indexes, return_inverse=True, return_counts=True)
    num_queries = queries.numel()
    if validate_args and num_queries:
        check_grades(target, rule, int(sizes.max()), query_of_item)
    device = preds.device
    length_class = torch.ceil(torch.log2(sizes.to(torch.float64))).to(torch.int64)
    # queries ordered by length class (then id); entries by query (then input order)
    query_order = torch.argsort(length_class, stable=True)
    rank_of_query = torch.empty_like(query_order)
    rank_of_query[query_order] = torch.arange(num_queries, device=device)
    entry_order = torch.argsort(rank_of_query[query_of_item], stable=True)
    sorted_sizes = sizes[query_order]
    starts = torch.cumsum(sorted_sizes, 0) - sorted_sizes
    _, queries_per_class = torch.unique_consecutive(length_class[query_order], return_counts=True)
    parts = []
    first_query = 0
    for count in queries_per_class.tolist():
        rows = query_order[first_query : first_query + count]
        lengths = sorted_sizes[first_query : first_query + count]
        width = int(lengths.max())
        first = int(starts[first_query])
        entries = entry_order[first : first + int(lengths.sum())]
        row = torch.repeat_interleave(torch.arange(count, device=device), lengths)
        column = torch.arange(entries.numel(), device=device) - (
            starts[first_query : first_query + count] - first
        ).repeat_interleave(lengths)
        scores = torch.full((count, width), lowest(preds.dtype), dtype=preds.dtype, device=device)
        scores[row, column] = preds[entries]
        grades = torch.zeros((count, width), dtype=target.dtype, device=device)
        grades[row, column] = target[entries]
        judged = torch.zeros((count, width), dtype=torch.bool, device=device)
        judged[row, column] = True
        ranked = judged.clone()
        if judged_items is not None:
            judged[row, column] = judged_items[entries]
        if mask is not None:
            ranked[row, column] = mask[entries]
        # lists of one length (the usual batch of candidates) have no padding
        padded = int(lengths.min()) < width
        relevance = DenseGrades(
            grades, rule, judged if padded or judged_items is not None else None
        )
        data = RankingInput(scores, ranked, relevance, deferred)
        parts.append(Part(rows, data))
        first_query += count
    return Batch(num_queries, device, tuple(parts))
