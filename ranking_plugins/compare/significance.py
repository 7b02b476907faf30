"""Paired significance tests: pure functions of a matrix of per-query differences.

The statistics work on a ``(queries, comparisons)`` matrix of differences
(system minus baseline, one column per comparison), so one draw of sign
flips or bootstrap resamples serves every comparison:

* :func:`paired_t_test`: Student's paired t-test (scipy's t distribution);
* :func:`wilcoxon_test`: Wilcoxon's signed-rank test (``scipy.stats.wilcoxon``);
* :func:`randomization_test`: Fisher's randomization test of the mean
  difference, every ``2^n`` sign flip when ``2^n <= permutations``, else
  ``permutations`` seeded random flips;
* :func:`bootstrap_test` and :func:`bootstrap_interval`: the paired bootstrap
  of the mean difference (a shift-method p-value, a percentile interval);
* :func:`t_interval`, :func:`effect_size` (Cohen's d of the differences) and
  :func:`adjust_p_values` (Holm, Bonferroni).

The t and Wilcoxon tests need scipy (``pip install "ranking-plugins[stats]"``);
the randomization test and the bootstrap are torch only.
:func:`ranking_plugins.compare.compare` pairs the systems' values and runs
one of them for every comparison.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.choices import CORRECTIONS

__all__ = [
    "adjust_p_values",
    "bootstrap_interval",
    "bootstrap_test",
    "effect_size",
    "paired_t_test",
    "randomization_test",
    "t_interval",
    "wilcoxon_test",
]

#: one block of sign flips or resamples holds at most this many entries (float64)
BLOCK_ENTRIES = 1 << 24

_EPS = torch.finfo(torch.float64).eps


def _scipy_stats() -> Any:
    try:
        import scipy.stats
    except ImportError as error:  # pragma: no cover - exercised without the extra
        raise ImportError(
            "the t-test and the Wilcoxon test of ranking_plugins.compare need scipy; "
            'install it with `pip install "ranking-plugins[stats]"` (the randomization '
            "test and the bootstrap need only torch)"
        ) from error
    return scipy.stats


# --------------------------------------------------------------------------- checks


def _check_differences(differences: Tensor) -> Tensor:
    validation.check_tensor("differences", differences)
    if differences.ndim == 1:
        differences = differences.unsqueeze(1)
    if differences.ndim != 2 or differences.shape[0] < 2:
        raise validation.ArgumentError(
            "differences",
            "must be (queries,) or (queries, comparisons) with at least 2 queries, got "
            f"shape {tuple(differences.shape)}",
        )
    if not differences.is_floating_point():
        raise TypeError(f"`differences` must be floating point, got {differences.dtype}")
    differences = differences.to(torch.float64)
    if not bool(torch.isfinite(differences).all()):
        raise validation.ArgumentError(
            "differences",
            "must be finite; NaN marks a query skipped as empty: drop it from every "
            "system first (compare() does, see `empty_target_action`)",
        )
    return differences


def _check_count(name: str, value: object) -> int:
    problem = validation.positive_int_problem(value)
    if problem is not None:  # a ValueError whatever is wrong, as this module always said
        raise validation.ArgumentError(name, problem.text)
    return int(value)  # type: ignore[call-overload]


def _check_level(name: str, value: object) -> float:
    problem = validation.unit_interval_problem(value)
    if problem is not None:
        raise validation.ArgumentError(name, problem.text)
    return float(value)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the tests


def paired_t_test(differences: Tensor) -> Tensor:
    """Two-sided p-value of Student's paired t-test, per column of ``differences``.

    ``scipy.stats.ttest_rel(system, baseline)``: t = mean / (sd / √n) with
    n - 1 degrees of freedom. Every difference 0 gives p = 1.

    >>> import torch
    >>> paired_t_test(torch.tensor([0.1, 0.2, 0.0, 0.3], dtype=torch.float64))
    tensor([0.1027], dtype=torch.float64)
    """
    d = _check_differences(differences)
    n = d.shape[0]
    mean = d.mean(0)
    sd = d.std(0, correction=1)
    statistic = mean / (sd / math.sqrt(n))
    t = _scipy_stats().t
    p = 2.0 * t.sf(statistic.abs().numpy(force=True), n - 1)
    return _identical_is_one(torch.as_tensor(p, dtype=torch.float64), d)


def wilcoxon_test(differences: Tensor) -> Tensor:
    """Two-sided p-value of Wilcoxon's signed-rank test, per column (``scipy.stats.wilcoxon``).

    scipy's defaults: zero differences dropped (``zero_method="wilcox"``), the
    exact distribution for small samples without ties, else the normal
    approximation. Every difference 0 gives p = 1.

    >>> import torch
    >>> wilcoxon_test(torch.tensor([0.1, 0.2, -0.05, 0.3, 0.25, 0.15], dtype=torch.float64))
    tensor([0.0625], dtype=torch.float64)
    """
    d = _check_differences(differences)
    stats = _scipy_stats()
    p = []
    for column in d.numpy(force=True).T:
        p.append(1.0 if not column.any() else float(stats.wilcoxon(column).pvalue))
    return torch.tensor(p, dtype=torch.float64)


def randomization_test(
    differences: Tensor,
    permutations: int = 10_000,
    seed: int = 0,
    *,
    signs: Tensor | None = None,
) -> Tensor:
    """Two-sided p-value of Fisher's randomization test of the mean difference, per column.

    Under the null hypothesis the two systems' values of a query are
    exchangeable, so each difference's sign is a coin flip. The p-value is the
    share of sign flips whose ``|mean|`` reaches the observed ``|mean|``: over all
    ``2^n`` flips (exact) when ``2^n <= permutations``, else over
    ``permutations`` seeded random flips plus the observed one,
    ``(count + 1) / (permutations + 1)`` (as ``scipy.stats.permutation_test``).
    One matrix of flips serves every column. A flipped ``|mean|`` within float64
    rounding of the observed one (relative 1e-14 of Σ|d|) counts as reaching
    it: on discrete metrics exact ties are common.

    ``signs``: a ``(flips, queries)`` matrix of ±1 to use instead (the test of
    this function against a brute-force count uses it); p is then
    ``count / flips``.

    >>> import torch
    >>> randomization_test(torch.tensor([0.1, 0.2, 0.0, 0.3], dtype=torch.float64))
    tensor([0.2500], dtype=torch.float64)
    """
    d = _check_differences(differences)
    n, columns = d.shape
    _check_count("permutations", permutations)
    observed = d.sum(0).abs()
    tolerance = 100 * (n + 2) * _EPS * d.abs().sum(0)
    reached = torch.zeros(columns, dtype=torch.int64, device=d.device)
    exact = signs is None and n < 63 and 2**n <= permutations
    if signs is not None:
        total = signs.shape[0]
        blocks = [signs.to(torch.float32)]
    elif exact:
        total = 2**n
        blocks = _all_sign_flips(n)
    else:
        total = permutations
        blocks = _random_sign_flips(n, permutations, seed)
    # zero rows up to a whole number of bytes of signs: their sign changes nothing
    d32 = torch.zeros(8 * ((n + 7) // 8), columns, dtype=torch.float32, device=d.device)
    d32[:n] = d
    # a float32 sum of n terms ±d is within this of the exact one, whatever the
    # order of the additions (rounding d to float32 included; Higham's γ_n+1)
    band = (n + 2) * 2.0**-24 * 1.01 * d.abs().sum(0)
    threshold = observed - tolerance
    for block in blocks:
        reached += _count_reaching(block.to(d.device), d, d32[: block.shape[1]], threshold, band)
    count = reached.to(torch.float64).cpu()
    if signs is None and not exact:
        return (count + 1) / (total + 1)
    return count / total


def _count_reaching(
    signs: Tensor, d: Tensor, d32: Tensor, threshold: Tensor, band: Tensor
) -> Tensor:
    """Per column, how many rows of ``signs`` give ``|signs @ d| >= threshold`` in float64.

    The products are taken in float32 (twice as fast as float64 on the CPU);
    only the few sums within ``band`` of the threshold, where float32 rounding
    could change the answer, are summed again in float64.
    """
    sums = (signs @ d32).to(torch.float64).abs()
    sure = sums - band >= threshold
    unsure = (sums + band >= threshold) & ~sure
    count = sure.sum(0)
    if not bool(unsure.any()):
        return count
    # all of them at once: a few large operations beat one small one per column
    n = d.shape[0]
    rows, columns = unsure.nonzero(as_tuple=True)
    by_column = d.T.contiguous()
    for start in range(0, rows.numel(), 1024):
        r, c = rows[start : start + 1024], columns[start : start + 1024]
        again = (signs[r, :n].to(torch.float64) * by_column[c]).sum(1).abs()
        count += torch.bincount(c[again >= threshold[c]], minlength=d.shape[1])
    return count


def _rows_per_block(n: int) -> int:
    return max(1, BLOCK_ENTRIES // max(n, 1))


def _all_sign_flips(n: int) -> Any:
    """Every ±1 vector of length n, in blocks of rows."""
    bits = torch.arange(n)
    step = _rows_per_block(n)
    for start in range(0, 2**n, step):
        codes = torch.arange(start, min(start + step, 2**n))
        yield 1.0 - 2.0 * ((codes.unsqueeze(1) >> bits) & 1).to(torch.float32)


#: row b: the signs that byte b stands for, bit j (least significant first) -> -1
_BYTE_SIGNS = 1.0 - 2.0 * ((torch.arange(256).unsqueeze(1) >> torch.arange(8)) & 1).float()


def _random_sign_flips(n: int, count: int, seed: int) -> Any:
    """``count`` seeded random ±1 vectors, in blocks of rows, ``8 * ceil(n / 8)`` long.

    Every random bit is one sign: 64-bit draws, read byte by byte through a
    table of the 256 sign patterns of a byte (a draw per sign would cost more
    than the products themselves). The signs past n multiply zeros.
    """
    generator = torch.Generator().manual_seed(seed)
    step = _rows_per_block(n)
    width = (n + 7) // 8
    words = (width + 7) // 8
    for start in range(0, count, step):
        rows = min(step, count - start)
        draws = torch.randint(
            -(2**63), 2**63 - 1, (rows, words), dtype=torch.int64, generator=generator
        )
        sign_bytes = draws.view(torch.uint8).view(rows, words * 8)[:, :width]
        yield torch.nn.functional.embedding(sign_bytes.long(), _BYTE_SIGNS).view(rows, width * 8)


def _bootstrap_indices(n: int, resamples: int, seed: int) -> Any:
    generator = torch.Generator().manual_seed(seed)
    step = _rows_per_block(n)
    for start in range(0, resamples, step):
        rows = min(step, resamples - start)
        yield torch.randint(0, n, (rows, n), generator=generator)


def _bootstrap_means(d: Tensor, indices: Any) -> Tensor:
    """Mean difference of every resample, ``(resamples, columns)``: counts times values."""
    n = d.shape[0]
    means = []
    for block in indices:
        block = block.to(d.device)
        counts = torch.zeros(block.shape[0], n, dtype=torch.float64, device=d.device)
        one = torch.ones(1, dtype=torch.float64, device=d.device).expand(block.shape)
        counts.scatter_add_(1, block, one)
        means.append(counts @ d / n)
    return torch.cat(means)


def bootstrap_interval(
    differences: Tensor,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    *,
    indices: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Percentile interval of the mean difference from the paired bootstrap, per column.

    Queries are resampled with replacement (the same resamples for every
    column); the bounds are the ``(1 - confidence) / 2`` and
    ``(1 + confidence) / 2`` quantiles (linear interpolation) of the
    resampled means, as ``scipy.stats.bootstrap(method="percentile")``.
    ``indices``: a ``(resamples, queries)`` matrix of query indices to use
    instead of seeded draws.

    >>> import torch
    >>> d = torch.tensor([0.1, 0.2, 0.0, 0.3, 0.15, 0.05], dtype=torch.float64)
    >>> low, high = bootstrap_interval(d)
    >>> bool(low < d.mean() < high)
    True
    """
    d = _check_differences(differences)
    level = _check_level("confidence", confidence)
    draws = [indices] if indices is not None else None
    means = _bootstrap_means(
        d, draws or _bootstrap_indices(d.shape[0], _check_count("resamples", resamples), seed)
    )
    alpha = (1.0 - level) / 2
    q = torch.tensor([alpha, 1.0 - alpha], dtype=torch.float64, device=d.device)
    bounds = torch.quantile(means, q, dim=0, interpolation="linear")
    return bounds[0].cpu(), bounds[1].cpu()


