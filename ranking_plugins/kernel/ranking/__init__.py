"""Ranking: from scores to where the relevant items stand.

:func:`rank` selects and orders the top of every list (or sorts whole rows)
and describes it as tie groups (:mod:`~ranking_plugins.kernel.ranking.selection`,
:mod:`~ranking_plugins.kernel.ranking.tie_groups`). The other way to the same
statistics, counting for item-index targets the items above and tied with each
relevant item, needs no order and lives with the statistics it makes
(:mod:`~ranking_plugins.kernel.statistics.counting`).
"""

from __future__ import annotations

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
    "RankedList",
    "lexsort_desc",
    "rank",
    "rows_to_complete",
    "tie_key",
]
