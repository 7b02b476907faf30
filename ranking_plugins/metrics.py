"""Every metric, described once, as data (SPEC section 4).

Each :class:`Metric` says whether it takes a cutoff k, which direction is
better, and how its per-query value follows from the rank statistics at a
cutoff (:class:`ranking_plugins.kernel.Cutoff`). The functional API and every
adapter read :data:`METRICS`; adding a metric is adding one entry.
:mod:`ranking_plugins.per_query` reads them off a batch's rank statistics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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
    personalisation,
)
from ranking_plugins.options import Options

DEFAULT_OPTIONS = Options()

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
    denominator = c.relevant_count.expand_as(c.k)
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


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One metric: its name, its direction and how its value follows from a cutoff."""

    name: str
    higher_is_better: bool
    #: the per-query value and whether it is defined (None for a catalogue-level metric)
    value: Callable[[Cutoff, Options], MetricValue] | None
    #: the parts of a value that is a ratio (``value`` divides them): the reader divides
    #: a call's ratios together
    ratio: Callable[[Cutoff, Options], RatioParts] | None = None
    #: a catalogue-level metric's value at each k (K,), from the accumulated exposure
    catalogue: Callable[[Exposure, Tensor], Tensor] | None = None
    #: the item inputs it reads (exactly one of them; see ``ItemInputs``)
    needs: tuple[str, ...] = ()
    #: why the given item inputs cannot give its value (None: they can), beyond their
    #: own checks (novelty's -log2 p(i) needs every popularity > 0)
    inputs_problem: Callable[[ItemInputs], str | None] | None = None
    #: it reads which items the top k holds (the exposure metrics)
    exposure: bool = False
    #: where the metric is read: at each k (``"k"``), at R (``"relevant_count"``,
    #: r_precision) or at the end of the list (``"whole_list"``)
    cutoff: str = "k"
    #: it reads which items are judged: whole lists, judged items counted too
    judgments: bool = False
    #: it reads subtopic judgments (a (Q, N, S) grade target): whole ranked lists
    #: that name their items
    intents: bool = False
    #: its relevant items are those of positive gain (trec_eval's ndcg_rel, Rndcg): a
    #: ``relevance_threshold`` <= 0, which makes grades <= 0 relevant with gain 0, is refused
    relevant_by_gain: bool = False
    #: its exact value under ``ties="average"`` is computed partly on the host
    #: (``kernel/statistics/tie_orders.py``): on an accelerator it synchronises with it
    host_under_average: bool = False
    #: trec_eval reads the grades themselves and leaves it alone under -l (its relevance
    #: level): in trec_eval's layout the command evaluates it without the threshold
    trec_eval_graded: bool = False
    #: trec_eval counts its relevant documents at -l although its gains ignore the level:
    #: in trec_eval's layout a query with no grade at the level has no relevant document
    #: (m_Rndcg.c's num_rel)
    trec_eval_counts_at_level: bool = False
    #: the recall levels whose interpolated precision it reads (trec_eval prints nan where
    #: a level's cutoff is 0 hits of an empty list: m_iprec_at_recall.c, m_11pt_avg.c)
    recall_levels: tuple[float, ...] = ()
    #: value of an empty query under empty_target_action="neg" (its worst value)
    empty_neg: float = 0.0
    #: what its empty query lacks under the options (None: a relevant item), for the
    #: error of ``empty_target_action="error"``
    empty_lacks: Callable[[Options], str] | None = None
    lower_bound: float = 0.0
    upper_bound: float | None = 1.0

    @property
    def at_k(self) -> bool:
        """Whether the metric takes a cutoff k (otherwise ``top_k`` does not apply)."""
        return self.cutoff == "k"

    def empty_value(self, action: str) -> float:
        """The value an empty query counts under ``empty_target_action`` "neg" or "pos"."""
        return self.empty_neg if action == "neg" else 1.0


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(name="hit_rate", higher_is_better=True, value=_hit_rate),
        Metric(name="mrr", higher_is_better=True, value=_mrr),
        Metric(
            name="precision",
            higher_is_better=True,
            value=_RatioValue(_precision),
            ratio=_precision,
        ),
        Metric(name="recall", higher_is_better=True, value=_RatioValue(_recall), ratio=_recall),
        Metric(name="f1", higher_is_better=True, value=_RatioValue(_f1), ratio=_f1),
        Metric(name="map", higher_is_better=True, value=_RatioValue(_map), ratio=_map),
        Metric(
            name="ndcg",
            higher_is_better=True,
            value=_RatioValue(_ndcg),
            ratio=_ndcg,
            trec_eval_graded=True,
        ),
        Metric(
            name="fall_out",
            higher_is_better=False,
            value=_fall_out,
            empty_neg=1.0,
            empty_lacks=_fall_out_empty_lacks,
        ),
        Metric(
            name="r_precision",
            higher_is_better=True,
            value=_RatioValue(_r_precision),
            ratio=_r_precision,
            cutoff="relevant_count",
        ),
        Metric(
            name="mean_rank",
            higher_is_better=False,
            value=_mean_rank,
            cutoff="whole_list",
            lower_bound=1.0,
            upper_bound=None,
        ),
        Metric(name="auc", higher_is_better=True, value=_auc, cutoff="whole_list"),
        Metric(name="auroc", higher_is_better=True, value=_auroc, host_under_average=True),
        Metric(
            name="num_ret",
            higher_is_better=True,
            value=_num_ret,
            cutoff="whole_list",
            upper_bound=None,
        ),
        Metric(
            name="num_rel",
            higher_is_better=True,
            value=_num_rel,
            cutoff="whole_list",
            upper_bound=None,
        ),
        Metric(
            name="num_rel_ret",
            higher_is_better=True,
            value=_num_rel_ret,
            cutoff="whole_list",
            upper_bound=None,
        ),
        Metric(name="relative_precision", higher_is_better=True, value=_relative_precision),
        Metric(name="set_map", higher_is_better=True, value=_set_map, cutoff="whole_list"),
        Metric(
            name="utility",
            higher_is_better=True,
            value=_utility,
            cutoff="whole_list",
            lower_bound=-math.inf,
            upper_bound=None,
        ),
        Metric(name="dcg", higher_is_better=True, value=_dcg, upper_bound=None),
        Metric(name="rbp", higher_is_better=True, value=_rbp, trec_eval_graded=True),
        Metric(name="bin_g", higher_is_better=True, value=_bin_g, cutoff="whole_list"),
        Metric(name="err", higher_is_better=True, value=_err, host_under_average=True),
        *(
            Metric(
                name=name,
                higher_is_better=True,
                value=_iprec_at(index),
                cutoff="whole_list",
                host_under_average=True,
                recall_levels=(RECALL_LEVELS[index],),
            )
            for index, name in enumerate(RECALL_LEVEL_METRICS)
        ),
        *(
            Metric(
                name=name,
                higher_is_better=True,
                value=_precision_at_r_multiple(multiple),
                cutoff="whole_list",
            )
            for name, multiple in zip(R_MULTIPLE_METRICS, R_MULTIPLES, strict=True)
        ),
        Metric(
            name="11pt_avg",
            higher_is_better=True,
            value=_eleven_point,
            cutoff="whole_list",
            host_under_average=True,
            recall_levels=RECALL_LEVELS,
        ),
        # -- judged measures
        Metric(
            name="bpref",
            higher_is_better=True,
            value=_bpref,
            cutoff="whole_list",
            judgments=True,
        ),
        Metric(
            name="infap",
            higher_is_better=True,
            value=_infap,
            cutoff="whole_list",
            judgments=True,
            host_under_average=True,
        ),
        Metric(
            name="num_nonrel_judged_ret",
            higher_is_better=False,
            value=_num_nonrel_judged_ret,
            cutoff="whole_list",
            upper_bound=None,
            judgments=True,
        ),
        Metric(name="unj", higher_is_better=False, value=_unjudged, judgments=True),
        Metric(name="judged", higher_is_better=True, value=_judged, judgments=True),
        Metric(
            name="rbp_resid",
            higher_is_better=False,
            value=_rbp_resid,
            cutoff="whole_list",
            judgments=True,
        ),
        Metric(
            name="g",
            higher_is_better=True,
            value=_g,
            cutoff="whole_list",
            host_under_average=True,
            trec_eval_graded=True,
        ),
        Metric(
            name="ndcg_rel",
            higher_is_better=True,
            value=_ndcg_rel,
            cutoff="whole_list",
            relevant_by_gain=True,
            trec_eval_graded=True,
        ),
        Metric(
            name="rndcg",
            higher_is_better=True,
            value=_rndcg,
            cutoff="whole_list",
            relevant_by_gain=True,
            trec_eval_graded=True,
            trec_eval_counts_at_level=True,
        ),
        # -- diversity: subtopic judgments
        *(
            Metric(
                name=name,
                higher_is_better=True,
                value=value,
                cutoff=cutoff,
                intents=True,
                # the greedy ideal list and the tied groups' expectations are sized on the host
                host_under_average=True,
                upper_bound=upper,
            )
            for name, value, cutoff, upper in (
                ("alpha_ndcg", _alpha_ndcg, "k", 1.0),
                ("alpha_dcg", _alpha_dcg, "k", None),
                ("err_ia", _err_ia, "k", None),
                ("nerr_ia", _nerr_ia, "k", 1.0),
                ("nrbp", _nrbp, "whole_list", None),
                ("nnrbp", _nnrbp, "whole_list", 1.0),
                ("p_ia", _p_ia, "k", 1.0),
                ("ap_ia", _ap_ia, "whole_list", 1.0),
                ("subtopic_recall", _subtopic_recall, "k", 1.0),
            )
        ),
        Metric(
            name="coverage", higher_is_better=True, value=None, catalogue=_coverage, exposure=True
        ),
        Metric(name="gini", higher_is_better=False, value=None, catalogue=_gini, exposure=True),
        Metric(
            name="entropy",
            higher_is_better=True,
            value=None,
            catalogue=_entropy,
            exposure=True,
            upper_bound=None,
        ),
        Metric(
            name="personalisation",
            higher_is_better=True,
            value=None,
            catalogue=personalisation,
            exposure=True,
        ),
        Metric(
            name="novelty",
            higher_is_better=True,
            value=_novelty,
            needs=("item_popularity",),
            inputs_problem=_novelty_inputs_problem,
            exposure=True,
            upper_bound=None,
        ),
        Metric(
            name="arp",
            higher_is_better=False,
            value=_arp,
            needs=("item_popularity",),
            exposure=True,
            upper_bound=None,
        ),
        Metric(
            name="tail_share",
            higher_is_better=True,
            value=_tail_share,
            needs=("tail_items",),
            exposure=True,
        ),
        Metric(
            name="diversity",
            higher_is_better=True,
            value=_diversity,
            needs=("item_features", "item_categories"),
            exposure=True,
            upper_bound=2.0,  # 1 - cosine: up to 2 for opposite features
        ),
    )
}

