"""Brute-force reference implementation of the ranking metrics (SPEC sections 2-5).

Deliberately slow and obvious: one query at a time, plain Python numbers, and
the ``"average"`` tie policy computed by literally enumerating every order of
every tie group and averaging the deterministic metric over all of them.
Torch is used only to read the input tensors and to build the output tensors.

Per-query semantics (the package's decisions where SPEC is silent):

* items with ``ranked=False`` (masked out) never enter the ranking, but when
  relevant they still count in R and in the ideal DCG;
* relevant: ``grade > 0``, or ``grade >= relevance_threshold`` when given;
* ``k=None`` means k = number of ranked items of the query, except that the
  ideal DCG of ``ndcg`` is then not cut (trec_eval's plain ``ndcg``);
* a k larger than the list reads it as padded with non-relevant items;
* a query with R = 0 is empty (``None``) for every metric; ``ndcg`` with
  IDCG@k = 0, ``mean_rank`` with no ranked relevant item and ``auc`` with no
  (relevant, non-relevant) pair of ranked items are undefined (``None``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

K_METRICS = ("hit_rate", "mrr", "precision", "recall", "f1", "map", "ndcg", "fall_out")
NO_K_METRICS = ("auc", "r_precision", "mean_rank")
ALL_METRICS = K_METRICS + NO_K_METRICS
TIES = ("average", "first", "pessimistic", "optimistic")
EMPTY_ACTIONS = ("neg", "pos", "skip", "error")


def weighted_mean(pairs: Sequence[tuple[float, float]]) -> float:
    """Σw·v / Σw exactly rounded, NaN without weight; values near the float64
    limit are summed scaled by 2^-64, so that a finite mean of them stays finite."""
    den = math.fsum(w for w, _ in pairs)
    if not den > 0:
        return math.nan
    try:
        return math.fsum(w * v for w, v in pairs) / den
    except OverflowError:  # the exact sum passes the float64 limit on its way
        return math.fsum(w * v * 2.0**-64 for w, v in pairs) / den * 2.0**64


# --------------------------------------------------------------------------- #
# relevance and gain
# --------------------------------------------------------------------------- #
def is_relevant(grade: float, relevance_threshold: float | None) -> bool:
    if relevance_threshold is None:
        return grade > 0
    return grade >= relevance_threshold


def exponential_gain(g: float) -> float:
    """2^g - 1 without cancellation below 1: 2.0**1e-310 is 1.0, a relevant item with
    no gain, where the gain is 6.9e-311."""
    return math.expm1(g * math.log(2.0)) if g < 1 else 2.0**g - 1.0


def gain_of(grade: float, relevance_threshold: float | None, gain: str) -> float:
    if not is_relevant(grade, relevance_threshold):
        return 0.0
    g = max(grade, 0.0)
    if gain == "exponential":
        return exponential_gain(g)
    if gain == "linear":
        return float(g)
    raise ValueError(f"unknown gain {gain!r}")


# --------------------------------------------------------------------------- #
# orders
# --------------------------------------------------------------------------- #
def tie_groups(scores: Sequence[float], ranked: Sequence[bool]) -> list[list[int]]:
    """Ranked item indices grouped by equal score, best score first; each
    group in ascending item index."""
    items = [i for i in range(len(scores)) if ranked[i]]
    distinct = sorted({float(scores[i]) for i in items}, reverse=True)
    return [[i for i in items if float(scores[i]) == s] for s in distinct]


def all_orders(
    scores: Sequence[float],
    grades: Sequence[float],
    ranked: Sequence[bool],
    ties: str,
    relevance_threshold: float | None,
    gain: str | None = None,
) -> list[list[int]]:
    """The full rankings (lists of item indices, rank 1 first) the tie policy
    stands for; for ``"average"`` every one of them is equally likely.

    ``gain``: under "pessimistic" and "optimistic", relevant items of one score
    are ordered by their gain (not their grade), equal gains by index: which
    item holds each place, as the exposure metrics read it (grades <= 0 made
    relevant by a threshold all have gain 0). The accuracy metrics cannot tell.
    """
    groups = tie_groups(scores, ranked)

    def rel(i: int) -> bool:
        return is_relevant(grades[i], relevance_threshold)

    def strength(i: int) -> float:
        return grades[i] if gain is None else gain_of(grades[i], relevance_threshold, gain)

    if ties == "average":
        per_group = [list(itertools.permutations(g)) for g in groups]
        return [[i for part in combo for i in part] for combo in itertools.product(*per_group)]
    if ties == "first":
        return [[i for g in groups for i in g]]
    if ties == "pessimistic":
        order: list[int] = []
        for g in groups:
            order += [i for i in g if not rel(i)]
            order += sorted((i for i in g if rel(i)), key=lambda i: (strength(i), i))
        return [order]
    if ties == "optimistic":
        order = []
        for g in groups:
            order += sorted((i for i in g if rel(i)), key=lambda i: (-strength(i), i))
            order += [i for i in g if not rel(i)]
        return [order]
    raise ValueError(f"unknown ties {ties!r}")


# --------------------------------------------------------------------------- #
# one deterministic order
# --------------------------------------------------------------------------- #
def _metric_for_order(
    order: list[int],
    grades: Sequence[float],
    metric: str,
    k: int | None,
    *,
    relevance_threshold: float | None,
    gain: str,
    ap_denominator: str,
    adaptive_k: bool,
    persistence: float = 0.8,
    fall_out_empty: str = "no_relevant",
) -> float | None:
    if metric in JUDGED_MEASURES:  # issue 13's judged measures, below: every item judged
        return _judged_measure_for_order(
            order,
            grades,
            [True] * len(grades),
            metric,
            k if JUDGED_MEASURES[metric] else None,
            relevance_threshold=relevance_threshold,
            persistence=persistence,
        )
    if metric in TREC_MEASURES:  # issue 13's measures, below
        return _trec_measure_for_order(
            order,
            grades,
            metric,
            None if metric in TREC_WHOLE_LIST else k,
            relevance_threshold=relevance_threshold,
            gain=gain,
            persistence=persistence,
            adaptive_k=adaptive_k,
        )
    rel_all = [is_relevant(g, relevance_threshold) for g in grades]
    R = sum(rel_all)
    n = len(order)
    rels = [rel_all[i] for i in order]  # rel at rank position 0..n-1
    if metric == "fall_out" and fall_out_empty == "no_nonrelevant":
        # TorchMetrics' rule: empty without a non-relevant item, defined without relevant ones
        if all(rels):
            return None
    elif R == 0:
        return None

    def hits(m: int) -> int:  # hits@m, list padded with non-relevant items
        return sum(rels[:m])

    if metric in NO_K_METRICS:
        if metric == "r_precision":
            return hits(R) / R
        if metric == "mean_rank":
            ranks = [pos + 1 for pos in range(n) if rels[pos]]
            if not ranks:
                return None
            return sum(ranks) / len(ranks)
        if metric == "auc":
            n_rel = sum(rels)
            n_non = n - n_rel
            if n_rel == 0 or n_non == 0:
                return None
            good = 0
            for p in range(n):
                if rels[p]:
                    good += sum(1 for q in range(p + 1, n) if not rels[q])
            return good / (n_rel * n_non)
        raise AssertionError(metric)

    kk = n if k is None else k
    if metric == "auroc":  # issue 26: TorchMetrics' AUROC of the top k, below
        return _roc_area_of_order(rels[:kk], None)
    kp = min(kk, n) if adaptive_k else kk
    h = hits(kk)
    if metric == "hit_rate":
        return 1.0 if h > 0 else 0.0
    if metric == "mrr":
        for pos in range(min(kk, n)):
            if rels[pos]:
                return 1.0 / (pos + 1)
        return 0.0
    if metric == "precision":
        return 0.0 if kp == 0 else h / kp
    if metric == "recall":
        return h / R
    if metric == "f1":
        return 2.0 * h / (kp + R)
    if metric == "map":
        if ap_denominator == "relevant":
            D = R
        elif ap_denominator == "min_k_relevant":
            D = min(kk, R)
        else:
            raise ValueError(f"unknown ap_denominator {ap_denominator!r}")
        total = 0.0
        for pos in range(min(kk, n)):
            if rels[pos]:
                total += hits(pos + 1) / (pos + 1)
        return total / D
    if metric == "ndcg":
        gains_all = [gain_of(g, relevance_threshold, gain) for g in grades]
        # top_k=None is trec_eval's plain ndcg: the ideal list is not cut at n
        ideal = sorted(gains_all, reverse=True)[: (len(gains_all) if k is None else kk)]
        idcg = sum(gv / math.log2(pos + 2) for pos, gv in enumerate(ideal))
        if idcg == 0:
            return None
        dcg = sum(gains_all[order[pos]] / math.log2(pos + 2) for pos in range(min(kk, n)))
        return dcg / idcg
    if metric == "fall_out":
        n_non = sum(1 for r in rels if not r)
        if n_non == 0:
            return 0.0
        top_non = sum(1 for r in rels[:kk] if not r)
        return top_non / n_non
    raise ValueError(f"unknown metric {metric!r}")


# --------------------------------------------------------------------------- #
# one query
# --------------------------------------------------------------------------- #
def reference_query(
    scores: Sequence[float],
    grades: Sequence[float],
    ranked: Sequence[bool],
    specs: Iterable[tuple[str, int | None]],
    *,
    ties: str,
    relevance_threshold: float | None = None,
    gain: str = "linear",
    ap_denominator: str = "relevant",
    adaptive_k: bool = False,
    persistence: float = 0.8,
    pooled: Sequence[bool] | None = None,
    fall_out_empty: str = "no_relevant",
) -> dict[tuple[str, int | None], float | None]:
    """Values of several (metric, k) pairs for one query, enumerating the
    orders only once.

    ``pooled``: which items carry a judgment (the package's ``judged``; None:
    every item). An item that is not pooled is never relevant, whatever its
    grade, for every metric; the judged measures read the flags themselves,
    over :func:`judged_orders`.
    """
    specs = list(specs)
    assert len(scores) == len(grades) == len(ranked)
    grades = [float(g) for g in grades]
    scores = [float(s) for s in scores]
    if pooled is not None:
        assert len(pooled) == len(grades)
        grades = [g if p else -math.inf for g, p in zip(grades, pooled, strict=True)]
    for s in scores:
        assert not math.isnan(s)
    orders = all_orders(scores, grades, ranked, ties, relevance_threshold)
    out: dict[tuple[str, int | None], float | None] = {}
    for metric, k in specs:
        if metric in JUDGED_MEASURES:
            out[(metric, k)] = reference_judged_measure(
                scores,
                grades,
                ranked,
                [True] * len(grades) if pooled is None else pooled,
                metric,
                k,
                ties=ties,
                relevance_threshold=relevance_threshold,
                persistence=persistence,
                adaptive_k=adaptive_k,
            )
            continue
        vals = [
            _metric_for_order(
                order,
                grades,
                metric,
                k,
                relevance_threshold=relevance_threshold,
                gain=gain,
                ap_denominator=ap_denominator,
                adaptive_k=adaptive_k,
                persistence=persistence,
                fall_out_empty=fall_out_empty,
            )
            for order in orders
        ]
        if any(v is None for v in vals):
            # undefinedness never depends on the order within tie groups
            assert all(v is None for v in vals), (metric, k, vals)
            out[(metric, k)] = None
        else:
            out[(metric, k)] = weighted_mean([(1.0, v) for v in vals])
    return out


def reference_metric(
    scores: list[float],
    grades: list[float],
    ranked: list[bool],
    metric: str,
    k: int | None,
    *,
    ties: str,
    relevance_threshold: float | None = None,
    gain: str = "linear",
    ap_denominator: str = "relevant",
    adaptive_k: bool = False,
) -> float | None:
    """Per-query value of one metric, or None where the query is empty or the
    metric undefined for it."""
    if metric in NO_K_METRICS:
        k = None
    return reference_query(
        scores,
        grades,
        ranked,
        [(metric, k)],
        ties=ties,
        relevance_threshold=relevance_threshold,
        gain=gain,
        ap_denominator=ap_denominator,
        adaptive_k=adaptive_k,
    )[(metric, k)]


# --------------------------------------------------------------------------- #
# whole batches, mirroring ranking_plugins.rank_metrics
# --------------------------------------------------------------------------- #
def _tolist(x):
    return x.detach().cpu().tolist()


def split_queries(preds, target, *, indexes=None, mask=None, target_format=None, judged=None):
    """Turn the three layouts into a list of (scores, grades, ranked, judged)
    per query: parallel per-item lists (``judged``: bool of the shape of
    ``preds`` in the dense and grouped layouts, or None: every item)."""
    queries = []
    if indexes is not None:
        p = [float(v) for v in _tolist(preds.reshape(-1))]
        t = [float(v) for v in _tolist(target.reshape(-1))]
        ids = [int(v) for v in _tolist(indexes.reshape(-1))]
        m = [bool(v) for v in _tolist(mask.reshape(-1))] if mask is not None else [True] * len(p)
        jd = [bool(v) for v in _tolist(judged.reshape(-1))] if judged is not None else None
        for qid in sorted(set(ids)):
            pos = [j for j, q in enumerate(ids) if q == qid]
            queries.append(
                (
                    [p[j] for j in pos],
                    [t[j] for j in pos],
                    [m[j] for j in pos],
                    None if jd is None else [jd[j] for j in pos],
                )
            )
        return queries

    P = [[float(v) for v in row] for row in _tolist(preds)]
    Q = len(P)
    N = len(P[0]) if Q else 0
    M = (
        [[bool(v) for v in row] for row in _tolist(mask)]
        if mask is not None
        else [[True] * N for _ in range(Q)]
    )
    if target_format is None:
        target_format = "dense" if tuple(target.shape) == tuple(preds.shape) else "indices"
    if target_format == "dense":
        G = [[float(v) for v in row] for row in _tolist(target)]
    elif target_format == "indices":
        T = _tolist(target)
        if target.dim() == 1:
            T = [[v] for v in T]
        G = []
        for row in T:
            listed = {int(v) for v in row if int(v) != -1}
            assert all(0 <= v < N for v in listed)
            G.append([1.0 if j in listed else 0.0 for j in range(N)])
    else:
        raise ValueError(target_format)
    J = [[bool(v) for v in row] for row in _tolist(judged)] if judged is not None else None
    for q in range(Q):
        queries.append((P[q], G[q], M[q], None if J is None else J[q]))
    return queries


def result_keys(metrics, top_k):
    """(key, metric, k) in output order."""
    if top_k is None:
        ks = [None]
    elif isinstance(top_k, int):
        ks = [top_k]
    else:
        ks = sorted(set(int(k) for k in top_k))
    out = []
    for metric in metrics:
        if (
            metric in NO_K_METRICS
            or metric in TREC_WHOLE_LIST
            or JUDGED_MEASURES.get(metric) is False
        ):
            out.append((metric, metric, None))
        else:
            for k in ks:
                out.append((metric if k is None else f"{metric}@{k}", metric, k))
    return out


def reference_rank_metrics(
    preds,
    target,
    metrics=("hit_rate", "mrr", "ndcg"),
    top_k=10,
    *,
    indexes=None,
    mask=None,
    target_format=None,
    ties="average",
    relevance_threshold=None,
    empty_target_action="neg",
    reduction="mean",
    gain="linear",
    ap_denominator="relevant",
    adaptive_k=False,
    weighted=False,
    rbp_persistence=0.8,
    judged=None,
    fall_out_empty="no_relevant",
):
    """Mirror of ``ranking_plugins.rank_metrics``; returns a dict of float64
    tensors (0-d for reduction="mean", (Q,) for reduction="none")."""
    import torch

    if isinstance(metrics, str):
        metrics = (metrics,)
    keys = result_keys(metrics, top_k)
    queries = split_queries(
        preds, target, indexes=indexes, mask=mask, target_format=target_format, judged=judged
    )
    per_query = []
    Rs = []
    for scores, grades, ranked, pooled in queries:
        if pooled is not None:  # an unjudged item is never relevant (R and the weights too)
            grades = [g if p else -math.inf for g, p in zip(grades, pooled, strict=True)]
        per_query.append(
            reference_query(
                scores,
                grades,
                ranked,
                [(metric, k) for _, metric, k in keys],
                ties=ties,
                relevance_threshold=relevance_threshold,
                gain=gain,
                ap_denominator=ap_denominator,
                adaptive_k=adaptive_k,
                persistence=rbp_persistence,
                pooled=pooled,
                fall_out_empty=fall_out_empty,
            )
        )
        Rs.append(sum(is_relevant(float(g), relevance_threshold) for g in grades))

    result = {}
    for key, metric, k in keys:
        values = []
        counted = []
        for vals in per_query:
            v = vals[(metric, k)]
            if v is None:
                if empty_target_action == "error":
                    raise ValueError(f"query without relevant items / undefined {key}")
                if empty_target_action == "neg":
                    v, c = (1.0 if metric == "fall_out" else 0.0), True
                elif empty_target_action == "pos":
                    v, c = 1.0, True
                elif empty_target_action == "skip":
                    v, c = math.nan, False
                else:
                    raise ValueError(empty_target_action)
            else:
                c = True
            values.append(v)
            counted.append(c)
        if reduction == "none":
            result[key] = torch.tensor(values, dtype=torch.float64)
        elif reduction == "mean":
            w = [(float(R) if weighted else 1.0) for R in Rs]
            mean = weighted_mean([(wi, v) for wi, v, c in zip(w, values, counted) if c])
            result[key] = torch.tensor(mean, dtype=torch.float64)
        else:
            raise ValueError(reduction)
    return result


# --------------------------------------------------------------------------- #
# beyond accuracy: which items each top k holds (issue 14)
# --------------------------------------------------------------------------- #
PER_QUERY_EXPOSURE = ("novelty", "arp", "tail_share", "diversity")
CATALOGUE_EXPOSURE = ("coverage", "gini", "entropy", "personalisation")


def _power_of_two_scaled(vector) -> list[float]:
    """``vector`` times a power of two that brings its largest entry near 1: exact
    (only the exponents change), and the cosine is the same, but a subnormal entry
    (5e-324) becomes a normal number, so its norm keeps its digits (hypot of two
    5e-324 rounds to 5e-324, a unit vector's norm would then read as 1, not sqrt 2)."""
    largest = max((abs(x) for x in vector), default=0.0)
    if largest == 0 or not math.isfinite(largest):
        return list(vector)
    exponent = math.frexp(largest)[1]
    return [math.ldexp(x, -exponent) for x in vector]


def _similarity(i: int, j: int, features, categories) -> float:
    if features is not None:
        a, b = _power_of_two_scaled(features[i]), _power_of_two_scaled(features[j])
        na, nb = math.hypot(*a), math.hypot(*b)  # no overflow nor underflow on the way
        if na == 0 or nb == 0:
            return 0.0
        return math.fsum((x / na) * (y / nb) for x, y in zip(a, b, strict=True))
    return 1.0 if categories[i] == categories[j] else 0.0


def _list_value(top: list[int], metric: str, items: dict) -> float | None:
    """One deterministic top-k list's value of a per-query exposure metric."""
    n = len(top)
    popularity = items.get("popularity")
    if metric == "diversity":
        if n < 2:
            return None
        pairs = [(a, b) for x, a in enumerate(top) for b in top[x + 1 :]]
        sim = sum(
            _similarity(a, b, items.get("features"), items.get("categories")) for a, b in pairs
        )
        return 1 - sim / len(pairs)
    if n == 0:
        return None
    if metric == "novelty":  # -log2(p / Σ) as log2(Σ) - log2(p): p / Σ may underflow
        total = sum(popularity)
        return sum(math.log2(total) - math.log2(popularity[i]) if popularity[i] > 0 else math.inf
                   for i in top) / n  # fmt: skip
    if metric == "arp":
        return sum(popularity[i] for i in top) / n
    if metric == "tail_share":
        return sum(1.0 for i in top if items["tail"][i]) / n
    raise AssertionError(metric)


def reference_exposure(
    rows: list[tuple[list[float], list[float], list[bool]]],
    ks: Sequence[int],
    *,
    ties: str,
    items: dict,
    relevance_threshold: float | None = None,
    gain: str | None = None,
    max_joint: int | None = None,
) -> dict[str, object]:
    """Every exposure metric by enumerating the orders the tie policy stands for.

    Per-query metrics: the mean over each query's orders (per query, a list,
    None where undefined). Coverage and personalisation: the mean over every
    joint choice of one order per query (queries independent). Gini and
    entropy: of the expected exposure counts (the mean over orders of each
    item's count); NaN when no item is shown.

    ``gain``: see :func:`all_orders`. ``max_joint``: past that many joint
    choices, coverage and personalisation are computed from each item's
    probability p_qi of being in query q's top k (each enumerated over q's own
    orders), by the independence of the queries: E[coverage] = mean_i
    (1 - Π_q (1 - p_qi)), E[|L_a ∩ L_b|] = Σ_i p_ai p_bi.
    """
    orders = [all_orders(s, g, r, ties, relevance_threshold, gain) for s, g, r in rows]
    num_items = len(rows[0][0])
    out: dict[str, object] = {}
    for k in ks:
        for metric in PER_QUERY_EXPOSURE:
            if metric in ("novelty", "arp") and "popularity" not in items:
                continue
            if metric == "tail_share" and "tail" not in items:
                continue
            if metric == "diversity" and not ({"features", "categories"} & set(items)):
                continue
            per_query: list[float | None] = []
            for query_orders in orders:
                values = [_list_value(o[:k], metric, items) for o in query_orders]
                per_query.append(None if values[0] is None else sum(values) / len(values))  # type: ignore[arg-type]
            out[f"{metric}@{k}"] = per_query
        counts = [0.0] * num_items
        for query_orders in orders:
            for o in query_orders:
                for i in o[:k]:
                    counts[i] += 1 / len(query_orders)
        total = sum(counts)
        ascending = sorted(counts)
        out[f"gini@{k}"] = (
            sum((2 * (j + 1) - num_items - 1) * c for j, c in enumerate(ascending))
            / (num_items * total)
            if total > 0
            else math.nan
        )
        out[f"entropy@{k}"] = (
            -sum(c / total * math.log2(c / total) for c in counts if c > 0)
            if total > 0
            else math.nan
        )
        q = len(rows)
        joint_size = math.prod(len(o) for o in orders)
        if max_joint is not None and joint_size > max_joint and num_items > 0:
            p = [[0.0] * num_items for _ in orders]
            for row, query_orders in enumerate(orders):
                for o in query_orders:
                    for i in o[:k]:
                        p[row][i] += 1 / len(query_orders)
            out[f"coverage@{k}"] = (
                sum(1 - math.prod(1 - p[row][i] for row in range(q)) for i in range(num_items))
                / num_items
            )
            if q > 1:
                overlaps = [
                    sum(p[a][i] * p[b][i] for i in range(num_items)) / k
                    for a in range(q)
                    for b in range(a + 1, q)
                ]
                out[f"personalisation@{k}"] = 1 - sum(overlaps) / len(overlaps)
            else:
                out[f"personalisation@{k}"] = math.nan
            continue
        if num_items == 0:  # an empty catalogue: 0 / 0
            out[f"coverage@{k}"] = math.nan
            out[f"personalisation@{k}"] = 1.0 if q > 1 else math.nan
            continue
        coverage = personalisation = 0.0
        joint = list(itertools.product(*orders))
        for choice in joint:
            tops = [set(o[:k]) for o in choice]
            coverage += len(set().union(*tops)) / num_items
            if q > 1:
                overlaps = [len(tops[a] & tops[b]) / k for a in range(q) for b in range(a + 1, q)]
                personalisation += 1 - sum(overlaps) / len(overlaps)
        out[f"coverage@{k}"] = coverage / len(joint)
        out[f"personalisation@{k}"] = personalisation / len(joint) if q > 1 else math.nan
    return out


# --------------------------------------------------------------------------- #
# issue 13: trec_eval's counts and set measures, RBP, DCG, binG
# --------------------------------------------------------------------------- #
#: measures defined for every query (no relevant item needed)
ALWAYS_DEFINED = ("num_ret", "num_rel", "num_rel_ret", "utility", "dcg")
#: the measures read on the whole list (no cutoff)
TREC_WHOLE_LIST = (
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "set_map",
    "utility",
    "bin_g",
    *(f"iprec_at_recall_{r:.2f}" for r in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)),
    "11pt_avg",
    *(f"Rprec_mult_{x / 10:.2f}" for x in range(2, 21, 2)),
)
RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: interpolated precision: exact under the ordered policies only (average is refused)
INTERPOLATED = (*(f"iprec_at_recall_{r:.2f}" for r in RECALL_LEVELS), "11pt_avg")
#: precision at int(x · R + 0.9) for trec_eval's multiples x of R
R_MULTIPLES = tuple(f"Rprec_mult_{x / 10:.2f}" for x in range(2, 21, 2))
TREC_MEASURES = (
    *ALWAYS_DEFINED,
    "relative_precision",
    "set_map",
    "rbp",
    "bin_g",
    *INTERPOLATED,
    *R_MULTIPLES,
)


