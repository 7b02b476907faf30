"""Statistics: where the relevant items stand, as sums over the top k at any cutoff.

Two sources read alike (:class:`ListStats`): :class:`RankStats` from a ranked
list, position by position, and :class:`CountStats` from counted ranks, tie
group by tie group. Both use SPEC section 3's closed forms, written once in
:mod:`~ranking_plugins.kernel.statistics.closed_forms`. :class:`Cutoff`
reads either at one cutoff per query and k. :func:`count_ranks` makes
:class:`CountStats` for item-index targets without ordering a list
(:mod:`~ranking_plugins.kernel.statistics.counting`).
"""

from __future__ import annotations

from ranking_plugins.kernel.statistics.count_stats import CountStats
from ranking_plugins.kernel.statistics.counting import RankCounter, count_ranks, distinct_ids
from ranking_plugins.kernel.statistics.list_stats import Cutoff, ListStats
from ranking_plugins.kernel.statistics.rank_stats import RankStats

__all__ = [
    "CountStats",
    "Cutoff",
    "ListStats",
    "RankCounter",
    "RankStats",
    "count_ranks",
    "distinct_ids",
]
