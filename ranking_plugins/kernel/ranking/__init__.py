"""Ranking: from scores to where the relevant items stand.

Two ways, one result (rank statistics): :func:`rank` selects and orders the
top of every list (or sorts whole rows) and describes it as tie groups
(:mod:`~ranking_plugins.kernel.ranking.selection`,
:mod:`~ranking_plugins.kernel.ranking.tie_groups`); :func:`count_ranks`
counts, for item-index targets, the items above and tied with each relevant
item (:mod:`~ranking_plugins.kernel.ranking.counting`).
"""

from __future__ import annotations

from ranking_plugins.kernel.ranking.counting import RankCounter, count_ranks, distinct_ids
from ranking_plugins.kernel.ranking.selection import rank, rows_to_complete
from ranking_plugins.kernel.ranking.tie_groups import (
    TIES,
    Candidates,
    CutGroup,
    RankedList,
    lexsort_desc,
    tie_key,
)

__all__ = [
    "TIES",
    "Candidates",
    "CutGroup",
    "RankCounter",
    "RankedList",
    "count_ranks",
    "distinct_ids",
    "lexsort_desc",
    "rank",
    "rows_to_complete",
    "tie_key",
]
