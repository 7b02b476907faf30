"""EmbeddingScores: every metric as if the full score matrix had been built."""

from __future__ import annotations

import pytest
import torch

from ranking_plugins import EmbeddingScores, rank_metrics
from ranking_plugins.kernel import TIES
from ranking_plugins.metrics import HOST_UNDER_AVERAGE, METRICS

NAMES = [
    name
    for name, metric in METRICS.items()
    if not metric.exposure and name not in HOST_UNDER_AVERAGE
]  # issue 14: own tests; issue 13: those computed on the host under "average" too


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
    # the listed items' own rows first (every query on at most a chunk's width of them,
    # a call as wide as a chunk), then the catalogue in chunks of 16, once, for the counts
    listed = target[target >= 0].unique().numel()
    assert 16 < listed < items.shape[0]
    assert chunks == [16] * -(-listed // 16) + [16, 16, 8]


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
        (torch.ones(3, 5), {}, TypeError, "`target` must be an integer tensor of item ids"),
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
    import ranking_plugins.batch_cache as batch_cache
    import ranking_plugins.kernel as kernel

    walks: list[int] = []
    real = kernel.embedding_stats

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        walks.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(kernel, "embedding_stats", counting)
    batch_cache.last_batch.clear()
    users, items, target, _ = _case(4)
    scores = EmbeddingScores(users, items)
    a = rank_metrics(scores, target, "mrr", 5)
    # the inputs are copied (to prove them unchanged later) once the same object comes twice
    b = rank_metrics(scores, target, "ndcg", 5)
    assert len(walks) == 2
    h = rank_metrics(scores, target, "hit_rate", 5)
    assert len(walks) == 2
    items.mul_(2).add_(1)  # in place: the scores changed, so they are walked again
    c = rank_metrics(scores, target, "mrr", 5)
    assert len(walks) == 3
    dense = users @ (items.sub(1).div(2)).T
    want = rank_metrics(dense, target, "hit_rate", 5)["hit_rate@5"]
    torch.testing.assert_close(h["hit_rate@5"], want, rtol=0, atol=1e-12)
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


# ------------------------------------------- the scores the counts refer to (issue 11, item 5)


def _chunk_matrix(score_fn, users: torch.Tensor, items: torch.Tensor, chunk_size: int):  # type: ignore[no-untyped-def]
    """The score matrix as the walk computes it: one ``score_fn`` call per catalogue chunk."""
    n = items.shape[0]
    return torch.cat(
        [score_fn(users, items[s : s + chunk_size]) for s in range(0, n, chunk_size)], 1
    )


def _assert_same_metrics(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-12, equal_nan=True)


def _float32_dot(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
    return query.float() @ chunk.float().T


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5])
def test_a_score_function_wider_than_the_embeddings_keeps_its_dtype(
    ties: str, chunk_size: int
) -> None:
    # bf16 embeddings scored in float32: item 0 scores 1 + 2^-9 (exact in float32,
    # 1.0 once rounded to bf16) and must stay above item 1's 1.0
    users = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.bfloat16)
    items = torch.tensor(
        [[1.0, 2.0**-9], [1.0, 0.0], [0.5, 0.0], [1.0, 2.0**-9], [0.0, 0.25]],
        dtype=torch.bfloat16,
    )
    target = torch.tensor([[0, -1], [2, 4]])
    options = {"ties": ties, "reduction": "none"}
    scores = EmbeddingScores(users, items, score_fn=_float32_dot, chunk_size=chunk_size)
    got = rank_metrics(scores, target, NAMES, [1, 2, 5], **options)
    want = rank_metrics(_float32_dot(users, items), target, NAMES, [1, 2, 5], **options)
    _assert_same_metrics(got, want)
    if ties == "average":
        assert got["mrr@5"][0] == 0.75  # item 0 ties with item 3, not with item 1 too


