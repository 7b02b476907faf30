"""What a metric formula reads: rank statistics at a cutoff.

:class:`ListStats` is the reading interface of both sources of statistics
(:class:`~ranking_plugins.kernel.statistics.rank_stats.RankStats` from a
ranked list, :class:`~ranking_plugins.kernel.statistics.count_stats.CountStats`
from counted ranks); :class:`Cutoff` reads one of them at one cutoff per
query and k, and is what the metric table's formulas see.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from functools import cached_property
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ranking_plugins.kernel.statistics.partial_auc import AucSlots, top_auc

if TYPE_CHECKING:
    from ranking_plugins.kernel.ranking.tie_groups import RankedList
    from ranking_plugins.kernel.statistics.exposure import TopItems
    from ranking_plugins.kernel.statistics.intents import IntentStats
    from ranking_plugins.kernel.statistics.judged import JudgedReadings


class ListStats(ABC):
    """Rank statistics of a batch of queries: sums over the top k at any cutoff k (Q, K).

    Each cutoff ``k`` is float64 and may exceed the list.
    """

    relevant_count: Tensor  # (Q,) float64, R
    relevant_ranked: Tensor  # (Q,) float64
    num_ranked: Tensor  # (Q,) float64
    #: the top of every list with its items, when known (the exposure metrics read it)
    top_list: RankedList | None = None
    #: the catalogue's size, when the lists' items are catalogue items
    num_items: int | None = None
    #: "average": a tie group may hold relevant and other items (else its items are alike)
    shared_ties: bool = True

    def relevant_count_later(self) -> Tensor | Callable[[], Tensor]:
        """R, or a function that counts it (without holding these statistics) where
        no metric has read it yet."""
        return self.relevant_count

    def expect(self, metric_names: Collection[str], deepest: int | None = None) -> None:
        """Told which metrics will be read, before any is: statistics that make their
        sums apart may make those several metrics need together (fewer operations).
        Here nothing is made ahead."""
        del metric_names, deepest

    def any_relevant(self) -> Tensor:
        """(Q,) bool: whether each query has a relevant item (R > 0)."""
        return self.relevant_count > 0

    @abstractmethod
    def hits_at(self, k: Tensor) -> Tensor:
        """E[relevant items in the top k]."""

    @abstractmethod
    def dcg_at(self, k: Tensor) -> Tensor:
        """E[DCG@k]."""

    @abstractmethod
    def idcg_at(self, k: Tensor, whole_list: bool, deepest: int | None = None) -> Tensor:
        """The ideal DCG@k; with ``whole_list``, of every relevant item, retrieved or not.

        ``deepest``: an upper bound of every ``k``, when the host knows it: the ideal
        list is then selected to that depth only."""

    @abstractmethod
    def ap_sum_at(self, k: Tensor) -> Tensor:
        """E[Σ_{j ≤ k} rel_j hits@j / j]: AP@k times its denominator."""

    @abstractmethod
    def reciprocal_rank_at(self, k: Tensor, deepest: int | None) -> Tensor:
        """E[1 / rank of the first relevant item], 0 when it is below k.

        ``deepest``: an upper bound of every ``k``, when the host knows it (the
        largest k of the request), else None. A source that has to walk places
        one by one without reading ``k`` on the host (``CountStats``, for a tie
        group with several relevant items, on an accelerator) stops there; a
        source that holds prefix sums over the positions (``RankStats``) reads
        them at ``k`` and needs no bound.
        """

    @abstractmethod
    def hit_probability_at(self, k: Tensor) -> Tensor:
        """P(a relevant item in the top k)."""

    @abstractmethod
    def geometric_gain_at(self, k: Tensor, persistence: float) -> Tensor:
        """E[Σ_{j ≤ k} gain_j p^(j-1)]: RBP's sum (read only for rbp)."""

    @property
    @abstractmethod
    def max_gain(self) -> Tensor:
        """(Q,) the largest gain of each query's relevant items (0 without any): RBP's scale."""

    @abstractmethod
    def interpolated_precision(self, recall_levels: tuple[float, ...]) -> Tensor:
        """(Q, L) trec_eval's interpolated precision at each recall level, whole list.

        The largest precision at or below the ranked relevant item that brings
        the hits to max(1, round(level · R)) (0 when the list never gets
        there). Under ``average``, a row with a tie group of relevant and
        other items gets its expectation over the group's orders on the host
        (:func:`~ranking_plugins.kernel.statistics.tie_orders.interpolated_precision_of_mixed_groups`).
        """

    @abstractmethod
    def err_at(self, k: Tensor, exponential: bool) -> Tensor:
        """ERR@k (Chapelle et al., CIKM 2009): Σ_{j ≤ k} R_j / j Π_{i < j} (1 - R_i).

        R_j = (2^g_j - 1) / 2^g_max, the grade g read from the gain (2^g - 1 with
        ``exponential``, g itself otherwise) and g_max the query's largest grade.
        Under "average" the chance of reading past a place is a mean product over
        the subsets of its tie group
        (:func:`~ranking_plugins.kernel.statistics.tie_orders.subset_product_means`).
        """

    @property
    @abstractmethod
    def bin_g_sum(self) -> Tensor:
        """(Q,) E[Σ over relevant ranked items of 1 / log2(2 + non-relevant items before it)].

        trec_eval's binG times R; read only for that metric.
        """

    @property
    @abstractmethod
    def rank_sum(self) -> Tensor:
        """(Q,) E[sum of the ranks of the relevant ranked items]."""

    @property
    @abstractmethod
    def ordered_pairs(self) -> Tensor:
        """(Q,) E[(relevant, non-relevant) pairs with the relevant item first]; a tie counts 1/2."""

    @property
    @abstractmethod
    def auc_slots(self) -> AucSlots:
        """Where the relevant ranked items stand, with their tie groups (read only for AUC)."""

    def auroc_at(self, k: Tensor, max_fpr: float | None, whole_list: bool) -> Tensor:
        """E[TorchMetrics' (partial) AUROC of the top k]: 0 where it holds one class only
        (:mod:`~ranking_plugins.kernel.statistics.partial_auc`)."""
        # only "average" cuts a group of relevant and other items (a host read finds them)
        cuts_mixed = self.shared_ties and not whole_list
        return top_auc(self.auc_slots, k, self.num_ranked, max_fpr, cuts_mixed)

    # -- G, ndcg_rel, Rndcg: read only for those measures -------------

    @property
    @abstractmethod
    def g_sum(self) -> Tensor:
        """(Q,) E[Σ over ranked items of gain_j / log2(2 + cost@j - gain@j)] (trec_eval's G).

        gain@j: the gains of the top j; cost@j: Σ_{i ≤ j} max(ideal gain_i, 1).
        On binary relevance it is :attr:`bin_g_sum`.
        """

    @property
    @abstractmethod
    def ideal_gain_sum(self) -> Tensor:
        """(Q,) the gains of every relevant item summed, ranked or not: G's normaliser."""

    @property
    @abstractmethod
    def ndcg_rel_sum(self) -> Tensor:
        """(Q,) E[Σ over ranked relevant items at place j of DCG@j / IDCG@min(j, R)] (ndcg_rel)."""

    @property
    @abstractmethod
    def gain_level_ends(self) -> Tensor:
        """(Q, M) trec_eval's R levels of Rndcg: where each gain of the ideal list ends.

        The relevant items counted from the largest gain down, one end per
        distinct gain (the last is R); 0 pads rows with fewer levels.
        """

    @cached_property
    def nonrelevant_ranked(self) -> Tensor:
        return self.num_ranked - self.relevant_ranked

    # -- judgments: read only by the measures of judged items ------------
    # Ranked lists (``RankStats``) answer them, and counts (``CountStats``) made
    # for them: a request that asks one of those measures reads whole lists and
    # tells the kernel (``RankingPlan(judgments=True)``).

    def judgments(self) -> JudgedReadings:
        """The statistics of judged items (bpref, infAP, unj, ...) of these lists."""
        raise ValueError(
            "the measures of judged items need ranked lists, or counts of the judged items"
        )  # pragma: no cover - requests that read them rank, or count the judged items

    def at(
        self,
        cutoff: Tensor,
        adaptive_k: bool,
        whole_list: bool = False,
        deepest: int | None = None,
    ) -> Cutoff:
        """Statistics at a per-query cutoff (Q, K) (float64, may exceed the list).

        ``whole_list``: the cutoff is the end of the list (``top_k=None``), so
        the ideal DCG is not cut: it covers every relevant item, retrieved or not.
        ``deepest``: the largest cutoff, when the host knows it (the largest k).
        """
        return Cutoff(self, cutoff, adaptive_k, whole_list, deepest)


