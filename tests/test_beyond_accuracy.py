"""The metrics of item exposure (issue 14): coverage, gini, entropy, personalisation,
novelty, arp, tail_share and diversity.

Checked against the brute-force reference (every order of every tie group, for
every policy), against torch_geometric's LinkPred* metrics on tie-free inputs,
and against RecBole's GiniIndex and TailPercentage re-implemented from their
documented formulas.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from reference import CATALOGUE_EXPOSURE, PER_QUERY_EXPOSURE, TIES, reference_exposure

from ranking_plugins import EmbeddingScores, rank_metrics
from ranking_plugins.functional import coverage, diversity, gini, personalisation
from ranking_plugins.kernel import host_reads

EXPOSURE_METRICS = [*CATALOGUE_EXPOSURE, *PER_QUERY_EXPOSURE]


def _problem(seed: int, num_queries: int = 3, num_items: int = 7, levels: int = 4):
    """Integer scores in few levels (many ties), grades, a mask, and item inputs."""
    g = torch.Generator().manual_seed(seed)
    while True:
        scores = torch.randint(0, levels, (num_queries, num_items), generator=g).double()
        # the joint orders of the reference stay few enough to enumerate
        joint = 1
        for row in scores:
            for value in row.unique():
                joint *= math.factorial(int((row == value).sum()))
        if joint <= 3000:
            break
    grades = torch.randint(0, 3, (num_queries, num_items), generator=g)
    mask = torch.rand(num_queries, num_items, generator=g) > 0.15
    popularity = torch.randint(1, 20, (num_items,), generator=g).double()
    features = torch.randn(num_items, 3, generator=g, dtype=torch.float64)
    features[2] = 0.0  # a zero row: similar to nothing
    categories = torch.randint(0, 3, (num_items,), generator=g)
    tail = popularity < 8
    return scores, grades, mask, popularity, tail, features, categories


def _rows(scores, grades, mask):
    return [
        (s.tolist(), g.tolist(), (m.tolist() if mask is not None else [True] * len(s)))
        for s, g, m in zip(scores, grades, mask if mask is not None else scores, strict=True)
    ]


def _close(got: torch.Tensor, expected: float | None) -> bool:
    if expected is None or (isinstance(expected, float) and math.isnan(expected)):
        return bool(torch.isnan(got))
    return math.isclose(float(got), expected, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("ks", [(1, 2, 4), (3, 7)])
def test_every_policy_matches_brute_force(
    ties: str, seed: int, use_mask: bool, ks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(1, 2, 4) ranks the top 4 of 7 (a tie group may go on past the list);
    (3, 7) sorts whole rows. Odd seeds take the accelerator paths (every row's
    cut group completed from its whole row)."""
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", seed % 2 == 1)
    scores, grades, mask, popularity, tail, features, categories = _problem(seed)
    mask = mask if use_mask else None
    for similarity in ("features", "categories"):
        item_kw = {"item_popularity": popularity, "tail_items": tail}
        ref_items = {"popularity": popularity.tolist(), "tail": tail.tolist()}
        if similarity == "features":
            item_kw["item_features"] = features
            ref_items["features"] = features.tolist()
        else:
            item_kw["item_categories"] = categories
            ref_items["categories"] = categories.tolist()
        expected = reference_exposure(_rows(scores, grades, mask), ks, ties=ties, items=ref_items)
        per_query = rank_metrics(
            scores,
            grades,
            list(PER_QUERY_EXPOSURE),
            list(ks),
            mask=mask,
            ties=ties,
            reduction="none",
            **item_kw,
        )
        for key, values in per_query.items():
            for q, value in enumerate(values):
                assert _close(value, expected[key][q]), (key, q, float(value), expected[key][q])
        means = rank_metrics(
            scores, grades, EXPOSURE_METRICS, list(ks), mask=mask, ties=ties, **item_kw
        )
        for key, value in means.items():
            if key.split("@")[0] in CATALOGUE_EXPOSURE:
                assert _close(value, expected[key]), (key, float(value), expected[key])
            else:
                defined = [v for v in expected[key] if v is not None]
                assert _close(value, sum(defined) / len(defined) if defined else None), key