def test_integer_scores_of_float_embeddings_are_not_rounded_to_float32() -> None:
    # a score_fn returning int64 scores above 2^24: float32 queries must not round them
    def item_number(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        ids = chunk[:, 0].to(torch.int64)
        return (2**40 + ids).unsqueeze(0).expand(query.shape[0], -1)

    users = torch.zeros(2, 1)
    items = torch.arange(8, dtype=torch.float32).unsqueeze(1)
    target = torch.tensor([6, 3])
    for chunk_size in (1, 3, 8):
        scores = EmbeddingScores(users, items, score_fn=item_number, chunk_size=chunk_size)
        got = rank_metrics(scores, target, NAMES, [1, 3], reduction="none")
        want = rank_metrics(item_number(users, items), target, NAMES, [1, 3], reduction="none")
        _assert_same_metrics(got, want)
        assert got["mrr@3"].tolist() == [0.5, 0.0]


def _duplicated_rows(seed: int, dtype: torch.dtype = torch.float64):  # type: ignore[no-untyped-def]
    """Random embeddings where a quarter of the item rows copy another row, targets among them."""
    generator = torch.Generator().manual_seed(seed)
    q, n, d = 6, 40, 8
    users = torch.randn(q, d, generator=generator, dtype=torch.float64).to(dtype)
    items = torch.randn(n, d, generator=generator, dtype=torch.float64).to(dtype)
    copies = torch.randperm(n, generator=generator)[:20].view(2, 10)
    items[copies[1]] = items[copies[0]]  # the rows of copies[0] are left alone
    first = copies[0, torch.randint(0, 10, (q,), generator=generator)]
    second = copies[1, torch.randint(0, 10, (q,), generator=generator)]
    target = torch.stack([first, second, torch.randint(-1, n, (q,), generator=generator)], 1)
    return users, items, target


def _disagreements(score_fn, dtype: torch.dtype, ties: str, chunk_size: int, trials: int) -> int:  # type: ignore[no-untyped-def]
    """Trials whose metrics differ from those of the chunk calls' score matrix."""
    differing = 0
    for seed in range(trials):
        users, items, target = _duplicated_rows(seed, dtype)
        options = {"ties": ties, "reduction": "none"}
        scores = EmbeddingScores(users, items, score_fn=score_fn, chunk_size=chunk_size)
        got = rank_metrics(scores, target, NAMES, [1, 3, 10], **options)
        matrix = _chunk_matrix(score_fn or (lambda q, c: q @ c.T), users, items, chunk_size)
        want = rank_metrics(matrix, target, NAMES, [1, 3, 10], **options)
        differing += any(
            not torch.equal(got[key].nan_to_num(-7.0), want[key].nan_to_num(-7.0)) for key in want
        )
    return differing


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("chunk_size", [1, 7, 16, 40, 64])
def test_random_float64_scores_with_identical_item_rows_follow_the_chunk_scores(
    ties: str, chunk_size: int
) -> None:
    """Every item, relevant or not, is ranked by the one score its chunk's call gave it.

    A matrix product rounds a pair's score according to the shape of the call
    (MKL, cuBLAS), so the reference is the matrix of the walk's own calls;
    with ``chunk_size >= N`` that is ``users @ items.T`` itself.
    """
    assert _disagreements(None, torch.float64, ties, chunk_size, trials=20) == 0


def test_one_chunk_is_exactly_the_one_matrix_call() -> None:
    for seed in range(8):
        users, items, target = _duplicated_rows(seed)
        for ties in TIES:
            options = {"ties": ties, "reduction": "none"}
            got = rank_metrics(EmbeddingScores(users, items), target, NAMES, None, **options)
            want = rank_metrics(users @ items.T, target, NAMES, None, **options)
            _assert_same_metrics(got, want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("chunk_size", [3, 7, 40])
def test_identical_item_rows_in_different_chunks_tie(dtype: torch.dtype, chunk_size: int) -> None:
    # small dyadic values: every dot product is exact, so any call gives the same
    # score to identical rows, and the chunked walk equals the one-matrix call
    for seed in range(4):
        users, items, target = _duplicated_rows(seed)
        users, items = (users * 4).round().div(4).to(dtype), (items * 4).round().div(4).to(dtype)
        for ties in TIES:
            options = {"ties": ties, "reduction": "none"}
            scores = EmbeddingScores(users, items, chunk_size=chunk_size)
            got = rank_metrics(scores, target, NAMES, [1, 3, 10], **options)
            want = rank_metrics(users @ items.T, target, NAMES, [1, 3, 10], **options)
            _assert_same_metrics(got, want)


@pytest.mark.parametrize("chunk_size", [1, 7, 40])
def test_custom_score_functions_of_every_dtype_follow_the_chunk_scores(chunk_size: int) -> None:
    def negative_distance(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        return -torch.cdist(query.double(), chunk.double())

    def half_cosine(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        q = torch.nn.functional.normalize(query.float(), dim=1)
        c = torch.nn.functional.normalize(chunk.float(), dim=1)
        return (q @ c.T).half()

    for score_fn in (negative_distance, half_cosine, _float32_dot):
        for dtype in (torch.float32, torch.bfloat16, torch.float64):
            for ties in ("average", "first"):
                assert _disagreements(score_fn, dtype, ties, chunk_size, trials=3) == 0


def test_a_score_function_that_changes_between_calls_is_an_error() -> None:
    calls = [0]

    def drifting(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        return query @ chunk.T + calls[0] * 1e-3

    users, items, target = _duplicated_rows(0)
    with pytest.raises(ValueError, match=r"`score_fn`.*deterministic"):
        rank_metrics(EmbeddingScores(users, items, score_fn=drifting), target, "mrr", 5)


# ------------------------------------------------------- zero queries (issue 11, item 11)


@pytest.mark.parametrize("validate_args", [True, False])
def test_zero_queries_give_what_the_dense_matrix_gives(validate_args: bool) -> None:
    users, items = torch.zeros(0, 3), torch.randn(5, 3)
    for target in (torch.zeros(0, dtype=torch.long), torch.zeros(0, 2, dtype=torch.long)):
        for top_k in (2, [1, 3], None):
            options = {"validate_args": validate_args}
            got = rank_metrics(EmbeddingScores(users, items), target, NAMES, top_k, **options)
            want = rank_metrics(users @ items.T, target, NAMES, top_k, **options)
            _assert_same_metrics(got, want)
            none = rank_metrics(
                EmbeddingScores(users, items), target, NAMES, top_k, reduction="none"
            )
            assert all(v.shape == (0,) for v in none.values())


def test_zero_queries_through_the_torchmetrics_adapter() -> None:
    pytest.importorskip("torchmetrics")
    from ranking_plugins import torchmetrics as rp

    users, items, target, _ = _case(3)
    metric = rp.MRR(top_k=5)
    metric.update(EmbeddingScores(users[:0], items), target[:0])
    metric.update(EmbeddingScores(users, items), target)
    torch.testing.assert_close(
        metric.compute(), rank_metrics(users @ items.T, target, "mrr", 5, gain="linear")["mrr@5"]
    )
    empty = rp.RankingMetrics(["mrr", "ndcg"], top_k=[1, 5])
    empty.update(EmbeddingScores(users[:0], items), target[:0])
    assert all(v.isnan() for v in empty.compute().values())


def test_zero_queries_through_the_ignite_adapter() -> None:
    pytest.importorskip("ignite")
    from ranking_plugins.ignite import MRR

    users, items, target, _ = _case(3)
    metric = MRR(top_k=[5])
    metric.update((EmbeddingScores(users[:0], items), target[:0]))
    metric.update((EmbeddingScores(users, items), target))
    want = rank_metrics(users @ items.T, target, "mrr", 5, empty_target_action="skip")["mrr@5"]
    assert metric.compute() == pytest.approx([want.item()], abs=1e-12)


@pytest.mark.parametrize("chunk_size", [4, 40])
def test_without_validation_the_walk_reads_nothing_on_the_host(
    chunk_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from host_reads import forbid_host_reads

    users, items, target = _duplicated_rows(1)
    target[:, 1:] = -1  # most chunks hold no listed item: all are still scored
    want = rank_metrics(
        _chunk_matrix(lambda q, c: q @ c.T, users, items, chunk_size), target, NAMES, [1, 5]
    )
    with forbid_host_reads(monkeypatch):
        scores = EmbeddingScores(users, items, chunk_size=chunk_size)
        got = rank_metrics(scores, target, NAMES, [1, 5], validate_args=False)
    _assert_same_metrics(got, want)


def test_chunks_without_a_listed_item_are_scored_once() -> None:
    users, items, target = _duplicated_rows(2)
    calls: list[int] = []

    def counted(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        # a chunk of the table: the offset of its first item; else rows gathered from it
        if chunk.untyped_storage().data_ptr() != items.untyped_storage().data_ptr():
            calls.append(-chunk.shape[0])
            return query @ chunk.T
        offset = chunk.data_ptr() - items.data_ptr()
        calls.append(offset // (items.stride(0) * items.element_size()))
        return query @ chunk.T

    target = torch.full_like(target, -1)
    target[0, 0] = 25  # in the third chunk of 10
    scores = EmbeddingScores(users, items, score_fn=counted, chunk_size=10)
    got = rank_metrics(scores, target, "mrr", 5, reduction="none")
    matrix = _chunk_matrix(lambda q, c: q @ c.T, users, items, 10)
    _assert_same_metrics(got, rank_metrics(matrix, target, "mrr", 5, reduction="none"))
    # the listed item's row (with others: a call as wide as a chunk), then the counting walk
    assert calls == [-10, 0, 10, 20, 30]


def _host_reads_of_a_validating_call_on_an_accelerator(
    monkeypatch: pytest.MonkeyPatch,
    chunk_size: int,
    score_fn=None,  # type: ignore[no-untyped-def]
) -> tuple[int, dict]:
    """The values a validating call reads on the host on the accelerator path, and its metrics."""
    from ranking_plugins.kernel import host_reads

    users, items, target = _duplicated_rows(3)
    reads = 0
    original = torch.Tensor.__bool__

    def counted(self: torch.Tensor) -> bool:
        nonlocal reads
        reads += 1
        return original(self)

    with monkeypatch.context() as patch:
        patch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)
        patch.setattr(torch.Tensor, "__bool__", counted)
        scores = EmbeddingScores(users, items, score_fn=score_fn, chunk_size=chunk_size)
        got = rank_metrics(scores, target, ["mrr", "ndcg", "recall"], [1, 5])
    return reads, got


def test_a_validating_call_on_an_accelerator_reads_as_often_with_any_number_of_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read per chunk (its NaN flag, whether it lists an item) synchronised a GPU per
    chunk: the flags are read once, after the walk, and every chunk is scored whole."""
    few, got_few = _host_reads_of_a_validating_call_on_an_accelerator(monkeypatch, 20)
    many, got_many = _host_reads_of_a_validating_call_on_an_accelerator(monkeypatch, 2)
    assert many == few
    users, items, target = _duplicated_rows(3)
    want = rank_metrics(users @ items.T, target, ["mrr", "ndcg", "recall"], [1, 5])
    _assert_same_metrics(got_many, want)
    _assert_same_metrics(got_few, want)


def test_a_nan_in_one_late_chunk_is_refused_on_an_accelerator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def nan_in_the_last_item(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        out = query @ chunk.T
        if torch.equal(chunk, last):
            out[-1, -1] = torch.nan
        return out

    last = _duplicated_rows(3)[1][-2:]
    with pytest.raises(ValueError, match="NaN"):
        _host_reads_of_a_validating_call_on_an_accelerator(monkeypatch, 2, nan_in_the_last_item)


def _many_queries(seed: int):  # type: ignore[no-untyped-def]
    """Enough queries (4 x QUERY_ROWS_AT_LEAST) for the listed scores to be read by rows."""
    from ranking_plugins.kernel.catalogue.chunked import QUERY_ROWS_AT_LEAST

    generator = torch.Generator().manual_seed(seed)
    q, n, d = 4 * QUERY_ROWS_AT_LEAST, 600, 8
    users = torch.randn(q, d, generator=generator)
    items = torch.randn(n, d, generator=generator)
    items[300:310] = items[:10]  # ties
    target = torch.randint(-1, n, (q, 2), generator=generator)
    target[: q // 2, 1] = -1
    return users, items, target


@pytest.mark.parametrize("ties", ["average", "first"])
def test_listed_scores_read_from_calls_on_the_queries_that_list_them(ties: str) -> None:
    """Q >= 4 x QUERY_ROWS_AT_LEAST: the listed items' scores come from calls on only
    the queries (at least QUERY_ROWS_AT_LEAST) that list an item of each chunk, then one
    counting walk of whole calls; the numbers are the matrix of whole chunk calls'."""
    from ranking_plugins.kernel.catalogue.chunked import QUERY_ROWS_AT_LEAST

    users, items, target = _many_queries(3)
    rows_per_call: list[int] = []

    def counted(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        rows_per_call.append(query.shape[0])
        return query @ chunk.T

    chunk_size = 16  # 38 chunks, each holding the targets of a few queries
    scores = EmbeddingScores(users, items, score_fn=counted, chunk_size=chunk_size)
    got = rank_metrics(scores, target, NAMES, [1, 10], ties=ties, reduction="none")
    whole = torch.cat([users @ items[i : i + chunk_size].T for i in range(0, 600, chunk_size)], 1)
    want = rank_metrics(whole, target, NAMES, [1, 10], ties=ties, reduction="none")
    _assert_same_metrics(got, want)
    q, chunks = users.shape[0], len(range(0, 600, chunk_size))
    by_rows, walk = rows_per_call[:-chunks], rows_per_call[-chunks:]
    assert walk == [q] * chunks  # one counting walk, of whole calls
    assert by_rows and all(QUERY_ROWS_AT_LEAST <= rows < q for rows in by_rows)


def test_listed_scores_from_a_score_function_that_reads_the_batch_are_counted_again() -> None:
    """A ``score_fn`` whose scores depend on the queries called together gives the
    listed items other scores on fewer queries: counted again against the whole calls'
    scores (one more walk), never against a score the whole calls did not give."""
    users, items, target = _many_queries(4)
    rows_per_call: list[int] = []

    def batch_dependent(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        rows_per_call.append(query.shape[0])
        return query @ chunk.T + query.mean()

    chunk_size = 64
    scores = EmbeddingScores(users, items, score_fn=batch_dependent, chunk_size=chunk_size)
    got = rank_metrics(scores, target, NAMES, [1, 10], reduction="none")
    calls = range(0, 600, chunk_size)
    whole = torch.cat([batch_dependent(users, items[i : i + chunk_size]) for i in calls], 1)
    want = rank_metrics(whole, target, NAMES, [1, 10], reduction="none")
    _assert_same_metrics(got, want)
    q = users.shape[0]
    # the calls by rows, their walk, the walk against the scores the whole calls gave
    # (recorded by the first), then this test's own whole calls
    assert rows_per_call[-3 * len(calls) :] == [q] * (3 * len(calls))
    assert min(rows_per_call) < q


def _outside(ids: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``ids`` with ids outside [0, n) put in (both sides), and what padding makes of them."""
    bad = ids.clone()
    bad[:, 0] = torch.tensor([n, n + 2, 10**6, -2, -7, n, n + 1, n + 3, 99])[: ids.shape[0]]
    return bad, torch.where((bad >= 0) & (bad < n), bad, -1)


@pytest.mark.parametrize("chunk_size", [4, 40])
def test_without_validation_an_id_outside_the_catalogue_is_padding(
    chunk_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24, row 10: an id >= N was read through a clamp, with another item's score."""
    from host_reads import forbid_host_reads

    users, items, target, exclude = _case(11, n=10)
    bad_target, target = _outside(target, 10)
    bad_exclude, exclude = _outside(exclude, 10)
    judged_ids = torch.randint(0, 10, (9, 4), generator=torch.Generator().manual_seed(2))
    bad_judged, judged_ids = _outside(judged_ids, 10)
    options = {"reduction": "none", "empty_target_action": "skip"}
    want = rank_metrics(
        users @ items.T, target, NAMES, [1, 3], mask=_mask_of(exclude, 10), **options
    )
    with forbid_host_reads(monkeypatch):
        scores = EmbeddingScores(users, items, exclude=bad_exclude, chunk_size=chunk_size)
        got = rank_metrics(scores, bad_target, NAMES, [1, 3], validate_args=False, **options)
    _assert_same_metrics(got, want)
    # the judged ids too, and the exposure metrics' top lists (which read on the host)
    judged_names = [name for name in NAMES if METRICS[name].judgments]
    exposure = {"item_popularity": torch.arange(1.0, 11.0)}
    for names, judged, bad, more in (
        (judged_names, judged_ids, bad_judged, options),
        (["arp", "coverage", "mrr"], None, None, exposure),
    ):
        want = rank_metrics(users @ items.T, target, names, [3], judged=judged, **more)
        got = rank_metrics(
            EmbeddingScores(users, items, chunk_size=chunk_size),
            bad_target,
            names,
            [3],
            judged=bad,
            validate_args=False,
            **more,
        )
        _assert_same_metrics(got, want)


@pytest.mark.parametrize("top_k", [[1, 3], None])
def test_without_validation_item_index_targets_outside_the_list_are_padding(top_k) -> None:  # type: ignore[no-untyped-def]
    """Issue 24, row 10, the (Q, N) matrix: the same policy (an id >= N crashed counting)."""
    users, items, target, _ = _case(12, n=10)
    bad_target, target = _outside(target, 10)
    judged_ids = torch.randint(0, 10, (9, 4), generator=torch.Generator().manual_seed(3))
    bad_judged, judged_ids = _outside(judged_ids, 10)
    options = {"reduction": "none", "empty_target_action": "skip"}
    scores = users @ items.T
    for judged, bad in ((None, None), (judged_ids, bad_judged)):
        want = rank_metrics(scores, target, NAMES, top_k, judged=judged, **options)
        got = rank_metrics(
            scores, bad_target, NAMES, top_k, judged=bad, validate_args=False, **options
        )
        _assert_same_metrics(got, want)
        with pytest.raises(ValueError, match=r"`target` item indices must lie in \[0, 10\)"):
            rank_metrics(scores, bad_target, NAMES, top_k, judged=judged, **options)
    with pytest.raises(ValueError, match=r"`judged` item indices must lie in \[0, 10\)"):
        rank_metrics(scores, target, NAMES, top_k, judged=bad_judged, **options)


def test_listed_scores_from_a_score_function_that_reads_the_items_called_are_counted_again() -> (
    None
):
    """A ``score_fn`` whose scores depend on the items called together gives the listed
    items other scores in the call on their own rows: counted again against the scores
    the counting walk's calls gave (one more walk), the chunk calls' matrix's numbers."""
    users, items, target = _duplicated_rows(5)
    widths: list[int] = []

    def item_dependent(query: torch.Tensor, chunk: torch.Tensor) -> torch.Tensor:
        widths.append(chunk.shape[0])
        return query @ chunk.T + chunk.mean()

    chunk_size = 16
    scores = EmbeddingScores(users, items, score_fn=item_dependent, chunk_size=chunk_size)
    got = rank_metrics(scores, target, NAMES, [1, 10], reduction="none")
    walk = [len(items[i : i + chunk_size]) for i in range(0, items.shape[0], chunk_size)]
    listed = target[target >= 0].unique().numel()
    # the listed items' rows, then the counting walk, twice
    assert widths == [chunk_size] * -(-listed // chunk_size) + walk + walk
    matrix = _chunk_matrix(item_dependent, users, items, chunk_size)
    _assert_same_metrics(got, rank_metrics(matrix, target, NAMES, [1, 10], reduction="none"))
