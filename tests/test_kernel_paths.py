"""The kernel's shortcuts give the same numbers as its slow paths.

For @k metrics the kernel takes a top-k selection and completes only the rows
whose boundary tie group was cut (on the CPU); elsewhere it completes every
row, and with a whole-list metric it sorts whole rows. All three must agree.
"""

from __future__ import annotations

import math

import pytest
import torch

import ranking_plugins.kernel as kernel
from ranking_plugins import rank_metrics
from ranking_plugins.batch_cache import last_batch
from ranking_plugins.kernel import host_reads, ranked_batch
from ranking_plugins.kernel.ranked_batch import Unranked
from ranking_plugins.kernel.ranking import selection
from ranking_plugins.kernel.ranking.tie_groups import lexsort_desc, sort_within_ties
from ranking_plugins.kernel.statistics import rank_stats
from ranking_plugins.options import Options
from ranking_plugins.request import RankingRequest

AT_K = ["hit_rate", "mrr", "precision", "recall", "f1", "map", "ndcg", "fall_out"]


@pytest.mark.parametrize("ties", kernel.TIES)
@pytest.mark.parametrize("seed", range(4))
def test_selection_paths_agree(ties: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = torch.Generator().manual_seed(seed)
    for trial in range(40):
        q = int(torch.randint(1, 6, (), generator=generator))
        n = int(torch.randint(1, 12, (), generator=generator))
        # few distinct scores: ties everywhere, often across the cutoff
        preds = torch.randint(0, 3, (q, n), generator=generator).float()
        if trial % 3 == 0:
            preds[torch.rand(q, n, generator=generator) < 0.2] = float("-inf")
        target = torch.randint(-1, 3, (q, n), generator=generator)
        mask = torch.rand(q, n, generator=generator) < 0.7 if trial % 2 else None
        ks = sorted(set(torch.randint(1, n + 3, (3,), generator=generator).tolist()))
        options = {"mask": mask, "ties": ties, "reduction": "none"}

        monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", False)
        # AP's and RR's sums at their places only, as on lists too long for the prefix sums
        monkeypatch.setattr(rank_stats, "PLACED_SUMS_ELEMENTS", 0)
        cut_rows_only = rank_metrics(preds, target, AT_K, ks, **options)
        monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)
        every_row = rank_metrics(preds, target, AT_K, ks, **options)
        whole_rows = rank_metrics(preds, target, [*AT_K, "auc"], ks, **options)
        for key, values in cut_rows_only.items():
            torch.testing.assert_close(values, every_row[key], rtol=0, atol=1e-12)
            torch.testing.assert_close(values, whole_rows[key], rtol=0, atol=1e-12)


