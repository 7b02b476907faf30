"""Intent-aware statistics: a ranked list read against subtopic judgments.

The diversity measures (alpha-nDCG, ERR-IA, NRBP, P-IA, AP-IA, subtopic
recall; :doc:`diversity`) judge each item per subtopic (an intent of the
query). An item relevant to subtopic s earns (1 - alpha)^c there, c the items
relevant to s ranked before it (Clarke et al., SIGIR 2008), so its gain
depends on the items above it: under ``ties="average"`` each place's expected
gain is read from its tie group's subtopic counts through the hypergeometric
law of the count (:func:`hypergeometric_power_mean`), exact and with no order
enumerated.

:func:`intent_stats` makes :class:`IntentStats` from a ranked list that names
its items (``RankedList.items``, whole lists) and the (Q, N, S) subtopic
relevance; the metric table's formulas (``ranking_plugins.metrics``) read
its sums at each cutoff and add ndeval's normalisations. The ideal list is
ndeval's greedy one (:func:`greedy_ideal_gains`): at each place the item of
the largest gain given the places above, equal gains to the larger item index
(ndeval: the larger document id).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from ranking_plugins.kernel.ranking.tie_groups import RankedList
from ranking_plugins.kernel.statistics.closed_forms import log_hypergeometric

#: gains this close (relative) are equal in the greedy ideal list: a gain is a sum of
#: powers of 1 - alpha, and the same sum reached in another order may differ in its last
#: bits; equal ones then go to the larger item index whatever the input's order
EQUAL_GAIN_TOLERANCE = 1e-12


def subtopic_relevance(grades: Tensor, threshold: float | None) -> Tensor:
    """(Q, N, S) bool: an item is relevant to a subtopic at a grade >= ``threshold``
    (None: above 0). ndeval's judgments are binary: a grade at the level counts 1."""
    return grades >= threshold if threshold is not None else grades > 0


def greedy_ideal_gains(relevant: Tensor, alpha: float) -> Tensor:
    """(Q, D) the gains of ndeval's greedy ideal list, D the most items of a query
    relevant to some subtopic (0 past a query's own).

    At each place the item whose gain Σ_s rel_s (1 - alpha)^c_s is the largest
    given the items placed above it; equal gains (:data:`EQUAL_GAIN_TOLERANCE`)
    to the larger item index. Each gain is summed in ascending order of its
    terms, so that it depends on the counts only, not on the subtopics' order.
    """
    num_queries, _, num_subtopics = relevant.shape
    device = relevant.device
    useful = relevant.any(dim=2)
    depth = int(useful.sum(dim=1).max()) if num_queries else 0
    if depth == 0:
        return torch.zeros(num_queries, 0, dtype=torch.float64, device=device)
    # the items relevant to a subtopic, in item order (so a larger place is a larger index)
    order = torch.sort((~useful).to(torch.int8), dim=1, stable=True).indices[:, :depth]
    candidates = relevant.gather(1, order.unsqueeze(2).expand(-1, -1, num_subtopics))
    taken = ~useful.gather(1, order)
    counts = torch.zeros(num_queries, num_subtopics, dtype=torch.float64, device=device)
    gains = torch.zeros(num_queries, depth, dtype=torch.float64, device=device)
    place = torch.arange(depth, device=device)
    rows = torch.arange(num_queries, device=device)
    x = 1.0 - alpha
    for step in range(depth):
        terms = torch.where(candidates, torch.pow(x, counts).unsqueeze(1), 0.0)
        score = terms.sort(dim=2).values.sum(dim=2)
        score = torch.where(taken, -1.0, score)
        best = score.max(dim=1, keepdim=True).values
        equal = (score >= best - EQUAL_GAIN_TOLERANCE * best.clamp(min=1.0)) & ~taken
        pick = torch.where(equal, place, -1).max(dim=1).values
        placed = pick >= 0
        pick = pick.clamp(min=0)
        gains[:, step] = torch.where(placed, best.squeeze(1), 0.0)
        taken[rows, pick] |= placed
        counts += (candidates[rows, pick] & placed.unsqueeze(1)).to(torch.float64)
    return gains


def hypergeometric_power_mean(
    population: Tensor, successes: Tensor, draws: Tensor, x: float
) -> Tensor:
    """E[x^H], H the successes among ``draws`` taken without replacement from
    ``population`` items of which ``successes`` are successes (elementwise).

    The chance that a tied item relevant to s, at the (draws + 1)-th place of
    its group, follows H other items of the group relevant to s; x^0 = 1.
    """
    result = torch.zeros_like(population)
    limit = int(torch.minimum(successes, draws).max()) if population.numel() else -1
    failures = population - successes
    for h in range(limit + 1):
        possible = (successes >= h) & (draws - h >= 0) & (draws - h <= failures)
        log_p = log_hypergeometric(successes, h, population, draws)
        result += torch.where(possible, torch.exp(log_p), 0.0) * x**h
    return result