def _trec_measure_for_order(
    order: list[int],
    grades: Sequence[float],
    metric: str,
    k: int | None,
    *,
    relevance_threshold: float | None,
    gain: str,
    persistence: float,
    adaptive_k: bool = False,
) -> float | None:
    """trec_eval's loops over one ranked list (``order``: the ranked items, rank 1 first)."""
    if metric in GAIN_MEASURES:
        return _gain_measure_for_order(order, grades, metric, relevance_threshold, gain)
    if metric == "err":
        return _err_for_order(order, grades, k, relevance_threshold, gain)
    rel_all = [is_relevant(g, relevance_threshold) for g in grades]
    R = sum(rel_all)
    top = order if k is None else order[:k]
    rels = [rel_all[i] for i in top]
    if metric == "num_ret":
        return float(len(top))
    if metric == "num_rel":
        return float(R)
    if metric == "num_rel_ret":
        return float(sum(rels))
    if metric == "utility":
        return float(sum(rels) - (len(rels) - sum(rels)))
    if metric == "dcg":
        return math.fsum(
            gain_of(grades[i], relevance_threshold, gain) / math.log2(j + 2)
            for j, i in enumerate(top)
        )
    if R == 0:
        return None
    if metric == "relative_precision":
        size = len(order) if k is None else (min(k, len(order)) if adaptive_k else k)
        return 0.0 if size == 0 else sum(rels) / min(size, R)  # nothing ranked: as precision
    if metric == "set_map":
        return 0.0 if not top else sum(rels) ** 2 / (len(top) * R)
    if metric == "rbp":  # graded, scaled by the largest gain (trec_eval's rbp)
        gains = [gain_of(grades[i], relevance_threshold, gain) for i in top]
        largest = max(gain_of(g, relevance_threshold, gain) for g in grades)
        if largest == 0:  # relevant items of gain 0 only (a threshold <= 0): as ndcg's IDCG = 0
            return None
        return (
            (1 - persistence) * math.fsum(persistence**j * g for j, g in enumerate(gains)) / largest
        )
    if metric == "bin_g":
        total, nonrelevant = 0.0, 0
        for r in rels:
            if r:
                total += 1 / math.log2(2 + nonrelevant)
            else:
                nonrelevant += 1
        return total / R
    if metric in R_MULTIPLES:
        cut = int(float(metric.rpartition("_")[2]) * R + 0.9)
        return sum(rel_all[i] for i in order[:cut]) / cut
    if metric in INTERPOLATED:
        levels = RECALL_LEVELS if metric == "11pt_avg" else (float(metric.rpartition("_")[2]),)
        values = []
        for level in levels:
            needed = max(1, math.floor(level * R + 0.5))  # trec_eval's lround
            best, hits = 0.0, 0
            for j, r in enumerate(rels, 1):  # the largest precision once the hits reach it
                hits += r
                if hits >= needed:
                    best = max(best, hits / j)
            values.append(best)
        return math.fsum(values) / len(values)
    raise ValueError(f"unknown measure {metric!r}")


