"""Expectations over the orders of a tie group that are not sums of per-position terms.

Under "average" every order of a tie group is equally likely (SPEC section 3).
Most measures are sums of per-position terms, whose expectations are the
closed forms of :mod:`~ranking_plugins.kernel.statistics.closed_forms`. The
measures here read, at a place, what the members placed before it in the same
group hold, so they take the distribution of that set: for a member at the
group's place ``u + 1`` the members before it are a uniformly random
``u``-subset of the others.

* :func:`g_group_expectation`: trec_eval's G (a gain over the log of the cost
  left, which depends on the gains placed before it).
* :func:`subset_product_means`: ERR's chance of reading past the group's
  first u places (a product over the members placed there).
* :func:`expected_interpolated_precision`: trec_eval's iprec_at_recall (an
  expected maximum of precisions).
* :func:`expected_infap_terms`: trec_eval's infAP (a term that reads the
  relevant, judged non-relevant and pooled items before the member).

Where the exact sum can grow past what a call should take, it is bounded by a
step budget (:data:`IPREC_AVERAGE_STEPS_MAX`, :data:`INFAP_AVERAGE_STEPS_MAX`)
and refused beyond it (:func:`check_average_steps`): never an approximation.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

import torch
from torch import Tensor

from ranking_plugins.kernel.statistics.closed_forms import log_hypergeometric


def _subset_sums(values: Sequence[float]) -> list[Counter[float]]:
    """For each size v, how many v-subsets of ``values`` (a multiset) have each sum."""
    table: list[Counter[float]] = [Counter({0.0: 1})]
    for value in values:
        table.append(Counter())
        for size in range(len(table) - 1, 0, -1):
            for total, count in table[size - 1].items():
                table[size][total + value] += count
    return table


def g_group_expectation(
    gains: Sequence[float], start: int, cost: Sequence[float], gain_before: float
) -> float:
    """E[Σ over the group's members of g / log2(2 + cost[T + i] - gain_before - g - X)].

    ``gains``: the gains of the group's t members; ``start``: T, the items
    ranked before the group; ``cost[n]``: trec_eval's cost of the top n
    (Σ_{j ≤ n} max(ideal gain_j, 1)); ``gain_before``: the gains of the top T.
    A member at the group's place u + 1 has X, the gains of a random u-subset
    of the other members, before it. Only members with a non-zero gain add a
    term or move X, so the others (``n`` of them) are counted, not listed:
    P(v given members and w others before it, at place v + w + 1) is
    C(n, w) / C(t - 1, v + w) per v-subset, times 1/t for the place.

    Cost: O(d · r · S · t) for d distinct non-zero gains among r members with
    one, S distinct subset sums (at most 2^r, at most r · max gain for integer
    grades) and t members; exact (binomials as Python integers).
    """
    t = len(gains)
    weighted = [g for g in gains if g != 0]
    n = t - len(weighted)
    total = 0.0
    for gain, multiplicity in Counter(weighted).items():
        others = list(weighted)
        others.remove(gain)
        sums = _subset_sums(others)
        member = 0.0
        for v, by_sum in enumerate(sums):
            for w in range(n + 1):
                u = v + w
                share = math.comb(n, w) / math.comb(t - 1, u)
                # 2 + (cost - gains before): past 2^53 the 2 was lost in 2 + cost, and
                # log2 of 0 or less raised "math domain error" (as rank_stats.g_sum).
                # The gains before are summed as trec_eval sums them in an order, in
                # place order (the top T, the members before, this one), then taken
                # from the cost: near 2^53 the last bits of that sum move the log.
                place_cost = cost[start + u + 1]
                member += share * math.fsum(
                    count / math.log2(2 + max(place_cost - (gain_before + s + gain), 0.0))
                    for s, count in by_sum.items()
                )
        total += multiplicity * gain * member / t
    return total


def subset_product_means(keeps: Tensor, size: Tensor, count: Tensor, places: int) -> Tensor:
    """(G, places + 1) the mean of Π x over the u-subsets of each group, u = 0..places.

    ``keeps`` (G, r): x of each group's r (``count``) members with x < 1 (the
    others have x = 1, padding too); ``size`` (G,): t, the members in all. The
    mean over the u-subsets is Σ_j H(j) F_j: H(j) the hypergeometric chance of
    j of the r members among u drawn from t, F_j the mean product over the
    j-subsets of the r members (elementary symmetric polynomials over their
    binomials). F is built one member at a time as a convex combination,
    F'_j = (n - j)/n F_j + j/n x F_{j-1} after n members, so nothing overflows
    or cancels; H comes from log-binomials. Cost O(G · r²) for F and
    O(G · places · r) for the means.
    """
    groups, width = keeps.shape
    dtype, device = torch.float64, keeps.device
    means = torch.zeros(groups, width + 1, dtype=dtype, device=device)
    means[:, 0] = 1.0
    j = torch.arange(1, width + 1, dtype=dtype, device=device)
    for n in range(1, width + 1):
        grow = (count >= n).unsqueeze(1)
        updated = means.clone()
        updated[:, 1:] = ((n - j) / n).clamp(min=0) * means[:, 1:] + (j / n) * keeps[
            :, n - 1 : n
        ] * means[:, :-1]
        means = torch.where(grow, updated, means)
    u = torch.arange(places + 1, dtype=dtype, device=device).view(1, -1, 1)
    jj = torch.arange(width + 1, dtype=dtype, device=device).view(1, 1, -1)
    t, r = size.view(-1, 1, 1), count.view(-1, 1, 1)
    possible = (jj <= r) & (jj <= u) & (u - jj <= t - r) & (u <= t)
    log_h = log_hypergeometric(r, jj, t, u)
    h = torch.where(possible, torch.exp(torch.where(possible, log_h, 0.0)), 0.0)
    return (h * means.unsqueeze(1)).sum(dim=2)


#: the most DP steps :func:`expected_interpolated_precision` takes for one query (a few
#: seconds on one CPU core); beyond, it refuses rather than approximate
IPREC_AVERAGE_STEPS_MAX = 10**8


def check_average_steps(measure: str, what: str, steps: int, budget: int, groups: str) -> None:
    """Refuse (ValueError) an exact expectation under "average" taking over ``budget`` steps.

    ``measure``: the metric names; ``what``: what the expectation is;
    ``groups``: the size of the query's largest tie groups, in words.
    """
    if steps > budget:
        raise ValueError(
            f"{measure} under `ties='average'` is {what}; this query's tie groups "
            f"({groups}) would take about {steps:.1e} exact steps, beyond {budget:.0e}: "
            "pass ties='first', 'pessimistic' or 'optimistic', or break the ties in the scores"
        )


def expected_interpolated_precision(
    groups: Sequence[tuple[int, int, int, int]], needed: Sequence[int]
) -> list[float]:
    """E[max_{j: hits@j ≥ n} hits@j / j] over the orders of the tie groups, for each n.

    ``groups``: (T, t, r, ρ) of each tie group holding a relevant item, in rank
    order (groups without one never change the maximum); ``needed``: the hits n
    of each recall level. The maximum V is below v exactly when the hits path
    stays under max(n, v · j) at every place j; the hits are fixed at group
    boundaries (ρ), and groups are ordered independently, so P(V < v) is a
    product over groups of the chance that the group's random arrangement (a
    lattice path of r hits in t places) stays under the line, a DP over its
    places. V takes one of the values i / p (the i-th relevant item, i ≥ n, at
    a place p its group allows), so E[V] = Σ_k (v_k - v_{k-1}) P(V ≥ v_k) over
    those values in increasing order, compared as exact fractions.

    Cost per level: C candidate values (Σ_c r_c (t_c - r_c + 1) at most) times
    Σ_c t_c (r_c + 1) DP steps over the groups: exact, on the host, and
    quadratic in the size of a tie group that mixes relevant and other items.
    Beyond :data:`IPREC_AVERAGE_STEPS_MAX` steps for a query it raises a
    ValueError (an exact number would take minutes; never an approximate one).
    """
    steps = sum(r * (t - r + 1) for _, t, r, _ in groups) * sum(
        t * (r + 1) for _, t, r, _ in groups
    )
    check_average_steps(
        "interpolated precision (iprec_at_recall_*, 11pt_avg)",
        "an expected maximum over the orders of each tie group",
        steps * len(set(needed)),
        IPREC_AVERAGE_STEPS_MAX,
        f"largest: {max(t for _, t, _, _ in groups)} items, "
        f"{max(r for _, _, r, _ in groups)} relevant",
    )
    results: dict[int, float] = {}
    for n in needed:
        if n not in results:
            results[n] = _expected_max_precision(groups, n)
    return [results[n] for n in needed]


def interpolated_precision_of_mixed_groups(
    best: Tensor,
    needed: Tensor,
    mixed: Tensor,
    members: Tensor,
    groups: tuple[Tensor, Tensor, Tensor, Tensor],
) -> Tensor:
    """``best`` with each row that ``mixed`` marks (a tie group of relevant and other
    items) replaced by :func:`expected_interpolated_precision` of its groups, exactly.

    ``groups``: (T, t, r, ρ) of every place, (Q, places) each; ``members``: the
    places that report the row's groups holding a relevant item (a group may be
    reported more than once). On the host, row by row: read only by iprec.
    """
    rows = mixed.any(dim=1).nonzero().squeeze(1).tolist()
    if not rows:
        return best
    best = best.clone()
    for q in rows:
        start, size, relevant, before = (field[q, members[q]].tolist() for field in groups)
        places = zip(start, size, relevant, before, strict=True)
        row_groups = sorted({(int(T), int(t), int(r), int(b)) for T, t, r, b in places})
        values = expected_interpolated_precision(row_groups, [int(n) for n in needed[q].tolist()])
        best[q] = torch.tensor(values, dtype=best.dtype, device=best.device)
    return best


def _expected_max_precision(groups: Sequence[tuple[int, int, int, int]], n: int) -> float:
    candidates: set[Fraction] = set()
    for start, size, relevant, before in groups:
        for a in range(max(1, n - before), relevant + 1):  # the group's a-th relevant item
            for place in range(start + a, start + size - (relevant - a) + 1):
                candidates.add(Fraction(before + a, place))
    if not candidates:
        return 0.0
    values = sorted(candidates)
    numerator = torch.tensor([float(v.numerator) for v in values], dtype=torch.float64)
    denominator = torch.tensor([float(v.denominator) for v in values], dtype=torch.float64)
    below = torch.ones(len(values), dtype=torch.float64)
    for start, size, relevant, before in groups:
        if before + relevant < n:
            continue
        # chance of h hits so far in the group, with the path kept under the line
        state = torch.zeros(len(values), relevant + 1, dtype=torch.float64)
        state[:, 0] = 1.0
        hits = torch.arange(relevant + 1, dtype=torch.float64)
        for u in range(1, size + 1):
            left = size - u + 1  # places left before this one is filled
            take = ((relevant - hits) / left).clamp(min=0)
            moved = state * take
            state = state * (1 - take)
            state[:, 1:] += moved[:, :-1]
            total = before + hits
            over = (total >= n) & (
                total * denominator.unsqueeze(1) >= numerator.unsqueeze(1) * (start + u)
            )
            state = torch.where(over, 0.0, state)
        below = below * state.sum(dim=1)
    steps = [float(values[0])] + [float(b - a) for a, b in itertools.pairwise(values)]
    return math.fsum(s * (1 - float(p)) for s, p in zip(steps, below.tolist(), strict=True))


#: the most (s, w) terms :func:`expected_infap_terms` sums for one query (0.4 to 1 s
#: per 10^7 on one CPU core, ``benchmarks/bench_judged.py``); beyond, it refuses
INFAP_AVERAGE_STEPS_MAX = 10**8

#: trec_eval's INFAP_EPSILON (trec_eval.h)
INFAP_EPSILON = 0.00001

#: the (s, w) terms summed at once (bounds the memory, about 30 MiB)
_INFAP_BLOCK = 2**18


def expected_infap_terms(
    query: Tensor,
    start: Tensor,
    size: Tensor,
    relevant: Tensor,
    nonrelevant: Tensor,
    pooled_only: Tensor,
    relevant_before: Tensor,
    nonrelevant_before: Tensor,
    pooled_before: Tensor,
) -> Tensor:
    """(G,) E[trec_eval's infAP term of one relevant member] of each tie group, over its orders.

    Each argument is (G,), one entry per tie group: ``query`` its row (for the
    step budget), T (``start``) items ranked before it, t (``size``) members,
    r ≥ 1 of them relevant, n_g judged non-relevant (``nonrelevant``), u_g
    pooled but not judged (``pooled_only``, grade < 0), and ρ0, n0, u0 of
    those kinds before the group. A relevant member at place T + k has the term
    (1 + d · (ρ + ε) / (ρ + n + 2ε)) / (T + k), with ρ, n, u the relevant,
    judged non-relevant and pooled-only items before it and d = ρ + n + u.

    Every relevant member has the same expectation. Of the group's other
    members, m - 1 are relevant or judged non-relevant (m = r + n_g) and z
    are neither (z = t - m). The member's rank s among the m is uniform over
    0..m-1; given s, the number w of the z placed before it has the negative
    hypergeometric chance P(w | s) = C(s + w, s) C(m - s - 1 + z - w, z - w)
    / C(m + z, m); the relevant ones among the s are hypergeometric with mean
    s (r - 1)/(m - 1), and the pooled-only ones among the w have mean
    π w, π = u_g / z, independently. As ρ + n = ρ0 + n0 + s, the term is
    linear in each of those two counts given (s, w), so with
    p(s) = (ρ0 + s (r - 1)/(m - 1) + ε) / (ρ0 + n0 + s + 2ε),

        E = (1/m) Σ_s [(1 + (d0 + s) p(s)) A(s) + π p(s) B(s)],
        A(s) = Σ_w P(w | s) / (T + s + w + 1),  B(s) = Σ_w P(w | s) w / (T + s + w + 1).

    P comes from a table of log-factorials (nothing overflows; each row of
    chances is divided by its own sum, so a rounding common to the row cancels).
    Cost: m (z + 1) terms per group (at most (t + 1)² / 4), in blocks of
    bounded memory. Beyond :data:`INFAP_AVERAGE_STEPS_MAX` terms for a query
    it raises a ValueError (never an approximate number); the sizes are read
    on the host.
    """
    dtype, device = torch.float64, start.device
    r, t = relevant.to(dtype), size.to(dtype)
    m = r + nonrelevant.to(dtype)
    z = t - m
    steps = m * (z + 1)
    per_query = torch.zeros(int(query.max()) + 1, dtype=dtype, device=device)
    per_query.index_add_(0, query, steps)
    worst = int(per_query.argmax())
    largest = torch.where(query == worst, t, 0.0).argmax()
    check_average_steps(
        "infAP (infap)",
        "an expectation over the orders of each tie group that mixes relevant and other items",
        int(per_query[worst]),
        INFAP_AVERAGE_STEPS_MAX,
        f"largest: {int(t[largest])} items, {int(m[largest])} of them relevant or judged",
    )
    # one row per (group, s)
    group = torch.repeat_interleave(torch.arange(m.numel(), device=device), m.to(torch.int64))
    s = torch.arange(group.numel(), dtype=dtype, device=device)
    s = s - (torch.cumsum(m, 0) - m)[group]
    mg, zg = m[group], z[group]
    log_factorial = torch.lgamma(
        torch.arange(int(t.max()) + 1, dtype=dtype, device=device) + 1
    )  # t.max() + 1 entries
    # per row: log C(m + z, m) + log s! + log (m - s - 1)! (a chance is at least 1 / (z + 1)
    # at the row's mode: nothing underflows there), the last index of the second binomial,
    # and the place T + s + 1 before the others
    row_log = (
        log_factorial[(mg + zg).to(torch.int64)]
        - log_factorial[zg.to(torch.int64)]
        + log_factorial[s.to(torch.int64)]
        + log_factorial[(mg - s - 1).to(torch.int64)]
    )
    s_index, z_index = s.to(torch.int64), zg.to(torch.int64)
    high = (mg - s - 1 + zg).to(torch.int64)
    place = start.to(dtype)[group] + s + 1
    a_sum, b_sum, p_sum = (torch.zeros_like(s) for _ in range(3))
    width = zg + 1
    ends = torch.cumsum(width, 0).to(torch.int64)
    row_start = ends - width.to(torch.int64)
    total = int(ends[-1])
    for first in range(0, total, _INFAP_BLOCK):
        # the block's terms: each one's row and its w
        e = torch.arange(first, min(first + _INFAP_BLOCK, total), device=device)
        row = torch.searchsorted(ends, e, right=True)

        def at(values: Tensor, index: Tensor = row) -> Tensor:
            return torch.index_select(values, 0, index)  # faster than indexing on the CPU

        w = e - at(row_start)
        log_p = (
            at(log_factorial, at(s_index) + w)
            - at(log_factorial, w)
            + at(log_factorial, at(high) - w)
            - at(log_factorial, at(z_index) - w)
            - at(row_log)
        )
        p = torch.exp(log_p)
        wf = w.to(dtype)
        inverse = p / (at(place) + wf)
        p_sum.index_add_(0, row, p)
        a_sum.index_add_(0, row, inverse)
        b_sum.index_add_(0, row, inverse * wf)
    a, b = a_sum / p_sum, b_sum / p_sum
    rho0, n0 = relevant_before.to(dtype)[group], nonrelevant_before.to(dtype)[group]
    d0 = rho0 + n0 + pooled_before.to(dtype)[group]
    share_relevant = torch.where(mg > 1, (r[group] - 1) / (mg - 1).clamp(min=1), 0.0)
    share_pooled = torch.where(zg > 0, pooled_only.to(dtype)[group] / zg.clamp(min=1), 0.0)
    precision = (rho0 + s * share_relevant + INFAP_EPSILON) / (rho0 + n0 + s + 2 * INFAP_EPSILON)
    value = (1 + (d0 + s) * precision) * a + share_pooled * precision * b
    return torch.zeros_like(t).index_add_(0, group, value / mg)