@dataclass(frozen=True)
class IntentStats:
    """Each place's expected intent-aware terms, and the query's subtopic totals.

    (Q, L) per place: ``gain`` E[Σ_s rel_s (1 - alpha)^c_s], ``pairs``
    E[Σ_s rel_s] (relevant (item, subtopic) pairs), ``new_subtopics``
    E[subtopics first met there]; (Q, S): ``ap_sums`` E[Σ_j rel_js (c_js + 1) / j]
    over the whole list, ``subtopic_relevant`` R_s (every item, ranked or not);
    ``ideal`` the greedy ideal list's gains (Q, D).
    """

    gain: Tensor
    pairs: Tensor
    new_subtopics: Tensor
    ap_sums: Tensor
    subtopic_relevant: Tensor
    ideal: Tensor
    alpha: float

    @cached_property
    def subtopics(self) -> Tensor:
        """(Q, 1) the subtopics with a relevant item (ndeval's actualSubtopics)."""
        return (self.subtopic_relevant > 0).sum(dim=1, keepdim=True).to(torch.float64)

    def _prefix(self, values: Tensor, weight: Tensor | None, k: Tensor) -> Tensor:
        """Σ_{j ≤ k} values_j weight_j at each k (Q, K), k past the end: the whole row."""
        length = values.shape[1]
        if length == 0:
            return torch.zeros_like(k)
        weighted = values if weight is None else values * weight[:length]
        cumulative = torch.cumsum(weighted, dim=1)
        index = (k.clamp(min=1, max=length) - 1).long()
        return torch.where(k >= 1, cumulative.gather(1, index), 0.0)

    def dcg(self, k: Tensor) -> Tensor:
        """E[alpha-DCG@k] (unnormalised)."""
        return self._prefix(self.gain, _discounts(self.gain.shape[1], self.gain.device), k)

    def ideal_dcg(self, k: Tensor) -> Tensor:
        return self._prefix(self.ideal, _discounts(self.ideal.shape[1], self.ideal.device), k)

    def err(self, k: Tensor) -> Tensor:
        """E[Σ_{j ≤ k} gain_j / j], ndeval's ERR-IA before its normalisation."""
        return self._prefix(self.gain, _reciprocals(self.gain.shape[1], self.gain.device), k)

    def ideal_err(self, k: Tensor) -> Tensor:
        return self._prefix(self.ideal, _reciprocals(self.ideal.shape[1], self.ideal.device), k)

    def geometric(self, beta: float) -> Tensor:
        """(Q, 1) E[Σ_j gain_j beta^(j-1)] over the whole list (NRBP's sum)."""
        return _geometric_sum(self.gain, beta)

    def ideal_geometric(self, beta: float) -> Tensor:
        return _geometric_sum(self.ideal, beta)

    def pairs_at(self, k: Tensor) -> Tensor:
        return self._prefix(self.pairs, None, k)

    def covered_at(self, k: Tensor) -> Tensor:
        """E[subtopics with a relevant item in the top k]."""
        return self._prefix(self.new_subtopics, None, k)

    def ideal_ideal(self, k: Tensor, weights: str) -> Tensor:
        """ndeval's collection-independent normaliser: Σ_{j ≤ k} S (1 - alpha)^(j-1) w_j,
        S the subtopics with a relevant item and w the DCG discount or 1 / j."""
        deepest = int(k.max()) if k.numel() else 0
        device = k.device
        j = torch.arange(1, deepest + 1, dtype=torch.float64, device=device)
        w = _discounts(deepest, device) if weights == "dcg" else 1.0 / j
        prefix = torch.cumsum((1.0 - self.alpha) ** (j - 1) * w, dim=0)
        prefix = torch.cat([torch.zeros(1, dtype=torch.float64, device=device), prefix])
        return self.subtopics * prefix[k.long().clamp(min=0)]


def _discounts(length: int, device: torch.device) -> Tensor:
    j = torch.arange(1, length + 1, dtype=torch.float64, device=device)
    return 1.0 / torch.log2(j + 1)


def _reciprocals(length: int, device: torch.device) -> Tensor:
    return 1.0 / torch.arange(1, length + 1, dtype=torch.float64, device=device)


