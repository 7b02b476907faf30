"""Property tests: ``ranking_plugins.rank_metrics`` against the brute-force
reference in ``reference.py`` (every metric, layout, tie policy and option),
plus a few closed-form and worked-example checks."""

from __future__ import annotations

import math

import pytest
import torch
import trec_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import (
    ALL_METRICS,
    EMPTY_ACTIONS,
    TIES,
    reference_metric,
    reference_rank_metrics,
)

import ranking_plugins

INF = float("inf")
SETTINGS = dict(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


# --------------------------------------------------------------------------- #
# strategies
# --------------------------------------------------------------------------- #
SMALL_SCORES = [0.0, 1.0, 2.0, 3.0]
GRADE_SETS = {
    "bool": [False, True],
    "int": [-1, 0, 0, 1, 1, 2, 3],
    "float": [-1.0, -0.5, 0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5],
}


@st.composite
def score_lists(draw, n: int, mode: str) -> list[float]:
    if mode == "small":
        return draw(st.lists(st.sampled_from(SMALL_SCORES), min_size=n, max_size=n))
    if mode == "small_inf":
        return draw(st.lists(st.sampled_from(SMALL_SCORES * 2 + [-INF]), min_size=n, max_size=n))
    if mode == "binary":
        return draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n))
    if mode == "distinct":
        return [float(v) for v in draw(st.permutations(list(range(n))))]
    raise AssertionError(mode)


def _preds_tensor(draw, rows, shape):
    flat = [v for row in rows for v in row] if rows and isinstance(rows[0], list) else rows
    has_inf = any(math.isinf(v) for v in flat)
    dtypes = [torch.float32, torch.float32, torch.float64, torch.float16, torch.bfloat16]
    if not has_inf:
        dtypes += [torch.int64, torch.int32]
    dtype = draw(st.sampled_from(dtypes))
    return torch.tensor(flat, dtype=torch.float64).reshape(shape).to(dtype)


def _grades_tensor(draw, flat, shape, kind):
    if kind == "bool":
        return torch.tensor(flat, dtype=torch.bool).reshape(shape)
    if kind == "int":
        return torch.tensor(flat, dtype=draw(st.sampled_from([torch.int64, torch.int32]))).reshape(
            shape
        )
    return torch.tensor(flat, dtype=draw(st.sampled_from([torch.float32, torch.float64]))).reshape(
        shape
    )


def _mask_rows(draw, sizes):
    """One bool list per query, each with at least one True."""
    rows = []
    for n in sizes:
        row = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        if not any(row):
            row[draw(st.integers(0, n - 1))] = True
        rows.append(row)
    return rows