@pytest.mark.parametrize("ties", TIES)
def test_item_index_targets_give_the_dense_numbers(ties: str) -> None:
    """One relevant id per query would be counted, not ranked: exposure ranks it."""
    scores, _, _, popularity, tail, features, _ = _problem(11)
    ids = torch.tensor([0, 3, 5])
    dense = torch.zeros_like(scores, dtype=torch.long).scatter_(1, ids[:, None], 1)
    kw = {"item_popularity": popularity, "tail_items": tail, "item_features": features}
    from_ids = rank_metrics(scores, ids, [*EXPOSURE_METRICS, "ndcg"], [1, 3], ties=ties, **kw)
    from_dense = rank_metrics(scores, dense, [*EXPOSURE_METRICS, "ndcg"], [1, 3], ties=ties, **kw)
    for key in from_dense:
        assert torch.allclose(from_ids[key], from_dense[key], equal_nan=True), key


def test_accuracy_numbers_do_not_change_when_exposure_is_asked() -> None:
    scores, grades, mask, popularity, *_ = _problem(5)
    for ties in TIES:
        alone = rank_metrics(scores, grades, ["ndcg", "map", "mrr"], [1, 4], mask=mask, ties=ties)
        beside = rank_metrics(
            scores,
            grades,
            ["ndcg", "map", "mrr", "coverage", "arp"],
            [1, 4],
            mask=mask,
            ties=ties,
            item_popularity=popularity,
        )
        for key, value in alone.items():
            assert torch.equal(value, beside[key]), key


# ----------------------------------------------------------------------------- PyG


def _tie_free(seed: int, num_queries: int = 17, num_items: int = 40):
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(num_queries, num_items, generator=g, dtype=torch.float64)
    target = torch.randint(0, 2, (num_queries, num_items), generator=g)
    return scores, target, g


@pytest.mark.parametrize("k", [1, 5, 12])
def test_against_torch_geometric(k: int) -> None:
    metrics = pytest.importorskip("torch_geometric.metrics")
    scores, target, g = _tie_free(k)
    num_items = scores.shape[1]
    popularity = torch.randint(0, 50, (num_items,), generator=g).double()
    category = torch.randint(0, 4, (num_items,), generator=g)
    top = scores.topk(k, dim=1).indices
    edges = target.nonzero().T  # the relevant (query, item) pairs: unused by these four

    def pyg(metric) -> float:
        metric.update(top, edges)
        return float(metric.compute())

    ours = rank_metrics(
        scores,
        target,
        ["coverage", "personalisation", "arp", "diversity"],
        k,
        item_popularity=popularity,
        item_categories=category,
    )
    assert math.isclose(  # PyG computes in float32
        float(ours[f"coverage@{k}"]), pyg(metrics.LinkPredCoverage(k, num_items)), rel_tol=1e-6
    )
    assert math.isclose(
        float(ours[f"personalisation@{k}"]),
        pyg(metrics.LinkPredPersonalization(k, max_src_nodes=None)),
        rel_tol=1e-6,
    )
    assert math.isclose(
        float(ours[f"arp@{k}"]),
        pyg(metrics.LinkPredAveragePopularity(k, popularity)),
        rel_tol=1e-6,
    )
    if k > 1:  # PyG divides by k (k - 1)
        assert math.isclose(
            float(ours[f"diversity@{k}"]),
            pyg(metrics.LinkPredDiversity(k, category)),
            rel_tol=1e-6,
        )


# ------------------------------------------------------------------------- RecBole


def _recbole_gini(item_matrix: list[list[int]], num_items: int, k: int) -> float:
    """RecBole's GiniIndex (recbole/evaluator/metrics.py), its documented formula:
    sort the recommendation counts of every item ascending (0 for items never
    recommended), gini = Σ_j (2j - n - 1) count_j / (n · total), j = 1..n."""
    counts = {i: 0 for i in range(num_items)}
    for row in item_matrix:
        for i in row[:k]:
            counts[i] += 1
    ordered = sorted(counts.values())
    total = len(item_matrix) * k
    return sum((2 * j - num_items - 1) * c for j, c in enumerate(ordered, 1)) / (num_items * total)


def _recbole_tail_percentage(item_matrix: list[list[int]], tail: set[int], k: int) -> float:
    """RecBole's TailPercentage: per user, the share of the top k in the tail, averaged."""
    return sum(sum(1 for i in row[:k] if i in tail) / k for row in item_matrix) / len(item_matrix)


