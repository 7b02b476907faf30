"""EmbeddingScores: every metric as if the full score matrix had been built."""

from __future__ import annotations

import pytest
import torch

from ranking_plugins import EmbeddingScores, rank_metrics
from ranking_plugins.kernel import TIES
from ranking_plugins.metrics import METRICS

NAMES = list(METRICS)


def _case(seed: int, q: int = 9, n: int = 40, d: int = 3, t: int = 3):
    generator = torch.Generator().manual_seed(seed)
    # small integer embeddings: dot products are exact, and tie often
    users = torch.randint(-2, 3, (q, d), generator=generator).float()
    items = torch.randint(-2, 3, (n, d), generator=generator).float()
    target = torch.randint(-1, n, (q, t), generator=generator)
    exclude = torch.randint(-1, n, (q, 5), generator=generator)
    return users, items, target, exclude


def _mask_of(exclude: torch.Tensor, n: int) -> torch.Tensor:
    mask = torch.ones(exclude.shape[0], n, dtype=torch.bool)
    rows = torch.arange(exclude.shape[0]).unsqueeze(1).expand_as(exclude)
    mask[rows[exclude >= 0], exclude[exclude >= 0]] = False
    return mask


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("chunk_size", [1, 7, 40, 1000])
@pytest.mark.parametrize("with_exclusions", [False, True])
def test_chunked_embeddings_equal_the_dense_matrix(
    ties: str, chunk_size: int, with_exclusions: bool
) -> None:
    for seed in range(3):
        users, items, target, exclude = _case(seed)
        options = {"ties": ties, "reduction": "none", "empty_target_action": "skip"}
        scores = EmbeddingScores(
            users, items, exclude=exclude if with_exclusions else None, chunk_size=chunk_size
        )
        mask = _mask_of(exclude, items.shape[0]) if with_exclusions else None
        for top_k in ([1, 3, 10, 50], None):
            got = rank_metrics(scores, target, NAMES, top_k, **options)
            want = rank_metrics(users @ items.T, target, NAMES, top_k, mask=mask, **options)
            assert got.keys() == want.keys()
            for key in want:
                torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-12, equal_nan=True)


def test_a_custom_score_function_is_used_chunk_by_chunk() -> None:
    users, items, target, _ = _case(5)
    chunks: list[int] = []

    def negative_distance(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        chunks.append(chunk.shape[0])
        return -torch.cdist(query, chunk)

    scores = EmbeddingScores(users, items, score_fn=negative_distance, chunk_size=16)
    got = rank_metrics(scores, target, ["ndcg", "mrr"], [5, 20])
    want = rank_metrics(-torch.cdist(users, items), target, ["ndcg", "mrr"], [5, 20])
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-12)
    # one call for the 9 x 3 listed items, then the catalogue in chunks of 16
    assert chunks == [27, 16, 16, 8]


def test_relevance_threshold_above_one_leaves_nothing_relevant() -> None:
    users, items, target, _ = _case(2)
    scores = EmbeddingScores(users, items)
    got = rank_metrics(scores, target, "mrr", 5, relevance_threshold=2, empty_target_action="skip")
    assert got["mrr@5"].isnan()


def test_an_empty_catalogue_gives_empty_queries() -> None:
    scores = EmbeddingScores(torch.randn(3, 4), torch.randn(0, 4))
    target = torch.full((3, 1), -1)
    assert rank_metrics(scores, target, "mrr", 5)["mrr@5"].item() == 0.0


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: EmbeddingScores(torch.randn(3), torch.randn(5, 3)), ValueError, "`query_emb`"),
        (lambda: EmbeddingScores(torch.randn(3, 2), torch.randn(5, 3)), ValueError, "width d"),
        (lambda: EmbeddingScores(torch.randn(3, 3), [[1.0]]), TypeError, "`item_emb`"),
        (
            lambda: EmbeddingScores(torch.randn(3, 3), torch.randn(5, 3), chunk_size=0),
            ValueError,
            "`chunk_size`",
        ),
        (
            lambda: EmbeddingScores(torch.randn(3, 3), torch.randn(5, 3), chunk_size=2.5),
            TypeError,
            "`chunk_size`",
        ),
        (
            lambda: EmbeddingScores(torch.randn(3, 3), torch.randn(5, 3), score_fn="dot"),
            TypeError,
            "`score_fn`",
        ),
        (
            lambda: EmbeddingScores(torch.randn(3, 3), torch.randn(5, 3), exclude=torch.ones(3, 2)),
            TypeError,
            "`exclude`",
        ),
        (
            lambda: EmbeddingScores(
                torch.randn(3, 3), torch.randn(5, 3), exclude=torch.ones(2, 2, dtype=torch.long)
            ),
            ValueError,
            "`exclude`",
        ),
    ],
)
def test_bad_embeddings_are_named(make, error: type, words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=words):
        make()


@pytest.mark.parametrize(
    ("target", "kwargs", "error", "words"),
    [
        (torch.ones(3, 5), {}, TypeError, "integer item ids"),
        (torch.tensor([[0], [1]]), {}, ValueError, "Q = 3"),
        (torch.tensor([0, 1, 5]), {}, ValueError, r"\[0, 5\)"),
        (
            torch.tensor([0, 1, 2]),
            {"mask": torch.ones(3, 5, dtype=torch.bool)},
            ValueError,
            "exclude",
        ),
        (torch.tensor([0, 1, 2]), {"target_format": "dense"}, ValueError, "item-index"),
    ],
)
def test_bad_targets_and_options_are_named(target, kwargs, error, words) -> None:  # type: ignore[no-untyped-def]
    scores = EmbeddingScores(torch.randn(3, 2), torch.randn(5, 2))
    with pytest.raises(error, match=words):
        rank_metrics(scores, target, "mrr", 3, **kwargs)


