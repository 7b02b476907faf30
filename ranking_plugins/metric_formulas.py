"""The formulas of the metric table (:data:`ranking_plugins.metrics.METRICS`).

Each function here gives one metric's per-query value from the rank statistics
at a cutoff (:class:`ranking_plugins.kernel.Cutoff`): as ``(value, defined)``,
or, for a ratio, as its parts, which :mod:`ranking_plugins.per_query` divides
together with the call's other ratios; the catalogue-level ones read the
accumulated ``Exposure``. :mod:`ranking_plugins.metrics` names them, one entry each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ranking_plugins.kernel import (
    COUNTS,
    LOG_ABSENT,
    Cutoff,
    Exposure,
    IntentStats,
    ItemInputs,
    TopItems,
    nrbp_scale,
)
from ranking_plugins.options import Options

#: (value, defined): a query where ``defined`` is False is handled by ``empty_target_action``
MetricValue = tuple[Tensor, Tensor]


def _ratio(numerator: Tensor, denominator: Tensor) -> Tensor:
    """numerator / denominator, 0 where the denominator is 0 (a subnormal one divides)."""
    # the quotients of the other places (0 / 0, x / 0) are computed and dropped:
    # values are read without gradients, and a division costs less than a where
    return torch.where(denominator > 0, numerator / denominator, 0.0)


#: (numerator, denominator, defined) of a metric whose value is numerator / denominator,
#: 0 where the denominator is 0; defined None: where the denominator is positive. The
#: reader divides the call's ratios of one shape together (per_query.read_values).
RatioParts = tuple[Tensor, Tensor, Tensor | None]


@dataclass(frozen=True)
class _RatioValue:
    """The value of a metric given as a ratio, read alone (a class, not a closure: the
    metrics are pickled with the modules that hold them)."""

    parts: Callable[[Cutoff, Options], RatioParts]

    def __call__(self, c: Cutoff, options: Options) -> MetricValue:
        numerator, denominator, defined = self.parts(c, options)
        positive = denominator > 0
        value = torch.where(positive, numerator / denominator, 0.0)
        return value, positive if defined is None else defined


def _has_relevant(c: Cutoff) -> Tensor:
    return c.has_relevant


def _has_gain(c: Cutoff) -> Tensor:
    """A relevant item with a positive gain: the measures normalised by the gains (the
    largest, or the ideal list's) are 0 / 0 without one, undefined as ndcg with IDCG = 0
    (a threshold <= 0 makes grades <= 0 relevant, with gain 0)."""
    # a positive largest gain is a relevant item's: R > 0 follows (and R is not counted)
    return (c.stats.max_gain > 0).unsqueeze(1).expand_as(c.k)


def _hit_rate(c: Cutoff, options: Options) -> MetricValue:
    return c.hit_probability, _has_relevant(c)


def _mrr(c: Cutoff, options: Options) -> MetricValue:
    return c.reciprocal_rank, _has_relevant(c)


def _precision(c: Cutoff, options: Options) -> RatioParts:
    return c.hits, c.list_size, _has_relevant(c)


def _recall(c: Cutoff, options: Options) -> RatioParts:
    return c.hits, c.relevant_count, _has_relevant(c)


def _f1(c: Cutoff, options: Options) -> RatioParts:
    return 2 * c.hits, c.list_size + c.relevant_count, _has_relevant(c)


def _map(c: Cutoff, options: Options) -> RatioParts:
    # (Q, 1): the reader broadcasts it, as recall's (the same tensor, expanded once)
    denominator = c.relevant_count
    if options.ap_denominator == "min_k_relevant":
        denominator = torch.minimum(denominator, c.k)
    return c.ap_sum, denominator, _has_relevant(c)


def _ndcg(c: Cutoff, options: Options) -> RatioParts:
    # a positive IDCG holds a relevant item's gain: R > 0 follows (and R is not counted)
    return c.dcg, c.idcg, None


def _fall_out(c: Cutoff, options: Options) -> MetricValue:
    nonrelevant = c.stats.nonrelevant_ranked.unsqueeze(1)
    value = _ratio(c.retrieved - c.hits, nonrelevant)
    if _fall_out_empty_lacks(options) == "non-relevant item":
        return value, (nonrelevant > 0).expand_as(c.k)
    return value, _has_relevant(c)


def _fall_out_empty_lacks(options: Options) -> str:
    """What fall-out's empty query lacks: fall-out needs only non-relevant items, and
    TorchMetrics computes it without relevant ones (``fall_out_empty``)."""
    return "non-relevant item" if options.fall_out_empty == "no_nonrelevant" else "relevant item"


def _r_precision(c: Cutoff, options: Options) -> RatioParts:
    return c.hits, c.relevant_count, _has_relevant(c)


def _mean_rank(c: Cutoff, options: Options) -> MetricValue:
    s = c.stats
    found = s.relevant_ranked.unsqueeze(1)
    return _ratio(s.rank_sum.unsqueeze(1), found), _has_relevant(c) & (found > 0)


def _auc(c: Cutoff, options: Options) -> MetricValue:
    s = c.stats
    pairs = (s.relevant_ranked * s.nonrelevant_ranked).unsqueeze(1)
    defined = _has_relevant(c) & (pairs > 0)
    if options.max_fpr is not None:  # the standardised partial AUC of the whole list
        return c.auroc(options.max_fpr), defined
    return _ratio(s.ordered_pairs.unsqueeze(1), pairs), defined


def _auroc(c: Cutoff, options: Options) -> MetricValue:
    """TorchMetrics' RetrievalAUROC: the (partial) AUC of the top k, 0 where it holds one
    class only (kernel/statistics/partial_auc.py); a query without relevant items is empty."""
    return c.auroc(options.max_fpr), _has_relevant(c)


# -- trec_eval's counts and set measures, RBP, DCG ------------------------------


def _always(c: Cutoff) -> Tensor:
    return torch.ones_like(c.k, dtype=torch.bool)


def _num_ret(c: Cutoff, options: Options) -> MetricValue:
    return c.retrieved, _always(c)


def _num_rel(c: Cutoff, options: Options) -> MetricValue:
    return c.relevant_count.expand_as(c.k), _always(c)


def _num_rel_ret(c: Cutoff, options: Options) -> MetricValue:
    return c.hits, _always(c)


def _relative_precision(c: Cutoff, options: Options) -> MetricValue:
    """hits@k / min(k, R): precision up to R, recall after (trec_eval's relative_P)."""
    return _ratio(c.hits, torch.minimum(c.list_size, c.relevant_count)), _has_relevant(c)


def _set_map(c: Cutoff, options: Options) -> MetricValue:
    """precision × recall of the retrieved set: hits² / (retrieved · R) (trec_eval's set_map)."""
    return _ratio(c.hits * c.hits, c.retrieved * c.relevant_count), _has_relevant(c)


def _utility(c: Cutoff, options: Options) -> MetricValue:
    """trec_eval's default utility: relevant retrieved minus non-relevant retrieved."""
    return 2 * c.hits - c.retrieved, _always(c)


def _dcg(c: Cutoff, options: Options) -> MetricValue:
    return c.dcg, _always(c)


def _rbp(c: Cutoff, options: Options) -> MetricValue:
    """(1 - p) Σ_{j ≤ k} p^(j-1) gain_j / max gain (Moffat & Zobel 2008; trec_eval's scaling).

    On binary relevance every gain is 1: the classic RBP. Graded gains are
    scaled into [0, 1] by the query's largest gain, as trec_eval's rbp does.
    """
    p = options.rbp_persistence
    scale = c.stats.max_gain.unsqueeze(1)
    return (1 - p) * _ratio(c.geometric_gain(p), scale), _has_gain(c)


def _bin_g(c: Cutoff, options: Options) -> MetricValue:
    """Σ_rel 1 / log2(2 + non-relevant ranked before it) / R (trec_eval's binG)."""
    value = _ratio(c.stats.bin_g_sum.unsqueeze(1), c.relevant_count)
    return value.expand_as(c.k), _has_relevant(c)


#: trec_eval's recall levels of iprec_at_recall and 11pt_avg
RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: the metric of each recall level (trec_eval's names too)
RECALL_LEVEL_METRICS = tuple(f"iprec_at_recall_{level:.2f}" for level in RECALL_LEVELS)


def _iprec_at(level: int) -> Callable[[Cutoff, Options], MetricValue]:
    def value(c: Cutoff, options: Options) -> MetricValue:
        column = c.interpolated_precision(RECALL_LEVELS)[:, level : level + 1]
        return column.expand_as(c.k), _has_relevant(c)

    return value


def _eleven_point(c: Cutoff, options: Options) -> MetricValue:
    """The mean of the 11 interpolated precisions (trec_eval's 11pt_avg)."""
    mean = c.interpolated_precision(RECALL_LEVELS).mean(dim=1, keepdim=True)
    return mean.expand_as(c.k), _has_relevant(c)


def _err(c: Cutoff, options: Options) -> MetricValue:
    """Expected reciprocal rank (Chapelle et al. 2009), R = (2^g - 1) / 2^g_max."""
    return c.err(options.gain == "exponential"), _has_gain(c)


#: trec_eval's multiples of R of Rprec_mult
R_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
#: the metric of each multiple (trec_eval's names too)
R_MULTIPLE_METRICS = tuple(f"Rprec_mult_{multiple:.2f}" for multiple in R_MULTIPLES)


def _precision_at_r_multiple(multiple: float) -> Callable[[Cutoff, Options], MetricValue]:
    """hits@c / c at c = int(multiple · R + 0.9) (trec_eval's Rprec_mult cut), list padded."""

    def value(c: Cutoff, options: Options) -> MetricValue:
        cut = torch.floor(multiple * c.relevant_count + 0.9)
        return _ratio(c.stats.hits_at(cut), cut).expand_as(c.k), _has_relevant(c)

    return value


# -- judged measures: they read which items are judged (kernel/statistics/judged.py)


def _bpref(c: Cutoff, options: Options) -> MetricValue:
    """Σ_rel (1 - min(n_r, R) / min(N, R)) / R (Buckley & Voorhees 2004; trec_eval's bpref).

    n_r: judged non-relevant items ranked before the relevant item r; N: the
    query's judged non-relevant items. Unjudged items are left out.
    """
    r = c.stats.relevant_count
    value = _ratio(c.judged.bpref_sum(r).unsqueeze(1), c.relevant_count)
    return value.expand_as(c.k), _has_relevant(c)


def _infap(c: Cutoff, options: Options) -> MetricValue:
    """Inferred AP (Yilmaz & Aslam, CIKM 2006), as trec_eval's infAP computes it."""
    value = _ratio(c.judged.infap_sum.unsqueeze(1), c.relevant_count)
    return value.expand_as(c.k), _has_relevant(c)


def _num_nonrel_judged_ret(c: Cutoff, options: Options) -> MetricValue:
    return c.judged.nonrelevant_judged_ranked.unsqueeze(1).expand_as(c.k), _always(c)


def _unjudged(c: Cutoff, options: Options) -> MetricValue:
    """Unjudged items in the top k / k (trec_eval's unj; past the list: not unjudged)."""
    # The ranked items in the top k (``retrieved``), not k itself: past the end of
    # the list trec_eval's m_unjudged.c counts nothing as unjudged. ``list_size -
    # judged_hits`` counted the padding of a list shorter than k as unjudged.
    return _ratio(c.retrieved - c.judged_hits, c.list_size), _always(c)


def _judged(c: Cutoff, options: Options) -> MetricValue:
    """Judged items in the top k / k (ir_measures' Judged@k; past the list: not judged).

    1 - unj@k when the list reaches k; past a shorter list's end neither counts.
    """
    return _ratio(c.judged_hits, c.list_size), _always(c)


def _rbp_resid(c: Cutoff, options: Options) -> MetricValue:
    """RBP's residual: p^n + (1 - p) Σ_{unjudged j} p^(j-1), 0 with no unjudged item.

    What the unjudged ranked items and the end of the list (n items) could add
    to RBP if they all had the largest gain (Moffat & Zobel 2008; trec_eval's
    rbp_resid, which is 0 when no ranked item is unjudged).
    """
    p = options.rbp_persistence
    judged = c.judged
    n = c.stats.num_ranked
    residual = p**n + (1 - p) * judged.unjudged_geometric(p)
    value = torch.where(judged.unjudged_ranked > 0, residual, 0.0)
    return value.unsqueeze(1).expand_as(c.k), _always(c)


# -- G, ndcg_rel, Rndcg ---------------------------------------------------------


def _g(c: Cutoff, options: Options) -> MetricValue:
    """Σ gain_j / log2(2 + cost@j - gain@j) / (every relevant item's gain) (trec_eval's G)."""
    s = c.stats
    return _ratio(s.g_sum, s.ideal_gain_sum).unsqueeze(1).expand_as(c.k), _has_gain(c)


def _ndcg_rel(c: Cutoff, options: Options) -> MetricValue:
    """nDCG averaged over the relevant items (trec_eval's ndcg_rel).

    A ranked relevant item at place j adds DCG@j / IDCG@min(j, R); each relevant
    item not ranked adds the whole list's DCG / IDCG; the sum is divided by R.
    """
    s = c.stats
    missing = (c.relevant_count - c.hits) * _ratio(c.dcg, c.idcg)
    return _ratio(s.ndcg_rel_sum.unsqueeze(1) + missing, c.relevant_count), _has_gain(c)


def _rndcg(c: Cutoff, options: Options) -> MetricValue:
    """nDCG averaged over trec_eval's R levels (Rndcg).

    The places where each gain of the ideal list ends (the last is R), and the
    end of the list when it holds R + 2 items or more; at each, DCG / IDCG.
    trec_eval's loop (m_Rndcg.c) adds that closing term only when it stopped
    before the end of the list, which a list of R + 1 items never does.
    """
    s = c.stats
    ends = s.gain_level_ends
    beyond = torch.where(s.num_ranked > s.relevant_count + 1, s.num_ranked, 0.0).unsqueeze(1)
    ends = torch.cat([ends, beyond], dim=1)
    at_end = _ratio(s.dcg_at(ends), s.idcg_at(ends, whole_list=False))
    points = (ends > 0).sum(dim=1, keepdim=True)
    value = _ratio(torch.where(ends > 0, at_end, 0.0).sum(dim=1, keepdim=True), points)
    return value.expand_as(c.k), _has_gain(c)


# -- beyond accuracy: which items the top k holds (kernel/statistics/exposure.py) ----------


def _top_items(c: Cutoff) -> TopItems:
    assert c.top_items is not None, "an exposure metric is read with its TopItems"
    return c.top_items


def _mean_weight(c: Cutoff, weight: Tensor) -> MetricValue:
    """E[Σ weight over the top k] / (items in the top k); defined when it holds an item."""
    items = _top_items(c)
    size = items.list_size
    return _ratio(items.weight_sum(weight), size), size > 0


def _novelty(c: Cutoff, options: Options) -> MetricValue:
    return _mean_weight(c, _top_items(c).items.self_information)


def _novelty_inputs_problem(items: ItemInputs) -> str | None:
    """-log2 p(i) is infinite for an item of popularity 0."""
    popularity = items.popularity
    if popularity is None or bool((popularity > 0).all()):
        return None
    return (
        "novelty needs `item_popularity` > 0 for every item: an item never "
        "interacted with has infinite self-information -log2 p(i); add one to "
        "every count (Laplace smoothing) if the catalogue has such items"
    )


def _arp(c: Cutoff, options: Options) -> MetricValue:
    popularity = _top_items(c).items.popularity
    assert popularity is not None
    return _mean_weight(c, popularity)


def _tail_share(c: Cutoff, options: Options) -> MetricValue:
    tail = _top_items(c).items.tail
    assert tail is not None
    return _mean_weight(c, tail.to(torch.float64))


def _diversity(c: Cutoff, options: Options) -> MetricValue:
    """1 - E[mean similarity of the n (n - 1) / 2 pairs in the top k]; defined when n >= 2."""
    items = _top_items(c)
    size = items.list_size
    pairs = size * (size - 1) / 2
    similarity = items.pair_similarity_sum()
    return 1 - _ratio(similarity, pairs), size >= 2


def _coverage(exposure: Exposure, ks: Tensor) -> Tensor:
    """E[share of the catalogue in at least one top k] = mean_i (1 - Π_q (1 - p_qi))."""
    return (1 - torch.exp(exposure.sums[LOG_ABSENT])).mean(dim=1)


def _gini(exposure: Exposure, ks: Tensor) -> Tensor:
    """RecBole's GiniIndex of the (expected) exposure counts c over the N items.

    Σ_j (2j - N - 1) c_(j) / (N Σc), c sorted ascending, j = 1..N.
    """
    counts = exposure.sums[COUNTS].sort(dim=1).values
    n = counts.shape[1]
    j = torch.arange(1, n + 1, dtype=torch.float64, device=counts.device)
    total = counts.sum(dim=1)
    return ((2 * j - n - 1) * counts).sum(dim=1) / (n * total)


def _entropy(exposure: Exposure, ks: Tensor) -> Tensor:
    """Shannon entropy (bits) of the (expected) exposure distribution c / Σc."""
    counts = exposure.sums[COUNTS]
    total = counts.sum(dim=1, keepdim=True)
    p = counts / total
    entropy = -torch.where(p > 0, p * torch.log2(torch.where(p > 0, p, 1.0)), 0.0).sum(dim=1)
    return torch.where(total.squeeze(1) > 0, entropy, torch.nan)  # no item shown: undefined


# -- diversity: intent-aware measures over subtopic judgments (kernel/statistics/intents.py)


def _intents(c: Cutoff) -> IntentStats:
    assert c.intents is not None, "a diversity measure is read with its IntentStats"
    return c.intents


def _has_subtopic(c: Cutoff) -> Tensor:
    """A subtopic with a relevant item: without one every diversity measure is 0 / 0."""
    return (_intents(c).subtopics > 0).expand_as(c.k)


def _alpha_dcg(c: Cutoff, options: Options) -> MetricValue:
    """alpha-DCG@k / Σ_{j ≤ k} S (1 - alpha)^(j-1) / log2(j + 1) (ndeval's alpha-DCG)."""
    i = _intents(c)
    return _ratio(i.dcg(c.k), i.ideal_ideal(c.k, "dcg")), _has_subtopic(c)


def _alpha_ndcg(c: Cutoff, options: Options) -> MetricValue:
    """alpha-DCG@k over the greedy ideal list's (Clarke et al., SIGIR 2008)."""
    i = _intents(c)
    return _ratio(i.dcg(c.k), i.ideal_dcg(c.k)), _has_subtopic(c)


def _err_ia(c: Cutoff, options: Options) -> MetricValue:
    """Σ_{j ≤ k} gain_j / j over Σ_{j ≤ k} S (1 - alpha)^(j-1) / j (ndeval's ERR-IA)."""
    i = _intents(c)
    return _ratio(i.err(c.k), i.ideal_ideal(c.k, "err")), _has_subtopic(c)


def _nerr_ia(c: Cutoff, options: Options) -> MetricValue:
    """Σ_{j ≤ k} gain_j / j over the greedy ideal list's (ndeval's nERR-IA)."""
    i = _intents(c)
    return _ratio(i.err(c.k), i.ideal_err(c.k)), _has_subtopic(c)


def _nrbp(c: Cutoff, options: Options) -> MetricValue:
    """(1 - (1 - alpha) beta) / S Σ_j gain_j beta^(j-1) (Clarke et al., ICTIR 2009)."""
    i = _intents(c)
    scale = nrbp_scale(options.alpha, options.beta)
    value = _ratio(scale * i.geometric(options.beta), i.subtopics)
    return value.expand_as(c.k), _has_subtopic(c)


def _nnrbp(c: Cutoff, options: Options) -> MetricValue:
    """NRBP over the greedy ideal list's (ndeval's nNRBP)."""
    i = _intents(c)
    value = _ratio(i.geometric(options.beta), i.ideal_geometric(options.beta))
    return value.expand_as(c.k), _has_subtopic(c)


def _p_ia(c: Cutoff, options: Options) -> MetricValue:
    """Relevant (item, subtopic) pairs in the top k / (k S) (intent-aware precision)."""
    i = _intents(c)
    return _ratio(i.pairs_at(c.k), c.list_size * i.subtopics), _has_subtopic(c)


def _ap_ia(c: Cutoff, options: Options) -> MetricValue:
    """The mean over the subtopics with a relevant item of each one's AP (ndeval's MAP-IA)."""
    i = _intents(c)
    per_subtopic = _ratio(i.ap_sums, i.subtopic_relevant).sum(dim=1, keepdim=True)
    return _ratio(per_subtopic, i.subtopics).expand_as(c.k), _has_subtopic(c)


def _subtopic_recall(c: Cutoff, options: Options) -> MetricValue:
    """Subtopics with a relevant item in the top k / S (ndeval's strec)."""
    i = _intents(c)
    return _ratio(i.covered_at(c.k), i.subtopics), _has_subtopic(c)