@st.composite
def batches(
    draw,
    layouts=("dense", "indices", "grouped"),
    score_modes=("small", "small_inf", "binary", "distinct"),
    max_q=3,
    max_n=6,
):
    """Inputs for rank_metrics: a dict with preds, target and optionally
    indexes, mask, target_format."""
    layout = draw(st.sampled_from(layouts))
    score_mode = draw(st.sampled_from(score_modes))
    with_mask = draw(st.booleans())
    out = {}
    if layout in ("dense", "indices"):
        Q = draw(st.integers(1, max_q))
        N = draw(st.integers(1, max_n))
        rows = [draw(score_lists(N, score_mode)) for _ in range(Q)]
        out["preds"] = _preds_tensor(draw, rows, (Q, N))
        if layout == "dense":
            kind = draw(st.sampled_from(sorted(GRADE_SETS)))
            flat = draw(st.lists(st.sampled_from(GRADE_SETS[kind]), min_size=Q * N, max_size=Q * N))
            out["target"] = _grades_tensor(draw, flat, (Q, N), kind)
            if draw(st.integers(0, 4)) == 0:
                out["target_format"] = "dense"
        else:
            one_d = draw(st.booleans())
            T = 1 if one_d else draw(st.integers(1, 4))
            ids = draw(st.lists(st.integers(-1, N - 1), min_size=Q * T, max_size=Q * T))
            if one_d:
                ids = [
                    i if i >= 0 else draw(st.integers(0, N - 1)) for i in ids
                ]  # (Q,) has no padding
            t = torch.tensor(ids, dtype=draw(st.sampled_from([torch.int64, torch.int32])))
            out["target"] = t if one_d else t.reshape(Q, T)
            if (not one_d and T == N) or draw(st.booleans()):
                out["target_format"] = "indices"
        if with_mask:
            out["mask"] = torch.tensor(_mask_rows(draw, [N] * Q), dtype=torch.bool)
    else:  # grouped
        nq = draw(st.integers(1, max_q))
        qids = draw(st.lists(st.integers(0, 9), min_size=nq, max_size=nq, unique=True))
        sizes = [draw(st.integers(1, max_n)) for _ in range(nq)]
        kind = draw(st.sampled_from(sorted(GRADE_SETS)))
        per_q = []
        masks = _mask_rows(draw, sizes) if with_mask else [[True] * n for n in sizes]
        for qid, n, mrow in zip(qids, sizes, masks):
            s = draw(score_lists(n, score_mode))
            g = draw(st.lists(st.sampled_from(GRADE_SETS[kind]), min_size=n, max_size=n))
            per_q.append([(qid, s[j], g[j], mrow[j]) for j in range(n)])
        # interleave the queries, keeping each query's own item order
        slots = [q for q, n in enumerate(sizes) for _ in range(n)]
        slots = draw(st.permutations(slots))
        cursor = [0] * nq
        flat = []
        for q in slots:
            flat.append(per_q[q][cursor[q]])
            cursor[q] += 1
        M = len(flat)
        out["preds"] = _preds_tensor(draw, [f[1] for f in flat], (M,))
        out["target"] = _grades_tensor(draw, [f[2] for f in flat], (M,), kind)
        out["indexes"] = torch.tensor(
            [f[0] for f in flat], dtype=draw(st.sampled_from([torch.int64, torch.int32]))
        )
        if with_mask:
            out["mask"] = torch.tensor([f[3] for f in flat], dtype=torch.bool)
    return out


top_ks = st.one_of(
    st.none(),
    st.integers(1, 8),
    st.lists(st.integers(1, 8), min_size=1, max_size=4),
)

metric_sets = st.one_of(
    st.just(ALL_METRICS),
    st.lists(st.sampled_from(ALL_METRICS), min_size=1, max_size=4, unique=True).map(tuple),
)


@st.composite
def options(draw, ties=TIES, actions=EMPTY_ACTIONS):
    return dict(
        metrics=draw(metric_sets),
        top_k=draw(top_ks),
        ties=draw(st.sampled_from(ties)),
        relevance_threshold=draw(st.sampled_from([None, None, None, 0.5, 1.0, 1.5, 2.0])),
        empty_target_action=draw(st.sampled_from(actions)),
        reduction=draw(st.sampled_from(["mean", "none"])),
        gain=draw(st.sampled_from(["exponential", "linear"])),
        ap_denominator=draw(st.sampled_from(["relevant", "min_k_relevant"])),
        adaptive_k=draw(st.booleans()),
        weighted=draw(st.booleans()),
    )


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #
def _describe(batch, opts):
    parts = [f"{k}={v!r}" for k, v in batch.items()] + [f"{k}={v!r}" for k, v in opts.items()]
    return "rank_metrics(" + ", ".join(parts) + ")"