@pytest.mark.parametrize("k", [1, 4, 10])
def test_against_recbole_formulas(k: int) -> None:
    scores, target, g = _tie_free(100 + k)
    num_items = scores.shape[1]
    tail = torch.rand(num_items, generator=g) < 0.3
    item_matrix = scores.topk(k, dim=1).indices.tolist()
    ours = rank_metrics(scores, target, ["gini", "tail_share"], k, tail_items=tail)
    assert math.isclose(float(ours[f"gini@{k}"]), _recbole_gini(item_matrix, num_items, k))
    tail_set = set(tail.nonzero().flatten().tolist())
    assert math.isclose(
        float(ours[f"tail_share@{k}"]), _recbole_tail_percentage(item_matrix, tail_set, k)
    )


# --------------------------------------------------------------------- closed forms


def test_personalisation_counts_every_pair_without_visiting_them() -> None:
    """Against the mean over all Q (Q - 1) / 2 pairs, with lists shorter than k (a mask)."""
    scores, target, g = _tie_free(7, num_queries=9, num_items=12)
    mask = torch.rand(scores.shape, generator=g) > 0.5
    k = 4
    masked = scores.masked_fill(~mask, -math.inf)
    tops = [{int(i) for i in row.topk(k).indices if mask[q, i]} for q, row in enumerate(masked)]
    pairs = list(itertools.combinations(tops, 2))
    expected = 1 - sum(len(a & b) / k for a, b in pairs) / len(pairs)
    got = personalisation(scores, target, top_k=k, mask=mask)
    assert math.isclose(float(got), expected)


def test_coverage_of_a_constant_model_is_its_expectation() -> None:
    """Every item tied: each query's top 1 is uniform over N, so E[coverage] = 1 - (1 - 1/N)^Q."""
    q, n = 5, 4
    scores = torch.zeros(q, n)
    target = torch.ones(q, n, dtype=torch.long)
    got = coverage(scores, target, top_k=1)
    assert math.isclose(float(got), 1 - (1 - 1 / n) ** q)
    assert math.isclose(float(gini(scores, target, top_k=1)), 0.0, abs_tol=1e-15)


# ------------------------------------------------------------------------ bad input


def test_bad_item_inputs_are_clear_errors() -> None:
    scores, target, _ = _tie_free(3, num_queries=4, num_items=6)
    with pytest.raises(
        ValueError, match=r"`item_popularity`: 5 items given, but the scores rank 6"
    ):
        rank_metrics(scores, target, ["arp"], 2, item_popularity=torch.ones(5))
    with pytest.raises(ValueError, match="`item_popularity` must be finite and non-negative"):
        rank_metrics(scores, target, ["arp"], 2, item_popularity=-torch.ones(6))
    with pytest.raises(ValueError, match=r"`item_features`: 5 items given, but the scores rank 6"):
        diversity(scores, target, top_k=2, item_features=torch.randn(5, 3))
    with pytest.raises(ValueError, match="`item_features` must be a 2-D floating-point"):
        diversity(scores, target, top_k=2, item_features=torch.randn(6))
    with pytest.raises(ValueError, match="`tail_items` must be a 1-D bool tensor"):
        rank_metrics(scores, target, ["tail_share"], 2, tail_items=torch.ones(6))
    with pytest.raises(ValueError, match="`item_categories` must be a 1-D integer"):
        diversity(scores, target, top_k=2, item_categories=torch.ones(6))
    with pytest.raises(ValueError, match="the same N items"):
        rank_metrics(
            scores,
            target,
            ["arp"],
            2,
            item_popularity=torch.ones(6),
            tail_items=torch.ones(5, dtype=torch.bool),
        )
    with pytest.raises(ValueError, match=r"novelty needs `item_popularity` > 0"):
        rank_metrics(scores, target, ["novelty"], 2, item_popularity=torch.arange(6.0))
    with pytest.raises(ValueError, match=r"arp needs `item_popularity`"):
        rank_metrics(scores, target, ["arp"], 2)
    with pytest.raises(ValueError, match=r"diversity needs `item_features` or `item_categories`"):
        diversity(scores, target, top_k=2)
    with pytest.raises(ValueError, match="not both"):
        diversity(
            scores,
            target,
            top_k=2,
            item_features=torch.randn(6, 2),
            item_categories=torch.zeros(6, dtype=torch.long),
        )


def test_catalogue_metrics_have_no_per_query_value() -> None:
    scores, target, _ = _tie_free(4, num_queries=4, num_items=6)
    with pytest.raises(ValueError, match=r"`reduction='none'`: coverage, gini is|are catalogue"):
        rank_metrics(scores, target, ["ndcg", "coverage", "gini"], 2, reduction="none")
    with pytest.raises(ValueError, match="`reduction='none'`: personalisation is a catalogue"):
        personalisation(scores, target, top_k=2, reduction="none")