#: the metrics whose exact value under ``ties="average"`` is computed partly on the host
HOST_UNDER_AVERAGE = tuple(name for name, m in METRICS.items() if m.host_under_average)

#: the catalogue-level metrics: one value per k from the accumulated exposure
CATALOGUE_METRICS = tuple(name for name, m in METRICS.items() if m.catalogue is not None)


def metric_names(which: Callable[[Metric], bool]) -> str:
    """The names of the table's metrics that ``which`` selects, for a message ("a, b, c")."""
    return ", ".join(name for name, metric in METRICS.items() if which(metric))


def get_metrics(metrics: str | Sequence[str]) -> list[Metric]:
    """Look metric names up in :data:`METRICS`, keeping order and dropping repeats."""
    names = [metrics] if isinstance(metrics, str) else metrics
    if isinstance(names, Sequence) and not isinstance(names, str):
        names = list(names)
    else:
        raise TypeError(f"`metrics` must be a metric name or a sequence of names, got {names!r}")
    if not names:
        raise ValueError(f"`metrics` must name at least one of {list(METRICS)}")
    found: list[Metric] = []
    for name in names:
        if not isinstance(name, str) or name not in METRICS:
            raise ValueError(f"`metrics`: unknown metric {name!r}; expected one of {list(METRICS)}")
        if METRICS[name] not in found:
            found.append(METRICS[name])
    return found