@pytest.mark.parametrize("ties", kernel.TIES)
def test_placed_sums_and_prefix_sums_give_the_same_bits(
    ties: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AP's and RR's sums at their places only (long lists on the CPU) and the prefix
    sums of every place (small lists; accelerators) agree to the bit, ties or not."""
    generator = torch.Generator().manual_seed(5)
    preds = torch.randint(0, 4, (40, 30), generator=generator).float()
    preds[:20] = torch.randn(20, 30, generator=generator)  # rows without ties
    target = (torch.rand(40, 30, generator=generator) < 0.2).float()
    ks = [1, 3, 10, 30]
    runs = []
    for elements in (0, 1 << 30):
        monkeypatch.setattr(rank_stats, "PLACED_SUMS_ELEMENTS", elements)
        last_batch.clear()
        runs.append(rank_metrics(preds, target, ["map", "mrr"], ks, ties=ties, reduction="none"))
    for key, values in runs[0].items():
        torch.testing.assert_close(values, runs[1][key], rtol=0, atol=0, equal_nan=True)


def test_small_lists_take_the_prefix_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of at most PLACED_SUMS_ELEMENTS places reads AP and RR off the prefix
    sums of every place, no PlacedSums (its ~30 operations cost more than a pass)."""
    made: list[int] = []
    of, init = rank_stats.PlacedSums.of, rank_stats.PlacedSums.__init__

    def counted_of(*args: object) -> rank_stats.PlacedSums:
        made.append(1)
        return of(*args)  # type: ignore[arg-type]

    def counted_init(self: rank_stats.PlacedSums, *args: object) -> None:
        made.append(1)
        init(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(rank_stats.PlacedSums, "of", staticmethod(counted_of))
    monkeypatch.setattr(rank_stats.PlacedSums, "__init__", counted_init)
    preds, target = torch.randn(64, 200), (torch.rand(64, 200) < 0.05).float()
    assert rank_stats.PLACED_SUMS_ELEMENTS >= 64 * 100
    rank_metrics(preds, target, ["map", "mrr"], [10, 100])
    assert not made
    monkeypatch.setattr(rank_stats, "PLACED_SUMS_ELEMENTS", 64 * 100 - 1)
    last_batch.clear()
    rank_metrics(preds, target, ["map", "mrr"], [10, 100])
    assert made


def test_cut_tie_group_is_completed_from_the_whole_row() -> None:
    # 6 items tie; only 2 fit in the top 2. The relevant one has the highest index.
    preds = torch.zeros(1, 6)
    target = torch.tensor([[0, 0, 0, 0, 0, 1]])
    first = rank_metrics(preds, target, ["hit_rate"], 2, ties="first")
    optimistic = rank_metrics(preds, target, ["hit_rate"], 2, ties="optimistic")
    average = rank_metrics(preds, target, ["hit_rate"], 2, ties="average")
    assert first["hit_rate@2"].item() == 0.0
    assert optimistic["hit_rate@2"].item() == 1.0
    assert average["hit_rate@2"].item() == pytest.approx(2 / 6)


def test_count_true_counts_every_row() -> None:
    flags = torch.rand(7, 1000) < 0.5
    assert torch.equal(kernel.count_true(flags), flags.sum(dim=1))
    assert torch.equal(kernel.count_true(flags[:, :3]), flags[:, :3].sum(dim=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.float64])
@pytest.mark.parametrize("accelerator_paths", [False, True])
@pytest.mark.parametrize("threshold", [None, 2.0])
def test_ideal_gains_shortcut_for_rows_with_one_relevant_grade(
    dtype: torch.dtype,
    accelerator_paths: bool,
    threshold: float | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows whose relevant items share one grade skip the selection; others must not."""
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator_paths)
    generator = torch.Generator().manual_seed(11)
    rows = []
    for kind in range(6):
        row = (torch.rand(30, generator=generator) < 0.2).to(torch.float64)
        if kind == 1:
            row = row * 3  # one grade, not 1
        elif kind == 2:
            row[row > 0] = torch.randint(1, 4, (int(row.sum()),), generator=generator).double()
        elif kind == 3:
            row[0], row[1] = 2.0, -1.0  # a negative grade: not "no negative"
        elif kind == 4:
            row[:] = 0.0  # nothing relevant
        elif kind == 5:
            row[3], row[4] = 2.0, 2.0 - 2.0**-8  # nearly equal grades
        rows.append(row)
    mixed = torch.stack(rows).to(dtype)  # half the rows need the selection
    mostly_one_grade = torch.cat([mixed, mixed[:1].expand(20, -1)])  # a few rows do
    for grades in (mixed, mostly_one_grade):
        for gain in ("exponential", "linear"):
            relevance = kernel.DenseGrades(grades, kernel.GainRule(threshold, gain))
            count = relevance.relevant_count()
            got = relevance.ideal_gains(12, lambda count=count: count)
            want = relevance._top_gains(grades, 12)
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            # not counted: the selection itself, kept for shallower reads (issue 27)
            uncounted = kernel.DenseGrades(grades, kernel.GainRule(threshold, gain))
            got = uncounted.ideal_gains(12, _no_count)
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            assert uncounted.ideal_gains(1, _no_count).data_ptr() == got.data_ptr()


def _no_count() -> torch.Tensor:
    raise AssertionError("R counted")


@pytest.mark.parametrize("width", [0, 1, 7, 8, 9, 255, 2039, 2040, 2048, 2049, 4100])
def test_count_true_counts_every_row_whatever_its_width_and_alignment(width: int) -> None:
    generator = torch.Generator().manual_seed(width)
    flags = torch.rand(5, width + 3, generator=generator) < 0.9
    for view in (flags, flags[:, 1:], flags[:, 3:], flags[1:], flags.t().contiguous().t()):
        assert torch.equal(kernel.count_true(view), view.sum(dim=1))
    full = torch.ones(3, 255 * 8 * 3 + 5, dtype=torch.bool)  # every byte of every word at 255
    assert torch.equal(kernel.count_true(full), full.sum(dim=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int64])
@pytest.mark.parametrize("threshold", [None, 2.0, 2**40 + 1.0])
def test_grade_summary_in_row_blocks_equals_whole_matrix_counts(
    dtype: torch.dtype, threshold: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ranking_plugins.kernel import flags

    monkeypatch.setattr(flags, "COMPARE_BLOCK_ELEMENTS", 50)  # 3 rows a block, 7 blocks
    generator = torch.Generator().manual_seed(5)
    grades = torch.randint(-1, 4, (20, 16), generator=generator).to(dtype)
    if dtype == torch.int64:
        grades[::3] += 2**40  # beyond float32's integers: compared in the grades' dtype
        grades[1, 2] = 2**40 + 1
    grades[4] = 0
    rule = kernel.GainRule(threshold, "linear")
    summary = kernel.DenseGrades(grades, rule).summary()
    assert summary is not None
    relevant = rule.relevant(grades)
    assert torch.equal(summary.relevant, relevant.sum(dim=1))
    assert torch.equal(summary.largest, grades.amax(dim=1))
    assert torch.equal(summary.holders, (grades == grades.amax(dim=1, keepdim=True)).sum(dim=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
@pytest.mark.parametrize("check_nan", [False, True])
def test_counting_in_row_blocks_equals_brute_force_counts(
    dtype: torch.dtype, check_nan: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ranking_plugins.kernel import flags
    from ranking_plugins.kernel.statistics.counting import RankCounter, distinct_ids

    monkeypatch.setattr(flags, "COMPARE_BLOCK_ELEMENTS", 40)  # 2 rows a block
    generator = torch.Generator().manual_seed(6)
    scores = torch.randint(0, 6, (9, 17), generator=generator).to(dtype)  # many ties
    if dtype == torch.int64:
        scores = scores + 2**40  # differences of 1 beyond float32's integers
    scores[3] = torch.arange(17).to(dtype)  # no ties in this row
    ids = distinct_ids(torch.randint(-1, 17, (9, 3), generator=generator))
    own = scores.gather(1, ids.clamp(min=0))
    counter = RankCounter(ids, own, 17, "average")
    counter.add(scores, 0, check_nan=check_nan)
    other = torch.ones(9, 3, dtype=torch.int64)  # the item itself, taken back out
    above = (scores.unsqueeze(1) > own.unsqueeze(2)).sum(dim=2)
    tied = (scores.unsqueeze(1) == own.unsqueeze(2)).sum(dim=2) - other
    listed = ids >= 0
    assert torch.equal(counter.above[listed], above[listed])
    assert torch.equal(counter.tied[listed], tied[listed])


@pytest.mark.parametrize("accelerator", [False, True])
def test_row_blocks_are_cache_sized_on_the_cpu_and_memory_sized_on_an_accelerator(
    accelerator: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ranking_plugins.kernel import flags

    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator)
    scores = torch.zeros(1, 32768)
    rows = flags.compare_rows(32768, scores)
    if accelerator:  # a block is kernel launches, not a cache's worth
        assert rows == flags.ACCELERATOR_BLOCK_ELEMENTS // 32768
    else:
        assert rows == flags.COMPARE_BLOCK_ELEMENTS // 32768
    assert flags.compare_rows(32768, scores, cpu_elements=1 << 16) == (rows if accelerator else 2)


@pytest.mark.parametrize("metrics", [["mrr", "ndcg", "map"], ["hit_rate", "recall"]])
def test_accelerator_row_blocks_give_the_cpu_numbers(
    metrics: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted (whole lists, graded summary) and embeddings, in blocks of 2 rows on the
    accelerator's paths, equal the CPU's one-block numbers exactly."""
    from ranking_plugins import EmbeddingScores
    from ranking_plugins.batch_cache import last_batch
    from ranking_plugins.kernel import flags

    generator = torch.Generator().manual_seed(8)
    preds = torch.randint(0, 5, (9, 40), generator=generator).float()  # many ties
    grades = torch.randint(0, 4, (9, 40), generator=generator) * (preds > 1)
    query, items = torch.randn(9, 4, generator=generator), torch.randn(40, 4, generator=generator)
    item = torch.randint(0, 40, (9,), generator=generator)

    def evaluate() -> list[dict[str, torch.Tensor]]:
        last_batch.clear()
        return [
            rank_metrics(preds, grades, metrics, None),
            rank_metrics(EmbeddingScores(query, items, chunk_size=16), item, metrics, [1, 5]),
        ]

    expected = evaluate()
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)
    monkeypatch.setattr(flags, "ACCELERATOR_BLOCK_ELEMENTS", 80)  # 2 rows of 40, 5 of 16
    for got, want in zip(evaluate(), expected, strict=True):
        assert got.keys() == want.keys()
        for key in want:
            assert torch.equal(got[key], want[key]), key


def test_counting_in_row_blocks_finds_nan_in_any_block(monkeypatch: pytest.MonkeyPatch) -> None:
    from ranking_plugins.kernel import flags

    monkeypatch.setattr(flags, "COMPARE_BLOCK_ELEMENTS", 40)
    preds = torch.randn(9, 17, generator=torch.Generator().manual_seed(7))
    for place in ((0, 0), (8, 16), (5, 3)):
        bad = preds.clone()
        bad[place] = math.nan
        with pytest.raises(ValueError, match="must not contain NaN"):
            rank_metrics(bad, torch.arange(9), ["mrr"], 5)


@pytest.mark.parametrize("ties", kernel.TIES)
@pytest.mark.parametrize("top_k", [4, None])
def test_rows_without_ties_described_apart_give_the_grouped_numbers(
    ties: str, top_k: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    generator = torch.Generator().manual_seed(8)
    preds = torch.randn(12, 9, generator=generator)
    preds[::3, 2:6] = 0.5  # a third of the rows tie, the rest are distinct
    preds[1::3, 3] = preds[1::3, 4]  # and a tie of two in another third
    grades = torch.randint(0, 4, (12, 9), generator=generator).float()
    metrics = ["ndcg", "map", "mrr", "precision", "recall", "hit_rate"]
    fast = rank_metrics(preds, grades, metrics, top_k, ties=ties, reduction="none")
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)  # every row grouped
    last_batch.clear()
    grouped = rank_metrics(preds, grades, metrics, top_k, ties=ties, reduction="none")
    assert fast.keys() == grouped.keys()
    for key in fast:
        torch.testing.assert_close(fast[key], grouped[key], rtol=0, atol=0, equal_nan=True)


WHOLE_LIST = ["map", "mrr", "ndcg", "r_precision", "precision", "recall", "hit_rate"]


def _rows_in_tie_order(
    preds: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None, ties: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The same rows, each put in the order the kernel ranks it (a run file's order)."""
    whole = RankingRequest.create(["map"], None, Options(ties=ties, validate_args=False))
    ranked = whole.rank(preds, target, mask=mask)
    (_, stats), *_ = ranked.parts
    stats = stats.rank() if isinstance(stats, Unranked) else stats
    order = stats.list.items
    last_batch.clear()
    return (
        preds.gather(1, order),
        target.gather(1, order),
        None if mask is None else mask.gather(1, order),
    )


def _count_sorts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sorts: list[int] = []

    def counted(*args: object, **kwargs: object) -> None:
        sorts.append(1)
        sort_within_ties(*args, **kwargs)  # type: ignore[arg-type]

    def counted_lexsort(keys: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        sorts.append(1)
        return lexsort_desc(keys)

    monkeypatch.setattr(selection, "sort_within_ties", counted)
    # "average" without a mask on the accelerator's paths sorts the scores alone
    monkeypatch.setattr(selection, "lexsort_desc", counted_lexsort)
    return sorts


@pytest.mark.parametrize("ties", kernel.TIES)
@pytest.mark.parametrize("masked", [False, True])
def test_rows_already_in_tie_order_skip_the_sort_and_give_the_same_numbers(
    ties: str, masked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    generator = torch.Generator().manual_seed(16)
    preds = torch.randint(0, 6, (30, 14), generator=generator).double()  # many ties
    preds[::4] = torch.randn(8, 14, generator=generator, dtype=torch.float64)  # and none
    preds[2, :3] = -math.inf
    target = torch.randint(0, 3, (30, 14), generator=generator).double()
    target[::3, ::2] = -math.inf  # unjudged: never relevant
    mask = torch.rand(30, 14, generator=generator) < 0.8 if masked else None
    if mask is not None:
        mask[5] = False  # a row with nothing ranked
        preds[~mask & (torch.rand(30, 14, generator=generator) < 0.3)] = math.nan
    ordered = _rows_in_tie_order(preds, target, mask, ties)
    # masked NaN scores: no score at all (refused only by the check of every value)
    options = {"ties": ties, "reduction": "none", "validate_args": not masked}
    metrics, ks = WHOLE_LIST, [1, 3, 10]
    shuffled = rank_metrics(preds, target, metrics, ks, mask=mask, **options)
    sorts = _count_sorts(monkeypatch)
    in_order = rank_metrics(*ordered[:2], metrics, ks, mask=ordered[2], **options)
    assert not sorts  # every row was in order: no sort
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)  # sorted, every row grouped
    last_batch.clear()
    accelerator = rank_metrics(*ordered[:2], metrics, ks, mask=ordered[2], **options)
    assert sorts
    for key, values in shuffled.items():
        torch.testing.assert_close(in_order[key], values, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(accelerator[key], values, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("ties", kernel.TIES)
def test_rows_out_of_tie_order_are_sorted(ties: str, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = torch.Generator().manual_seed(17)
    preds = torch.randint(0, 4, (6, 9), generator=generator).double()
    target = torch.randint(0, 3, (6, 9), generator=generator).double()
    mask = torch.rand(6, 9, generator=generator) < 0.8
    ordered = _rows_in_tie_order(preds, target, mask, ties)
    sorts = _count_sorts(monkeypatch)
    # (row, what puts it out of order): a score that rises, in the first row or only the
    # last; a masked item before a ranked one at the lowest score; under "pessimistic" and
    # "optimistic", equal scores in the wrong order of relevance
    cases = [(0, "score"), (5, "score"), (5, "mask")]
    if ties in ("pessimistic", "optimistic"):
        cases.append((5, "key"))
    for row, case in cases:
        bad_preds, bad_target, bad_mask = (t.clone() for t in ordered)  # type: ignore[union-attr]
        bad_mask[row, :2] = True
        if case == "score":
            bad_preds[row, 1] = bad_preds[row, 0] + 1.0
        elif case == "mask":  # out of order by the mask alone
            bad_preds[row] = -math.inf
            bad_mask[row] = True
            bad_mask[row, 0] = False
        else:  # two scores above the rest, out of order by relevance alone
            bad_preds[row, :2] = bad_preds[row].max() + 10.0
            relevant_first = torch.tensor([2.0, 0.0], dtype=torch.float64)
            bad_target[row, :2] = (
                relevant_first if ties == "pessimistic" else relevant_first.flip(0)
            )
        last_batch.clear()
        before = len(sorts)
        got = rank_metrics(bad_preds, bad_target, WHOLE_LIST, None, mask=bad_mask, ties=ties)
        assert len(sorts) == before + 1, case
        again = _rows_in_tie_order(bad_preds, bad_target, bad_mask, ties)
        want = rank_metrics(again[0], again[1], WHOLE_LIST, None, mask=again[2], ties=ties)
        assert len(sorts) == before + 2  # the reordering ranked once; the rows in order never
        for key, values in got.items():
            torch.testing.assert_close(values, want[key], rtol=0, atol=0, equal_nan=True)


def test_rows_in_order_but_holding_nan_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    preds = torch.tensor([[3.0, 2.0, 1.0, 0.0], [3.0, 2.0, math.nan, 0.0]])
    target = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]])
    for mask in (None, torch.tensor([[True] * 4, [True, True, True, False]])):
        with pytest.raises(ValueError, match="must not contain NaN"):
            rank_metrics(preds, target, ["map"], None, mask=mask)  # no mask: after ranking
    # a NaN where the mask hides it is no score at all
    hidden = torch.tensor([[True] * 4, [True, True, False, True]])
    options = {"mask": hidden, "reduction": "none", "validate_args": False}
    got = rank_metrics(preds, target, ["map"], None, **options)
    without = rank_metrics(preds.nan_to_num(-5.0), target, ["map"], None, **options)
    assert torch.equal(got["map"], without["map"])


@pytest.mark.parametrize("ties", kernel.TIES)
def test_a_whole_list_ranking_read_at_k_ranks_blocks_only_to_k(
    ties: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    generator = torch.Generator().manual_seed(18)
    preds = torch.randint(0, 5, (20, 40), generator=generator).double()
    target = torch.randint(0, 3, (20, 40), generator=generator).double()
    mask = torch.rand(20, 40, generator=generator) < 0.9
    monkeypatch.setattr(ranked_batch, "WHOLE_ROW_BLOCK_ELEMENTS", 200)  # blocks of 5 rows
    options = Options(ties=ties)
    whole = RankingRequest.create(["map", "mrr"], None, options)
    at_k = RankingRequest.create(["ndcg", "precision", "mrr"], [1, 5, 10], options)
    ranked = whole.rank(preds, target, mask=mask)
    assert len(ranked.parts) == 4 and all(isinstance(s, Unranked) for _, s in ranked.parts)
    depths: list[int | None] = []
    rank_stats = ranked_batch.rank_stats

    def recorded(data: object, ties: str, depth: int | None, *args: object) -> object:
        depths.append(depth)
        return rank_stats(data, ties, depth, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ranked_batch, "rank_stats", recorded)
    from_whole = at_k.read(ranked)
    assert depths == [10] * 4
    last_batch.clear()
    own = at_k.read(at_k.rank(preds, target, mask=mask))
    for key, value in own.results.items():
        torch.testing.assert_close(
            from_whole.results[key].values, value.values, rtol=0, atol=0, equal_nan=True
        )


@pytest.mark.parametrize("ties", kernel.TIES)
def test_sums_over_the_relevant_places_equal_the_whole_row_sums(
    ties: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # AP and the reciprocal rank summed at their few places (CPU) or along every position
    generator = torch.Generator().manual_seed(19)
    preds = torch.randint(0, 4, (25, 12), generator=generator).double()
    preds[::2] = torch.randn(13, 12, generator=generator, dtype=torch.float64)
    target = torch.randint(0, 3, (25, 12), generator=generator).double()
    target[target > 0] *= torch.rand(25, 12, generator=generator)[target > 0] < 0.4
    target[3] = 0.0  # nothing relevant
    mask = torch.rand(25, 12, generator=generator) < 0.85
    metrics, ks = ["map", "mrr", "hit_rate", "r_precision"], list(range(1, 15))  # whole rows
    options = {"mask": mask, "ties": ties, "reduction": "none"}
    placed = rank_metrics(preds, target, metrics, ks, **options)
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)
    last_batch.clear()
    every_position = rank_metrics(preds, target, metrics, ks, **options)
    for key, values in placed.items():
        torch.testing.assert_close(values, every_position[key], rtol=0, atol=0, equal_nan=True)


#: metrics read at k and of whole lists that every ``ties`` policy takes
BINARY_AT_K = [*AT_K, "dcg", "rbp", "err", "relative_precision"]
BINARY_WHOLE = ["r_precision", "mean_rank", "auc", "bin_g", "g", "ndcg_rel", "rndcg"]


@pytest.mark.parametrize("ties", kernel.TIES)
@pytest.mark.parametrize("top_k", [4, None])
@pytest.mark.parametrize("masked", [False, True])
def test_bool_targets_and_rows_without_ties_give_the_general_forms_numbers(
    ties: str, top_k: int | None, masked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bool targets take their own shortcuts (the gain is the relevance tensor itself,
    the ideal DCG read from the discounts' sums), and on the CPU rows without ties take
    the closed forms at one item per group: the same 0/1 grades as floats through the
    general forms on every row (the accelerator paths) must give the same bits."""
    generator = torch.Generator().manual_seed(12)
    distinct = torch.randn(10, 9, generator=generator)
    tied = distinct.clone()
    tied[::3, 2:6] = 0.25  # a tie of four, across the cutoff 4 in some rows
    tied[1::3, 3] = tied[1::3, 4]  # a tie of two
    target = torch.rand(10, 9, generator=generator) < 0.4
    target[5] = False  # a query without a relevant item
    mask = torch.rand(10, 9, generator=generator) < 0.8 if masked else None
    metrics = BINARY_AT_K if top_k is not None else [*BINARY_AT_K, *BINARY_WHOLE]
    for preds in (distinct, tied):  # every row without ties, then some rows with
        options = {"mask": mask, "ties": ties, "reduction": "none"}
        monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)
        last_batch.clear()
        want = rank_metrics(preds, target.float(), metrics, top_k, **options)
        for accelerator_paths, grades in ((True, target), (False, target), (False, target.float())):
            monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator_paths)
            last_batch.clear()
            got = rank_metrics(preds, grades, metrics, top_k, **options)
            assert got.keys() == want.keys()
            for key in got:
                torch.testing.assert_close(
                    got[key], want[key], rtol=0, atol=0, equal_nan=True, msg=key
                )


def test_binary_ideal_dcg_from_the_discounts_sums_equals_the_ideal_list() -> None:
    """RankStats.idcg_at and cum_idcg of binary relevance (no (Q, L) ideal list) against
    the ideal list summed position by position, at cutoffs below, at and beyond R and L."""
    from ranking_plugins.kernel.inputs.parts import RankingInput
    from ranking_plugins.kernel.ranked_batch import rank_stats

    generator = torch.Generator().manual_seed(13)
    preds = torch.randn(6, 12, generator=generator)
    target = torch.zeros(6, 12, dtype=torch.bool)
    for row, relevant in enumerate([0, 1, 3, 5, 8, 12]):
        target[row, torch.randperm(12, generator=generator)[:relevant]] = True
    relevance = kernel.DenseGrades(target, kernel.GainRule(None, "exponential"))
    stats = rank_stats(RankingInput(preds, None, relevance, False), "first", 5)
    assert isinstance(stats, kernel.RankStats)
    discount = 1.0 / torch.log2(torch.arange(2, 8, dtype=torch.float64))
    count = target.sum(dim=1, keepdim=True)
    ideal = (torch.arange(6) < count).to(torch.float64) * discount  # 6 places: beyond L = 5
    prefix = torch.cat([torch.zeros(6, 1, dtype=torch.float64), ideal.cumsum(dim=1)], dim=1)
    k = torch.tensor([0.0, 1, 3, 5, 6, 40], dtype=torch.float64).expand(6, 6)
    want = prefix.gather(1, k.clamp(max=5).to(torch.int64))  # the list is 5 deep
    torch.testing.assert_close(stats.idcg_at(k, whole_list=False), want, rtol=0, atol=1e-15)
    torch.testing.assert_close(stats.cum_idcg, prefix[:, :6], rtol=0, atol=1e-15)


@pytest.mark.parametrize("judged", [False, True])
def test_graded_ideal_dcg_to_the_largest_k_equals_the_whole_ideal_list_read_at_k(
    judged: bool,
) -> None:
    """A whole-list ranking read at k selects the ideal list to the largest k only: the
    same bits as the whole row's ideal list read at k (graded rows, one-grade rows, rows
    without a relevant item, and judged items); and through rank_metrics, a whole-list
    request and an @k request sharing one ranking give the @k request's numbers alone."""
    from ranking_plugins.kernel.inputs.parts import RankingInput
    from ranking_plugins.kernel.ranked_batch import rank_stats

    generator = torch.Generator().manual_seed(21)
    preds = torch.randint(0, 6, (8, 40), generator=generator).to(torch.float64)
    target = torch.randint(-1, 4, (8, 40), generator=generator).to(torch.float64)
    target[1] = torch.where(target[1] > 0, 2.0, target[1])  # one relevant grade
    target[2] = target[2].clamp(max=0)  # nothing relevant
    pooled = torch.rand(8, 40, generator=generator) < 0.8 if judged else None
    relevance = kernel.DenseGrades(target, kernel.GainRule(None, "linear"), judged=pooled)
    stats = rank_stats(RankingInput(preds, None, relevance, False), "average", None)
    assert isinstance(stats, kernel.RankStats) and stats.length == 40
    k = torch.tensor([0.0, 1, 3, 7, 10], dtype=torch.float64).expand(8, 5)
    whole = stats.idcg_at(k, whole_list=False)  # the whole row's ideal list
    torch.testing.assert_close(stats.idcg_at(k, False, deepest=10), whole, rtol=0, atol=0)
    assert stats._ideal_dcgs[10].shape == (8, 11)
    # the command's path: one whole-list ranking read by an @k request (cli.evaluate)
    options = Options.create(ties="average", gain="linear")
    whole_lists = RankingRequest.create(("map",), None, options)
    at_k = RankingRequest.create(("ndcg",), [3, 10], options)
    ranked = whole_lists.rank(preds, target, judged=pooled)
    assert at_k.reads(whole_lists.ranking_key, whole_lists.depth)
    alone = at_k.evaluate(preds.clone(), target.clone(), judged=pooled)
    read = at_k.read(ranked)
    for key in at_k.keys:
        got, want = read.results[key].values, alone.results[key].values
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("gain", ["exponential", "linear"])
def test_graded_ndcg_at_k_counts_no_relevant_items(
    gain: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27 (W4): ndcg@k of integer grades reads the ideal list's top k, never R.

    R's walk over the grades (``DenseGrades.summary``) is a pass of its own; the
    values equal those of a request that counts R (map with it), ties included.
    """
    generator = torch.Generator().manual_seed(27)
    preds = torch.randint(0, 5, (16, 40), generator=generator).float()  # many ties
    grades = torch.randint(0, 5, (16, 40), generator=generator)
    grades[3] = 0  # no relevant item: undefined, skipped
    counted = rank_metrics(preds, grades, ["ndcg", "map"], [1, 5, 10], gain=gain)

    def walk(self: kernel.DenseGrades, *args: object) -> None:
        raise AssertionError("R counted")

    monkeypatch.setattr(kernel.DenseGrades, "summary", walk)
    alone = rank_metrics(preds, grades, "ndcg", [1, 5, 10], gain=gain)
    for k in (1, 5, 10):
        assert torch.equal(alone[f"ndcg@{k}"], counted[f"ndcg@{k}"])


def test_integer_grades_checked_and_ideal_list_from_one_selection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 27 (W4): under the exponential gain the check of integer grades reads their
    maxima; a ranking to depth k takes them from the ideal list's own top-k selection."""
    generator = torch.Generator().manual_seed(7)
    grades = torch.randint(0, 5, (6, 50), generator=generator)
    rule = kernel.GainRule(None, "exponential")
    want = kernel.DenseGrades(grades, rule)._top_gains(grades, 10)
    selections = []
    topk = torch.topk

    def counted(*args: object, **kwargs: object) -> object:
        selections.append(args[1] if len(args) > 1 else kwargs["k"])
        return topk(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(torch, "topk", counted)
    relevance = kernel.DenseGrades(grades, rule, select_depth=10)
    assert torch.equal(relevance.largest(), grades.amax(dim=1))
    got = relevance.ideal_gains(10, _no_count)
    assert torch.equal(relevance.ideal_gains(1, _no_count), got[:, :1])
    assert selections == [10]
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_grouped_mask_of_true_ranks_by_score_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27 (W3): the adapters' mask of True (no user mask) costs no sort by the flag,
    and the values are those without a mask."""
    from ranking_plugins.kernel.ranking import tie_groups

    sorted_by: list[int] = []
    lexsort = tie_groups.lexsort_desc

    def counted(keys: list[torch.Tensor]) -> torch.Tensor:
        sorted_by.append(len(keys))
        return lexsort(keys)

    monkeypatch.setattr(tie_groups, "lexsort_desc", counted)
    generator = torch.Generator().manual_seed(3)
    preds = torch.randint(0, 4, (60,), generator=generator).float()  # ties
    target = torch.randint(0, 2, (60,), generator=generator)
    indexes = torch.arange(6).repeat_interleave(10)
    mask = torch.ones(60, dtype=torch.bool)
    metrics = ["mrr", "ndcg", "map"]
    unmasked = rank_metrics(preds, target, metrics, indexes=indexes)
    masked = rank_metrics(preds, target, metrics, indexes=indexes, mask=mask)
    assert sorted_by == [1, 1]
    for key, value in unmasked.items():
        assert torch.equal(masked[key], value), key


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
@pytest.mark.parametrize("width", [32 * 160, 32 * 160 + 17, 32 * 321 - 1])
@pytest.mark.parametrize("pieces", ["whole", "row blocks"])
def test_top_grades_of_long_integer_rows_from_blocks_equal_topk(
    dtype: torch.dtype, width: int, pieces: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27 (W4): the top k grades of long integer rows come from the 32-column blocks
    with the largest maxima, never a top-k over the whole row; the values are topk's,
    with ties across blocks, a last shorter block, and the dtype's extreme values; in
    one row block or several (the last one shorter)."""
    from ranking_plugins.kernel.inputs import relevance
    from ranking_plugins.kernel.inputs.relevance import top_grades

    if pieces == "row blocks":  # 5 rows per block
        monkeypatch.setattr(relevance, "_MAXIMA_ELEMENTS", 5 * (width // 32))

    info = torch.iinfo(dtype)
    generator = torch.Generator().manual_seed(width)
    grades = torch.randint(0, 3, (9, width), generator=generator).to(dtype)
    grades[1] = 0  # one grade everywhere: every block ties
    grades[2, -3:] = info.max  # the largest grades in the last (shorter) block
    grades[3] = info.min
    grades[3, ::700] = info.min + 1  # few above the least value
    grades[4, 5:37] = info.max  # a whole block and its neighbours' edges
    grades[5] = torch.arange(width).remainder(7).to(dtype)  # many equal maxima
    wide = []
    topk = torch.topk

    def counted(*args: object, **kwargs: object) -> object:
        wide.append(args[0].shape[-1] >= width)  # type: ignore[attr-defined]
        return topk(*args, **kwargs)  # type: ignore[call-overload]

    for k in (1, 3, 10):
        want = topk(grades, k, dim=1).values
        monkeypatch.setattr(torch, "topk", counted)
        got = top_grades(grades, k)
        monkeypatch.setattr(torch, "topk", topk)
        assert got.dtype == dtype and torch.equal(got, want)
        assert not any(wide)
        # a column slice (rows not contiguous) reads the same blocks
        assert torch.equal(top_grades(grades[:, 1:], k), topk(grades[:, 1:], k, dim=1).values)
    assert top_grades(grades[:0], 3).shape == (0, 3)


@pytest.mark.parametrize("ties", kernel.TIES)
@pytest.mark.parametrize("gain", ["exponential", "linear"])
def test_graded_ndcg_of_long_integer_rows_equals_that_of_float_grades(ties: str, gain: str) -> None:
    """Issue 27 (W4): ndcg@k of long integer rows (ideal list from blocks) gives the bits
    of the same grades as float64 (ideal list from a top-k of the whole row), validated
    or not; ties in the scores across the cutoff included."""
    generator = torch.Generator().manual_seed(4)
    q, n = 12, 32 * 330 + 5  # 330 blocks: enough for k = 20
    preds = torch.randint(0, 50, (q, n), generator=generator).float()
    grades = torch.zeros(q, n, dtype=torch.int64)
    graded = torch.rand(q, n, generator=generator).topk(30, dim=1).indices
    grades.scatter_(1, graded, torch.randint(1, 5, (q, 30), generator=generator))
    grades[2] = 0  # nothing relevant
    grades[3, -4:] = 4  # the best grades in the last, shorter block
    ks = [1, 5, 10, 20]
    want = rank_metrics(preds, grades.double(), "ndcg", ks, gain=gain, ties=ties, reduction="none")
    for validate in (True, False):
        last_batch.clear()
        got = rank_metrics(
            preds,
            grades,
            "ndcg",
            ks,
            gain=gain,
            ties=ties,
            reduction="none",
            validate_args=validate,
        )
        for key, values in want.items():
            torch.testing.assert_close(got[key], values, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int16, torch.uint8])
def test_exponential_gain_of_integer_grades_reads_nothing_back(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27 (W4): no integer lies strictly between 0 and 1, so the exponential gain of
    integer grades takes no expm1 and no look at whether one is needed; 2^g - 1 exactly."""
    from ranking_plugins.kernel.inputs import relevance

    def read(*args: object) -> bool:
        raise AssertionError("looked for grades between 0 and 1")

    monkeypatch.setattr(relevance, "host_reads_are_free", read)
    grades = torch.tensor([[0, 1, 2, 4, 100, 7]], dtype=dtype)
    got = kernel.GainRule(None, "exponential").gain_of(grades)
    want = torch.tensor([[0.0, 1, 3, 15, 2.0**100 - 1, 127]], dtype=torch.float64)
    assert torch.equal(got, want)


@pytest.mark.parametrize("with_mask", [False, True])
def test_grouped_lists_of_one_length_in_order_are_ranked_as_views(
    with_mask: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27 (W3): a batch of candidate lists of one length, gathered by query,
    is ranked as views of the flat inputs (no padded copies), with the numbers of the
    same entries given out of order (gathered by query, no padded copies either) and of
    the dense matrix."""
    import importlib

    grouped = importlib.import_module("ranking_plugins.kernel.inputs.grouped")
    built: list[int] = []
    padded_rows = grouped._padded_rows

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(1)
        return padded_rows(*args, **kwargs)

    monkeypatch.setattr(grouped, "_padded_rows", counted)
    generator = torch.Generator().manual_seed(5)
    preds = torch.randint(0, 5, (7, 12), generator=generator).float()  # ties
    target = torch.randint(0, 3, (7, 12), generator=generator)
    judged = torch.rand(7, 12, generator=generator) < 0.8
    mask = torch.rand(7, 12, generator=generator) < 0.9 if with_mask else None
    indexes = torch.arange(7).repeat_interleave(12)
    metrics = ["mrr", "ndcg", "map", "precision", "bpref", "r_precision"]
    options = {"reduction": "none", "ties": "average"}

    def flat(t: torch.Tensor | None, order: torch.Tensor) -> torch.Tensor | None:
        return None if t is None else t.flatten()[order]

    def grouped_metrics(order: torch.Tensor) -> dict:
        return rank_metrics(
            flat(preds, order),
            flat(target, order),
            metrics,
            [1, 5],
            indexes=indexes[order],
            mask=flat(mask, order),
            judged=flat(judged, order),
            **options,
        )

    in_order = grouped_metrics(torch.arange(84))
    assert built == []
    shuffled = grouped_metrics(torch.randperm(84, generator=generator))
    assert built == []
    dense = rank_metrics(preds, target, metrics, [1, 5], mask=mask, judged=judged, **options)
    for key, value in dense.items():
        torch.testing.assert_close(in_order[key], value, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(shuffled[key], value, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize(
    ("dtype", "first", "step"),
    [
        (torch.int8, -100, 7),  # sorted as given (already narrow)
        (torch.int16, -30000, 6000),  # a span over int16's range
        (torch.int32, 5, 1),  # cast to int16 as they are
        (torch.int64, 32760 - 2**40, 3),  # a small span far from zero: less the lowest id
        (torch.int64, 0, 40_000),  # a span over int16's: int32 keys
        (torch.int64, -(2**40), 2**38),  # a span over int32's: sorted as int64
    ],
)
@pytest.mark.parametrize("accelerator_paths", [False, True])
def test_grouped_ids_out_of_order_of_any_range(
    dtype: torch.dtype,
    first: int,
    step: int,
    accelerator_paths: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Query ids out of order are sorted as the narrowest integers that hold their
    range: whatever the ids' dtype and range, the values are the dense matrix's, bit for
    bit, queries in the order of their ids (lists of one length, and of several)."""
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator_paths)
    generator = torch.Generator().manual_seed(11)
    queries, items = 9, 6
    preds = torch.randint(0, 4, (queries, items), generator=generator).float()  # ties
    target = torch.randint(0, 3, (queries, items), generator=generator)
    mask = torch.rand(queries, items, generator=generator) < 0.8
    ids = torch.tensor([first + step * q for q in range(queries)], dtype=torch.int64)
    order = torch.randperm(queries * items, generator=generator)
    metrics = ["mrr", "ndcg", "map", "precision"]
    options = {"reduction": "none", "ties": "average"}
    dense = rank_metrics(preds, target, metrics, [1, 3], mask=mask, **options)
    indexes = ids.to(dtype).repeat_interleave(items)[order]
    got = rank_metrics(
        preds.flatten()[order],
        target.flatten()[order],
        metrics,
        [1, 3],
        indexes=indexes,
        mask=mask.flatten()[order],
        **options,
    )
    for key, value in dense.items():
        torch.testing.assert_close(got[key], value, rtol=0, atol=0, equal_nan=True)
    # the last query's last items dropped: lists of two lengths, padded rows
    kept = order[(order < (queries - 1) * items + 2)]
    short = rank_metrics(
        preds.flatten()[kept],
        target.flatten()[kept],
        metrics,
        [1, 3],
        indexes=ids.to(dtype).repeat_interleave(items)[kept],
        mask=mask.flatten()[kept],
        **options,
    )
    last = rank_metrics(
        preds[-1:, :2], target[-1:, :2], metrics, [1, 3], mask=mask[-1:, :2], **options
    )
    for key, value in dense.items():
        torch.testing.assert_close(short[key][:-1], value[:-1], rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(short[key][-1:], last[key], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("gain", ["linear", "exponential"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.float64, torch.float32])
def test_gains_by_the_relevance_rule_equal_the_masked_gains(gain: str, dtype: torch.dtype) -> None:
    """Issue 27 (W3): integer grades under "grade > 0" skip the mask; every gain,
    and the sign of every zero (a float -0.0 grade), is the masked form's."""
    from ranking_plugins.kernel.inputs.relevance import GainRule

    grades = torch.tensor([-3, -1, 0, 1, 2, 4, 7], dtype=dtype)
    if dtype.is_floating_point:
        grades = torch.cat([grades, torch.tensor([-0.0, 0.5], dtype=dtype)])
    for threshold in (None, 2.0):
        rule = GainRule(threshold, gain)
        relevant = rule.relevant(grades)
        masked = torch.where(relevant, rule.gain_of(grades), 0.0)
        got = rule.gains(grades, relevant, by_this_rule=True)
        assert torch.equal(got, masked)
        assert torch.equal(got.signbit(), masked.signbit())