# -- G, ndcg_rel, Rndcg (issue 13): trec_eval's loops, written out -----------------------
GAIN_MEASURES = ("g", "ndcg_rel", "rndcg")
# read on the whole list; with ERR (at k), every measure of this module's reference
TREC_WHOLE_LIST += GAIN_MEASURES
TREC_MEASURES += (*GAIN_MEASURES, "err")


def _gain_measure_for_order(
    order: list[int],
    grades: Sequence[float],
    metric: str,
    relevance_threshold: float | None,
    gain: str,
) -> float | None:
    """trec_eval's G, ndcg_rel and Rndcg (m_G.c, m_ndcg_rel.c, m_Rndcg.c) on one order."""
    gains = [gain_of(grades[i], relevance_threshold, gain) for i in order]
    ideal = sorted((gain_of(g, relevance_threshold, gain) for g in grades), reverse=True)
    ideal = [g for g in ideal if g > 0]
    R = len(ideal)
    if R == 0:
        return None
    depth = max(len(gains), R)

    def at(values: list[float], j: int) -> float:  # the value at place j (1-based), 0 past the end
        return values[j - 1] if j <= len(values) else 0.0

    def dcg(values: list[float], n: int) -> float:
        return math.fsum(at(values, j) / math.log2(j + 1) for j in range(1, n + 1))

    if metric == "g":
        total, results, cost = 0.0, 0.0, 0.0
        for j, g in enumerate(gains, 1):
            results += g
            cost += max(at(ideal, j), 1.0)
            if g != 0:
                total += g / math.log2(2 + (cost - results))  # 2 + cost loses the 2 past 2^53
        return total / math.fsum(ideal)
    if metric == "ndcg_rel":
        terms = [dcg(gains, j) / dcg(ideal, min(j, R)) for j, g in enumerate(gains, 1) if g > 0]
        missing = (R - len(terms)) * dcg(gains, len(gains)) / dcg(ideal, R)
        return (math.fsum(terms) + missing) / R
    if metric == "rndcg":
        ends = [j for j in range(1, R + 1) if j == R or ideal[j] != ideal[j - 1]]
        if len(gains) > R + 1:  # m_Rndcg.c's closing term: its loop stopped before the end
            ends.append(len(gains))
        return math.fsum(dcg(gains, b) / dcg(ideal, min(b, depth)) for b in ends) / len(ends)
    raise ValueError(f"unknown measure {metric!r}")