def result_key(metric: Metric, k: int | None) -> str:
    """The key of a metric's result at cutoff ``k``: ``"<metric>@<k>"``, or its bare name
    for a metric without a cutoff or ``k=None`` (read on the whole list)."""
    return metric.name if k is None or not metric.at_k else f"{metric.name}@{k}"


def key_metric(key: str) -> Metric | None:
    """The metric of a :func:`result_key` (``"ndcg@10"``: ndcg), None for another string."""
    return METRICS.get(key.partition("@")[0])


def result_columns(
    metric: Metric, ks: tuple[int, ...] | None
) -> tuple[tuple[int | None, str], ...]:
    """The cutoff and :func:`result_key` of each of a metric's results, in output order:
    one per k of ``ks``, or one (k None) without a cutoff or with ``top_k=None``."""
    column_ks: tuple[int | None, ...] = ks if metric.at_k and ks is not None else (None,)
    return tuple((k, result_key(metric, k)) for k in column_ks)


def rank_depth(metrics: Sequence[Metric], ks: tuple[int, ...] | None) -> int | None:
    """How deep the ranked list must go: the largest k, or None for the whole list."""
    if ks is None or any(not m.at_k or m.judgments or m.intents for m in metrics):
        return None
    return max(ks)


def recall_at_fixed_precision(
    precision: Tensor, recall: Tensor, top_k: Tensor, min_precision: float
) -> tuple[Tensor, Tensor]:
    """TorchMetrics' choice on a precision-recall curve over the ks ``top_k``
    (``RetrievalRecallAtFixedPrecision``): the largest recall among the ks whose
    precision is >= ``min_precision``, and the largest such k; ``(0, len(top_k))``
    where no k reaches it or the largest recall is 0. A pure function of the
    averaged curves.

    >>> precision, recall = torch.tensor([1.0, 0.5, 0.6]), torch.tensor([0.5, 0.5, 1.0])
    >>> recall_at_fixed_precision(precision, recall, torch.tensor([1, 2, 3]), 0.8)
    (tensor(0.5000), tensor(1))
    """
    reached = precision >= min_precision  # NaN (no query counted) reaches nothing
    last = torch.tensor(len(top_k), dtype=top_k.dtype, device=top_k.device)
    if not bool(reached.any()):
        return torch.zeros((), dtype=recall.dtype, device=recall.device), last
    best = recall[reached].max()
    if best == 0:
        return best, last
    return best, top_k[reached & (recall == best)].max()


__all__ = [
    "CATALOGUE_METRICS",
    "METRICS",
    "Metric",
    "get_metrics",
    "key_metric",
    "rank_depth",
    "recall_at_fixed_precision",
    "result_columns",
    "result_key",
]
