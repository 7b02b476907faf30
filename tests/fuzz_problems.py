"""Helpers of the differential fuzzer (``test_fuzz.py``): ranking problems, their
layouts, and the oracle built on the brute-force reference (``reference.py``).

A *problem* is a few queries, each a list of items with an abstract score
(a Python float, ``-inf`` allowed, many ties), a grade (bool, int or float,
from the whole range: negative, 0, tiny, fractional, large, and rarely a grade
whose gain overflows) and a ``ranked`` flag (the mask). Each test expresses
one problem in one layout and entry point; the tensors are built so that they
hold *exactly* the problem (a dtype is used only where it represents every
score and grade exactly), and the expected numbers are the reference's on
those very tensor values.

The oracle is :func:`reference.reference_rank_metrics` itself, with two
changes that SPEC section 4 asks for and the reference does not do:

* the exponential gain 2^g - 1 is computed without cancellation (``expm1``
  below 1: a grade of 1e-20 earns 6.9e-21, not 0);
* a query whose relevant gains (or their sum) overflow float64 is flagged:
  the package may raise ``ValueError`` for it (SPEC: an error, never a NaN);
  when it returns numbers they must be the limit the reference computes with
  every gain of the query scaled by the same power of 2 (an infinite grade
  then earns 1 and every finite one 0).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import reference
import torch
from hypothesis import strategies as st
from reference import ALL_METRICS, EMPTY_ACTIONS, JUDGED_MEASURES, TIES, TREC_MEASURES

from ranking_plugins.metrics import METRICS

INF = math.inf
BIG = 2**60  # int64 scores far above 2**53, where float64 no longer tells n from n + 1

# --------------------------------------------------------------------------- #
# pools
# --------------------------------------------------------------------------- #
SCORE_POOLS: dict[str, list[float] | None] = {
    "ties": [0.0, 1.0, 2.0, 3.0],
    "ties_inf": [0.0, 1.0, 2.0, -INF],
    "binary": [0.0, 1.0],
    # distinct only in float64 (1 + 2^-52), in float32 (1 + 2^-23), in bfloat16 (1 + 2^-7)
    "fine": [1.0, 1.0 + 2**-52, 1.0 + 2**-23, 1.0 + 2**-7, 0.0, -0.0, -INF],
    "wide": [-1e300, -5e-324, -0.0, 0.0, 5e-324, 1e-300, 65504.0, 70000.0, 1e300, -INF],
    "distinct": None,  # a permutation of 0..N-1
}

GRADE_POOLS: dict[str, list[Any]] = {
    "bool": [False, True],
    "int": [-3, -1, 0, 0, 0, 1, 1, 1, 2, 3, 50, 1023],
    "float": [
        -2.5,
        -1e-20,
        0.0,
        0.0,
        0.0,
        1e-310,
        1e-20,
        0.25,
        0.5,
        1.0,
        1.0,
        1.5,
        50.0,
        1023.0,
        1023.5,
    ],
}
#: grades on the error path (a gain that overflows float64) and -inf (never relevant)
EXTREME_GRADES: dict[str, list[Any]] = {
    "bool": [],
    "int": [1024, 5000],
    "float": [1024.0, 2000.5, INF, -INF],
}

THRESHOLDS = [
    -1e300,
    -2.0,
    -1.0,
    -0.5,
    -1e-310,
    -0.0,
    0.0,
    1e-310,
    1e-20,
    0.25,
    0.5,
    1.0,
    1.5,
    2.0,
    50.0,
    1023.0,
    1e300,
]

#: every metric of the rank kernel: the first release's, trec_eval's (issue 13)
#: and the measures of judged items (issue 13; they read ``judged``)
RANK_MEASURES = (*ALL_METRICS, *TREC_MEASURES, *JUDGED_MEASURES)


def metric_sets(pool: Sequence[str] = ALL_METRICS) -> st.SearchStrategy[tuple[str, ...]]:
    """The whole pool, or 1..4 of its metrics; a pool wider than the first release's
    eleven draws those as often as before (all, or a few) and its own in 3 draws of 5."""

    def few(names: Sequence[str]) -> st.SearchStrategy[tuple[str, ...]]:
        return st.lists(st.sampled_from(list(names)), min_size=1, max_size=4, unique=True).map(
            tuple
        )

    if len(pool) > len(ALL_METRICS):
        first = (st.just(ALL_METRICS), few(ALL_METRICS))
        return st.one_of(*first, few(pool), few(pool), st.just(tuple(pool)))
    return st.one_of(st.just(tuple(pool)), few(pool))


METRIC_SETS = metric_sets()
#: rbp's and rbp_resid's persistence p (None: the default, 0.8)
PERSISTENCES = (None, None, 0.5, 0.9, 0.05, 0.999)
TOP_KS = st.one_of(
    st.none(),
    st.integers(1, 7),
    st.lists(st.integers(1, 7), min_size=1, max_size=4),
)

SCORE_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int64_big")


# --------------------------------------------------------------------------- #
# problems
# --------------------------------------------------------------------------- #
@dataclass
class Query:
    scores: list[float]
    grades: list[Any]
    ranked: list[bool]

    def __len__(self) -> int:
        return len(self.scores)


@dataclass
class Problem:
    queries: list[Query]
    grade_kind: str  # "bool" | "int" | "float"
    masked: bool  # whether a mask is given at all
    num_items: int | None  # N when every query has N items (dense), else None

    @property
    def num_queries(self) -> int:
        return len(self.queries)

    def all_grades(self) -> list[Any]:
        return [g for q in self.queries for g in q.grades]

    def all_scores(self) -> list[float]:
        return [s for q in self.queries for s in q.scores]


@st.composite
def score_list(draw: st.DrawFn, n: int, mode: str) -> list[float]:
    pool = SCORE_POOLS[mode]
    if pool is None:
        return [float(v) for v in draw(st.permutations(list(range(n))))]
    return draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))


@st.composite
def problems(
    draw: st.DrawFn,
    *,
    ragged: bool = False,
    max_q: int = 4,
    max_n: int = 5,
    grade_kinds: Sequence[str] = ("bool", "int", "float"),
    extreme: bool = True,
    empty_ok: bool = True,
) -> Problem:
    """Q queries of N items (``ragged``: of 1..max_n items each)."""
    min_q = 0 if empty_ok and draw(st.integers(0, 15)) == 0 else 1
    q = draw(st.integers(min_q, max_q))
    if ragged:
        sizes = [draw(st.integers(1, max_n)) for _ in range(q)]
        n = None
    else:
        n = draw(st.integers(0, max_n)) if empty_ok and draw(st.integers(0, 15)) == 0 else None
        n = draw(st.integers(1, max_n)) if n is None else n
        sizes = [n] * q
    mode = draw(st.sampled_from(sorted(SCORE_POOLS)))
    kind = draw(st.sampled_from(list(grade_kinds)))
    pool = list(GRADE_POOLS[kind])
    if extreme and EXTREME_GRADES[kind] and draw(st.integers(0, 9)) == 0:
        pool += EXTREME_GRADES[kind]
    masked = draw(st.booleans())
    queries = []
    for size in sizes:
        scores = draw(score_list(size, mode))
        grades = draw(st.lists(st.sampled_from(pool), min_size=size, max_size=size))
        if masked:
            ranked = draw(st.lists(st.booleans(), min_size=size, max_size=size))
        else:
            ranked = [True] * size
        queries.append(Query(scores, grades, ranked))
    return Problem(queries, kind, masked, n)


@st.composite
def thresholds(draw: st.DrawFn, grades: Sequence[Any] = ()) -> float | None:
    """None (often), any finite value, exactly at / just above a grade, and
    rarely a non-finite one (refused: issue 11, item 7)."""
    if draw(st.integers(0, 40)) == 0:
        return draw(st.sampled_from([math.nan, INF, -INF]))
    choice = draw(st.integers(0, 5))
    finite = [float(g) for g in grades if math.isfinite(float(g))]
    if choice <= 2:
        return None
    if choice == 5 and finite:
        g = draw(st.sampled_from(finite))
        return g if draw(st.booleans()) else math.nextafter(g, INF)
    return draw(st.sampled_from(THRESHOLDS))


#: the fall_out_empty rules drawn (the package's, TorchMetrics')
FALL_OUT_EMPTY = ("no_relevant", "no_nonrelevant")


@st.composite
def options(
    draw: st.DrawFn,
    grades: Sequence[Any] = (),
    *,
    actions: Sequence[str] = EMPTY_ACTIONS,
    cli: bool = False,
    measures: Sequence[str] = ALL_METRICS,
) -> dict[str, Any]:
    """The options of rank_metrics (reduction excepted); ``measures``: the metrics
    drawn from (beyond the first release's eleven, ``rbp_persistence`` is drawn too)."""
    extra = {}
    if tuple(measures) != ALL_METRICS:
        persistence = draw(st.sampled_from(PERSISTENCES))
        if persistence is not None:
            extra["rbp_persistence"] = persistence
    return dict(
        **extra,
        metrics=draw(metric_sets(measures)),
        top_k=draw(TOP_KS),
        ties=draw(st.sampled_from(TIES)),
        relevance_threshold=draw(thresholds(grades)),
        empty_target_action=draw(st.sampled_from(list(actions))),
        gain=draw(st.sampled_from(["exponential", "linear"])),
        ap_denominator=draw(st.sampled_from(["relevant", "min_k_relevant"])),
        adaptive_k=False if cli else draw(st.booleans()),
        weighted=False if cli else draw(st.booleans()),
        # which query fall-out calls empty (TorchMetrics' rule, its adapter's default)
        **({} if cli else {"fall_out_empty": draw(st.sampled_from(FALL_OUT_EMPTY))}),
    )


@st.composite
def judged_flags(draw: st.DrawFn, problem: Problem) -> list[list[bool]] | None:
    """None (every item judged), or per query a judged flag per item (the
    package's ``judged``, trec_eval's "in the qrels"): mostly judged, some not."""
    if draw(st.integers(0, 3)) == 0:
        return None
    share = draw(st.sampled_from([0.0, 0.5, 0.8, 1.0]))
    flags = []
    for query in problem.queries:
        drawn = draw(st.lists(st.integers(0, 9), min_size=len(query), max_size=len(query)))
        flags.append([x < 10 * share or x == 9 for x in drawn])
    return flags


# --------------------------------------------------------------------------- #
# tensors that hold a problem exactly
# --------------------------------------------------------------------------- #
def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, "int64" if name == "int64_big" else name)