def check_against_reference(batch, opts):
    try:
        expected = reference_rank_metrics(**batch, **opts)
    except ValueError:
        with pytest.raises(ValueError):
            ranking_plugins.rank_metrics(**batch, **opts)
        return
    got = ranking_plugins.rank_metrics(**batch, **opts)
    assert set(got) == set(expected), _describe(batch, opts)
    for key, exp in expected.items():
        g = got[key]
        assert isinstance(g, torch.Tensor), key
        assert g.dtype == torch.float64, (key, g.dtype)
        assert g.shape == exp.shape, (key, g.shape, exp.shape)
        torch.testing.assert_close(
            g,
            exp,
            rtol=1e-9,
            atol=1e-9,
            equal_nan=True,
            msg=lambda m, key=key: f"{key}: {m}\n{_describe(batch, opts)}",
        )


# --------------------------------------------------------------------------- #
# property tests against the reference
# --------------------------------------------------------------------------- #
@settings(max_examples=400, **SETTINGS)
@given(batch=batches(), opts=options())
def test_matches_reference(batch, opts):
    check_against_reference(batch, opts)


@settings(max_examples=150, **SETTINGS)
@given(
    batch=batches(layouts=("dense",), score_modes=("binary", "small")),
    opts=options(ties=("average",)),
)
def test_average_ties_heavy(batch, opts):
    """Many ties, the "average" policy only: the brute force is the spec."""
    check_against_reference(batch, opts)


@settings(max_examples=100, **SETTINGS)
@given(batch=batches(), opts=options(actions=("error",)))
def test_error_action(batch, opts):
    """empty_target_action="error" raises ValueError exactly when some query
    is empty / its value undefined, and otherwise changes nothing."""
    check_against_reference(batch, opts)


@settings(max_examples=100, **SETTINGS)
@given(batch=batches(), opts=options(ties=("average",), actions=("skip",)))
def test_policies_bracket_average(batch, opts):
    """pessimistic <= average <= optimistic for higher-is-better metrics
    (reversed for fall_out and mean_rank), per query."""
    opts = dict(opts, reduction="none")
    res = {
        t: ranking_plugins.rank_metrics(**batch, **dict(opts, ties=t))
        for t in ("pessimistic", "average", "optimistic")
    }
    for key in res["average"]:
        lo, mid, hi = res["pessimistic"][key], res["average"][key], res["optimistic"][key]
        if key.split("@")[0] in ("fall_out", "mean_rank"):
            lo, hi = hi, lo
        ok = torch.isnan(mid) | ((lo <= mid + 1e-12) & (mid <= hi + 1e-12))
        assert bool(ok.all()), (key, lo, mid, hi, _describe(batch, opts))


@settings(max_examples=100, **SETTINGS)
@given(batch=batches(score_modes=("distinct",)), opts=options(ties=("average",)))
def test_policies_agree_without_ties(batch, opts):
    base = (
        ranking_plugins.rank_metrics(**batch, **opts)
        if opts["empty_target_action"] != "error"
        else None
    )
    for t in TIES:
        if base is None:
            break
        other = ranking_plugins.rank_metrics(**batch, **dict(opts, ties=t))
        for key in base:
            torch.testing.assert_close(
                other[key], base[key], rtol=1e-12, atol=1e-12, equal_nan=True
            )


# --------------------------------------------------------------------------- #
# reference self-checks: the SPEC's closed forms for "average"
# --------------------------------------------------------------------------- #
def _closed_forms(scores, rels, k):
    """SPEC section 3 closed forms: expected hits@k, AP numerator, RR@k."""
    distinct = sorted(set(scores), reverse=True)
    groups = [[r for s, r in zip(scores, rels) if s == v] for v in distinct]
    T = rho = 0
    hits = ap = 0.0
    rr = None
    for g in groups:
        t, r = len(g), sum(g)
        if T < k <= T + t:
            hits = rho + (k - T) * r / t
        for j in range(T + 1, min(T + t, k) + 1):
            bracket = rho + 1 + ((j - T - 1) * (r - 1) / (t - 1) if t > 1 else 0)
            ap += (r / t) * bracket / j
        if rr is None and r > 0:
            rr = sum(
                math.comb(t - i, r - 1) / math.comb(t, r) / (T + i)
                for i in range(1, t - r + 2)
                if T + i <= k
            )
        T += t
        rho += r
    if k > T:
        hits = rho
    return hits, ap, (rr or 0.0)