def _err_for_order(
    order: list[int],
    grades: Sequence[float],
    k: int | None,
    relevance_threshold: float | None,
    gain: str,
) -> float | None:
    """ERR@k (Chapelle et al. 2009) of one order: Σ_j R_j / j Π_{i<j} (1 - R_i).

    R = (2^g - 1) / 2^g_max, g the grade of a relevant item (0 otherwise) and
    g_max the largest over the query; the grade is read back from the gain.
    """

    def grade(i: int) -> float:
        value = gain_of(grades[i], relevance_threshold, gain)
        return math.log2(value + 1) if gain == "exponential" else value

    g_max = max(grade(i) for i in range(len(grades)))
    if g_max <= 0:
        return None
    total, reach = 0.0, 1.0
    for j, i in enumerate(order if k is None else order[:k], 1):
        stop = (2 ** grade(i) - 1) / 2**g_max
        total += reach * stop / j
        reach *= 1 - stop
    return total


def reference_trec_measure(
    scores: Sequence[float],
    grades: Sequence[float],
    ranked: Sequence[bool],
    metric: str,
    k: int | None,
    *,
    ties: str,
    relevance_threshold: float | None = None,
    gain: str = "linear",
    persistence: float = 0.8,
) -> float | None:
    """One query's value of an issue-13 measure: the mean over the orders ``ties`` stands for."""
    orders = all_orders(scores, [float(g) for g in grades], ranked, ties, relevance_threshold)
    values = [
        _trec_measure_for_order(
            order,
            grades,
            metric,
            k,
            relevance_threshold=relevance_threshold,
            gain=gain,
            persistence=persistence,
        )
        for order in orders
    ]
    return _mean_over_orders(values, (metric, k))