def test_exposure_needs_a_cutoff_and_catalogue_items() -> None:
    scores, target, _ = _tie_free(5, num_queries=4, num_items=6)
    with pytest.raises(ValueError, match="`top_k`: coverage is read at a cutoff"):
        coverage(scores, target, top_k=None)
    flat_scores, flat_target = scores.flatten(), target.flatten()
    indexes = torch.arange(4).repeat_interleave(6)
    with pytest.raises(ValueError, match=r"grouped\s+layout \(`indexes`\) has none"):
        coverage(flat_scores, flat_target, top_k=2, indexes=indexes)


# ------------------------------------------------------------------ EmbeddingScores


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("chunk_size", [3, 64])
def test_embedding_scores_give_the_matrix_numbers(ties: str, chunk_size: int) -> None:
    """Integer embeddings (exact dot products, many ties, cut groups across chunks),
    excluded items: the same numbers as the (Q, N) matrix with a mask."""
    from ranking_plugins import EmbeddingScores

    g = torch.Generator().manual_seed(21)
    q, n, d = 6, 11, 2
    query_emb = torch.randint(0, 3, (q, d), generator=g)
    item_emb = torch.randint(0, 2, (n, d), generator=g)
    exclude = torch.randint(-1, n, (q, 2), generator=g)
    target = torch.randint(0, n, (q, 2), generator=g)
    matrix = query_emb @ item_emb.T
    mask = torch.ones(q, n, dtype=torch.bool)
    rows = torch.arange(q).unsqueeze(1).expand_as(exclude)
    mask[rows[exclude >= 0], exclude[exclude >= 0]] = False
    popularity = torch.randint(1, 9, (n,), generator=g).double()
    kw = {
        "item_popularity": popularity,
        "tail_items": popularity < 4,
        "item_features": torch.randn(n, 3, generator=g),
        "ties": ties,
    }
    names = [*EXPOSURE_METRICS, "ndcg", "hit_rate"]
    scores = EmbeddingScores(query_emb, item_emb, exclude=exclude, chunk_size=chunk_size)
    for ks in ([1, 3, 4], [2, 11, 12]):
        got = rank_metrics(scores, target, names, ks, **kw)
        expected = rank_metrics(matrix, target, names, ks, mask=mask, **kw)
        for key, value in expected.items():
            assert torch.allclose(got[key], value, rtol=1e-12, atol=1e-12, equal_nan=True), key


def test_nothing_ranked_leaves_the_distribution_metrics_undefined() -> None:
    """Every item masked: no item is shown, so gini, entropy and arp are NaN, coverage 0."""
    scores = torch.rand(3, 5, dtype=torch.float64)
    mask = torch.zeros(3, 5, dtype=torch.bool)
    got = rank_metrics(
        scores, torch.ones(3, 5), ["coverage", "gini", "entropy", "arp"], 2,
        mask=mask, item_popularity=torch.ones(5),
    )  # fmt: skip
    assert float(got["coverage@2"]) == 0.0
    assert all(math.isnan(float(got[k])) for k in ("gini@2", "entropy@2", "arp@2"))


# ------------------------------------------- found by the fuzzer (test_fuzz.py::test_exposure)


def test_novelty_of_a_share_below_the_float64_range_is_finite() -> None:
    """An item of popularity 1e-300 among 1e300: its share 1e-600 is below float64,
    but -log2 of it is log2(Σ) - log2(p) ≈ 1993.2 bits, not inf."""
    popularity = torch.tensor([1e-300, 1e300], dtype=torch.float64)
    preds = torch.tensor([[2.0, 1.0], [1.0, 2.0]])
    got = rank_metrics(preds, torch.zeros(2, 2), ["novelty"], 1, item_popularity=popularity)
    total = 1e300 + 1e-300  # == 1e300 in float64
    expected = ((math.log2(total) - math.log2(1e-300)) + (math.log2(total) - math.log2(1e300))) / 2
    assert math.isclose(float(got["novelty@1"]), expected, rel_tol=1e-12)


