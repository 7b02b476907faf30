"""Counting ranks (item-index targets) gives the numbers of the ranked-list kernel.

``rank_batch(..., method="count")`` counts, for each relevant item, the items
above it and tied with it; ``method="rank"`` orders the lists. Both feed the
same metric table, so every metric at every k, under every tie policy, must
agree; and counting column block by column block (as the embeddings walk does)
must agree with counting the whole matrix at once.
"""

from __future__ import annotations

import pytest
import torch
from reference import reference_rank_metrics

from ranking_plugins import rank_metrics
from ranking_plugins.kernel import TIES, GainRule, ItemIds, host_reads, normalize_input, rank_batch
from ranking_plugins.kernel.statistics import RankCounter, distinct_ids
from ranking_plugins.metrics import METRICS
from ranking_plugins.options import Options
from ranking_plugins.per_query import read_metrics

ALL = [  # the exposure and the diversity metrics have tests of their own
    metric for metric in METRICS.values() if not metric.exposure and not metric.intents
]


def _random_case(generator: torch.Generator, trial: int) -> dict:
    q = int(torch.randint(1, 6, (), generator=generator))
    n = int(torch.randint(1, 14, (), generator=generator))
    t = int(torch.randint(1, 5, (), generator=generator))
    # few distinct scores: ties everywhere, among relevant items too
    preds = torch.randint(0, 4, (q, n), generator=generator).float()
    if trial % 3 == 0:
        preds[torch.rand(q, n, generator=generator) < 0.2] = float("-inf")
    if trial % 5 == 0:
        preds = preds.to(torch.int32)
    target = torch.randint(-1, n, (q, t), generator=generator)  # repeats and padding too
    mask = torch.rand(q, n, generator=generator) < 0.75 if trial % 2 else None
    return {"preds": preds, "target": target, "mask": mask}


