"""Paired significance tests (ranking_plugins.compare) against scipy.stats and ranx."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from ranking_plugins import ArgumentError, rank_metrics
from ranking_plugins.compare import (
    adjust_p_values,
    bootstrap_interval,
    bootstrap_test,
    compare,
    effect_size,
    paired_t_test,
    paired_values,
    randomization_test,
    t_interval,
    wilcoxon_test,
)

stats = pytest.importorskip("scipy.stats")


def discrete_systems(queries: int, systems: int, seed: int) -> torch.Tensor:
    """Per-query values on a grid of 0.1 (like precision@10): many ties and zero differences."""
    generator = torch.Generator().manual_seed(seed)
    base = torch.randint(0, 11, (queries, 1), generator=generator)
    shift = torch.randint(-2, 4, (queries, systems), generator=generator)
    return ((base + shift).clamp(0, 10) / 10).to(torch.float64)


def continuous_differences(queries: int, columns: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(queries, columns, generator=generator, dtype=torch.float64) * 0.2 + 0.05


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_t_test_and_interval_equal_scipy(seed: int) -> None:
    d = continuous_differences(30, 3, seed)
    a = torch.rand(30, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    p = paired_t_test(d)
    low, high = t_interval(d, 0.9)
    for c in range(3):
        b = (a + d[:, c]).numpy()
        result = stats.ttest_rel(b, a.numpy())
        assert p[c].item() == pytest.approx(result.pvalue, abs=1e-10)
        interval = result.confidence_interval(0.9)
        assert low[c].item() == pytest.approx(interval.low, abs=1e-10)
        assert high[c].item() == pytest.approx(interval.high, abs=1e-10)


def test_wilcoxon_equals_scipy_with_ties_and_zeros() -> None:
    values = discrete_systems(40, 3, 5)
    d = values[:, 1:] - values[:, :1]
    assert bool((d == 0).any())
    p = wilcoxon_test(d)
    for c in range(2):
        expected = stats.wilcoxon(values[:, c + 1].numpy(), values[:, 0].numpy()).pvalue
        assert p[c].item() == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("n", [5, 9, 12])
def test_exact_randomization_equals_scipy_permutation_test(n: int) -> None:
    values = discrete_systems(n, 3, n)
    d = values[:, 1:] - values[:, :1]
    p = randomization_test(d, permutations=2**n)
    for c in range(2):
        result = stats.permutation_test(
            (values[:, c + 1].numpy(), values[:, 0].numpy()),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            vectorized=True,
            n_resamples=np.inf,
        )
        assert p[c].item() == pytest.approx(result.pvalue, abs=1e-10)


def test_sampled_randomization_counts_every_flip_like_a_brute_force_count() -> None:
    values = discrete_systems(25, 4, 3)
    d = values[:, 1:] - values[:, :1]
    signs = torch.where(
        torch.rand(500, 25, generator=torch.Generator().manual_seed(4)) < 0.5, -1, 1
    )
    p = randomization_test(d, signs=signs)
    x, s = d.numpy(), signs.numpy()
    for c in range(3):
        observed = abs(x[:, c].sum())
        count = sum(
            abs((row * x[:, c]).sum()) >= observed - 1e-12 for row in s
        )  # brute force, row by row
        assert p[c].item() == count / 500


def test_seeded_randomization_is_reproducible_and_near_the_exact_value() -> None:
    values = discrete_systems(16, 2, 9)
    d = values[:, 1:] - values[:, :1]
    exact = randomization_test(d, permutations=2**16).item()
    sampled = randomization_test(d, permutations=20_000, seed=7)
    assert torch.equal(sampled, randomization_test(d, permutations=20_000, seed=7))
    assert not torch.equal(sampled, randomization_test(d, permutations=20_000, seed=8))
    # the sampled p is binomial around the exact one: within 5 standard errors
    assert abs(sampled.item() - exact) < 5 * (exact * (1 - exact) / 20_000) ** 0.5 + 1e-4


def test_bootstrap_interval_equals_scipy_with_the_same_resamples() -> None:
    d = continuous_differences(20, 2, 11)
    drawn: list[np.ndarray] = []

    def mean_of_indices(i: np.ndarray, axis: int) -> np.ndarray:
        if i.ndim == 2:
            drawn.append(i.astype(np.int64))
        return np.mean(d[:, 0].numpy()[i.astype(np.int64)], axis=axis)

    result = stats.bootstrap(
        (np.arange(20.0),),
        mean_of_indices,
        vectorized=True,
        n_resamples=999,
        method="percentile",
        confidence_level=0.9,
        rng=np.random.default_rng(3),
    )
    indices = torch.from_numpy(np.concatenate(drawn))
    assert indices.shape == (999, 20)
    low, high = bootstrap_interval(d, 0.9, indices=indices)
    assert low[0].item() == pytest.approx(result.confidence_interval.low, abs=1e-10)
    assert high[0].item() == pytest.approx(result.confidence_interval.high, abs=1e-10)


def test_bootstrap_test_finds_a_clear_difference_and_not_noise() -> None:
    d = continuous_differences(50, 1, 2) + 0.1
    assert bootstrap_test(d).item() < 0.01
    noise = d - d.mean()
    assert bootstrap_test(noise).item() > 0.5


def test_effect_size_is_cohens_d_of_the_differences() -> None:
    d = continuous_differences(15, 2, 1)
    x = d.numpy()
    expected = x.mean(0) / x.std(0, ddof=1)
    assert effect_size(d).numpy() == pytest.approx(expected, abs=1e-12)


def test_holm_and_bonferroni_by_their_definitions() -> None:
    p = torch.tensor([0.04, 0.001, 0.03, 0.2, 0.01], dtype=torch.float64)
    m = len(p)
    assert adjust_p_values(p, "bonferroni").tolist() == pytest.approx(
        [min(1.0, m * v) for v in p.tolist()]
    )
    order = sorted(range(m), key=lambda i: p[i].item())
    holm = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i].item()))
        holm[i] = running
    assert adjust_p_values(p, "holm").tolist() == pytest.approx(holm)
    assert torch.equal(adjust_p_values(p, "none"), p)


def test_t_test_p_values_equal_ranx_compare() -> None:
    """The same runs: ranx.compare's p-values, and ours on this package's own per-query values."""
    ranx = pytest.importorskip("ranx")
    generator = torch.Generator().manual_seed(0)
    grades = torch.randint(0, 3, (25, 12), generator=generator)
    grades[:, 8:] = 0  # d8..d11 are not judged
    grades[:, 0] = 2  # every query has a relevant document
    scores = [torch.rand(25, 12, generator=generator, dtype=torch.float64) for _ in range(3)]
    qrels = {f"q{q:02d}": {f"d{i}": int(grades[q, i]) for i in range(8)} for q in range(25)}
    names = ["a", "b", "c"]
    runs = [
        ranx.Run(
            {f"q{q:02d}": {f"d{i}": float(s[q, i]) for i in range(12)} for q in range(25)},
            name=name,
        )
        for s, name in zip(scores, names)
    ]
    report = ranx.compare(ranx.Qrels(qrels), runs, metrics=["ndcg@5"], stat_test="student")
    per_query = {
        name: rank_metrics(s, grades, "ndcg", 5, reduction="none", gain="linear")["ndcg@5"]
        for s, name in zip(scores, names)
    }
    for run, name in zip(runs, names):  # ranx's ndcg is Järvelin's: linear gain
        theirs = ranx.evaluate(ranx.Qrels(qrels), run, "ndcg@5", return_mean=False)
        assert per_query[name].numpy() == pytest.approx(theirs, abs=1e-12)
    ours = compare(per_query, test="t", correction="none")
    assert len(ours.rows) == 3
    for row in ours.rows:
        theirs = report.comparisons[frozenset([row.system, row.baseline])]["ndcg@5"]["p_value"]
        assert row.p_value == pytest.approx(theirs, abs=1e-10)


def test_missing_scipy_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    d = continuous_differences(10, 1, 0)
    with pytest.raises(ImportError, match=r"ranking-plugins\[stats\]"):
        paired_t_test(d)
    assert randomization_test(d).shape == (1,)  # torch only


def test_compare_takes_rank_metrics_dicts_aligned_by_query_id() -> None:
    generator = torch.Generator().manual_seed(1)
    target = torch.randint(0, 2, (12, 10), generator=generator)
    target[:, 0] = 1
    a = rank_metrics(
        torch.rand(12, 10, generator=generator), target, ["ndcg", "mrr"], 5, reduction="none"
    )
    b = rank_metrics(
        torch.rand(12, 10, generator=generator), target, ["ndcg", "mrr"], 5, reduction="none"
    )
    ids = [f"q{i}" for i in range(12)]
    order = torch.randperm(12, generator=generator)
    shuffled = {key: value[order] for key, value in b.items()}
    report = compare(
        {"a": a, "b": shuffled},
        query_ids={"a": ids, "b": [ids[i] for i in order.tolist()]},
        test="t",
    )
    plain = compare({"a": a, "b": b}, test="t")
    assert [r.metric for r in report.rows] == ["ndcg@5", "mrr@5"]
    for mine, reference in zip(report.rows, plain.rows):
        assert mine.p_value == reference.p_value
        assert mine.difference == pytest.approx(
            (b[mine.metric] - a[mine.metric]).mean().item(), abs=1e-15
        )


def test_baseline_and_corrections_in_compare() -> None:
    values = discrete_systems(30, 4, 8)
    systems = {f"s{i}": values[:, i] for i in range(4)}
    report = compare(systems, baseline="s2", test="randomization", correction="bonferroni")
    assert [(r.baseline, r.system) for r in report.rows] == [
        ("s2", "s0"),
        ("s2", "s1"),
        ("s2", "s3"),
    ]
    for row in report.rows:
        assert row.adjusted_p_value == pytest.approx(min(1.0, 3 * row.p_value))
        assert row.significant == (row.adjusted_p_value < 0.05)
    pairs = compare(systems, test="t")
    assert [(r.baseline, r.system) for r in pairs.rows] == list(itertools.combinations(systems, 2))


def test_identical_systems_have_p_one() -> None:
    values = discrete_systems(10, 1, 0)[:, 0]
    for test in ("t", "wilcoxon", "randomization", "bootstrap"):
        row = compare({"a": values, "b": values.clone()}, test=test).rows[0]
        assert (row.p_value, row.difference, row.effect_size) == (1.0, 0.0, 0.0)


def test_empty_queries_follow_empty_target_action() -> None:
    a = torch.tensor([0.5, float("nan"), 0.2, 0.9, 0.4], dtype=torch.float64)
    b = torch.tensor([0.7, float("nan"), 0.1, 1.0, 0.6], dtype=torch.float64)
    ids = ["q1", "q2", "q3", "q4", "q5"]
    skipped = compare({"a": a, "b": b}, query_ids=ids, test="t")
    assert skipped.dropped_queries == ["q2"] and skipped.queries == 4
    keep = torch.tensor([0, 2, 3, 4])
    assert skipped.rows[0].p_value == pytest.approx(
        stats.ttest_rel(b[keep].numpy(), a[keep].numpy()).pvalue, abs=1e-12
    )
    neg = compare({"a": a, "b": b}, query_ids=ids, test="t", empty_target_action="neg")
    assert neg.queries == 5 and neg.rows[0].baseline_mean == pytest.approx(2.0 / 5)
    with pytest.raises(ValueError, match="'q2'"):
        compare({"a": a, "b": b}, query_ids=ids, empty_target_action="error")


# --------------------------------------------------------------------------- bad input


def test_one_system_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least 2 systems"):
        compare({"a": torch.rand(5, dtype=torch.float64)})


def test_unequal_query_sets_name_the_missing_queries() -> None:
    a, b = torch.rand(3, dtype=torch.float64), torch.rand(3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"'q3' of 'a' missing from 'b'.*'q4' of 'b' missing"):
        compare({"a": a, "b": b}, query_ids={"a": ["q1", "q2", "q3"], "b": ["q1", "q2", "q4"]})
    with pytest.raises(ValueError, match="'a' has 3 queries and 'b' has 4"):
        compare({"a": a, "b": torch.rand(4, dtype=torch.float64)})


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_alpha_outside_zero_one_is_an_error(alpha: float) -> None:
    values = torch.rand(5, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="`alpha` must be a number in \\(0, 1\\)"):
        compare({"a": values[:, 0], "b": values[:, 1]}, alpha=alpha)


@pytest.mark.parametrize("count", [0, -3, 2.5])
def test_zero_permutations_is_an_error(count: object) -> None:
    values = torch.rand(5, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="`permutations` must be a positive int"):
        compare({"a": values[:, 0], "b": values[:, 1]}, test="randomization", permutations=count)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`permutations` must be a positive int"):
        randomization_test(values, permutations=count)  # type: ignore[arg-type]


def test_other_bad_arguments() -> None:
    values = torch.rand(5, 2, dtype=torch.float64)
    systems = {"a": values[:, 0], "b": values[:, 1]}
    with pytest.raises(ValueError, match="`test` must be one of"):
        compare(systems, test="anova")
    with pytest.raises(ValueError, match="`baseline` must be one of the systems"):
        compare(systems, baseline="c")
    with pytest.raises(ValueError, match="`correction` must be one of"):
        compare(systems, correction="fdr")
    with pytest.raises(ValueError, match="shape \\(Q,\\)"):
        paired_values({"a": values, "b": values})
    with pytest.raises(ValueError, match="the same ones"):
        paired_values({"a": {"ndcg": values[:, 0]}, "b": {"mrr": values[:, 1]}})


def test_exports() -> None:
    values = discrete_systems(20, 3, 4)
    report = compare(
        {"bm25": values[:, 0], "dense": values[:, 1], "my_model": values[:, 2]}, baseline="bm25"
    )
    table = report.to_table()
    assert table.splitlines()[0].split()[:3] == ["metric", "system", "baseline"]
    assert len(report.to_csv().splitlines()) == 3
    document = report.to_dict()
    assert document["rows"][0]["p_value"] == report.rows[0].p_value
    latex = report.to_latex()
    assert "\\toprule" in latex and "my\\_model" in latex


def test_float32_products_are_rechecked_where_rounding_could_change_the_count() -> None:
    # flipping the tiny differences changes the sum by 2e-9: invisible in float32
    # next to 1.0, visible in float64 (and to scipy)
    d = torch.tensor([1.0, 1e-9, -1e-9], dtype=torch.float64)
    expected = stats.permutation_test(
        (d.numpy(),),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=np.inf,
    ).pvalue
    assert randomization_test(d).item() == pytest.approx(expected, abs=1e-12) == 0.75


# --------------------------------------------------------------------------- issue 24


@pytest.mark.parametrize("queries", [0, 1])
def test_fewer_than_two_queries_is_a_clear_error(queries: int) -> None:
    """Issue 24 row 7: zero queries raised an IndexError from the alignment."""
    values = torch.zeros(queries, dtype=torch.float64)
    match = "at least 2 queries, got 0; there are no queries" if queries == 0 else "got 1$"
    with pytest.raises(ValueError, match=match):
        compare({"a": values, "b": values.clone()})
    with pytest.raises(ValueError, match=match):
        compare(
            {"a": {"mrr": values}, "b": {"mrr": values.clone()}},
            query_ids={"a": [str(q) for q in range(queries)], "b": list(map(str, range(queries)))},
        )
    with pytest.raises(ValueError, match="no metric values"):
        compare({"a": {}, "b": {}})


def test_neg_fills_an_empty_query_as_the_kernel_does() -> None:
    """Issue 24 row 8: "neg" filled fall-out's NaN with 0, its best value; the kernel's
    empty_neg (its worst value, 1) decides, so compare's fill equals rank_metrics' own."""
    scores = torch.tensor(
        [[0.9, 0.8, 0.7, 0.6], [0.1, 0.2, 0.3, 0.4], [0.5, 0.9, 0.1, 0.3]], dtype=torch.float64
    )
    target = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0]])  # query 1 is empty
    keys = ["fall_out", "ndcg"]
    systems = {
        name: rank_metrics(
            sign * scores, target, keys, 2, reduction="none", empty_target_action="skip"
        )
        for name, sign in (("a", 1.0), ("b", -1.0))
    }
    assert np.isnan(float(systems["a"]["fall_out@2"][1]))  # skipped as empty
    for action in ("neg", "pos"):
        report = compare(systems, empty_target_action=action)
        for name, sign in (("a", 1.0), ("b", -1.0)):
            counted = rank_metrics(sign * scores, target, keys, 2, empty_target_action=action)
            for key in ("fall_out@2", "ndcg@2"):
                assert report.means[key][name] == pytest.approx(float(counted[key]), abs=1e-12)
    neg = compare(systems, empty_target_action="neg")
    # queries 0 and 2: one of three non-relevant items in the top 2; 1: empty, 1 (not 0)
    assert neg.means["fall_out@2"]["a"] == pytest.approx((1 / 3 + 1.0 + 1 / 3) / 3)


@pytest.mark.parametrize("metric", ["fall_out@10", "mean_rank", "unj", "gini@5", "arp@10"])
def test_latex_and_table_read_the_direction_of_the_metric(metric: str) -> None:
    """Issue 24 row 9: for a lower-is-better metric the lower mean is bold and its system
    beats the other (the higher mean won both before)."""
    low = torch.tensor([0.1, 0.2, 0.1, 0.0, 0.2, 0.1, 0.1, 0.2], dtype=torch.float64)
    report = compare({"worse": {metric: low + 0.5}, "better": {metric: low}})
    assert report.higher_is_better == {metric: False}
    assert report.rows[0].significant
    cells = {line.split(" & ")[1]: line for line in report.to_latex().splitlines() if " & " in line}
    assert "\\textbf{" in cells["better"] and "$^{a}$" in cells["better"]
    assert "\\textbf{" not in cells["worse"] and "$^" not in cells["worse"]
    assert f"lower is better: {metric}" in report.to_table()
    assert "(the lowest for " in report.to_latex()
    # a higher-is-better metric (and a bare tensor, which names none) keeps the higher mean
    for values in ({"ndcg@10": low}, low):
        up = (
            {"worse": values, "better": {k: v + 0.5 for k, v in values.items()}}
            if isinstance(values, dict)
            else {"worse": values, "better": values + 0.5}
        )
        higher = compare(up)
        cells = {
            line.split(" & ")[1]: line for line in higher.to_latex().splitlines() if " & " in line
        }
        assert "\\textbf{" in cells["better"] and "$^{a}$" in cells["better"]
        assert "lower is better" not in higher.to_table()


# -- values by query id (issue 25): pytrec_eval's, ranx's and the runs API's results


def _by_id_systems(seed: int) -> tuple[list[str], torch.Tensor]:
    """Three systems' values on 15 queries, and the queries' ids (ints among them)."""
    values = torch.rand(15, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return [f"q{i}" for i in range(15)], values


def _shuffled(qids: list[str], column: torch.Tensor, seed: int) -> dict[str, float]:
    """``{qid: value}`` in a shuffled order: matching by position would pair wrong queries."""
    order = torch.randperm(len(qids), generator=torch.Generator().manual_seed(seed)).tolist()
    return {qids[i]: float(column[i]) for i in order}


@pytest.mark.parametrize("seed", [0, 1])
def test_qid_value_dicts_are_matched_by_id_and_equal_scipy(seed: int) -> None:
    qids, values = _by_id_systems(seed)
    systems = {name: _shuffled(qids, values[:, i], seed + i) for i, name in enumerate("abc")}
    report = compare(systems, test="t", baseline="a", correction="none")
    for row, column in zip(report.rows, (1, 2), strict=True):
        expected = stats.ttest_rel(values[:, column].numpy(), values[:, 0].numpy())
        assert row.system == "abc"[column] and row.metric == ""
        assert row.p_value == pytest.approx(expected.pvalue, rel=1e-12)
        assert row.difference == pytest.approx(float((values[:, column] - values[:, 0]).mean()))
    wilcoxon = compare(systems, test="wilcoxon", baseline="a", correction="none")
    expected_w = stats.wilcoxon(values[:, 1].numpy(), values[:, 0].numpy())
    assert wilcoxon.rows[0].p_value == pytest.approx(expected_w.pvalue, rel=1e-12)


def test_pytrec_eval_results_are_matched_by_id() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {str(q): {f"d{d}": (q + d) % 3 for d in range(8)} for q in range(10)}
    generator = torch.Generator().manual_seed(3)
    runs = [
        {q: {f"d{d}": float(s) for d, s in enumerate(torch.rand(8, generator=generator))}
         for q in qrels}
        for _ in range(2)
    ]  # fmt: skip
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5", "recip_rank"})
    a, b = (evaluator.evaluate(run) for run in runs)
    b = dict(reversed(list(b.items())))  # another query order
    report = compare({"a": a, "b": b}, correction="none")
    assert report.metrics == sorted(report.metrics, key=list(a["0"]).index)
    for row in report.rows:
        xs = np.array([a[q][row.metric] for q in qrels])
        ys = np.array([b[q][row.metric] for q in qrels])
        assert row.p_value == pytest.approx(stats.ttest_rel(ys, xs).pvalue, rel=1e-12)
    # the single measure of each, {qid: value}
    single = {
        name: {q: r["ndcg_cut_5"] for q, r in res.items()} for name, res in (("a", a), ("b", b))
    }
    assert (
        compare(single).rows[0].p_value == report.rows[report.metrics.index("ndcg_cut_5")].p_value
    )


def test_int_query_ids_equal_their_string_form() -> None:
    _, values = _by_id_systems(2)
    a = {i: float(values[i, 0]) for i in range(15)}  # int ids
    b = {str(i): float(values[i, 1]) for i in reversed(range(15))}
    row = compare({"a": a, "b": b}, correction="none").rows[0]
    expected = stats.ttest_rel(values[:, 1].numpy(), values[:, 0].numpy())
    assert row.p_value == pytest.approx(expected.pvalue, rel=1e-12)


def test_ranx_runs_are_matched_by_id() -> None:
    ranx = pytest.importorskip("ranx")
    qrels_dict = {f"q{q}": {f"d{d}": (q * d) % 3 for d in range(6)} for q in range(8)}
    generator = torch.Generator().manual_seed(4)
    runs = []
    for name in ("x", "y"):
        run_dict = {
            q: {f"d{d}": float(s) for d, s in enumerate(torch.rand(6, generator=generator))}
            for q in qrels_dict
        }
        run = ranx.Run(run_dict, name=name)
        ranx.evaluate(ranx.Qrels(qrels_dict), run, ["ndcg@3", "mrr"])
        runs.append(run)
    report = compare({"x": runs[0], "y": runs[1]}, correction="none")
    assert set(report.metrics) == {"ndcg@3", "mrr"}
    for row in report.rows:
        xs = np.array([runs[0].scores[row.metric][q] for q in qrels_dict])
        ys = np.array([runs[1].scores[row.metric][q] for q in qrels_dict])
        assert row.p_value == pytest.approx(stats.ttest_rel(ys, xs).pvalue, rel=1e-12)


def test_runs_results_are_matched_by_id_and_summaries_left_out() -> None:
    from ranking_plugins.runs.evaluation import Results

    qids, values = _by_id_systems(5)

    def results(column: int, order: list[int]) -> Results:
        per_query = {
            "map": values[order, column],
            "gm_map": torch.full((len(order),), float("nan"), dtype=torch.float64),
        }
        return Results([qids[i] for i in order], ["map", "gm_map"], per_query, {}, {}, {})

    a = results(0, list(range(15)))
    b = results(1, list(reversed(range(15))))
    report = compare({"a": a, "b": b}, correction="none")
    assert report.metrics == ["map"]  # gm_map: a summary, no per-query values
    expected = stats.ttest_rel(values[:, 1].numpy(), values[:, 0].numpy())
    assert report.rows[0].p_value == pytest.approx(expected.pvalue, rel=1e-12)


def test_a_query_missing_from_one_system_is_refused_naming_it() -> None:
    qids, values = _by_id_systems(6)
    a = _shuffled(qids, values[:, 0], 0)
    b = _shuffled(qids, values[:, 1], 1)
    del b["q7"]
    with pytest.raises(ValueError, match=r"'q7' of 'a' missing from 'b'.*trec_eval -c"):
        compare({"a": a, "b": b})


def test_nan_by_id_follows_empty_target_action() -> None:
    qids, values = _by_id_systems(7)
    a = _shuffled(qids, values[:, 0], 0)
    b = _shuffled(qids, values[:, 1], 1)
    b["q3"] = float("nan")
    report = compare({"a": a, "b": b}, correction="none")  # skip: paired, q3 left out
    assert report.dropped_queries == ["q3"] and report.queries == 14
    keep = [i for i in range(15) if i != 3]
    expected = stats.ttest_rel(values[keep, 1].numpy(), values[keep, 0].numpy())
    assert report.rows[0].p_value == pytest.approx(expected.pvalue, rel=1e-12)


@pytest.mark.parametrize(
    ("systems", "error", "message"),
    [
        (
            {"a": {"q1": 0.5}, "b": torch.tensor([0.5])},
            ValueError,
            "by query id but 'b' by position",
        ),
        (
            {"a": {"q1": 0.2, "q2": "high"}, "b": {"q1": 0.5, "q2": 0.1}},
            TypeError,
            r"system 'a': the value of query 'q2' is a str \('high'\), expected a number",
        ),
        (
            {"a": {"q1": {"map": "x"}}, "b": {"q1": {"map": 0.5}}},
            TypeError,
            "the value of query 'q1' for 'map' is a str",
        ),
        (
            {"a": {"q1": 0.5, "q2": {"map": 0.5}}, "b": {"q1": 0.5}},
            TypeError,
            "got a dict of dict and float values",
        ),
        (
            {"a": {"q1": {"map": 0.1}, "q2": {"P_5": 0.2}}, "b": {"q1": {"map": 0.5}}},
            ValueError,
            "query 'q2' has the measures",
        ),
        ({"a": {}, "b": {"q1": 0.5}}, ValueError, "'a' has no metric values"),
    ],
)
def test_bad_values_by_id_are_clear_errors(
    systems: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        compare(systems)


def test_query_ids_with_values_by_id_is_an_error() -> None:
    with pytest.raises(ArgumentError, match="`query_ids` must be None: the systems give their"):
        compare({"a": {"q1": 0.1, "q2": 0.2}, "b": {"q1": 0.3, "q2": 0.1}}, query_ids=["q1", "q2"])


# -- the Python API's results, repeated ids, argument errors


def _qrels_and_runs(queries: int = 12) -> tuple[dict[str, dict[str, int]], list[dict]]:
    """Qrels and two runs without tied scores (every tie policy gives pytrec_eval's order)."""
    generator = torch.Generator().manual_seed(11)
    qrels = {f"q{q}": {f"d{d}": (q + 2 * d) % 3 for d in range(8)} for q in range(queries)}
    runs = []
    for _ in range(2):
        runs.append(
            {
                q: {f"d{d}": float(s) for d, s in enumerate(torch.randperm(8, generator=generator))}
                for q in qrels
            }
        )
    return qrels, runs


def test_evaluate_run_results_are_compared_by_query_id() -> None:
    """``compare`` reads ``evaluate_run``'s RunResults (per-query values by query id) of
    several measures; pytrec_eval's own values, through scipy, are the oracle."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from ranking_plugins import evaluate_run

    qrels, (run_a, run_b) = _qrels_and_runs()
    measures = ["ndcg_cut_10", "map", "P_5", "gm_map"]  # results under the spelling asked
    a, b = (evaluate_run(qrels, run, measures) for run in (run_a, run_b))
    report = compare({"a": a, "b": b}, correction="none")
    assert report.metrics == ["ndcg_cut_10", "map", "P_5"]  # gm_map: a summary, left out
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map", "P.5"})
    ours, theirs = evaluator.evaluate(run_a), evaluator.evaluate(run_b)
    for row in report.rows:
        xs = np.array([ours[q][row.metric] for q in qrels])
        ys = np.array([theirs[q][row.metric] for q in qrels])
        assert row.p_value == pytest.approx(stats.ttest_rel(ys, xs).pvalue, rel=1e-9)
        assert row.difference == pytest.approx(float((ys - xs).mean()), abs=1e-12)
    # RunResults beside pytrec_eval's dict: the same keys, matched by id
    mixed = compare({"a": a, "b": dict(reversed(list(theirs.items())))}, correction="none")
    for row, expected in zip(mixed.rows, report.rows, strict=True):
        assert row.p_value == pytest.approx(expected.p_value, rel=1e-9)


def test_evaluate_run_results_missing_a_query_are_refused_naming_it() -> None:
    from ranking_plugins import evaluate_run

    qrels, (run_a, run_b) = _qrels_and_runs()
    del run_b["q3"]  # evaluated without it (unretrieved_queries="skip")
    a, b = (evaluate_run(qrels, run, ["map"]) for run in (run_a, run_b))
    with pytest.raises(ArgumentError, match=r"'q3' of 'a' missing from 'b'"):
        compare({"a": a, "b": b})


def test_a_repeated_query_id_is_named_with_its_system() -> None:
    values = torch.rand(3, dtype=torch.float64)
    with pytest.raises(
        ArgumentError, match=r"system 'a' has '1' as 1 and as '1' \(an int id equals"
    ):
        compare({"a": {1: 0.5, "1": 0.1, "2": 0.3}, "b": {"1": 0.5, "2": 0.2, "3": 0.1}})
    with pytest.raises(ArgumentError, match=r"`query_ids` .*system 'b' has 'q2' twice"):
        compare(
            {"a": values, "b": values.clone()},
            query_ids={"a": ["q1", "q2", "q3"], "b": ["q1", "q2", "q2"]},
        )


@pytest.mark.parametrize(
    ("keywords", "argument"),
    [
        ({"alpha": "x"}, "alpha"),
        ({"confidence": 1.5}, "confidence"),
        ({"permutations": 0}, "permutations"),
        ({"baseline": "c"}, "baseline"),
        ({"query_ids": {"a": ["q1", "q2", "q3"]}}, "query_ids"),
    ],
)
def test_bad_arguments_raise_the_packages_argument_error(
    keywords: dict[str, object], argument: str
) -> None:
    values = torch.rand(3, 2, dtype=torch.float64)
    with pytest.raises(ArgumentError) as raised:
        compare({"a": values[:, 0], "b": values[:, 1]}, **keywords)  # type: ignore[arg-type]
    assert raised.value.argument == argument and isinstance(raised.value, ValueError)


def test_bad_systems_and_differences_raise_the_packages_argument_error() -> None:
    values = torch.rand(3, 2, dtype=torch.float64)
    for systems in ({"a": values[:, 0]}, {"a": values, "b": values}):
        with pytest.raises(ArgumentError, match="systems"):
            compare(systems)
    with pytest.raises(ArgumentError) as raised:
        paired_t_test(torch.tensor([0.1, float("nan")], dtype=torch.float64))
    assert raised.value.argument == "differences"
