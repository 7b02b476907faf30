"""The grouped layout: flat (M,) scores, grades and query ids, one entry per item."""

from __future__ import annotations

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.inputs.checks import check_grades
from ranking_plugins.kernel.inputs.parts import (
    Batch,
    Part,
    RankingInput,
    lowest,
    nan_check_deferred,
    nan_possible,
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
    Queries are ordered by id (one stable sort of the ids; none when ``indexes``
    never decreases). Lists are padded only to
    lists of the same length class (lengths in (2^(j-1), 2^j]), one part per
    class, so 20,000 one-item lists beside one 20,000-item list cost 60,000
    slots, not 400 million.

    ``scores_checked``: ``preds`` were checked for NaN when an adapter kept
    them; the grades' checks, which need whole queries, still run here.
    """
    device = preds.device
    if indexes.numel() == 0:
        if validate_args and not scores_checked:
            validation.check_values(preds, None, None, 0)
        return Batch(0, device, ())
    # What the layout needs on the host is read in two reads (each one synchronisation
    # on an accelerator; ids out of order add a third, their range, :func:`_by_query`):
    # whether the ids never decrease (no sort then) and whether the mask ranks every
    # item (the adapters keep a mask of True where the user gave none: without one the
    # ranking sorts by score alone, not by score and flag); then the lists' lengths
    # (the rows' widths).
    read = [(indexes[1:] >= indexes[:-1]).all()]
    if mask is not None:
        read.append(mask.all())
    in_order, *every_ranked = torch.stack(read).tolist()
    if every_ranked and every_ranked[0]:
        mask = None
    # padding is parked below every score, never over a NaN: the ranking meets them all
    check_scores = validate_args and not scores_checked
    deferred = nan_check_deferred(preds, mask, check_scores)
    nan = (deferred, nan_possible(preds, validate_args))
    if check_scores and not deferred:
        validation.check_values(preds, None, None, 0)
    by_query: Tensor | None = None
    if in_order:  # input already gathered by query (the command's collections): no sort
        _, sizes = torch.unique_consecutive(indexes, return_counts=True)

        def query_of_item() -> Tensor:  # only where the grades' sums are checked
            return torch.repeat_interleave(torch.arange(sizes.numel(), device=device), sizes)

    else:
        by_query, sizes = _by_query(indexes)
        order = by_query

        def query_of_item() -> Tensor:
            query = torch.empty_like(order)
            query[order] = torch.repeat_interleave(
                torch.arange(sizes.numel(), device=device), sizes
            )
            return query

    shortest, longest = torch.stack(torch.aminmax(sizes)).tolist()
    num_queries = sizes.numel()
    if validate_args:
        check_grades(target, rule, longest, query_of_item)
    flat = (preds, target, mask, judged_items)
    if longest * num_queries <= 2 * preds.numel():
        # padding every list to the longest at most doubles the slots: one part, every
        # query in id order
        data = _rows(flat, sizes, None, by_query, True, longest, shortest < longest, rule, nan)
        return Batch(num_queries, device, (Part(slice(None), data),))
    length_class = torch.ceil(torch.log2(sizes.to(torch.float64))).to(torch.int64)
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
        data = _rows(flat, lengths, query_start[rows], by_query, False, width, padded, rule, nan)
        parts.append(Part(rows, data))
        first_query += count
    return Batch(num_queries, device, tuple(parts))


def _by_query(indexes: Tensor) -> tuple[Tensor, Tensor]:
    """The entries by query (ids ascending, each query's in input order) and each
    query's size.

    One stable sort of the ids, as the narrowest integers that hold their range (a
    radix sort's passes go by the key's bytes: 1M int16 keys sort about four times
    as fast as int64 ones on the CPU); the order is the same whatever the key's width.
    """
    key = indexes
    if indexes.element_size() > 2:
        lo, hi = torch.stack(torch.aminmax(indexes)).tolist()
        for narrow in (torch.int16, torch.int32):
            limits = torch.iinfo(narrow)
            if indexes.element_size() <= narrow.itemsize:
                break
            if limits.min <= lo and hi <= limits.max:  # the usual ids: cast as they are
                key = indexes.to(narrow)
                break
            if hi - lo <= limits.max:  # the difference is in [0, hi - lo] whatever wraps
                key = (indexes - lo).to(narrow)
                break
    sorted_key, by_query = torch.sort(key, stable=True)
    _, sizes = torch.unique_consecutive(sorted_key, return_counts=True)
    return by_query, sizes


def _rows(
    flat: tuple[Tensor, Tensor, Tensor | None, Tensor | None],
    lengths: Tensor,
    starts: Tensor | None,
    by_query: Tensor | None,
    every_query: bool,
    width: int,
    padded: bool,
    rule: GainRule,
    nan: tuple[bool, bool],
) -> RankingInput:
    """Some queries' entries as rows of ``width`` (see :func:`_padded_rows`);
    ``every_query``: they are all the queries, in id order; ``starts``: where each
    query's entries begin (made here when None and needed); ``nan``: the input's
    ``nan_unchecked`` and ``nan_possible``."""
    preds, target, mask, judged_items = flat
    count = lengths.numel()
    if every_query and not padded:
        # every item in lists of one length: the rows are a view (in order, no copy) or
        # the entries gathered by query
        def rows(t: Tensor | None) -> Tensor | None:
            if t is None:
                return None
            # reshape: a strided 1-D input (a slice with a step) is copied, not refused
            return (t if by_query is None else t.index_select(0, by_query)).reshape(count, width)

        scores, grades = rows(preds), rows(target)
        assert scores is not None and grades is not None
        ranked, judged = rows(mask), rows(judged_items)
    else:
        whole = every_query and by_query is None  # every item, in order
        if starts is None:
            starts = torch.cumsum(lengths, 0) - lengths
        scores, grades, ranked, judged_rows = _padded_rows(
            flat, lengths, starts, by_query, whole, width, padded
        )
        judged = judged_rows if padded or judged_items is not None else None
    return RankingInput(scores, ranked, DenseGrades(grades, rule, judged), *nan)


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
