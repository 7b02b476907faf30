"""The top of every list of :class:`EmbeddingScores`, without the (Q, N) score matrix.

The exposure metrics need the items of each top k, which counting does not
give. The catalogue is walked chunk by chunk, keeping each query's best
``depth + 1`` candidates (merged as it goes); where the tie group at the
cutoff goes on past them (a *cut* group), a second walk collects all its
members. Those candidates hold every item :func:`rank` would look at on the
whole row, so ranking them (a few columns per query, sorted by item id so
that index order is the catalogue's) gives the same ranked list, under every
tie policy, with the catalogue's item ids.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from ranking_plugins.kernel.catalogue.chunked import EmbeddingScores
from ranking_plugins.kernel.inputs.parts import RankingInput, lowest
from ranking_plugins.kernel.inputs.relevance import ItemIds
from ranking_plugins.kernel.ranking.selection import rank
from ranking_plugins.kernel.ranking.tie_groups import RankedList


class _Candidates:
    """The relevance of candidate columns: column j of row q is catalogue item ids[q, j]."""

    binary = True

    def __init__(self, relevance: ItemIds, ids: Tensor) -> None:
        self.relevance = relevance
        self.ids = ids

    def at(self, items: Tensor, rows: Tensor | None = None) -> tuple[Tensor, Tensor]:
        ids = self.ids if rows is None else self.ids[rows]
        return self.relevance.at(ids.gather(1, items), rows)

    def rows(self, rows: Tensor | slice) -> tuple[Tensor, Tensor]:
        return self.relevance.at(self.ids[rows], rows)


def excluded_in_chunk(scores: EmbeddingScores, start: int, width: int) -> Tensor | None:
    """(Q, width) bool: the items of this chunk that ``exclude`` takes out of the ranking."""
    if scores.exclude is None:
        return None
    exclude = scores.exclude.to(torch.int64)
    inside = (exclude >= start) & (exclude < start + width)
    flags = torch.zeros(exclude.shape[0], width + 1, dtype=torch.bool, device=exclude.device)
    flags.scatter_(1, torch.where(inside, exclude - start, width), True)
    return flags[:, :width]


def chunk_tops(scores: EmbeddingScores, keep: int) -> tuple[Tensor, Tensor]:
    """Each query's best ``keep`` (at most the items) scores and item ids, walking the chunks.

    Excluded items take the lowest score (their ids are kept: the caller tells them apart).
    """
    top_values: Tensor | None = None
    top_ids: Tensor | None = None
    for start in scores.chunks():
        block = scores.score_chunk(start)
        excluded = excluded_in_chunk(scores, start, block.shape[1])
        if excluded is not None:
            block = block.masked_fill(excluded, lowest(block.dtype))
        # the chunk's best first (no (Q, chunk) ids or copies), then merged with the best so far
        values, order = torch.topk(block, min(keep, block.shape[1]), dim=1)
        del block
        ids = order + start
        if top_values is not None and top_ids is not None:
            dtype = torch.promote_types(top_values.dtype, values.dtype)
            values = torch.cat([top_values.to(dtype), values.to(dtype)], dim=1)
            ids = torch.cat([top_ids, ids], dim=1)
            values, order = torch.topk(values, min(keep, values.shape[1]), dim=1)
            ids = ids.gather(1, order)
        top_values, top_ids = values, ids
    assert top_values is not None and top_ids is not None
    return top_values, top_ids


def embedding_top_list(
    scores: EmbeddingScores, relevance: ItemIds, ties: str, depth: int
) -> RankedList:
    """The ranked list of the first ``depth`` places of every query, catalogue ids in ``items``.

    Reads values on the host (which rows hold a cut group, and their members).
    """
    n = scores.num_items
    keep = min(depth + 1, n)
    top_values, top_ids = chunk_tops(scores, keep)
    candidate_ids, candidate_values = top_ids, top_values
    if keep > depth:  # the group at the cutoff may go on past the candidates
        cut_score = top_values[:, depth - 1]
        rows = (top_values[:, depth] == cut_score).nonzero().squeeze(1)
        if rows.numel():
            candidate_ids, candidate_values = _with_cut_members(
                scores, top_values, top_ids, rows, cut_score[rows], depth
            )
        else:
            candidate_ids, candidate_values = top_ids[:, :depth], top_values[:, :depth]
    return ranked_candidates(
        candidate_ids, candidate_values, relevance, ties, depth, n, scores.exclude
    )


def ranked_candidates(
    candidate_ids: Tensor,
    candidate_values: Tensor,
    relevance: ItemIds,
    ties: str,
    depth: int,
    num_items: int,
    exclude: Tensor | None = None,
) -> RankedList:
    """The ranked list of the first ``depth`` places, from each query's candidates.

    ``candidate_ids`` (Q, C) catalogue ids (``num_items``: padding) with their
    scores: every ranked item above the score at place ``depth`` and every
    member of the tie group there (or exactly the first ``depth``), in any
    order; ``exclude`` (Q, X) ids listed among them that are not ranked.
    """
    # index order is the catalogue's: each row's candidates sorted by item id
    candidate_ids, order = candidate_ids.sort(dim=1)
    candidate_values = candidate_values.gather(1, order)
    ranked = candidate_ids < num_items
    if exclude is not None:
        exclude = exclude.to(torch.int64)
        ranked &= ~(candidate_ids.unsqueeze(-1) == exclude.unsqueeze(1)).any(dim=-1)
    data = RankingInput(candidate_values, ranked, _Candidates(relevance, candidate_ids))  # type: ignore[arg-type]
    listed = rank(data, ties, depth, item_order=True)
    assert listed.items is not None
    cut = listed.cut_group
    if cut is not None:
        cut = replace(cut, member_items=candidate_ids[cut.rows])
    return replace(listed, items=candidate_ids.gather(1, listed.items), cut_group=cut)


def _with_cut_members(
    scores: EmbeddingScores,
    top_values: Tensor,
    top_ids: Tensor,
    rows: Tensor,
    cut_score: Tensor,
    depth: int,
) -> tuple[Tensor, Tensor]:
    """Candidates: the first ``depth`` of each row, and for ``rows`` the items above the
    cut score and every (ranked) member of the cut group, padded with id N."""
    n = scores.num_items
    members: list[list[Tensor]] = [[] for _ in range(rows.numel())]
    for start in scores.chunks():
        block = scores.score_chunk(start)[rows]
        same = block == cut_score.unsqueeze(1).to(block.dtype)
        excluded = excluded_in_chunk(scores, start, block.shape[1])
        if excluded is not None:
            same &= ~excluded[rows]
        where = same.nonzero()
        for r in range(rows.numel()):
            members[r].append(where[where[:, 0] == r, 1] + start)
    lists_ids: list[Tensor] = []
    lists_values: list[Tensor] = []
    for r, row in enumerate(rows.tolist()):
        above = top_values[row] > cut_score[r]
        found = torch.cat(members[r])
        lists_ids.append(torch.cat([top_ids[row][above], found]))
        lists_values.append(
            torch.cat([top_values[row][above], cut_score[r].expand(found.shape[0])])
        )
    width = max(depth, *(ids.shape[0] for ids in lists_ids))
    pad_value = lowest(top_values.dtype)
    ids = torch.full((top_ids.shape[0], width), n, dtype=top_ids.dtype, device=top_ids.device)
    values = torch.full(
        (top_values.shape[0], width), pad_value, dtype=top_values.dtype, device=top_ids.device
    )
    ids[:, :depth] = top_ids[:, :depth]
    values[:, :depth] = top_values[:, :depth]
    for r, row in enumerate(rows.tolist()):
        ids[row] = n
        values[row] = pad_value
        ids[row, : lists_ids[r].shape[0]] = lists_ids[r]
        values[row, : lists_values[r].shape[0]] = lists_values[r]
    return ids, values


__all__ = ["chunk_tops", "embedding_top_list", "excluded_in_chunk", "ranked_candidates"]