def bootstrap_test(differences: Tensor, resamples: int = 10_000, seed: int = 0) -> Tensor:
    """Two-sided p-value of the paired bootstrap test of the mean difference, per column.

    The shift method (Efron and Tibshirani, 16.4; Sakai 2006): the resampled
    means, centred on the observed mean, stand for the null distribution; p is
    ``(count + 1) / (resamples + 1)`` where count is the number of resamples
    with ``|mean* - mean| >= |mean|``. Every difference 0 gives p = 1.

    >>> import torch
    >>> d = torch.tensor([0.1, 0.2, 0.0, 0.3, 0.15, 0.05], dtype=torch.float64)
    >>> bool(bootstrap_test(d) < 0.05)
    True
    """
    d = _check_differences(differences)
    n = d.shape[0]
    means = _bootstrap_means(d, _bootstrap_indices(n, _check_count("resamples", resamples), seed))
    observed = d.mean(0)
    tolerance = 100 * (n + 2) * _EPS * d.abs().mean(0)
    count = ((means - observed).abs() >= observed.abs() - tolerance).sum(0)
    p = (count.to(torch.float64) + 1) / (means.shape[0] + 1)
    return _identical_is_one(p.cpu(), d)


def t_interval(differences: Tensor, confidence: float = 0.95) -> tuple[Tensor, Tensor]:
    """Student's t interval of the mean difference, per column: mean ± t·sd/√n.

    >>> import torch
    >>> low, high = t_interval(torch.tensor([0.1, 0.2, 0.0, 0.3], dtype=torch.float64))
    >>> round(float(low), 4), round(float(high), 4)
    (-0.0554, 0.3554)
    """
    d = _check_differences(differences)
    level = _check_level("confidence", confidence)
    n = d.shape[0]
    mean = d.mean(0)
    half = float(_scipy_stats().t.ppf((1 + level) / 2, n - 1)) * d.std(0, correction=1)
    half = half / math.sqrt(n)
    return (mean - half).cpu(), (mean + half).cpu()