def exactly(values: Sequence[float], dtype: torch.dtype) -> torch.Tensor | None:
    """``values`` in ``dtype``, or None where the dtype changes one of them."""
    wide = torch.tensor([float(v) for v in values], dtype=torch.float64)
    if dtype.is_floating_point:
        t = wide.to(dtype)
        return t if bool((t.to(torch.float64) == wide).all()) else None
    info = torch.iinfo(dtype)
    out = []
    for v in values:
        v = float(v)
        if v == -INF:
            out.append(info.min)  # below every other score of the pools
        elif math.isfinite(v) and v == int(v) and info.min < v <= info.max:
            out.append(int(v))
        else:
            return None
    return torch.tensor(out, dtype=dtype)


def score_tensor(values: Sequence[float], shape: tuple[int, ...], name: str) -> torch.Tensor | None:
    """Scores in dtype ``name``; ``int64_big`` maps them, order kept, to 2^60 + rank."""
    if name == "int64_big":
        finite = sorted({float(v) for v in values if v != -INF})
        rank = {v: BIG + i for i, v in enumerate(finite)}
        low = torch.iinfo(torch.int64).min
        out = [low if v == -INF else rank[float(v)] for v in values]
        return torch.tensor(out, dtype=torch.int64).reshape(shape)
    t = exactly(values, torch_dtype(name))
    return None if t is None else t.reshape(shape)