def test_diversity_of_features_whose_squares_leave_float64() -> None:
    """Rows of 1e200 (squares overflow) and 5e-324 (squares underflow): their cosines
    are those of the same directions, not 0 (a norm of inf or of 0)."""
    features = torch.tensor([[1e200, 0.0], [1e200, 1e200], [5e-324, 0.0]], dtype=torch.float64)
    preds = torch.tensor([[3.0, 2.0, 1.0], [3.0, 1.0, 2.0]])
    got = rank_metrics(
        preds, torch.zeros(2, 3), ["diversity"], 2, reduction="none", item_features=features
    )
    # top 2: items {0, 1} (cosine 1/√2), items {0, 2} (cosine 1)
    expected = torch.tensor([1 - 1 / math.sqrt(2), 0.0], dtype=torch.float64)
    torch.testing.assert_close(got["diversity@2"], expected, rtol=1e-12, atol=1e-12)


def test_per_query_exposure_of_an_empty_catalogue_is_undefined() -> None:
    """N = 0: no top k holds an item, so novelty, arp and tail_share are undefined (NaN,
    as with every item masked), not an IndexError."""
    kw = {
        "item_popularity": torch.ones(0),
        "tail_items": torch.ones(0, dtype=torch.bool),
        "item_categories": torch.zeros(0, dtype=torch.long),
    }
    names = ["novelty", "arp", "tail_share", "diversity", "gini", "entropy"]
    got = rank_metrics(torch.zeros(2, 0), torch.zeros(2, 0), names, [1, 2], **kw)
    assert all(math.isnan(float(value)) for value in got.values()), got
    per_query = rank_metrics(
        torch.zeros(2, 0), torch.zeros(2, 0), names[:4], 2, reduction="none", **kw
    )
    assert all(bool(torch.isnan(value).all()) for value in per_query.values()), per_query


@pytest.mark.parametrize("target_format", ["dense", "indices"])
def test_coverage_of_an_empty_catalogue(target_format: str) -> None:
    """The share of no items is 0 / 0: NaN, as gini and entropy there (a (Q, 0) batch is
    ranked with one padding column, which is no catalogue item). A catalogue of items
    that no list shows is covered 0."""
    target = torch.zeros(2, 0) if target_format == "dense" else torch.full((2, 1), -1)
    names = ["coverage", "gini", "entropy"]
    got = rank_metrics(torch.zeros(2, 0), target, names, [1, 3], target_format=target_format)
    assert all(math.isnan(float(value)) for value in got.values()), got
    hidden = torch.zeros(2, 3, dtype=torch.bool)
    shown = rank_metrics(torch.zeros(2, 3), torch.zeros(2, 3), ["coverage"], 1, mask=hidden)
    assert float(shown["coverage@1"]) == 0.0


@pytest.mark.parametrize(
    "ids",
    [[2**40, 2**40, 1, 7, 1], [-3, -3, 5, 2**63 - 1, 5], [-(2**63), -(2**63), 0, 1, 0]],
)
def test_category_ids_are_labels_in_every_entry_point(ids: list[int]) -> None:
    """Issue 24 rows 5-6: any int64 is a category id (large or negative ones raised an
    allocator error, or a ValueError); only which items share one matters."""
    pytest.importorskip("ignite")
    pytest.importorskip("torchmetrics")
    from ignite.engine import Engine

    from ranking_plugins import ignite as rp_ignite
    from ranking_plugins import torchmetrics as rp_tm
    from ranking_plugins.embeddings import EmbeddingScores

    labels = torch.tensor([0, 0, 1, 2, 1])  # the same partition of the 5 items
    given = torch.tensor(ids)
    g = torch.Generator().manual_seed(3)
    users, items = torch.randn(4, 3, generator=g), torch.randn(5, 3, generator=g)
    scores = users @ items.T
    target = torch.zeros(4, 5)
    target[:, 0] = 1
    expected = diversity(scores, target, top_k=[2, 4], item_categories=labels)
    torch.testing.assert_close(
        diversity(scores, target, top_k=[2, 4], item_categories=given), expected
    )
    got = rank_metrics(scores, target, ["diversity"], [2, 4], item_categories=given)
    assert float(got["diversity@4"]) == pytest.approx(float(expected[1]), abs=1e-12)
    embedded = rank_metrics(
        EmbeddingScores(users, items),
        torch.zeros(4, 1, dtype=torch.int64),
        ["diversity"],
        [2, 4],
        item_categories=given,
    )
    assert float(embedded["diversity@4"]) == pytest.approx(float(expected[1]), abs=1e-12)
    metric = rp_tm.RankingMetrics(["diversity"], [2, 4], item_categories=given)
    metric.update(scores, target)
    assert float(metric.compute()["diversity@4"]) == pytest.approx(float(expected[1]), abs=1e-12)
    engine = Engine(lambda engine, batch: batch)
    rp_ignite.RankingMetrics(["diversity"], [2, 4], item_categories=given).attach(engine, "d")
    state = engine.run([(scores, target)])
    assert state.metrics["diversity@4"] == pytest.approx(float(expected[1]), abs=1e-12)