@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=1, max_size=6),
    data=st.data(),
)
def test_reference_matches_spec_closed_forms(scores, data):
    n = len(scores)
    rels = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    k = data.draw(st.integers(1, n + 2))
    R = sum(rels)
    grades = [1.0 if r else 0.0 for r in rels]
    ranked = [True] * n
    hits, ap, rr = _closed_forms(scores, rels, k)
    ref = lambda m: reference_metric(scores, grades, ranked, m, k, ties="average")  # noqa: E731
    if R == 0:
        assert ref("precision") is None
        return
    assert ref("precision") == pytest.approx(hits / k, abs=1e-12)
    assert ref("map") == pytest.approx(ap / R, abs=1e-12)
    assert ref("mrr") == pytest.approx(rr, abs=1e-12)


# --------------------------------------------------------------------------- #
# constant scores: "average" is a random ranking's expectation
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("N,R", [(1, 1), (4, 1), (4, 2), (5, 3), (6, 6), (6, 2)])
def test_constant_scores_equal_random_expectation(N, R):
    ks = list(range(1, N + 3))
    grades = [1.0] * R + [0.0] * (N - R)
    preds = torch.zeros(1, N)
    target = torch.tensor([grades])
    got = ranking_plugins.rank_metrics(
        preds, target, ALL_METRICS, ks, ties="average", reduction="mean"
    )
    expected = {}
    for k in ks:
        kk = min(k, N)
        expected[f"precision@{k}"] = kk * R / N / k
        expected[f"recall@{k}"] = kk / N
        expected[f"hit_rate@{k}"] = 1 - math.comb(N - R, kk) / math.comb(N, kk)
        # P(first relevant at rank i) = C(N-i, R-1) / C(N, R)
        expected[f"mrr@{k}"] = sum(
            math.comb(N - i, R - 1) / math.comb(N, R) / i for i in range(1, kk + 1)
        )
        expected[f"fall_out@{k}"] = kk / N if R < N else 0.0
        expected[f"f1@{k}"] = 2 * kk * R / N / (k + R)
        dcg = sum(1 / math.log2(i + 1) for i in range(1, kk + 1)) * R / N
        idcg = sum(1 / math.log2(i + 1) for i in range(1, min(k, R) + 1))
        expected[f"ndcg@{k}"] = dcg / idcg
    expected["r_precision"] = R / N
    expected["mean_rank"] = (N + 1) / 2
    expected["auc"] = 0.5 if R < N else float("nan")
    for key, val in expected.items():
        if key == "auc" and R == N:
            continue  # undefined -> "neg" -> 0.0
        # the reference agrees with the closed form ...
        metric, _, k = key.partition("@")
        ref = reference_metric(
            [0.0] * N, grades, [True] * N, metric, int(k) if k else None, ties="average"
        )
        assert ref == pytest.approx(val, abs=1e-12), key
        # ... and so does the package
        assert got[key].item() == pytest.approx(val, abs=1e-9), key


# --------------------------------------------------------------------------- #
# SPEC section 7 worked examples (reference and package)
# --------------------------------------------------------------------------- #
Y_PRED = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])