def score_dtypes_for(values: Sequence[float]) -> list[str]:
    return [n for n in SCORE_DTYPES if score_tensor(values, (len(values),), n) is not None]


def grade_dtypes_for(values: Sequence[Any], kind: str) -> list[torch.dtype]:
    if kind == "bool":
        candidates = [torch.bool, torch.bool, torch.uint8, torch.int64, torch.float32]
    elif kind == "int":
        candidates = [torch.int64, torch.int32, torch.int16, torch.int8, torch.float64]
    else:
        candidates = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
    out = []
    for dtype in candidates:
        if dtype == torch.bool or exactly([float(v) for v in values], dtype) is not None:
            out.append(dtype)
    return out


def grade_tensor(values: Sequence[Any], shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.tensor([bool(v) for v in values], dtype=torch.bool).reshape(shape)
    t = exactly([float(v) for v in values], dtype)
    assert t is not None, (values, dtype)
    return t.reshape(shape)


def reference_scores(preds: torch.Tensor) -> torch.Tensor:
    """float64 scores in the same order as ``preds``, ties kept: the values
    themselves for a float dtype, the rank among the distinct values for an
    integer one (float64 cannot tell 2^60 from 2^60 + 1)."""
    if preds.dtype.is_floating_point:
        return preds.detach().to(torch.float64)
    values = preds.detach().reshape(-1).tolist()
    rank = {v: float(i) for i, v in enumerate(sorted(set(values)))}
    return torch.tensor([rank[v] for v in values], dtype=torch.float64).reshape(preds.shape)


# --------------------------------------------------------------------------- #
# the oracle
# --------------------------------------------------------------------------- #
class _Oracle:
    """State of the patched reference while it runs (one query at a time)."""

    scale: float = 0.0  # every gain of the query is multiplied by 2^-scale
    overflow: bool = False
    cache: dict[Any, Any] = {}  # noqa: RUF012 - shared on purpose


def _gain_of(grade: float, relevance_threshold: float | None, gain: str) -> float:
    """SPEC's gain, scaled by 2^-scale; 2^g - 1 without cancellation."""
    if not reference.is_relevant(grade, relevance_threshold):
        return 0.0
    g = max(grade, 0.0)
    s = _Oracle.scale
    if s == INF:  # the limit: an infinite grade earns 1, a finite one 0
        return 1.0 if g == INF else 0.0
    if gain == "linear":
        return g * 2.0**-s
    if s == 0:
        return reference.exponential_gain(g)
    scaled = 2.0 ** (g - s) - 2.0**-s
    # a positive gain stays positive under the scaling (the measures that count the
    # items of positive gain, as ndcg_rel's R, must count it): the smallest subnormal
    # where 2^-s (2^g - 1) underflows, a gain no sum of the others can tell from 0
    return scaled if scaled > 0 or g == 0 else math.ulp(0.0)


def gain_scale(relevant_grades: Sequence[float], gain: str) -> tuple[float, bool]:
    """(scale, overflows): the power of 2 that keeps the query's gains finite,
    and whether its gains or their sum overflow float64 unscaled."""
    grades = [max(g, 0.0) for g in relevant_grades]
    if not grades:
        return 0.0, False
    top = max(grades)
    if top == INF:
        return INF, True
    if gain == "linear":
        return 0.0, not math.isfinite(math.fsum(grades))
    if top <= 1000:
        return 0.0, False
    total = math.fsum(2.0 ** (g - top) for g in grades)  # the sum is 2^top * total
    return top, top + math.log2(total) >= 1024 - 1e-9


_ORIGINAL_QUERY = reference.reference_query
_ORIGINAL_FOR_ORDER = reference._metric_for_order


def _metric_for_order(order, grades, metric, k, **kw):  # type: ignore[no-untyped-def]
    """The reference's, but map@None with ap_denominator="min_k_relevant" on a
    query that ranks no item is 0 (nothing retrieved) where the reference
    divides by min(0, R) = 0."""
    if metric == "map" and k is None and not order and kw.get("ap_denominator") == "min_k_relevant":
        relevant = [reference.is_relevant(float(g), kw.get("relevance_threshold")) for g in grades]
        return 0.0 if any(relevant) else None
    return _ORIGINAL_FOR_ORDER(order, grades, metric, k, **kw)


def _err_for_order(order, grades, k, relevance_threshold, gain):  # type: ignore[no-untyped-def]
    """The reference's ERR@k, Σ_j R_j / j Π_{i<j} (1 - R_i) with R = (2^g - 1) / 2^g_max,
    but reading g from the grades (max(grade, 0) of a relevant item, 0 otherwise)
    rather than back from the (here scaled) gain, and R as 2^(g - g_max) - 2^-g_max,
    which neither overflows nor cancels for grades near or past 1024."""

    def grade(i: int) -> float:
        g = float(grades[i])
        return max(g, 0.0) if reference.is_relevant(g, relevance_threshold) else 0.0

    g_max = max((grade(i) for i in range(len(grades))), default=0.0)
    if g_max <= 0:
        return None
    total, reach = 0.0, 1.0
    for j, i in enumerate(order if k is None else order[:k], 1):
        g = grade(i)
        # g_max = inf: the limit, an infinite grade stops for sure, a finite one never
        exact = 2.0 ** (g - g_max) - 2.0**-g_max if g_max != INF else 0.0
        stop = (1.0 if g == INF else 0.0) if g_max == INF else exact
        total += reach * stop / j
        reach *= 1 - stop
    return total


def _reference_query(scores, grades, ranked, specs, **kw):  # type: ignore[no-untyped-def]
    thr = kw.get("relevance_threshold")
    gain = kw.get("gain", "linear")
    pooled = kw.get("pooled")
    if pooled is not None:  # an unjudged item is never relevant
        grades = [g if p else -INF for g, p in zip(grades, pooled, strict=True)]
        kw = dict(kw, pooled=tuple(bool(p) for p in pooled))
    relevant = [float(g) for g in grades if reference.is_relevant(float(g), thr)]
    scale, overflow = gain_scale(relevant, gain)
    _Oracle.overflow |= overflow
    key = (
        tuple(float(s) for s in scores),
        tuple(float(g) for g in grades),
        tuple(bool(r) for r in ranked),
        tuple(specs),
        tuple(sorted(kw.items())),
    )
    if key not in _Oracle.cache:
        if len(_Oracle.cache) > 20000:
            _Oracle.cache.clear()
        _Oracle.scale = scale
        values = _ORIGINAL_QUERY(scores, grades, ranked, specs, **kw)
        absolute = [spec for spec in specs if spec[0] == "dcg"]
        if scale != 0 and absolute:  # dcg is not a ratio: its gains unscaled (inf past float64)
            _Oracle.scale = 0.0
            try:
                values |= _ORIGINAL_QUERY(scores, grades, ranked, absolute, **kw)
            except OverflowError:
                values |= {spec: INF for spec in absolute}
        _Oracle.cache[key] = values
    return _Oracle.cache[key]


@contextlib.contextmanager
def _patched_reference() -> Iterator[None]:
    saved = (
        reference.gain_of,
        reference.reference_query,
        reference._metric_for_order,
        reference._err_for_order,
    )
    reference.gain_of, reference.reference_query = _gain_of, _reference_query
    reference._metric_for_order, reference._err_for_order = _metric_for_order, _err_for_order
    _Oracle.overflow = False
    try:
        yield
    finally:
        (
            reference.gain_of,
            reference.reference_query,
            reference._metric_for_order,
            reference._err_for_order,
        ) = saved
        _Oracle.scale = 0.0


@dataclass
class Expected:
    """What an entry point must give: per query values and means, or an error."""

    none: dict[str, torch.Tensor] = field(default_factory=dict)
    mean: dict[str, torch.Tensor] = field(default_factory=dict)
    must_raise: bool = False  # empty_target_action="error" met an empty query
    may_raise: bool = False  # a gain overflows, or the mask hides everything
    why: str = ""

    @property
    def keys(self) -> list[str]:
        return list(self.mean)


def oracle(
    preds: torch.Tensor,
    target: torch.Tensor,
    opts: Mapping[str, Any],
    *,
    indexes: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    target_format: str | None = None,
    judged: torch.Tensor | None = None,
) -> Expected:
    """The reference on exactly these tensors (``preds`` as :func:`reference_scores`;
    ``judged``: bool, the shape of ``preds``, or None: every item judged)."""
    kw = dict(opts)
    kw.pop("reduction", None)
    threshold = kw.get("relevance_threshold")
    if threshold is not None and not math.isfinite(threshold):
        # a grade >= nan is never true and >= -inf always is: refused, as the command does
        return Expected(must_raise=True, why=f"relevance_threshold={threshold}")
    by_gain = [name for name in kw["metrics"] if METRICS[name].relevant_by_gain]
    if by_gain and threshold is not None and threshold <= 0:  # relevant: a positive gain
        return Expected(must_raise=True, why=f"{by_gain[0]} with relevance_threshold <= 0")
    args = dict(indexes=indexes, mask=mask, target_format=target_format, judged=judged)
    ref_preds = reference_scores(preds)
    out = Expected()
    if mask is not None and mask.numel() > 0 and not bool(mask.any()):
        out.may_raise, out.why = True, "the mask hides every item"
    if "g" in kw["metrics"]:
        # G's costs of 1 per place are lost past 2^53: refused there (rank_stats.g_sum)
        for _, grades, _, _ in reference.split_queries(ref_preds, target, **args):
            relevant = [g for g in grades if reference.is_relevant(g, threshold)]
            gains = [reference.exponential_gain(max(g, 0.0)) if kw.get("gain", "linear") == "exponential"
                     else max(g, 0.0) for g in relevant if g < 1024]  # fmt: skip
            if len(gains) < len(relevant) or sum(gains) + len(grades) >= 2.0**52:
                out.may_raise, out.why = True, "G of gains past 2^53"
    if judged is not None:
        # an unjudged item's grade is still an input: refused when its gain overflows
        for _, grades, _, _ in reference.split_queries(
            ref_preds, target, **args | {"judged": None}
        ):
            relevant = [g for g in grades if reference.is_relevant(g, threshold)]
            if gain_scale(relevant, kw.get("gain", "linear"))[1]:
                out.may_raise, out.why = True, "the gain of an unjudged item overflows float64"
    with _patched_reference():
        try:
            out.none = reference.reference_rank_metrics(
                ref_preds, target, reduction="none", **args, **kw
            )
            out.mean = reference.reference_rank_metrics(
                ref_preds, target, reduction="mean", **args, **kw
            )
        except ValueError as error:
            out.must_raise, out.why = True, str(error)
        if _Oracle.overflow:
            out.may_raise, out.why = True, "a relevant gain (or a sum of them) overflows float64"
    return out


# --------------------------------------------------------------------------- #
# the metrics of item exposure (issue 14) and their item inputs
# --------------------------------------------------------------------------- #
EXPOSURE_MEASURES = (*reference.CATALOGUE_EXPOSURE, *reference.PER_QUERY_EXPOSURE)
#: interaction counts and shares: ties, tiny and huge (and in one draw of eight 0,
#: which novelty refuses)
POPULARITY_POOL = [0.5, 1.0, 1.0, 2.0, 3.0, 7.0, 20.0, 1e-300, 1e300]
FEATURE_POOL = [-2.0, -1.0, 0.0, 0.0, 0.5, 1.0, 2.0, 3.0]
#: features whose squares overflow or underflow float64 (the cosine is still exact)
WIDE_FEATURES = [1e200, -1e200, 1e-200, 5e-324]
#: category ids far apart (labels, not indices): huge, up to int64's ends, and negative
CATEGORY_LABELS = [0, 1, 1000, 2**40, 2**62, 2**63 - 1, -1, -(2**40), -(2**63)]
#: past this many joint orders of the queries, the reference's coverage and
#: personalisation factorise over the queries (see ``reference_exposure``)
MAX_JOINT = 2000


@dataclass
class ItemDraw:
    """The item inputs of the exposure metrics (each None when not given), in Python numbers."""

    popularity: list[float] | None = None
    tail: list[bool] | None = None
    features: list[list[float]] | None = None
    categories: list[int] | None = None
    popularity_dtype: torch.dtype = torch.float64
    features_dtype: torch.dtype = torch.float64
    categories_dtype: torch.dtype = torch.int64
    num_items: int = 0

    def keywords(self) -> dict[str, torch.Tensor]:
        """The package's item keywords (those given)."""
        out: dict[str, torch.Tensor] = {}
        if self.popularity is not None:
            out["item_popularity"] = torch.tensor(self.popularity, dtype=torch.float64).to(
                self.popularity_dtype
            )
        if self.tail is not None:
            out["tail_items"] = torch.tensor(self.tail, dtype=torch.bool).reshape(-1)
        if self.features is not None:
            d = len(self.features[0]) if self.features else 1
            out["item_features"] = (
                torch.tensor(self.features, dtype=torch.float64)
                .reshape(self.num_items, d)
                .to(self.features_dtype)
            )
        if self.categories is not None:
            out["item_categories"] = torch.tensor(self.categories, dtype=self.categories_dtype)
        return out

    def reference(self) -> dict[str, Any]:
        """``reference_exposure``'s ``items``."""
        named = dict(
            popularity=self.popularity,
            tail=self.tail,
            features=self.features,
            categories=self.categories,
        )
        return {key: value for key, value in named.items() if value is not None}

    def given(self, keyword: str) -> bool:
        field_name = {
            "item_popularity": "popularity",
            "tail_items": "tail",
            "item_features": "features",
            "item_categories": "categories",
        }[keyword]
        return getattr(self, field_name) is not None


@st.composite
def item_draws(draw: st.DrawFn, n: int, metrics: Sequence[str]) -> ItemDraw:
    """Each item input: mostly given when a drawn metric reads it, sometimes when
    none does; diversity gets features or categories (rarely both: refused)."""
    items = ItemDraw(num_items=n)

    def wanted(keyword: str) -> bool:
        needed = any(keyword in METRICS[m].needs for m in metrics)
        return draw(st.integers(0, 9)) < (9 if needed else 3)

    if wanted("item_popularity"):
        pool = POPULARITY_POOL if draw(st.booleans()) else [1.0, 2.0, 3.0, 5.0]
        pool = [*pool, 0.0] if draw(st.integers(0, 7)) == 0 else pool
        items.popularity = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
        dtypes = [torch.float64, torch.float32, torch.int64]
        fits = [t for t in dtypes if exactly(items.popularity, t) is not None]
        items.popularity_dtype = draw(st.sampled_from(fits))
    if wanted("tail_items"):
        items.tail = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    similarity = draw(st.sampled_from(["features", "categories", "both"]))
    if similarity == "both" and draw(st.integers(0, 3)) > 0:
        similarity = draw(st.sampled_from(["features", "categories"]))
    if similarity in ("features", "both") and wanted("item_features"):
        d = draw(st.integers(1, 3))
        pool = FEATURE_POOL + (WIDE_FEATURES if draw(st.integers(0, 4)) == 0 else [])
        cell = st.sampled_from(pool)
        items.features = [draw(st.lists(cell, min_size=d, max_size=d)) for _ in range(n)]
        flat = [x for row in items.features for x in row]
        dtypes = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
        items.features_dtype = draw(
            st.sampled_from([t for t in dtypes if exactly(flat, t) is not None])
        )
        if n == 0:
            items.features = []
    if similarity in ("categories", "both") and wanted("item_categories"):
        items.categories = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        items.categories_dtype = draw(st.sampled_from([torch.int64, torch.int32, torch.uint8]))
        if draw(st.integers(0, 3)) == 0:  # ids are labels: any int64 (issue 24)
            labels = draw(
                st.lists(st.sampled_from(CATEGORY_LABELS), min_size=4, max_size=4, unique=True)
            )
            items.categories = [labels[c] for c in items.categories]
            items.categories_dtype = torch.int64
    return items


def _exposure_refusal(opts: Mapping[str, Any], items: ItemDraw) -> str | None:
    """Why the request is refused before any ranking (a ValueError), or None."""
    for name in opts["metrics"]:
        metric = METRICS[name]
        if not metric.exposure:
            continue
        if opts["top_k"] is None:
            return f"{name} without a cutoff"
        if metric.needs and not any(items.given(keyword) for keyword in metric.needs):
            return f"{name} without {metric.needs}"
        if name == "diversity" and items.features is not None and items.categories is not None:
            return "diversity with both features and categories"
        if (
            name == "novelty"
            and items.popularity is not None
            and min(items.popularity, default=1) <= 0
        ):
            return "novelty with a popularity of 0"
    return None


def exposure_oracle(
    preds: torch.Tensor,
    target: torch.Tensor,
    opts: Mapping[str, Any],
    items: ItemDraw,
    *,
    mask: torch.Tensor | None = None,
    target_format: str | None = None,
    judged: torch.Tensor | None = None,
) -> Expected:
    """What rank_metrics gives for ``opts["metrics"]``, exposure metrics among them,
    on (Q, N) ``preds``: the accuracy metrics from :func:`oracle`, the exposure
    metrics from ``reference.reference_exposure`` (an unjudged item is never relevant,
    which decides its place under "pessimistic" and "optimistic")."""
    metrics = tuple(opts["metrics"])
    accuracy = tuple(m for m in metrics if not METRICS[m].exposure)
    exposure = tuple(m for m in metrics if METRICS[m].exposure)
    args = dict(mask=mask, target_format=target_format, judged=judged)
    threshold = opts.get("relevance_threshold")
    ties = opts.get("ties", "average")
    if threshold is not None and not math.isfinite(threshold):
        return Expected(must_raise=True, why=f"relevance_threshold={threshold}")
    refusal = _exposure_refusal(opts, items)
    if refusal is not None:
        return Expected(must_raise=True, why=refusal)
    out = oracle(preds, target, dict(opts, metrics=accuracy), **args) if accuracy else Expected()
    if out.must_raise:
        return out
    ks = [key_k for _, _, key_k in reference.result_keys(exposure, opts["top_k"])]
    ks = sorted({int(k) for k in ks if k is not None})
    queries = reference.split_queries(reference_scores(preds), target, **args)
    rows, weights = [], []
    for scores, grades, ranked, flags in queries:
        relevant = [float(g) for g in grades if reference.is_relevant(float(g), threshold)]
        if gain_scale(relevant, opts.get("gain", "linear"))[1]:
            # the gains are read (they order a group): refused where they overflow
            out.may_raise, out.why = True, "a relevant gain (or a sum of them) overflows float64"
        if flags is not None:  # an unjudged item is never relevant
            grades = [g if f else -INF for g, f in zip(grades, flags, strict=True)]
        rows.append((scores, grades, ranked))
        relevant = sum(reference.is_relevant(float(g), threshold) for g in grades)
        weights.append(float(relevant) if opts.get("weighted") else 1.0)
    values: dict[str, Any] = {}
    if rows:
        with _patched_reference():  # the gains that order a group: 2^g - 1 without cancellation
            values = reference.reference_exposure(
                rows,
                ks,
                ties=ties,
                items=items.reference(),
                relevance_threshold=threshold,
                gain=opts.get("gain", "linear"),
                max_joint=MAX_JOINT,
            )
    none: dict[str, torch.Tensor] = {}
    mean: dict[str, torch.Tensor] = {}
    for key, name, _ in reference.result_keys(exposure, opts["top_k"]):
        value = values.get(key, math.nan)
        if name in reference.CATALOGUE_EXPOSURE:
            mean[key] = torch.tensor(float(value), dtype=torch.float64)
            continue
        per_query = value if isinstance(value, list) else [None] * len(rows)
        none[key] = torch.tensor(
            [math.nan if v is None else v for v in per_query], dtype=torch.float64
        )
        counted = [(w, v) for w, v in zip(weights, per_query, strict=True) if v is not None]
        mean[key] = torch.tensor(reference.weighted_mean(counted), dtype=torch.float64)
    order = [key for key, _, _ in reference.result_keys(metrics, opts["top_k"])]
    out.none = {key: (out.none | none)[key] for key in order if key in (out.none | none)}
    out.mean = {key: (out.mean | mean)[key] for key in order}
    return out


def reference_keys(opts: Mapping[str, Any]) -> list[str]:
    metrics = opts["metrics"]
    return [key for key, _, _ in reference.result_keys(metrics, opts["top_k"])]


# --------------------------------------------------------------------------- #
# comparing
# --------------------------------------------------------------------------- #
RTOL = ATOL = 1e-9


def assert_values(
    got: Mapping[str, Any],
    expected: Mapping[str, torch.Tensor],
    what: str,
    *,
    float64: bool = True,
) -> None:
    """Same keys in the same order, values within 1e-9, NaN exactly where expected."""
    assert list(got) == list(expected), f"{what}: keys {list(got)} != {list(expected)}"
    for key, exp in expected.items():
        value = got[key]
        if isinstance(value, torch.Tensor):
            if float64:
                assert value.dtype == torch.float64, f"{what}: {key} has dtype {value.dtype}"
            value = value.detach().to("cpu", torch.float64)
        else:
            value = torch.tensor(value, dtype=torch.float64)
        assert value.shape == exp.shape, f"{what}: {key} shape {value.shape} != {exp.shape}"
        torch.testing.assert_close(
            value,
            exp,
            rtol=RTOL,
            atol=ATOL,
            equal_nan=True,
            msg=lambda m, key=key: f"{what}: {key}: {m}",
        )


def checked(
    call: Callable[[], Any],
    expected: Expected,
    what: str,
    compare: Callable[[Any], None],
    errors: tuple[type[BaseException], ...] = (ValueError, TypeError),
) -> None:
    """Run ``call``: it must raise one of ``errors`` when the reference does, may
    when ``expected.may_raise``, and otherwise return what ``compare`` accepts.
    Any other exception propagates (a failure)."""
    try:
        got = call()
    except errors as error:
        if expected.must_raise or expected.may_raise:
            return
        raise AssertionError(
            f"{what}: raised {type(error).__name__}({error}) where the reference gives numbers"
        ) from error
    assert not expected.must_raise, f"{what}: returned numbers where it must raise ({expected.why})"
    compare(got)


# --------------------------------------------------------------------------- #
# layouts
# --------------------------------------------------------------------------- #
def dense_inputs(
    problem: Problem, score_dtype: str, grade_dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(preds, target, mask) of a rectangular problem."""
    q, n = problem.num_queries, problem.num_items
    assert n is not None
    preds = score_tensor(problem.all_scores(), (q, n), score_dtype)
    assert preds is not None
    target = grade_tensor(problem.all_grades(), (q, n), grade_dtype)
    mask = None
    if problem.masked:
        flat = [r for query in problem.queries for r in query.ranked]
        mask = torch.tensor(flat, dtype=torch.bool).reshape(q, n)
    return preds, target, mask


def item_id_target(
    id_lists: Sequence[Sequence[int]], width: int, one_d: bool, dtype: torch.dtype
) -> torch.Tensor:
    """(Q,) or (Q, T) item ids, padded with -1."""
    if one_d:
        return torch.tensor([ids[0] for ids in id_lists], dtype=dtype)
    rows = [list(ids) + [-1] * (width - len(ids)) for ids in id_lists]
    return torch.tensor(rows, dtype=dtype).reshape(len(id_lists), width)


def listed_grades(target: torch.Tensor, num_queries: int, num_items: int) -> torch.Tensor:
    """Dense grades of item-id targets for the reference: grade 1 for a listed
    item, -inf for an unlisted one. An unlisted item has no grade: it is
    unjudged (SPEC: padding is never an item, and "grade 0 is relevant under
    a threshold <= 0" is about judged items), never relevant whatever the
    threshold, with gain 0."""
    rows = target.reshape(num_queries, -1).tolist() if num_queries else []
    grades = torch.full((num_queries, num_items), -INF, dtype=torch.float64)
    for q, row in enumerate(rows):
        for item in row:
            if item >= 0:
                grades[q, item] = 1.0
    return grades


def grouped_inputs(
    problem: Problem,
    order: Sequence[int],
    qids: Sequence[int],
    score_dtype: str,
    grade_dtype: torch.dtype,
    index_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Flat (preds, target, indexes, mask), entries in ``order``."""
    entries = [
        (qids[q], s, g, r)
        for q, query in enumerate(problem.queries)
        for s, g, r in zip(query.scores, query.grades, query.ranked)
    ]
    entries = [entries[i] for i in order]
    m = len(entries)
    preds = score_tensor([e[1] for e in entries], (m,), score_dtype)
    assert preds is not None
    target = grade_tensor([e[2] for e in entries], (m,), grade_dtype)
    indexes = torch.tensor([e[0] for e in entries], dtype=index_dtype)
    mask = torch.tensor([e[3] for e in entries], dtype=torch.bool) if problem.masked else None
    return preds, target, indexes, mask


def describe(**parts: Any) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in parts.items())
