"""Running totals of per-query values: the state every adapter keeps.

A :class:`Totals` is a small immutable record, one column per result key
(``"ndcg@10"``, ...), five float64 rows: Σw, Σw·x, Σw·x², Σw² over the
queries that count (w = 1, or R with ``weighted=True``), and Σw·x once more,
scaled by 2^-64 (:data:`VALUE_SCALE`), for the mean of values so large that
Σw·x overflows. Every row is a plain sum, so merging two totals, or
all-reducing them across processes, is one addition, and the order of
batches and processes cannot change the result beyond float64 rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ranking_plugins.metrics import key_metric
from ranking_plugins.per_query import Evaluation, ResultTable, result_matrices

#: rows of :attr:`Totals.sums`
WEIGHT, WEIGHTED_VALUE, WEIGHTED_SQUARE, SQUARED_WEIGHT, SCALED_VALUE = range(5)
ROWS = 5

#: the row SCALED_VALUE holds Σw·x·2^-VALUE_SCALE, read only where Σw·x overflows
#: (dcg of exponential gains near 2^1023; 2^63 queries of them fit): a power of
#: two, so that such a mean is scaled back exactly, while every other mean is
#: Σw·x / Σw itself (a scaled row alone would lose the bits of values below 2^-958)
VALUE_SCALE = 64
_DOWN, _UP = 2.0**-VALUE_SCALE, 2.0**VALUE_SCALE


#: more queries than any totals count (an int64 count of them): a bounded metric's
#: values of that many queries still sum to a finite float64
_MOST_QUERIES = 2**63


def _sum_stays_finite(keys: tuple[str, ...], num_queries: int) -> bool:
    """Whether ``num_queries`` values of each key's metric, within its bounds, sum to a
    finite float64: every key's metric bounded both ways (ratios, counts of a top k)."""
    largest = 0.0
    for key in keys:
        metric = key_metric(key)
        if metric is None or metric.upper_bound is None:
            return False
        largest = max(largest, abs(metric.lower_bound), abs(metric.upper_bound))
    return math.isfinite(largest * max(num_queries, 1))


def _mean(wx: Tensor, scaled_wx: Tensor, weight: Tensor | float) -> Tensor:
    """Σw·x / Σw, read from Σw·x·2^-64 where the sum Σw·x overflowed (finite values
    near the float64 limit)."""
    return torch.where(torch.isinf(wx), scaled_wx / weight * _UP, wx / weight)


def _terms(values: Tensor, counted: Tensor, relevant: Tensor | None) -> tuple[Tensor, ...]:
    """Per query, what each row of the (5, K) sums adds up, from (Q, K) ``values`` where
    ``counted``, each query weighing its ``relevant`` count (``weighted=True``) or 1
    (None): elementwise, so that a part's rows are the whole's rows sliced."""
    # skipped queries are NaN and weigh 0; a counted NaN stays NaN in the mean
    x = torch.where(counted, values, 0.0)
    if relevant is not None:
        weight = counted.to(torch.float64) * relevant.unsqueeze(1)
        wx = weight * x
        return (weight, wx, wx * x, weight * weight, weight * (x * _DOWN))
    # w is 0 or 1 and x is 0 where w is: w·x is x and w² is w, to the bit
    return (counted, x, x * x, counted, x * _DOWN)


def _summed_terms(terms: tuple[Tensor, ...], part: slice | None = None, dim: int = 0) -> Tensor:
    """The (5, K) sums of :func:`_terms` over the queries of ``part`` (None: all of them;
    ``dim``: the queries' dimension)."""
    summed: dict[int, Tensor] = {}  # a term given twice (the count) summed once
    for term in terms:
        if id(term) not in summed:
            dtype = torch.float64 if term.dtype == torch.bool else None
            rows = term if part is None else term[part]
            summed[id(term)] = rows.sum(dim, dtype=dtype)
    return torch.stack([summed[id(term)] for term in terms], dim=0)