@pytest.mark.parametrize("impl", ["reference", "package"])
def test_spec_worked_examples(impl):
    f = reference_rank_metrics if impl == "reference" else ranking_plugins.rank_metrics
    y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    r = f(Y_PRED, y, ("mrr",), [1, 2, 3, 4])
    assert [r[f"mrr@{k}"].item() for k in (1, 2, 3, 4)] == pytest.approx([0.5, 0.75, 0.75, 0.75])

    y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    r = f(Y_PRED, y, ("hit_rate",), [1, 2, 3, 4], empty_target_action="skip")
    assert [r[f"hit_rate@{k}"].item() for k in (1, 2, 3, 4)] == pytest.approx([0.0, 1.0, 1.0, 1.0])
    r = f(Y_PRED, y, ("hit_rate",), [1, 2, 3, 4], empty_target_action="neg")
    assert [r[f"hit_rate@{k}"].item() for k in (1, 2, 3, 4)] == pytest.approx([0.0, 0.5, 0.5, 0.5])

    r = f(
        torch.tensor([[0.1, 0.9, 0.8], [0.05, 0.95, 0.0]]),
        torch.tensor([[0, 0, 1], [0, 1, 0]]),
        ("mrr", "mean_rank"),
        None,
    )
    assert r["mrr"].item() == pytest.approx(0.75)
    assert r["mean_rank"].item() == pytest.approx(1.5)

    r = f(
        torch.tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]),
        torch.tensor([False, False, True, False, True, False, True]),
        ("map",),
        None,
        indexes=torch.tensor([0, 0, 0, 1, 1, 1, 1]),
    )
    assert r["map"].item() == pytest.approx(0.7917, abs=1e-4)


