"""SPEC section 3's closed forms, each written once.

A tie group c holds t_c items, r_c of them relevant, after T_c ranked items of
which ρ_c are relevant. Under "average" every order of the group is equally
likely, and these are the exact expectations over those orders. Both sources
of statistics use them: :class:`~ranking_plugins.kernel.statistics.rank_stats.RankStats`
position by position along a ranked list, and
:class:`~ranking_plugins.kernel.statistics.count_stats.CountStats` group by
group, from the counts of each relevant item.

Every argument is a float64 tensor; they broadcast.
"""

from __future__ import annotations

import torch
from torch import Tensor


def ap_slope(group_size: Tensor, group_relevant: Tensor) -> Tensor:
    """(r_c - 1) / (t_c - 1), 0 for a group of one item.

    Given that the item at the group's i-th place is relevant, the expected
    number of relevant items down to it is ρ_c + 1 + (i - 1)(r_c - 1)/(t_c - 1):
    the AP term of a place is that over its position (SPEC section 3).
    """
    t, r = group_size, group_relevant
    # where t > 1 the divisor is at least 1; the other quotients are replaced in place
    return ((r - 1) / (t - 1)).masked_fill_(t <= 1, 0.0)


def ap_term_at(
    relevance: Tensor,
    position: Tensor,
    start: Tensor,
    size: Tensor,
    group_relevant: Tensor,
    relevant_before: Tensor,
    offset: Tensor | None = None,
) -> Tensor:
    """E[rel_j * hits@j] / j at each place: the closed form of SPEC section 3.

    ``offset``: ``position - start`` where the caller made it already (the first hits
    read it too); the same subtraction, so the same bits.
    """
    slope = ap_slope(size, group_relevant)
    if offset is None:
        offset = position - start
    expected_hits = relevant_before + 1 + (offset - 1) * slope
    return relevance * expected_hits / position


def first_hit_at_first_place(group_size: Tensor, group_relevant: Tensor) -> Tensor:
    """p_1 = r_c / t_c: P(the first relevant item is at the group's first place)."""
    return group_relevant / group_size


def first_hit_step(group_size: Tensor, group_relevant: Tensor, place: Tensor) -> Tensor:
    """p_{i+1} / p_i = (t_c - i - r_c + 1) / (t_c - i) at place i of the first relevant group.

    So p_i = C(t_c - i, r_c - 1) / C(t_c, r_c): P(the first relevant item is at
    the group's i-th place); the step is 0 once no place is left for it.
    """
    t, r, i = group_size, group_relevant, place
    return (t - i - r + 1).clamp(min=0) / (t - i).clamp(min=1)


def first_hit_step_inside(places_left: Tensor, group_relevant: Tensor) -> Tensor:
    """:func:`first_hit_step` where ``places_left`` = t_c - i is positive (the clamp of
    its divisor is then the identity): the same bits, two operations fewer. At a
    group's last place (0 left) it is 0 / 0 or x / 0, for a caller that drops it."""
    return (places_left - group_relevant + 1).clamp(min=0) / places_left


def first_hit_probabilities(first: Tensor, steps: Tensor) -> Tensor:
    """p_1, p_2, ... along the last dimension: ``first`` times the steps before each place.

    ``first``: p at the first place (:func:`first_hit_at_first_place`, or the
    probability carried over from the previous places); ``steps``: p_{i+1} / p_i
    at each place (:func:`first_hit_step`).
    """
    shifted = torch.nn.functional.pad(steps[..., :-1], (1, 0), value=1.0)
    before = torch.cumprod(shifted, dim=-1)
    return first * before


def nonrelevant_below(
    group_start: Tensor,
    group_size: Tensor,
    group_relevant: Tensor,
    relevant_before: Tensor,
    nonrelevant_ranked: Tensor,
) -> Tensor:
    """E[non-relevant ranked items below a relevant member of the group]; a tie counts 1/2.

    Those after the group, N⁻ - ((T_c + t_c) - (ρ_c + r_c)), and half of the
    group's own t_c - r_c: the ordered pairs that AUC counts.
    """
    t, r = group_size, group_relevant
    nonrelevant_to_group_end = (group_start + t) - (relevant_before + r)
    below = nonrelevant_ranked - nonrelevant_to_group_end
    return below + (t - r) / 2


def geometric_weight_sum(start: Tensor, count: Tensor, persistence: float) -> Tensor:
    """Σ_{j=start+1}^{start+count} p^(j-1): the RBP weights of ``count`` places after ``start``.

    A relevant member of a tie group is at each of the group's places with
    probability 1/t_c, so its expected weight is this sum over the group's
    places within k, divided by t_c.
    """
    p = persistence
    return (p**start - p ** (start + count)) / (1 - p)


def nonrelevant_slots_discount(
    prefix: Tensor, nonrelevant_before: Tensor, group_nonrelevant: Tensor
) -> Tensor:
    """E[1 / log2(2 + non-relevant items ranked before a relevant member of the group)].

    A relevant member's place among the group's n = t_c - r_c non-relevant items
    is uniform over the n + 1 slots (the other relevant members do not matter),
    so with B non-relevant items before the group the expectation is
    (D(B + n + 1) - D(B)) / (n + 1), D(m) = Σ_{j ≤ m} 1/log2(j + 1) (``prefix``,
    read at integer positions): trec_eval's binG term, exact under "average".
    """
    last = prefix.shape[0] - 1
    low = nonrelevant_before.clamp(0, last).to(torch.int64)
    high = (nonrelevant_before + group_nonrelevant + 1).clamp(0, last).to(torch.int64)
    return (prefix[high] - prefix[low]) / (group_nonrelevant + 1)


def recall_level_cut(recall_levels: Tensor, relevant_count: Tensor) -> Tensor:
    """round(level · R): trec_eval's cutoff in hits for a recall level (its ``lround``).

    ``recall_levels`` (L,) and ``relevant_count`` (Q, 1) broadcast to (Q, L);
    halves round away from zero, as C's ``lround`` does on these positive values.
    trec_eval 9.0.8 and earlier (so pytrec_eval) cut at int(level · R + 0.9) instead.
    """
    return torch.floor(recall_levels * relevant_count + 0.5)


def recall_level_hits(recall_levels: Tensor, relevant_count: Tensor) -> Tensor:
    """max(1, round(level · R)): the hits that reach a recall level (:func:`recall_level_cut`)."""
    return recall_level_cut(recall_levels, relevant_count).clamp(min=1)


def stopping_probability(gain: Tensor, max_gain: Tensor, exponential: bool) -> Tensor:
    """ERR's R = (2^g - 1) / 2^g_max, with g read from its gain (2^g - 1, or g when linear)."""
    if exponential:
        return gain / (max_gain + 1)
    # 2^(g - g_max) - 2^-g_max rather than (2^g - 1) / 2^g_max: a linear grade of 1024
    # or more (a finite gain) made that inf / inf, a NaN
    return torch.exp2(gain - max_gain) - torch.exp2(-max_gain)


def log_hypergeometric(r: Tensor, j: Tensor | int, t: Tensor, u: Tensor) -> Tensor:
    """log H: the chance that u members of a tie group of t, r of them relevant, taken
    in a random order, hold j relevant ones, C(r, j) C(t - r, u - j) / C(t, u) (valid
    where it is possible: the caller masks the rest)."""
    return _log_binomial(r, j) + _log_binomial(t - r, u - j) - _log_binomial(t, u)


def _log_binomial(n: Tensor, k: Tensor | int) -> Tensor:
    k = torch.as_tensor(k, dtype=torch.float64, device=n.device)
    return torch.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma((n - k).clamp(min=0) + 1)