# --------------------------------------------------------------------------- #
# judged measures (issue 13): bpref, infap, num_nonrel_judged_ret, unj, judged, rbp_resid
# --------------------------------------------------------------------------- #
#: the measures that read which items are judged; (takes a cutoff k)
JUDGED_MEASURES = {
    "bpref": False,
    "infap": False,
    "num_nonrel_judged_ret": False,
    "unj": True,
    "judged": True,
    "rbp_resid": False,
}
#: defined for every query (no relevant item needed)
JUDGED_ALWAYS_DEFINED = ("num_nonrel_judged_ret", "unj", "judged", "rbp_resid")
INFAP_EPSILON = 0.00001


def judged_orders(
    scores: Sequence[float],
    grades: Sequence[float],
    ranked: Sequence[bool],
    ties: str,
    relevance_threshold: float | None,
) -> list[list[int]]:
    """The orders a tie policy stands for, for the measures of judged items.

    "average" and "first" as :func:`all_orders`. "pessimistic" and "optimistic"
    decide only where relevant items stand among their ties (and by grade); the
    order of items they leave interchangeable (the non-relevant ones of a tie,
    relevant ones of one grade), which no other measure sees but unj does, is
    averaged: every order of those sub-blocks is equally likely.
    """
    if ties in ("average", "first"):
        return all_orders(scores, grades, ranked, ties, relevance_threshold)
    blocks: list[list[int]] = []
    for group in tie_groups(scores, ranked):
        nonrelevant = [i for i in group if not is_relevant(grades[i], relevance_threshold)]
        by_grade: dict[float, list[int]] = {}
        for i in group:
            if is_relevant(grades[i], relevance_threshold):
                by_grade.setdefault(float(grades[i]), []).append(i)
        relevant = [by_grade[g] for g in sorted(by_grade, reverse=ties == "optimistic")]
        parts = [*relevant, nonrelevant] if ties == "optimistic" else [nonrelevant, *relevant]
        blocks += [p for p in parts if p]
    per_block = [list(itertools.permutations(b)) for b in blocks]
    return [[i for part in combo for i in part] for combo in itertools.product(*per_block)]