@pytest.mark.parametrize("impl", ["reference", "package"])
def test_small_hand_checked_cases(impl):
    f = reference_rank_metrics if impl == "reference" else ranking_plugins.rank_metrics
    # scores [2, 1, 1, 0], relevant items 1 and 3 (one in the tie at ranks 2-3)
    preds = torch.tensor([[2.0, 1.0, 1.0, 0.0]])
    target = torch.tensor([[0, 1, 0, 2]])
    r = f(preds, target, ALL_METRICS, [1, 2, 3], ties="average", gain="linear", reduction="none")
    assert r["hit_rate@2"].item() == pytest.approx(0.5)
    assert r["mrr@3"].item() == pytest.approx(0.5 * (1 / 2) + 0.5 * (1 / 3))
    assert r["precision@3"].item() == pytest.approx(1 / 3)
    assert r["recall@2"].item() == pytest.approx(0.25)
    # map@3 = (1/R) * E[1/rank of item 1] ; R=2
    assert r["map@3"].item() == pytest.approx(0.5 * (0.5 * (1 / 2) + 0.5 * (1 / 3)))
    # ndcg@2 linear: E[DCG@2] = 0.5 * 1/log2(3); IDCG@2 = 2 + 1/log2(3)
    assert r["ndcg@2"].item() == pytest.approx(0.5 / math.log2(3) / (2 + 1 / math.log2(3)))
    assert r["fall_out@2"].item() == pytest.approx((1 + 0.5) / 2)
    assert r["r_precision"].item() == pytest.approx(0.5 / 2)
    assert r["mean_rank"].item() == pytest.approx((2.5 + 4) / 2)
    # pairs (rel, non-rel): (1,0) lose, (1,2) tie 1/2, (3,0) lose, (3,2) lose
    assert r["auc"].item() == pytest.approx(0.5 / 4)
    # masked relevant item still counts in R and IDCG
    mask = torch.tensor([[True, True, True, False]])
    r = f(
        preds,
        target,
        ("recall", "ndcg", "mean_rank"),
        None,
        mask=mask,
        ties="first",
        gain="linear",
        reduction="none",
    )
    assert r["recall"].item() == pytest.approx(0.5)
    assert r["ndcg"].item() == pytest.approx((1 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert r["mean_rank"].item() == pytest.approx(2.0)


def test_error_action_raises_on_empty_query():
    preds = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    target = torch.tensor([[0, 1], [0, 0]])
    with pytest.raises(ValueError):
        ranking_plugins.rank_metrics(preds, target, ("mrr",), 1, empty_target_action="error")
    with pytest.raises(ValueError):
        reference_rank_metrics(preds, target, ("mrr",), 1, empty_target_action="error")


# --------------------------------------------------------------------------- #
# trec_eval's own test collection (SPEC section 7): reference and package
# --------------------------------------------------------------------------- #
TREC_MEASURES = {  # trec_eval name -> (metric, k)
    "map": ("map", None),
    "map_cut_10": ("map", 10),
    "P_5": ("precision", 5),
    "P_10": ("precision", 10),
    "P_1000": ("precision", 1000),
    "recip_rank": ("mrr", None),
    "Rprec": ("r_precision", None),
    "recall_10": ("recall", 10),
    "recall_100": ("recall", 100),
    "recall_1000": ("recall", 1000),
    "success_1": ("hit_rate", 1),
    "success_10": ("hit_rate", 10),
    "ndcg": ("ndcg", None),
    "ndcg_cut_10": ("ndcg", 10),
    "ndcg_cut_1000": ("ndcg", 1000),
}


def _trec_queries(trec_eval_dir, qrels_file):
    """Per query: (qid, scores, grades, retrieved) over its judged and retrieved docs.

    The docs are listed as ``trec_files.to_tensors`` lists them (docno descending,
    so ``ties="first"`` is trec_eval's order), without the padding.
    """
    qrels = trec_files.read_qrels(trec_eval_dir / qrels_file)
    run = trec_files.read_run(trec_eval_dir / "results.test")
    qids, preds, target, mask = trec_files.to_tensors(qrels, run)
    width = [len(set(qrels.get(q, {})) | set(run[q])) for q in qids]
    return [
        (q, preds[i, :n].tolist(), target[i, :n].tolist(), mask[i, :n].tolist())
        for i, (q, n) in enumerate(zip(qids, width))
    ]


def _trec_expected(trec_eval_dir, out_file):
    printed = trec_files.read_trec_eval_output(trec_eval_dir / out_file)
    return {
        (m, q): float(v) for q, row in printed.items() for m, v in row.items() if m in TREC_MEASURES
    }


@pytest.mark.parametrize("impl", ["reference", "package"])
@pytest.mark.parametrize(
    "qrels_file,out_file,threshold",
    [("qrels.test", "out.test.aq", None), ("qrels.rel_level", "out.test.aql", 2.0)],
)
def test_trec_eval_collection(trec_eval_dir, impl, qrels_file, out_file, threshold):
    """The reference itself reproduces trec_eval; the package too, in the grouped layout."""
    expected = _trec_expected(trec_eval_dir, out_file)
    queries = _trec_queries(trec_eval_dir, qrels_file)
    measures = {
        m: s for m, s in TREC_MEASURES.items() if threshold is None or not m.startswith("ndcg")
    }
    if impl == "reference":
        for q, scores, grades, ranked in queries:
            vals = {
                m: reference_metric(
                    scores,
                    grades,
                    ranked,
                    metric,
                    k,
                    ties="first",
                    relevance_threshold=threshold,
                    gain="linear",
                )
                for m, (metric, k) in measures.items()
            }
            for m, v in vals.items():
                assert v == pytest.approx(expected[(m, q)], abs=5e-5), (q, m)
        return
    preds = torch.tensor([s for q in queries for s in q[1]], dtype=torch.float64)
    target = torch.tensor([g for q in queries for g in q[2]])
    mask = torch.tensor([r for q in queries for r in q[3]])
    indexes = torch.tensor([i for i, q in enumerate(queries) for _ in q[1]])
    common = dict(
        indexes=indexes,
        mask=mask,
        ties="first",
        relevance_threshold=threshold,
        gain="linear",
        reduction="none",
    )
    metrics = sorted({metric for metric, _ in measures.values()})
    at_k = ranking_plugins.rank_metrics(preds, target, metrics, [1, 5, 10, 100, 1000], **common)
    whole = ranking_plugins.rank_metrics(preds, target, metrics, None, **common)
    for m, (metric, k) in measures.items():
        got = whole[metric] if k is None else at_k[f"{metric}@{k}"]
        for i, (q, *_rest) in enumerate(queries):
            assert got[i].item() == pytest.approx(expected[(m, q)], abs=5e-5), (q, m)
