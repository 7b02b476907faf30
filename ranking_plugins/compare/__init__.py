"""Is system A better than system B? Paired tests over per-query values.

Every function here is pure: it takes the per-query values of two or more
systems on the same queries (``rank_metrics(..., reduction="none")``, the
adapters' ``compute_per_query()``, or ``ranking-plugins evaluate --per-query``)
and returns numbers. :func:`compare` runs one test for every comparison and
returns a :class:`ComparisonReport` (a table, JSON, CSV or LaTeX).

The tests themselves are pure functions of a matrix of differences, in
:mod:`ranking_plugins.compare.significance` (imported here too): paired t,
Wilcoxon, randomization, bootstrap, intervals, effect sizes, corrections.

>>> import torch
>>> from ranking_plugins.compare import compare
>>> a = torch.tensor([0.50, 0.20, 0.90, 0.40, 0.70, 0.30], dtype=torch.float64)
>>> b = torch.tensor([0.60, 0.35, 0.90, 0.55, 0.80, 0.50], dtype=torch.float64)
>>> report = compare({"bm25": a, "dense": b}, test="randomization")
>>> row = report.rows[0]
>>> (row.system, row.baseline, round(row.difference, 4), row.p_value)
('dense', 'bm25', 0.1167, 0.0625)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.choices import CORRECTIONS, TESTS
from ranking_plugins.compare.pairing import SystemValues, _listing, paired_values
from ranking_plugins.compare.report import Comparison, ComparisonReport
from ranking_plugins.compare.significance import (
    _check_count,
    _check_level,
    _identical_is_one,
    adjust_p_values,
    bootstrap_interval,
    bootstrap_test,
    effect_size,
    paired_t_test,
    randomization_test,
    t_interval,
    wilcoxon_test,
)
from ranking_plugins.metrics import key_metric

__all__ = [
    "CORRECTIONS",
    "TESTS",
    "Comparison",
    "ComparisonReport",
    "adjust_p_values",
    "bootstrap_interval",
    "bootstrap_test",
    "compare",
    "effect_size",
    "paired_t_test",
    "paired_values",
    "randomization_test",
    "t_interval",
    "wilcoxon_test",
]


# --------------------------------------------------------------------------- compare


def compare(
    systems: Mapping[str, SystemValues],
    *,
    query_ids: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    test: str = "t",
    baseline: str | None = None,
    alpha: float = 0.05,
    correction: str = "holm",
    confidence: float = 0.95,
    permutations: int = 10_000,
    resamples: int = 10_000,
    seed: int = 0,
    empty_target_action: str = "skip",
) -> ComparisonReport:
    """Compare systems on the same queries, metric by metric.

    Args:
        systems: ``{name: values}``, values a ``(Q,)`` tensor of per-query
            values or a dict of them by metric (``rank_metrics(...,
            reduction="none")``), or values by query id: ``{query_id: value}``
            (pytrec_eval's or ranx's one measure), pytrec_eval's
            ``{query_id: {measure: value}}``, a ranx ``Run`` after
            ``ranx.evaluate``, or results with ``.qids`` and ``.per_query``
            (:func:`paired_values` says how each is read); every system the
            same metrics, and all by position or all by id.
        query_ids: for tensors, the queries' ids, one sequence for all or one
            per system (values are then matched by id); by default by
            position. A query one system lacks is an error naming it.
        test: ``"t"`` (paired t-test), ``"wilcoxon"`` (signed-rank),
            ``"randomization"`` (Fisher's, sign flips) or ``"bootstrap"``.
        baseline: compare every other system with this one; None compares
            every pair (each later system against each earlier one).
        alpha: significance level of the adjusted p-values, in (0, 1).
        correction: ``"holm"``, ``"bonferroni"`` or ``"none"``; the family is
            the comparisons of one metric.
        confidence: level of the interval of each mean difference: Student's t
            interval for ``test="t"``, else the paired bootstrap percentile
            interval.
        permutations: random sign flips of the randomization test (all
            ``2^n`` when that is not more).
        resamples: bootstrap resamples (test and intervals).
        seed: seed of the flips and resamples.
        empty_target_action: what a NaN value means (a query the kernel
            skipped as empty, ``empty_target_action="skip"``): ``"skip"``
            leaves the query out of every system (the test stays paired;
            the report lists it), ``"neg"`` and ``"pos"`` count it as the
            kernel does for the metric of the key (``"neg"``: its ``empty_neg``
            in the metric table, 1 for fall_out, else 0; ``"pos"``: 1; 0 and 1
            for a key that names no metric), ``"error"`` raises naming it.
            Fewer than 2 queries left is an error.

    Returns:
        A :class:`ComparisonReport`; its rows are in metric order, then system order.
    """
    validation.check_choice("test", test, TESTS)
    validation.check_choice("correction", correction, CORRECTIONS)
    validation.check_choice(
        "empty_target_action", empty_target_action, validation.EMPTY_TARGET_ACTIONS
    )
    alpha = _check_level("alpha", alpha)
    confidence = _check_level("confidence", confidence)
    _check_count("permutations", permutations)
    _check_count("resamples", resamples)
    names, qids, values = paired_values(systems, query_ids)
    if len(qids) < 2:  # a paired test (and a sample standard deviation) needs two
        raise validation.ArgumentError(
            "systems",
            f"must hold at least 2 queries, got {len(qids)}"
            + ("; there are no queries to compare" if not qids else ""),
        )
    if baseline is not None and baseline not in names:
        raise validation.ArgumentError(
            "baseline", f"must be one of the systems {names}, got {baseline!r}"
        )
    if baseline is not None:
        pairs = [(baseline, name) for name in names if name != baseline]
    else:
        pairs = [(names[i], names[j]) for i in range(len(names)) for j in range(i + 1, len(names))]
    values, kept, dropped = _empty_queries(values, qids, empty_target_action)
    means = {m: dict(zip(names, x.mean(0).tolist(), strict=True)) for m, x in values.items()}
    test_of = _PairedTest(test, alpha, correction, confidence, permutations, resamples, seed)
    rows = [
        row
        for metric, matrix in values.items()
        for row in test_of.rows(metric, matrix, names, pairs, means[metric], kept)
    ]
    return ComparisonReport(
        test=test,
        alpha=alpha,
        correction=correction,
        confidence=confidence,
        systems=names,
        metrics=list(values),
        means=means,
        rows=rows,
        queries=kept,
        dropped_queries=dropped,
        higher_is_better={m: _direction(m) for m in values},
    )


@dataclass(frozen=True)
class _PairedTest:
    """The test, interval and correction :func:`compare` was asked for."""

    test: str
    alpha: float
    correction: str
    confidence: float
    permutations: int
    resamples: int
    seed: int

    def rows(
        self,
        metric: str,
        matrix: Tensor,
        names: list[str],
        pairs: list[tuple[str, str]],
        means: dict[str, float],
        queries: int,
    ) -> list[Comparison]:
        """One :class:`Comparison` per (baseline, system) pair on one metric's (Q, S) values."""
        column = {name: i for i, name in enumerate(names)}
        base_index = torch.tensor([column[b] for b, _ in pairs])
        system_index = torch.tensor([column[s] for _, s in pairs])
        d = matrix[:, system_index] - matrix[:, base_index]
        p = _p_values(d, self.test, self.permutations, self.resamples, self.seed)
        if self.test == "t":
            low, high = t_interval(d, self.confidence)
        else:
            low, high = bootstrap_interval(d, self.confidence, self.resamples, self.seed)
        adjusted = adjust_p_values(p, self.correction)
        sizes = effect_size(d)
        return [
            Comparison(
                metric=metric,
                system=name,
                baseline=base,
                system_mean=means[name],
                baseline_mean=means[base],
                difference=float(d[:, i].mean()),
                ci_low=float(low[i]),
                ci_high=float(high[i]),
                effect_size=float(sizes[i]),
                p_value=float(p[i]),
                adjusted_p_value=float(adjusted[i]),
                significant=bool(adjusted[i] < self.alpha),
                queries=queries,
            )
            for i, (base, name) in enumerate(pairs)
        ]


def _direction(key: str) -> bool:
    """Whether a higher value of result key ``key`` is better (True for a key of no metric)."""
    metric = key_metric(key)
    return True if metric is None else metric.higher_is_better


def _empty_value(key: str, action: str) -> float:
    """What an empty query counts under "neg"/"pos": the kernel's value for the metric."""
    metric = key_metric(key)
    if metric is None:  # no metric to ask: the kernel's default
        return 0.0 if action == "neg" else 1.0
    return metric.empty_value(action)


def _p_values(d: Tensor, test: str, permutations: int, resamples: int, seed: int) -> Tensor:
    if test == "t":
        return paired_t_test(d)
    if test == "wilcoxon":
        return wilcoxon_test(d)
    if test == "randomization":
        return _identical_is_one(randomization_test(d, permutations, seed), d)
    return bootstrap_test(d, resamples, seed)


def _empty_queries(
    values: dict[str, Tensor], qids: list[str], action: str
) -> tuple[dict[str, Tensor], int, list[str]]:
    """NaN values (queries skipped as empty) as ``empty_target_action`` says."""
    empty = torch.zeros(len(qids), dtype=torch.bool)
    for matrix in values.values():
        empty |= matrix.isnan().any(1)
    if not bool(empty.any()):
        return values, len(qids), []
    named = [qids[i] for i in empty.nonzero().flatten().tolist()]
    if action == "error":
        raise ValueError(
            f"queries {_listing(named)} have no value (NaN: skipped as empty) in some "
            "system; pass empty_target_action='skip' to leave them out, or 'neg'/'pos'"
        )
    if action in ("neg", "pos"):
        filled = {k: torch.nan_to_num(m, nan=_empty_value(k, action)) for k, m in values.items()}
        return filled, len(qids), []
    kept = ~empty
    if int(kept.sum()) < 2:
        raise ValueError(
            f"fewer than 2 queries have a value in every system ({_listing(named)} are "
            "NaN: skipped as empty); nothing to compare"
        )
    return {k: m[kept] for k, m in values.items()}, int(kept.sum()), named