@dataclass(frozen=True)
class Totals:
    """Σw, Σw·x, Σw·x², Σw², Σw·x·2^-64 per result key, as one (5, K) float64 tensor."""

    keys: tuple[str, ...]
    sums: Tensor

    @classmethod
    def zeros(cls, keys: tuple[str, ...], device: torch.device | str | None = None) -> Totals:
        return cls(keys, torch.zeros(ROWS, len(keys), dtype=torch.float64, device=device))

    @classmethod
    def of(cls, evaluation: Evaluation, keys: tuple[str, ...], weighted: bool) -> Totals:
        """The totals of one batch; only device ops, nothing is read back to the host."""
        if not keys:  # only catalogue-level metrics: nothing per query
            device = evaluation.relevant_count.device
            return cls.zeros(keys, device)
        values, counted = result_matrices(evaluation.results, keys)
        relevant = evaluation.relevant_count if weighted else None
        return cls(keys, _summed_terms(_terms(values, counted, relevant)))

    @classmethod
    def of_parts(
        cls, evaluation: Evaluation, keys: tuple[str, ...], weighted: bool, queries: list[int]
    ) -> list[Totals]:
        """The totals of consecutive parts of one evaluated batch, ``queries[i]`` queries
        in part i: to the bit :meth:`of` of each part evaluated alone (each part's sums
        over its own rows, the operations of :meth:`of` on a slice of the same shape)."""
        if not keys:
            return [cls.of(evaluation, keys, weighted) for _ in queries]
        values, counted = result_matrices(evaluation.results, keys)
        terms = _terms(values, counted, evaluation.relevant_count if weighted else None)
        if len(set(queries)) == 1:
            # parts of one size: each term's (parts, Q, K) view summed over Q, the same
            # sums in the same order as each part's (Q, K) rows summed alone
            shape = (len(queries), queries[0], len(keys))
            each = tuple(term.reshape(shape) for term in terms)
            rows = _summed_terms(each, dim=1)  # (5, parts, K)
            return [cls(keys, part) for part in rows.unbind(1)]
        found, start = [], 0
        for count in queries:
            found.append(cls(keys, _summed_terms(terms, slice(start, start + count))))
            start += count
        return found

    @staticmethod
    def mean_of(evaluation: Evaluation, keys: tuple[str, ...], weighted: bool) -> Tensor:
        """``Totals.of(evaluation, keys, weighted).mean()`` to the bit, in fewer operations.

        A call that only reports the mean (``rank_metrics``) needs neither Σw·x²
        nor Σw²; each operation is a launch on an accelerator.
        """
        if weighted or not keys:
            return Totals.of(evaluation, keys, weighted).mean()
        results = evaluation.results
        count: Tensor | float
        if (
            isinstance(results, ResultTable)
            and results.keys_in_order == keys
            and results.every_counted
        ):  # Σw is Q and w·x is x: no mask, no count to take
            x = results.per_query
            count = float(x.shape[0])
        else:
            values, counted = result_matrices(results, keys)
            x = torch.where(counted, values, 0.0)
            count = counted.sum(0, dtype=torch.float64)
        wx = x.sum(0)
        if _sum_stays_finite(keys, x.shape[0]):
            # the rescue differs from wx / count only where finite values overflow the sum
            return wx / count
        return _mean(wx, (x * _DOWN).sum(0), count)

    def mean_with(self, evaluation: Evaluation, weighted: bool) -> Tensor:
        """``self.merge(Totals.of(evaluation, self.keys, weighted)).mean()`` to the bit, in
        fewer operations.

        The mean reads Σw and Σw·x (and Σw·x·2^-64 where Σw·x may overflow): the batch's
        other rows are not made. A batch whose every query counts (unweighted) adds Q to
        Σw and its values themselves to Σw·x: no mask, no count to take. Each row is the
        same sum added to the same kept row, so the same bits.
        """
        if weighted or not self.keys:
            return self.merge(Totals.of(evaluation, self.keys, weighted)).mean()
        results = evaluation.results
        count: Tensor | float
        if (
            isinstance(results, ResultTable)
            and results.keys_in_order == self.keys
            and results.every_counted
        ):
            x = results.per_query
            count = float(x.shape[0])
        else:
            values, counted = result_matrices(results, self.keys)
            x = torch.where(counted, values, 0.0)
            count = counted.sum(0, dtype=torch.float64).to(self.sums.device)
        device = self.sums.device
        rows = self.sums.unbind(0)  # one view for all rows
        weight = rows[WEIGHT] + count
        wx = rows[WEIGHTED_VALUE] + x.sum(0).to(device)
        if _sum_stays_finite(self.keys, _MOST_QUERIES):
            # the rescue differs from wx / Σw only where finite values overflow the sum
            return wx / weight
        return _mean(wx, rows[SCALED_VALUE] + (x * _DOWN).sum(0).to(device), weight)

    def merge(self, other: Totals) -> Totals:
        if other.keys != self.keys:
            raise ValueError(f"cannot merge totals of {other.keys} into totals of {self.keys}")
        return Totals(self.keys, self.sums + other.sums.to(self.sums.device))

    @property
    def weight(self) -> Tensor:
        """Σw per key, the number of counted queries (their total R when weighted)."""
        return self.sums[WEIGHT]

    def mean(self) -> Tensor:
        """The (weighted) mean per key; NaN where no query counted."""
        return _mean(self.sums[WEIGHTED_VALUE], self.sums[SCALED_VALUE], self.sums[WEIGHT])

    def standard_error(self) -> Tensor:
        """Standard error of the mean per key: sample standard deviation / √n.

        With weights, the variance uses reliability weights and n is the
        effective sample size (Σw)² / Σw²; with w = 1 both reduce to the
        textbook formulas. NaN with fewer than two counted queries.
        """
        w, wx, wx2, w2 = self.sums[:SCALED_VALUE]
        n_effective = w * w / w2
        variance = (wx2 - wx * wx / w) / (w - w2 / w)
        return torch.sqrt(variance.clamp(min=0) / n_effective)

    def as_dict(self, values: Tensor) -> dict[str, Tensor]:
        return dict(zip(self.keys, values.unbind(0), strict=True))