def _both_paths(case: dict, ties: str, ks: tuple[int, ...] | None, threshold: float | None):
    data = normalize_input(
        case["preds"],
        case["target"],
        indexes=None,
        mask=case["mask"],
        target_format="indices",
        rule=GainRule(threshold, "exponential"),
        validate_args=True,
    )
    results = []
    for method in ("rank", "count"):
        ranked = rank_batch(data, ties, None, method, judgments=True)
        results.append(read_metrics(ranked, ALL, ks, Options(empty_target_action="skip")).results)
    return results


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("accelerator_paths", [False, True])
def test_counting_equals_the_ranked_list_for_every_metric(
    ties: str, seed: int, accelerator_paths: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the accelerator paths read nothing back to the host, and must agree too
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator_paths)
    generator = torch.Generator().manual_seed(seed)
    for trial in range(60):
        case = _random_case(generator, trial)
        n = case["preds"].shape[1]
        ks = None if trial % 4 == 0 else (1, 2, max(1, n // 2), n + 3)
        threshold = 2.0 if trial % 11 == 0 else None  # nothing relevant
        ranked, counted = _both_paths(case, ties, tuple(sorted(set(ks))) if ks else None, threshold)
        assert ranked.keys() == counted.keys()
        for key in ranked:
            torch.testing.assert_close(
                counted[key].values, ranked[key].values, rtol=0, atol=1e-12, equal_nan=True
            )
            assert torch.equal(counted[key].counted, ranked[key].counted)


@pytest.mark.parametrize("ties", TIES)
def test_item_index_targets_are_counted_and_match_brute_force(
    ties: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ranking_plugins.kernel.ranked_batch as ranked_batch

    calls: list[str] = []
    real = ranked_batch.count_ranks

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append("count")
        return real(*args, **kwargs)

    monkeypatch.setattr(ranked_batch, "count_ranks", spy)
    generator = torch.Generator().manual_seed(7)
    names = [m.name for m in ALL]
    for trial in range(12):
        case = _random_case(generator, trial)
        case["target"] = case["target"][:, : 1 + trial % 3]  # whole-list metrics: counted
        options = {"mask": case["mask"], "ties": ties, "reduction": "none"}
        got = rank_metrics(case["preds"], case["target"], names, [1, 3, 20], **options)
        want = reference_rank_metrics(case["preds"], case["target"], names, [1, 3, 20], **options)
        for key in want:
            torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-9, equal_nan=True)
    assert calls, "item-index targets with few ids should be ranked by counting"


@pytest.mark.parametrize("ties", TIES)
def test_counting_block_by_block_with_an_exclusion_list_equals_one_masked_matrix(
    ties: str,
) -> None:
    generator = torch.Generator().manual_seed(3)
    q, n = 7, 50
    preds = torch.randint(0, 6, (q, n), generator=generator).float()
    target = torch.randint(-1, n, (q, 3), generator=generator)
    exclude = torch.randint(-1, n, (q, 6), generator=generator)  # may hit targets too
    mask = torch.ones(q, n, dtype=torch.bool)
    rows = torch.arange(q).unsqueeze(1).expand_as(exclude)
    mask[rows[exclude >= 0], exclude[exclude >= 0]] = False

    ids = distinct_ids(target)
    counter = RankCounter(ids, preds.gather(1, ids.clamp(min=0)), n, ties, exclude=exclude)
    for start in range(0, n, 9):
        counter.add(preds[:, start : start + 9], start)
    blockwise = read_metrics(counter.stats(), ALL, (1, 5, 60), Options(empty_target_action="neg"))

    data = normalize_input(
        preds,
        target,
        indexes=None,
        mask=mask,
        target_format="indices",
        rule=GainRule(None, "exponential"),
        validate_args=True,
    )
    whole = read_metrics(
        rank_batch(data, ties, None, "rank"), ALL, (1, 5, 60), Options(empty_target_action="neg")
    )
    for key, result in whole.results.items():
        torch.testing.assert_close(blockwise.results[key].values, result.values, atol=1e-12, rtol=0)


def test_an_item_never_counts_against_itself_when_its_score_differs_in_the_last_bit() -> None:
    # target scores computed by another kernel may differ from the block's by one ulp
    preds = torch.tensor([[0.5, 0.25, 0.75, 0.5]])
    ids = torch.tensor([[0]])
    nudged = torch.nextafter(preds.gather(1, ids), torch.tensor(1.0))
    counter = RankCounter(ids, nudged, 4, "average")
    counter.add(preds, 0)
    exact = RankCounter(ids, preds.gather(1, ids), 4, "average")
    exact.add(preds, 0)
    # above: only 0.75; the other 0.5 is tied in the exact count, below the nudged score
    assert exact.stats().start.tolist() == [[1.0]]
    assert exact.stats().size.tolist() == [[2.0]]
    assert counter.stats().start.tolist() == [[1.0]]
    assert counter.stats().size.tolist() == [[1.0]]


@pytest.mark.parametrize("accelerator_paths", [False, True])
def test_reciprocal_rank_in_a_long_tie_with_several_relevant_items(
    accelerator_paths: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator_paths)
    # one tie group of 3000 items holding 3 relevant ones: the place-by-place sum
    # runs over several blocks of places
    n = 3000
    preds = torch.zeros(2, n)
    preds[1, :10] = 1.0  # the second query: 10 non-relevant items first
    target = torch.tensor([[5, 700, 2999], [20, 1500, 2500]])
    data = normalize_input(
        preds,
        target,
        indexes=None,
        mask=None,
        target_format="indices",
        rule=GainRule(None, "exponential"),
        validate_args=True,
    )
    names = [METRICS["mrr"], METRICS["hit_rate"], METRICS["map"]]
    for ks in [(1, 10, 1500), None]:
        ranked = read_metrics(
            rank_batch(data, "average", None, "rank"), names, ks, Options(empty_target_action="neg")
        )
        counted = read_metrics(
            rank_batch(data, "average", None, "count"),
            names,
            ks,
            Options(empty_target_action="neg"),
        )
        for key, result in ranked.results.items():
            torch.testing.assert_close(
                counted.results[key].values, result.values, rtol=1e-9, atol=0
            )


def test_count_path_rejects_dense_targets() -> None:
    data = normalize_input(
        torch.rand(2, 3),
        torch.ones(2, 3),
        indexes=None,
        mask=None,
        target_format=None,
        rule=GainRule(None, "exponential"),
        validate_args=True,
    )
    assert not isinstance(data.parts[0].data.relevance, ItemIds)
    with pytest.raises(ValueError, match="item-index targets"):
        rank_batch(data, "average", 3, "count")


def test_block_scores_are_recorded_for_every_listed_item_and_changed_rows_found() -> None:
    # the walk over EmbeddingScores checks its counts were made against the blocks' scores
    preds = torch.tensor([[0.5, 0.25, 0.75, 0.5], [1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    ids = torch.tensor([[0, 2], [3, -1]])
    exclude = torch.tensor([[2], [-1]])  # a listed item that is excluded still has a score
    given = preds.gather(1, ids.clamp(min=0)).clone()
    given[1, 1] = 123.0  # padding: never compared
    counter = RankCounter(ids, given, 4, "average", exclude=exclude)
    for start in (0, 3):
        counter.add(preds[:, start : start + 3], start)
    assert counter.block_score[0].tolist() == [0.5, 0.75]
    assert counter.block_score[1, 0] == 4.0
    assert counter.changed_rows().tolist() == [False, False]

    nudged = given.clone()
    nudged[0, 1] = torch.nextafter(nudged[0, 1], torch.tensor(1.0, dtype=torch.float64))
    stale = RankCounter(ids, nudged, 4, "average", exclude=exclude)
    stale.add(preds, 0)
    assert stale.changed_rows().tolist() == [True, False]


def test_block_scores_keep_a_wider_dtype_than_the_given_scores() -> None:
    # int64 blocks above 2^24 against float32 given scores: promoted, never rounded to float32
    preds = torch.tensor([[2**40 + 1, 2**40, 2**40 + 2]], dtype=torch.int64)
    counter = RankCounter(torch.tensor([[0]]), torch.zeros(1, 1), 3, "average")
    counter.add(preds, 0)
    assert counter.block_score.dtype == torch.int64
    assert counter.block_score.tolist() == [[2**40 + 1]]
    assert counter.changed_rows().tolist() == [True]


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("accelerator_paths", [False, True])
def test_one_id_per_query_reads_as_the_same_id_beside_a_padding_one(
    ties: str, accelerator_paths: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone relevant id (T = 1) is counted and read by readings of its own; beside a
    padding id (T = 2) the same query takes the readings of several ids. Every metric
    at every k agrees to the bit, with masks, padding-only rows and -inf scores."""
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator_paths)
    generator = torch.Generator().manual_seed(21)
    for trial in range(24):
        case = _random_case(generator, trial)
        lone = case["target"][:, :1]
        n = case["preds"].shape[1]
        ks = None if trial % 4 == 0 else (1, 2, max(1, n // 2), n + 3)
        beside_padding = {**case, "target": torch.cat([lone, torch.full_like(lone, -1)], dim=1)}
        results = []
        for each in ({**case, "target": lone}, beside_padding):
            data = normalize_input(
                each["preds"],
                each["target"],
                indexes=None,
                mask=each["mask"],
                target_format="indices",
                rule=GainRule(None, "exponential"),
                validate_args=True,
            )
            ranked = rank_batch(data, ties, None, "count", judgments=True)
            options = Options(empty_target_action="skip")
            results.append(read_metrics(ranked, ALL, ks, options).results)
        one, general = results
        assert one.keys() == general.keys()
        for key in one:
            torch.testing.assert_close(
                one[key].values, general[key].values, rtol=0, atol=0, equal_nan=True, msg=key
            )


def test_one_id_counted_in_row_blocks_on_the_accelerator_paths_as_in_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the accelerator paths one id per row is counted in blocks of rows when the
    flags would outgrow their memory bound: the counts are those of one block."""
    from ranking_plugins.kernel import flags

    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)
    generator = torch.Generator().manual_seed(4)
    preds = torch.randint(0, 5, (11, 40), generator=generator).float()
    ids = torch.randint(-1, 40, (11, 1), generator=generator)
    counters = []
    for elements in (flags.ACCELERATOR_BLOCK_ELEMENTS, 40):  # one block; 4 rows a block
        monkeypatch.setattr(flags, "ACCELERATOR_BLOCK_ELEMENTS", elements)
        counter = RankCounter(ids, preds.gather(1, ids.clamp(min=0)), 40, "average")
        counter.add(preds, 0, own_scores=True)
        counters.append(counter)
    one, blocks = counters
    assert torch.equal(one.counts(), blocks.counts())
    # the counts themselves: items above and tied (itself left out), on listed rows
    score = preds.gather(1, ids.clamp(min=0))
    listed = (ids >= 0).squeeze(1)
    assert torch.equal(one.above[listed], (preds > score).sum(dim=1, keepdim=True)[listed])
    tied = (preds == score).sum(dim=1, keepdim=True) - 1
    assert torch.equal(one.tied[listed], tied[listed])


def _block_values(kind: int, shape: tuple[int, int], generator: torch.Generator) -> torch.Tensor:
    """Blocks that tie often: normal floats, zeros and subnormals, infinities and NaN, ints."""
    small = torch.randint(1, 4, shape, generator=generator)
    if kind == 0:
        return small.float() / 3  # normal numbers only: one comparison per listed item
    if kind == 1:
        return (small - 2).float()  # zeros: two comparisons
    if kind == 2:
        values = small.double()
        values[torch.rand(shape, generator=generator) < 0.2] = torch.inf
        values[torch.rand(shape, generator=generator) < 0.1] = -torch.inf
        values[torch.rand(shape, generator=generator) < 0.1] = torch.nan
        return values
    if kind == 3:  # zero and subnormal numbers
        return (small - 1).float() * (torch.finfo(torch.float32).tiny / 8)
    return small  # int64


@pytest.mark.parametrize("flush_denormal", [False, True])
@pytest.mark.parametrize("ties", TIES)
def test_each_block_is_counted_as_the_comparisons_of_its_items_define(
    ties: str, flush_denormal: bool
) -> None:
    """Above, tied and (under "first") tied-before counts of one column block, for
    listed items before, inside and after it, as their definitions over the block's
    items count them; the given scores are the block's own, or others (a score that
    is not the block's, a NaN); with subnormal numbers read as zero too."""
    if flush_denormal and not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormal numbers")
    try:
        _count_blocks_as_defined(ties, flush_denormal)
    finally:
        torch.set_flush_denormal(False)


def _count_blocks_as_defined(ties: str, flush_denormal: bool) -> None:
    generator = torch.Generator().manual_seed(11)
    for trial in range(150):
        q = int(torch.randint(1, 12, (), generator=generator))
        width = int(torch.randint(1, 40, (), generator=generator))
        t = int(torch.randint(1, 5, (), generator=generator))
        start = int(torch.randint(0, 30, (), generator=generator))
        block = _block_values(trial % 5, (q, width), generator)
        ids = torch.randint(start - 15, start + width + 15, (q, t), generator=generator)
        ids = torch.where(ids < 0, -1, distinct_ids(ids))
        inside = (ids >= start) & (ids < start + width)
        own = block.gather(1, (ids - start).clamp(0, width - 1))
        given = torch.where(inside, own, block[:, :1])
        if trial % 3 == 0:  # others than the block's: one more, or NaN
            other = torch.rand(given.shape, generator=generator) < 0.3
            given = torch.where(other, given + 1, given)
        if trial % 7 == 0:
            given = given.double()
            given[0, 0] = torch.nan
        # the values made first, then compared as the CPU reads them (subnormals as zero)
        torch.set_flush_denormal(flush_denormal)
        counter = RankCounter(ids, given, start + width + 15, ties)
        column = torch.arange(start, start + width) if ties == "first" else None
        counter._count_flags(block, None, column)
        x, s = block.unsqueeze(1), given.unsqueeze(2)  # (Q, 1, C) against (Q, T, 1)
        tied = x == s
        assert torch.equal(counter.above, (x > s).sum(dim=2)), trial
        assert torch.equal(counter.tied, tied.sum(dim=2)), trial
        before = tied & (torch.arange(start, start + width) < ids.unsqueeze(2))
        want_before = before.sum(dim=2) if ties == "first" else torch.zeros_like(ids)
        assert torch.equal(counter.tied_before, want_before), trial
        torch.set_flush_denormal(False)