def test_exclusions_out_of_range_and_score_functions_of_the_wrong_shape_are_caught() -> None:
    users, items = torch.randn(3, 2), torch.randn(5, 2)
    bad_exclude = EmbeddingScores(users, items, exclude=torch.tensor([[7], [0], [1]]))
    with pytest.raises(ValueError, match=r"`exclude` item indices must lie in \[0, 5\)"):
        rank_metrics(bad_exclude, torch.tensor([0, 1, 2]), "mrr", 3)
    wrong_shape = EmbeddingScores(users, items, score_fn=lambda q, c: q @ c.T[:, :1])
    with pytest.raises(ValueError, match="`score_fn` must return"):
        rank_metrics(wrong_shape, torch.tensor([0, 1, 2]), "mrr", 3)
    nan = EmbeddingScores(
        users, items, score_fn=lambda q, c: torch.full((q.shape[0], c.shape[0]), torch.nan)
    )
    with pytest.raises(ValueError, match="NaN"):
        rank_metrics(nan, torch.tensor([0, 1, 2]), "mrr", 3)


def test_the_same_scores_object_is_walked_once_for_several_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ranking_plugins.request as request_module

    walks: list[int] = []
    real = request_module.embedding_stats

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        walks.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(request_module, "embedding_stats", counting)
    request_module._last_batch.clear()
    users, items, target, _ = _case(4)
    scores = EmbeddingScores(users, items)
    a = rank_metrics(scores, target, "mrr", 5)
    b = rank_metrics(scores, target, "ndcg", 5)
    assert len(walks) == 1
    items.mul_(2).add_(1)  # in place: the scores changed, so they are walked again
    c = rank_metrics(scores, target, "mrr", 5)
    assert len(walks) == 2
    assert a["mrr@5"] == rank_metrics(users @ (items.sub(1).div(2)).T, target, "mrr", 5)["mrr@5"]
    assert b["ndcg@5"] == rank_metrics(users @ (items.sub(1).div(2)).T, target, "ndcg", 5)["ndcg@5"]
    assert c["mrr@5"] == rank_metrics(users @ items.T, target, "mrr", 5)["mrr@5"]


# ------------------------------------------------------------------ adapters


def test_an_ignite_evaluator_can_return_embedding_scores() -> None:
    pytest.importorskip("ignite")
    from ignite.engine import Engine

    from ranking_plugins.ignite import MRR, RankingMetrics

    users, items, target, exclude = _case(6, q=12)
    batches = [(users[:5], target[:5], exclude[:5]), (users[5:], target[5:], exclude[5:])]

    def step(engine: Engine, batch: tuple) -> tuple:
        user_emb, y, seen = batch
        return EmbeddingScores(user_emb, items, exclude=seen, chunk_size=16), y

    evaluator = Engine(step)
    RankingMetrics(["ndcg", "hit_rate", "auc"], top_k=[3, 10]).attach(evaluator, "ranking")
    MRR(top_k=[3, 10]).attach(evaluator, "mrr")
    metrics = evaluator.run(batches).metrics

    dense = users @ items.T
    mask = _mask_of(exclude, items.shape[0])
    want = rank_metrics(
        dense,
        target,
        ["ndcg", "hit_rate", "auc", "mrr"],
        [3, 10],
        mask=mask,
        empty_target_action="skip",
    )
    for key in ("ndcg@3", "ndcg@10", "hit_rate@3", "hit_rate@10", "auc"):
        assert metrics[key] == pytest.approx(want[key].item(), abs=1e-12)
    assert metrics["mrr"] == pytest.approx([want["mrr@3"].item(), want["mrr@10"].item()], abs=1e-12)


def test_torchmetrics_metrics_and_a_collection_take_embedding_scores() -> None:
    pytest.importorskip("torchmetrics")
    from torchmetrics import MetricCollection

    from ranking_plugins import torchmetrics as rp

    users, items, target, exclude = _case(8, q=12)
    target[0, 0] = -5  # ignored through ignore_index
    collection = MetricCollection(
        {"mrr": rp.MRR(top_k=10), "ndcg": rp.NDCG(top_k=10), "auc": rp.AUC()}
    )
    ranking = rp.RankingMetrics(["hit_rate", "map"], top_k=[1, 5], ignore_index=-5)
    for rows in (slice(0, 7), slice(7, 12)):
        scores = EmbeddingScores(users[rows], items, exclude=exclude[rows], chunk_size=11)
        clean = target[rows].clamp(min=-1)
        collection.update(scores, clean)
        ranking.update(scores, target[rows])

    dense = users @ items.T
    mask = _mask_of(exclude, items.shape[0])
    clean = target.clamp(min=-1)
    want = rank_metrics(dense, clean, ["mrr", "ndcg"], 10, mask=mask, gain="linear")
    want |= rank_metrics(dense, clean, ["auc", "hit_rate", "map"], [1, 5], mask=mask)
    got = collection.compute()
    torch.testing.assert_close(got["mrr"], want["mrr@10"], rtol=0, atol=1e-12)
    torch.testing.assert_close(got["ndcg"], want["ndcg@10"], rtol=0, atol=1e-12)
    torch.testing.assert_close(got["auc"], want["auc"], rtol=0, atol=1e-12)
    for key, value in ranking.compute().items():
        torch.testing.assert_close(value, want[key], rtol=0, atol=1e-12)