def per_query_matrix(evaluation: Evaluation, keys: tuple[str, ...]) -> Tensor:
    """``(Q, K)`` float64 per-query values of one batch; NaN where a query does not count.

    What the adapters keep with ``keep_per_query=True``, for the paired tests
    of :mod:`ranking_plugins.compare`.
    """
    values, counted = result_matrices(evaluation.results, keys)
    return torch.where(counted, values.to(torch.float64), torch.nan)


#: TorchMetrics' names of the aggregations of per-query values (``aggregation``); any
#: other is a callable. The mean is the totals' own; the others need every value.
AGGREGATIONS = ("mean", "median", "min", "max")

#: an aggregation: one of :data:`AGGREGATIONS` or a callable, as TorchMetrics takes it
Aggregation = str | Callable[..., Tensor]


def aggregate(per_query: Tensor, aggregation: Aggregation) -> Tensor:
    """One value per column of a ``(Q, K)`` per-query matrix (:func:`per_query_matrix`),
    over the queries that count in it (not NaN), as TorchMetrics' ``aggregation``.

    ``"median"`` is :func:`torch.median`'s, the lower of the two middle values of
    an even count; a callable is called as TorchMetrics calls it,
    ``aggregation(values, dim=None)``, on each column's counted values (1-D
    float64), and must return one number. NaN where no query counts, without
    calling it (the mean's rule here; TorchMetrics gives 0.0).

    >>> values = torch.tensor([[0.5, 1.0], [0.25, float("nan")], [1.0, 0.0], [0.0, 0.5]])
    >>> aggregate(values, "median")
    tensor([0.2500, 0.5000], dtype=torch.float64)
    >>> aggregate(values, lambda x, dim=None: x.sum())
    tensor([1.7500, 1.5000], dtype=torch.float64)
    """
    reduce: dict[str, Callable[[Tensor], Tensor]] = {
        "mean": torch.mean,
        "median": torch.median,
        "min": torch.amin,
        "max": torch.amax,
    }
    found = []
    for column in per_query.to(torch.float64).unbind(1):
        counted = column[~torch.isnan(column)]
        if counted.numel() == 0:
            found.append(column.new_full((), torch.nan))
            continue
        if isinstance(aggregation, str):
            value = reduce[aggregation](counted)
        else:
            value = aggregation(counted, dim=None)
        value = torch.as_tensor(value, dtype=torch.float64, device=column.device)
        if value.numel() != 1:
            raise ValueError(
                f"`aggregation`: the callable must return one number for a tensor of "
                f"per-query values, got a tensor of shape {tuple(value.shape)}"
            )
        found.append(value.reshape(()))
    if not found:  # no per-query key (catalogue-level metrics only)
        return per_query.new_empty(0, dtype=torch.float64)
    return torch.stack(found)


#: trec_eval's floor of a value in a geometric mean (``MIN_GEO_MEAN``): a 0 would make it 0
GEOMETRIC_FLOOR = 1e-5


def geometric_mean(values: Tensor, floor: float = GEOMETRIC_FLOOR) -> float:
    """exp(mean(log(max(x, floor)))) over the values that are not NaN (trec_eval's gm_map).

    An aggregation of per-query values, not a formula: ``gm_map`` is the
    geometric mean of the per-query ``map``. NaN when no value counts.

    >>> geometric_mean(torch.tensor([0.5, 0.125, float("nan")], dtype=torch.float64))
    0.25
    """
    counted = values[~torch.isnan(values)]
    if counted.numel() == 0:
        return float("nan")
    return float(torch.exp(geometric_terms(counted, floor).mean()))


def geometric_terms(values: Tensor, floor: float = GEOMETRIC_FLOOR) -> Tensor:
    """log(max(x, floor)): what :func:`geometric_mean` averages, and what trec_eval (and
    pytrec_eval) report per query for ``gm_map`` and ``gm_bpref``.

    >>> geometric_terms(torch.tensor([1.0, 0.0], dtype=torch.float64)).tolist()
    [0.0, -11.512925464970229]
    """
    return torch.log(values.clamp(min=floor))


__all__ = [
    "AGGREGATIONS",
    "Aggregation",
    "Totals",
    "aggregate",
    "geometric_mean",
    "geometric_terms",
    "per_query_matrix",
]