def _judged_measure_for_order(
    order: list[int],
    grades: Sequence[float],
    pooled: Sequence[bool],
    metric: str,
    k: int | None,
    *,
    relevance_threshold: float | None,
    persistence: float,
    adaptive_k: bool = False,
) -> float | None:
    """trec_eval's loops (m_bpref.c, m_infap.c, m_unjudged.c, ...) over one ranked list.

    ``pooled``: the item has a judgment entry (trec_eval: it is in the qrels);
    judged: pooled with a grade >= 0 (a negative grade: in the pool, not judged);
    relevant: pooled and relevant under the threshold.
    """
    n_items = len(grades)
    relevant = [pooled[i] and is_relevant(grades[i], relevance_threshold) for i in range(n_items)]
    judged = [pooled[i] and grades[i] >= 0 for i in range(n_items)]
    R = sum(relevant)
    N = sum(1 for i in range(n_items) if judged[i] and not relevant[i])
    if metric == "num_nonrel_judged_ret":
        return float(sum(1 for i in order if judged[i] and not relevant[i]))
    if metric in ("unj", "judged"):
        k = len(order) if k is None else k  # None: the whole list
        size = min(k, len(order)) if adaptive_k else k  # as precision divides
        if size == 0:
            return 0.0
        # past the list nothing is counted: for unj the padding is not unjudged
        # (trec_eval's m_unjudged.c), for judged it is not judged (ir_measures' Judged@k)
        wanted = metric == "judged"
        return sum(1 for i in order[:k] if judged[i] == wanted) / size
    if metric == "rbp_resid":
        unjudged = [j for j, i in enumerate(order) if not judged[i]]
        if not unjudged:
            return 0.0
        p = persistence
        return p ** len(order) + (1 - p) * math.fsum(p**j for j in unjudged)
    if R == 0:
        return None
    if metric == "bpref":
        total, nonrelevant = 0.0, 0
        for i in order:
            if relevant[i]:
                total += 1 - min(nonrelevant, R) / min(N, R) if nonrelevant else 1.0
            elif judged[i]:
                nonrelevant += 1
        return total / R
    if metric == "infap":
        total, rel_so_far, nonrelevant, pool_only = 0.0, 0, 0, 0
        for j, i in enumerate(order):
            if not pooled[i]:
                continue
            if relevant[i]:
                rel_so_far += 1
                if j == 0:
                    total += 1.0
                else:
                    d = rel_so_far - 1 + nonrelevant + pool_only
                    precision = (rel_so_far - 1 + INFAP_EPSILON) / (
                        rel_so_far - 1 + nonrelevant + 2 * INFAP_EPSILON
                    )
                    total += 1 / (j + 1) + (j / (j + 1)) * (d / j) * precision
            elif judged[i]:
                nonrelevant += 1
            else:
                pool_only += 1
        return total / R
    raise ValueError(f"unknown measure {metric!r}")