def _geometric_sum(values: Tensor, beta: float) -> Tensor:
    j = torch.arange(values.shape[1], dtype=torch.float64, device=values.device)
    return (values * beta**j).sum(dim=1, keepdim=True)


def intent_stats(ranked_list: RankedList, relevant: Tensor, alpha: float) -> IntentStats:
    """The intent-aware terms of whole ranked lists that name their items.

    ``relevant``: (Q, N, S) bool, per item (a column of the scores) and
    subtopic. Under "average" (``ranked_list.shared_ties``) a place holds any
    member of its tie group alike: with t members, r of them relevant to s
    and rho items relevant to s above the group, the (a + 1)-th place of the
    group is relevant to s with chance r / t and then follows
    H ~ Hypergeometric(t - 1, r - 1, a) of the group's items relevant to s,
    so its expected gain is (r / t) x^rho E[x^H], its expected AP term
    (r / t) (rho + 1 + a (r - 1) / (t - 1)) and its chance to meet s first
    [rho = 0] (r / t) P(H = 0). Other policies: each place holds its item.
    """
    items = ranked_list.items
    assert items is not None, "intent-aware statistics read the ranked items"
    num_queries, length = items.shape
    num_subtopics = relevant.shape[2]
    x = 1.0 - alpha
    index = items.clamp(min=0).unsqueeze(2).expand(-1, -1, num_subtopics)
    rel = relevant.gather(1, index) & ranked_list.ranked.unsqueeze(2)
    rel_f = rel.to(torch.float64)
    cumulative = torch.cumsum(rel_f, dim=1)
    start = torch.zeros(num_queries, 1, num_subtopics, dtype=torch.float64, device=rel.device)
    before = torch.cat([start, cumulative], dim=1)  # (Q, L + 1, S): relevant items above
    place = torch.arange(length, dtype=torch.float64, device=rel.device).expand(num_queries, -1)
    if ranked_list.shared_ties:
        group_start = ranked_list.group_start.long().clamp(max=length)
        group_end = (ranked_list.group_start + ranked_list.group_size).long().clamp(max=length)
        size = ranked_list.group_size.clamp(min=1).unsqueeze(2)
        rho = before.gather(1, group_start.unsqueeze(2).expand(-1, -1, num_subtopics))
        r = before.gather(1, group_end.unsqueeze(2).expand(-1, -1, num_subtopics)) - rho
        drawn = (place - ranked_list.group_start).clamp(min=0).unsqueeze(2).expand_as(r)
        chance = torch.where(ranked_list.ranked.unsqueeze(2), r / size, 0.0)
        slope = torch.where(size > 1, (r - 1) / (size - 1).clamp(min=1), 0.0)
        ap_term = chance * (rho + 1 + drawn * slope)
        power_mean = torch.ones_like(r)
        zero_chance = torch.ones_like(r)
        tied = (size > 1).expand_as(r) & (r > 0)
        if bool(tied.any()):
            population = (size - 1).expand_as(r)[tied]
            successes = (r - 1)[tied]
            draws = drawn[tied]
            power_mean[tied] = hypergeometric_power_mean(population, successes, draws, x)
            zero_chance[tied] = hypergeometric_power_mean(population, successes, draws, 0.0)
        gain_term = chance * torch.pow(x, rho) * power_mean
        first_term = chance * (rho == 0) * zero_chance
    else:
        above = before[:, :-1]
        gain_term = rel_f * torch.pow(x, above)
        ap_term = rel_f * (above + 1)
        first_term = rel_f * (above == 0)
        chance = rel_f
    reciprocal = 1.0 / (place + 1).unsqueeze(2)
    return IntentStats(
        gain=gain_term.sum(dim=2),
        pairs=chance.sum(dim=2),
        new_subtopics=first_term.sum(dim=2),
        ap_sums=(ap_term * reciprocal).sum(dim=1),
        subtopic_relevant=relevant.sum(dim=1).to(torch.float64),
        ideal=greedy_ideal_gains(relevant, alpha),
        alpha=alpha,
    )


def nrbp_scale(alpha: float, beta: float) -> float:
    """NRBP's factor (1 - (1 - alpha) beta): the value of an ideal list of one subtopic."""
    return 1.0 - (1.0 - alpha) * beta


__all__ = [
    "EQUAL_GAIN_TOLERANCE",
    "IntentStats",
    "greedy_ideal_gains",
    "hypergeometric_power_mean",
    "intent_stats",
    "nrbp_scale",
    "subtopic_relevance",
]