def test_category_memory_grows_with_the_items_not_the_largest_id() -> None:
    """Issue 24 row 6: ids up to 5e6 on 3 items grew 375 MB (one one-hot column per id
    up to the largest); relabelled, the one-hot rows are as wide as the categories used."""
    from ranking_plugins.kernel.inputs.items import ItemInputs

    items = ItemInputs.create(item_categories=torch.tensor([5_000_000, 5_000_000, 1]))
    assert items.categories is not None and items.categories.tolist() == [1, 1, 0]


class _LargestTensor(torch.overrides.TorchFunctionMode):
    """Records the most elements of any tensor a torch function returns."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        result = func(*args, **(kwargs or {}))
        for value in result if isinstance(result, tuple | list) else (result,):
            if isinstance(value, torch.Tensor):
                self.largest = max(self.largest, value.numel())
        return result


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("embedded", [False, True])
def test_category_memory_grows_with_the_items_not_the_categories(ties: str, embedded: bool) -> None:
    """Issue 24 row 6: with nearly every item in a category of its own, diversity built an
    (N + 1, C) one-hot table and a (Q, L, C) prefix of it: N x N (+1.5 GB at 10,000 items).
    Now no tensor grows with N x C: the largest is a few times the (Q, N) scores. Scores
    with few values, so "average" cuts tie groups whose members come from the whole row."""
    q, n = 4, 3000
    g = torch.Generator().manual_seed(24)
    categories = torch.randperm(n, generator=g)  # every item in its own category
    categories[: n // 10] = 7  # and a crowd in one, so that some pairs are equal
    target = torch.randint(0, 2, (q, n), generator=g)
    preds: torch.Tensor | EmbeddingScores = torch.randint(0, 3, (q, n), generator=g).double()
    if embedded:
        preds = EmbeddingScores(
            torch.randint(-1, 2, (q, 2), generator=g).double(),
            torch.randint(-1, 2, (n, 2), generator=g).double(),
        )
        target = torch.randint(0, n, (q, 3), generator=g)
    ks = [1, 10, 50]
    with _LargestTensor() as seen:
        got = rank_metrics(preds, target, ["diversity"], ks, ties=ties, item_categories=categories)
    # an embedded catalogue's counts compare each block with two values per listed item
    planes = 2 * target.shape[1] if embedded else 4
    assert seen.largest <= planes * q * n, f"a tensor of {seen.largest} elements (N x C: {n * n})"
    # ids are labels: other ids for the same categories give the same values
    shifted = rank_metrics(
        preds, target, ["diversity"], ks, ties=ties, item_categories=categories - 2**40
    )
    torch.testing.assert_close(got, shifted, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("embedded", [False, True])
@pytest.mark.parametrize("num_categories", [3, 60])
def test_categories_give_exactly_the_values_of_their_one_hot_features(
    ties: str, embedded: bool, num_categories: int
) -> None:
    """Issue 24 row 6: the pairs of equal category are counted, not summed as one-hot
    vectors; the counts are the vector sums' integers, so the values are the same floats
    as one-hot features' (cosine 1 when equal, else 0), tie groups cut at k included."""
    q, n = 5, 60
    g = torch.Generator().manual_seed(6)
    categories = torch.randint(0, num_categories, (n,), generator=g)
    one_hot = torch.nn.functional.one_hot(categories).double()
    target = torch.randint(0, 2, (q, n), generator=g)
    preds: torch.Tensor | EmbeddingScores = torch.randint(0, 4, (q, n), generator=g).double()
    mask = torch.rand(q, n, generator=g) < 0.9
    if embedded:  # groups of ~5 tied items: with 60 categories, fewer candidates than categories
        preds = EmbeddingScores(
            torch.randint(1, 4, (q, 2), generator=g).double(),
            torch.randint(0, 4, (n, 2), generator=g).double(),
        )
        target, mask = torch.randint(0, n, (q, 3), generator=g), None
    ks = [1, 2, 7, 20]  # the list ends at 20: groups there go on past it
    got = rank_metrics(
        preds, target, ["diversity"], ks, mask=mask, ties=ties, item_categories=categories
    )
    expected = rank_metrics(
        preds, target, ["diversity"], ks, mask=mask, ties=ties, item_features=one_hot
    )
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