def reference_judged_measure(
    scores: Sequence[float],
    grades: Sequence[float],
    ranked: Sequence[bool],
    pooled: Sequence[bool],
    metric: str,
    k: int | None,
    *,
    ties: str,
    relevance_threshold: float | None = None,
    persistence: float = 0.8,
    adaptive_k: bool = False,
) -> float | None:
    """One query's value of a judged measure: the mean over the orders ``ties`` stands for.

    An item that is not ``pooled`` is never relevant, whatever its grade.
    """
    grades = [float(g) if pooled[i] else -math.inf for i, g in enumerate(grades)]
    orders = judged_orders(scores, grades, ranked, ties, relevance_threshold)
    values = [
        _judged_measure_for_order(
            order,
            grades,
            pooled,
            metric,
            k if JUDGED_MEASURES[metric] else None,
            relevance_threshold=relevance_threshold,
            persistence=persistence,
            adaptive_k=adaptive_k,
        )
        for order in orders
    ]
    return _mean_over_orders(values, (metric, k))


def _mean_over_orders(values: list[float | None], what: object) -> float | None:
    """The mean of a measure over every order; None where it is undefined (in every order)."""
    if any(v is None for v in values):
        assert all(v is None for v in values), (what, values)
        return None
    return math.fsum(v for v in values if v is not None) / len(values)


