"""Regression tests of issue 11 for the kernel: thresholds, gains, NaN, memory.

Each test failed on the kernel before the issue was fixed; the item number of
the issue is in the test's docstring.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest
import torch
from reference import reference_rank_metrics

from ranking_plugins import rank_metrics
from ranking_plugins.functional import ndcg

AT_K = ["hit_rate", "mrr", "precision", "recall", "f1", "map", "ndcg", "fall_out"]
WHOLE = ["r_precision", "mean_rank", "auc"]


def _close(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-12, msg=key)


# ----------------------------------------------------------- item 3: threshold <= 0


@pytest.mark.parametrize("threshold", [0, -1, 0.0, 1e-300])
@pytest.mark.parametrize("top_k", [3, None])
def test_bool_target_reads_false_as_grade_zero(threshold: float, top_k: int | None) -> None:
    """Item 3: with a bool target and a threshold <= 0, recall@3 and map@3 were 3.0."""
    preds = torch.tensor([[0.9, 0.8, 0.7, 0.2], [0.1, 0.5, 0.5, 0.9]])
    grades = torch.tensor([[1, 0, 0, 1], [0, 0, 1, 0]])
    metrics = AT_K + WHOLE
    as_bool = rank_metrics(preds, grades.bool(), metrics, top_k, relevance_threshold=threshold)
    as_int = rank_metrics(preds, grades, metrics, top_k, relevance_threshold=threshold)
    _close(as_bool, as_int)
    want = reference_rank_metrics(
        preds, grades, metrics, top_k, relevance_threshold=threshold, reduction="mean"
    )
    for key, value in want.items():
        assert as_bool[key].item() == pytest.approx(float(value), abs=1e-12), key
    assert as_bool[f"recall@{top_k}" if top_k else "recall"] <= 1


@pytest.mark.parametrize("threshold", [0.0, -2.0])
@pytest.mark.parametrize("ties", ["average", "first", "pessimistic", "optimistic"])
def test_grouped_padding_is_never_relevant(threshold: float, ties: str) -> None:
    """Item 3: the padding slots of short grouped lists counted as relevant."""
    lengths = [1, 2, 5, 3, 9]
    generator = torch.Generator().manual_seed(0)
    rows = [torch.randint(0, 3, (n,), generator=generator).float() for n in lengths]
    grades = [torch.randint(-1, 2, (n,), generator=generator) for n in lengths]
    metrics = AT_K + WHOLE
    options = dict(relevance_threshold=threshold, ties=ties, reduction="none")
    grouped = rank_metrics(
        torch.cat(rows),
        torch.cat(grades),
        metrics,
        [1, 4],
        indexes=torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths)),
        **options,
    )
    for q, (scores, target) in enumerate(zip(rows, grades, strict=True)):
        one = rank_metrics(scores[None], target[None], metrics, [1, 4], **options)
        for key in one:
            torch.testing.assert_close(grouped[key][q : q + 1], one[key], msg=key)


def test_empty_list_with_threshold_zero_is_an_empty_query() -> None:
    """Item 3: with N = 0 and empty_target_action="pos", hit_rate was 0 instead of 1."""
    for threshold in (None, 0.0, -5.0):
        result = rank_metrics(
            torch.empty(2, 0),
            torch.empty(2, 0),
            "hit_rate",
            3,
            relevance_threshold=threshold,
            empty_target_action="pos",
        )
        assert result["hit_rate@3"].item() == 1.0


def test_threshold_is_compared_exactly_in_the_grades_dtype() -> None:
    """16777216 >= 16777217.0 held once the threshold was rounded to float32."""
    preds = torch.tensor([[2.0, 1.0]])
    target = torch.tensor([[16_777_216, 16_777_217]])
    result = rank_metrics(preds, target, "mrr", 2, relevance_threshold=16_777_217.0, gain="linear")
    assert result["mrr@2"].item() == 0.5
    halves = torch.tensor([[0.1, 0.2]], dtype=torch.float32)  # 0.1f < 0.1000000015
    result = rank_metrics(preds, halves, "mrr", 2, relevance_threshold=0.1000000015)
    assert result["mrr@2"].item() == 0.5


# ----------------------------------------------------------- item 7: NaN threshold


@pytest.mark.parametrize("threshold", [math.nan, math.inf, -math.inf])
def test_non_finite_threshold_is_rejected(threshold: float) -> None:
    """Item 7: relevance_threshold=nan was accepted and made every metric 0."""
    with pytest.raises(ValueError, match="`relevance_threshold` must be a finite number"):
        rank_metrics(torch.rand(2, 3), torch.ones(2, 3), "mrr", relevance_threshold=threshold)


# ----------------------------------------------------------- item 8: gains and NaN


@pytest.mark.parametrize(
    ("grade", "gain"),
    [
        (1024.0, "exponential"),
        (5000.0, "exponential"),
        (math.inf, "linear"),
        (math.inf, "exponential"),
    ],
)
def test_gain_that_overflows_is_an_error(grade: float, gain: str) -> None:
    """Item 8: a grade >= 1024 (or +inf) gave NaN per query and a mean of 0.0."""
    preds = torch.tensor([[2.0, 1.0, 0.5]])
    target = torch.tensor([[grade, 0.0, 1.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="overflows float64"):
        ndcg(preds, target, top_k=2, gain=gain)


def test_sum_of_gains_that_overflows_is_an_error() -> None:
    """Three grades of 1023: each gain is finite, the ideal DCG is not."""
    preds = torch.tensor([[4.0, 3.0, 2.0, 1.0]])
    target = torch.tensor([[0.0, 1023.0, 1023.0, 1023.0]])
    with pytest.raises(ValueError, match="overflows float64"):
        ndcg(preds, target, top_k=4, gain="exponential")


@pytest.mark.parametrize("in_order", [True, False])
def test_sum_of_a_grouped_querys_gains_that_overflows_is_an_error(in_order: bool) -> None:
    """The grouped layout sums each query's gains by its entries' query, in order or not;
    another query's entries must not be summed with them (2^1022 is finite three times
    over, not four)."""
    preds = torch.tensor([4.0, 3.0, 2.0, 1.0, 4.0, 3.0, 2.0, 1.0])
    target = torch.tensor([0.0, 1022.0, 1022.0, 0.0, 1022.0, 1022.0, 1022.0, 1022.0])
    indexes = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    order = torch.arange(8) if in_order else torch.tensor([4, 0, 5, 1, 6, 2, 7, 3])
    with pytest.raises(ValueError, match="overflows float64"):
        rank_metrics(
            preds[order], target[order], "ndcg", 4, indexes=indexes[order], gain="exponential"
        )
    fine = target.clone()
    fine[7] = 0.0
    rank_metrics(preds[order], fine[order], "ndcg", 4, indexes=indexes[order], gain="exponential")


def test_largest_finite_gains_are_exact() -> None:
    preds = torch.tensor([[2.0, 1.0]])
    target = torch.tensor([[0.0, 1023.0]])
    value = ndcg(preds, target, top_k=2, gain="exponential").item()
    assert value == pytest.approx(1 / math.log2(3), rel=1e-15)


def test_a_nan_per_query_value_is_never_averaged_as_zero() -> None:
    """Item 8: without validation the overflow cannot be reported; the mean is NaN, not 0."""
    preds = torch.tensor([[2.0, 1.0], [2.0, 1.0]])
    target = torch.tensor([[2000.0, 0.0], [1.0, 0.0]])
    mean = ndcg(preds, target, top_k=2, gain="exponential", validate_args=False)
    assert mean.isnan()


def test_tiny_grade_earns_a_gain_under_the_exponential_gain() -> None:
    """Item 8: 2**1e-20 - 1 cancels to 0 (ndcg@2 0 while hit_rate@2 1); expm1 does not."""
    preds = torch.tensor([[2.0, 1.0]])
    target = torch.tensor([[0.0, 1e-20]], dtype=torch.float64)
    result = rank_metrics(preds, target, ["ndcg", "hit_rate"], 2, gain="exponential")
    assert result["hit_rate@2"].item() == 1.0
    assert result["ndcg@2"].item() == pytest.approx(1 / math.log2(3), rel=1e-12)


def test_subnormal_grade_is_not_clamped_in_a_denominator() -> None:
    """Item 8: a linear grade of 1e-310 was clamped to 1e-300: ndcg@2 6.3e-11, not 0.63."""
    preds = torch.tensor([[2.0, 1.0]])
    target = torch.tensor([[0.0, 1e-310]], dtype=torch.float64)
    value = ndcg(preds, target, top_k=2, gain="linear").item()
    assert value == pytest.approx(1 / math.log2(3), rel=1e-9)


# ----------------------------------------------------------- items 9 and 10: memory


def _peak_growth(code: str) -> float:
    """MiB that peak RSS grew by while ``code`` ran, after its ``setup`` part."""
    script = textwrap.dedent(
        """
        import resource, torch
        from ranking_plugins import rank_metrics
        torch.set_num_threads(1)
        def peak():
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        {code}
        print(after - before)
        """
    ).format(code=textwrap.indent(textwrap.dedent(code), "").strip())
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return float(run.stdout.split()[-1])


def test_grouped_layout_memory_does_not_grow_with_the_longest_list() -> None:
    """Item 9: every query was padded to the longest one (O(queries x longest list))."""
    growth = _peak_growth(
        """
        short, long = 10_000, 10_000
        indexes = torch.cat([torch.arange(short), torch.full((long,), short)])
        preds = torch.rand(short + long)
        target = (torch.rand(short + long) < 0.3).float()
        before = peak()
        result = rank_metrics(preds, target, ["mrr", "ndcg", "auc"], 10, indexes=indexes)
        assert result["mrr@10"].isfinite()
        after = peak()
        """
    )
    # padded to the longest list this is 10,001 x 10,000 slots: several GB
    assert growth < 200, f"peak memory grew by {growth:.0f} MiB"


def test_whole_list_metrics_rank_dense_rows_in_blocks() -> None:
    """Item 10: whole-list metrics used about 137 bytes per (query, item)."""
    growth = _peak_growth(
        """
        preds = torch.rand(64, 200_000)
        target = torch.rand(64, 200_000) < 0.01
        before = peak()
        result = rank_metrics(preds, target, ["auc", "mean_rank", "ndcg"], None)
        assert result["auc"].isfinite()
        after = peak()
        """
    )
    preds_mib = 64 * 200_000 * 4 / 2**20  # 49 MiB
    # Before: about 137 bytes per element, 1.7 GiB here. Now one block of about
    # 2^20 elements (140 MiB) is live at a time; glibc keeps some of the freed
    # blocks' heap, so the high-water mark reads about 430 MiB.
    assert growth < 12 * preds_mib, f"peak memory grew by {growth:.0f} MiB"


def test_grouped_gains_are_summed_per_query() -> None:
    """Two queries, each with one gain near the float64 limit: no overflow in either."""
    preds = torch.tensor([0.0, 1.0, 0.0, 1.0])
    target = torch.tensor([-3, 1023, -3, 1023])
    indexes = torch.tensor([0, 0, 7, 7])
    assert ndcg(preds, target, indexes=indexes, top_k=2).item() == 1.0


@pytest.mark.parametrize("ties", ["first", "average", "pessimistic"])
@pytest.mark.parametrize("lengths", ["alike", "skewed"])
def test_grouped_input_in_query_order_or_not_gives_the_same_numbers(
    ties: str, lengths: str
) -> None:
    """Items gathered query by query (no sort, one padded part when padding costs at most
    twice the items) or in blocks out of query order (sorted, length classes)."""
    generator = torch.Generator().manual_seed(16)
    sizes = [20 + q % 5 for q in range(30)] if lengths == "alike" else [1] * 25 + [3, 40, 200]
    blocks = []
    for query, size in enumerate(sizes):
        scores = torch.randint(0, 6, (size,), generator=generator).to(torch.float64)
        grades = torch.randint(0, 3, (size,), generator=generator).to(torch.float64)
        mask = torch.rand(size, generator=generator) > 0.1
        blocks.append((scores, grades, torch.full((size,), query), mask))
    metrics = ("ndcg", "map", "mrr", "precision")
    results = []
    for order in (range(len(sizes)), reversed(range(len(sizes)))):
        preds, target, indexes, mask = (torch.cat(t) for t in zip(*[blocks[q] for q in order]))
        results.append({
            key: value
            for top_k in (None, [1, 5])
            for key, value in rank_metrics(preds, target, metrics, top_k, indexes=indexes,
                                           mask=mask, ties=ties, reduction="none").items()
        })  # fmt: skip
    assert results[0].keys() == results[1].keys()
    for key in results[0]:
        torch.testing.assert_close(results[0][key], results[1][key], rtol=0, atol=1e-12)