def shaped_as(column: Tensor, k: Tensor) -> Tensor:
    """A (Q, 1) statistic broadcast to the cutoffs' (Q, K): itself where K = 1 (no view)."""
    return column if column.shape == k.shape else column.expand_as(k)


class Cutoff:
    """Rank statistics read at one cutoff per query and k: what a metric formula sees."""

    def __init__(
        self,
        stats: ListStats,
        k: Tensor,
        adaptive_k: bool,
        whole_list: bool,
        deepest: int | None = None,
    ) -> None:
        self.stats = stats
        self.k = k
        self.adaptive_k = adaptive_k
        self.whole_list = whole_list
        self.deepest = deepest  # an upper bound of k known on the host, if any
        #: which items the top k holds (set when an exposure metric is read)
        self.top_items: TopItems | None = None
        #: the intent-aware terms of the lists (set when a diversity measure is read)
        self.intents: IntentStats | None = None

    @cached_property
    def hits(self) -> Tensor:
        return self.stats.hits_at(self.k)

    @cached_property
    def dcg(self) -> Tensor:
        return self.stats.dcg_at(self.k)

    @cached_property
    def idcg(self) -> Tensor:
        return self.stats.idcg_at(self.k, self.whole_list, self.deepest)

    @cached_property
    def ap_sum(self) -> Tensor:
        return self.stats.ap_sum_at(self.k)

    @cached_property
    def reciprocal_rank(self) -> Tensor:
        return self.stats.reciprocal_rank_at(self.k, self.deepest)

    @cached_property
    def hit_probability(self) -> Tensor:
        return self.stats.hit_probability_at(self.k)

    def geometric_gain(self, persistence: float) -> Tensor:
        """E[Σ_{j ≤ k} gain_j p^(j-1)], computed once per persistence p."""
        cache: dict[float, Tensor] = self.__dict__.setdefault("_geometric", {})
        if persistence not in cache:
            cache[persistence] = self.stats.geometric_gain_at(self.k, persistence)
        return cache[persistence]

    def err(self, exponential: bool) -> Tensor:
        """ERR@k (read only for err; ``exponential``: the gain is 2^g - 1), computed once."""
        cache: dict[bool, Tensor] = self.__dict__.setdefault("_err", {})
        if exponential not in cache:
            cache[exponential] = self.stats.err_at(self.k, exponential)
        return cache[exponential]

    def interpolated_precision(self, recall_levels: tuple[float, ...]) -> Tensor:
        """(Q, L) interpolated precision at the recall levels, computed once per levels."""
        cache: dict[tuple[float, ...], Tensor] = self.__dict__.setdefault("_iprec", {})
        if recall_levels not in cache:
            cache[recall_levels] = self.stats.interpolated_precision(recall_levels)
        return cache[recall_levels]

    def auroc(self, max_fpr: float | None) -> Tensor:
        """The (partial) AUROC of the top k (read only for auc and auroc), once per max_fpr."""
        cache: dict[float | None, Tensor] = self.__dict__.setdefault("_auroc", {})
        if max_fpr not in cache:
            cache[max_fpr] = self.stats.auroc_at(self.k, max_fpr, self.whole_list)
        return cache[max_fpr]

    @cached_property
    def retrieved(self) -> Tensor:
        """Ranked items at or above the cutoff."""
        return torch.minimum(self.k, self.stats.num_ranked.unsqueeze(1))

    @cached_property
    def list_size(self) -> Tensor:
        """The k that precision divides by."""
        return self.retrieved if self.adaptive_k else self.k

    @cached_property
    def relevant_count(self) -> Tensor:
        return self.stats.relevant_count.unsqueeze(1)

    @cached_property
    def has_relevant(self) -> Tensor:
        """(Q, K) whether the query has a relevant item: most metrics are undefined without."""
        return shaped_as(self.stats.any_relevant().unsqueeze(1), self.k)

    @cached_property
    def judged(self) -> JudgedReadings:
        """The statistics of judged items, computed when a measure reads them."""
        return self.stats.judgments()

    @cached_property
    def judged_hits(self) -> Tensor:
        """E[judged items in the top k] (trec_eval's unj counts the others)."""
        return self.judged.judged_at(self.k)