# --------------------------------------------------------------------------- #
# issue 26: TorchMetrics' RetrievalAUROC(top_k, max_fpr)
# --------------------------------------------------------------------------- #
def _roc_area_of_order(rels: list[bool], max_fpr: float | None) -> float:
    """TorchMetrics' retrieval_auroc of one order without ties: the ROC curve drawn
    item by item, its area up to ``max_fpr`` by trapezoids (the last one cut where
    the curve crosses it), McClish-standardised; 0 when the list holds one class."""
    positives = sum(rels)
    negatives = len(rels) - positives
    if positives == 0 or negatives == 0:
        return 0.0
    f = 1.0 if max_fpr is None else max_fpr
    area, fpr, tpr = 0.0, 0.0, 0.0
    for rel in rels:
        if rel:
            tpr += 1 / positives
            continue
        step = min(1 / negatives, max(0.0, f - fpr))
        area += step * tpr  # a horizontal step: the trapezoid is a rectangle
        fpr += 1 / negatives
    if max_fpr is None or max_fpr == 1:
        return area
    least = f * f / 2
    return 0.5 * (1 + (area - least) / (f - least))


def reference_auroc(
    scores: Sequence[float],
    grades: Sequence[float],
    ranked: Sequence[bool],
    k: int | None,
    max_fpr: float | None,
    *,
    ties: str,
    relevance_threshold: float | None = None,
) -> float | None:
    """``auroc@k`` of one query: the mean over the tie policy's orders of TorchMetrics'
    value on the top k (the top min(k, n)); None for a query without relevant items."""
    grades = [float(g) for g in grades]
    if not any(is_relevant(g, relevance_threshold) for g in grades):
        return None
    orders = all_orders([float(s) for s in scores], grades, ranked, ties, relevance_threshold)
    values = [
        _roc_area_of_order(
            [is_relevant(grades[i], relevance_threshold) for i in order[:k]], max_fpr
        )
        for order in orders
    ]
    return math.fsum(values) / len(values)