def effect_size(differences: Tensor) -> Tensor:
    """Cohen's d of the paired differences (d_z): mean / sample standard deviation.

    0 when every difference is 0; ±inf when all differences are one non-zero value.

    >>> import torch
    >>> effect_size(torch.tensor([0.1, 0.2, 0.0, 0.3], dtype=torch.float64))
    tensor([1.1619], dtype=torch.float64)
    """
    d = _check_differences(differences)
    size = d.mean(0) / d.std(0, correction=1)
    return torch.where((d == 0).all(0), 0.0, size).cpu()


def _identical_is_one(p: Tensor, d: Tensor) -> Tensor:
    """Two identical systems differ by nothing: p = 1, not the 0/0 of the formulas."""
    return torch.where((d == 0).all(0).cpu(), 1.0, p)


def adjust_p_values(p_values: Tensor, correction: str = "holm") -> Tensor:
    """p-values adjusted for multiple comparisons (one family: all of them).

    ``"bonferroni"``: min(1, m·p). ``"holm"``: Holm's step-down, the i-th
    smallest p becomes max over j <= i of min(1, (m - j + 1)·p_(j)); it
    rejects what Bonferroni rejects and more. ``"none"``: unchanged.

    >>> import torch
    >>> adjust_p_values(torch.tensor([0.01, 0.04, 0.03]), "holm")
    tensor([0.0300, 0.0600, 0.0600])
    """
    validation.check_choice("correction", correction, CORRECTIONS)
    m = p_values.numel()
    if correction == "none" or m == 0:
        return p_values.clone()
    if correction == "bonferroni":
        return (p_values * m).clamp(max=1.0)
    order = torch.argsort(p_values, stable=True)
    factors = torch.arange(m, 0, -1, dtype=p_values.dtype, device=p_values.device)
    stepped = torch.cummax((p_values[order] * factors).clamp(max=1.0), 0).values
    return torch.empty_like(p_values).scatter_(0, order, stepped)
