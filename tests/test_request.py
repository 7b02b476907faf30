"""RankingRequest (validated options, rank reuse across metric objects) and Totals."""

from __future__ import annotations

import contextlib
import io
import math
import statistics
from collections import Counter
from pathlib import Path

import numpy
import pytest
import torch
from reference import reference_rank_metrics

import ranking_plugins.batch_cache as batch_cache
import ranking_plugins.kernel as kernel
from ranking_plugins import rank_metrics
from ranking_plugins.cli import main
from ranking_plugins.kernel.statistics.list_stats import Cutoff, ListStats
from ranking_plugins.per_query import Evaluation, ResultTable, result_matrices
from ranking_plugins.request import RankingRequest
from ranking_plugins.totals import VALUE_SCALE, Totals


@pytest.fixture
def rank_calls(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """Depths of every kernel ranking pass made through a RankingRequest."""
    calls: list[int | None] = []
    real = kernel.rank_batch

    def counting(batch, ties, depth, **keywords):  # type: ignore[no-untyped-def]
        calls.append(depth)
        return real(batch, ties, depth, **keywords)

    monkeypatch.setattr(kernel, "rank_batch", counting)
    batch_cache.last_batch.clear()
    return calls


def _batch(seed: int = 0, q: int = 6, n: int = 30) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    preds = torch.randint(0, 8, (q, n), generator=g).float()  # ties on purpose
    target = torch.randint(0, 3, (q, n), generator=g)
    return preds, target


def _means(request: RankingRequest, preds: torch.Tensor, target: torch.Tensor) -> dict:
    totals = Totals.of(request.evaluate(preds, target), request.keys, request.options.weighted)
    return totals.as_dict(totals.mean())


def test_same_batch_is_ranked_once_for_several_metric_objects(rank_calls: list) -> None:
    # The first batch is ranked twice: copies of a batch are taken only once
    # the same tensors came twice in a row (a single metric never pays for
    # them). From then on every batch is ranked once for all three metrics.
    for seed in range(3):
        preds, target = _batch(seed)
        results = {}
        for name in ("mrr", "ndcg", "hit_rate"):
            results.update(_means(RankingRequest.create(name, [1, 5]), preds, target))
        expected = rank_metrics(preds, target, ["mrr", "ndcg", "hit_rate"], [1, 5])
        assert results.keys() == expected.keys()
        for key, value in expected.items():
            torch.testing.assert_close(results[key], value, rtol=0, atol=1e-12)
    assert rank_calls == [5, 5, 5, 5]  # two for the first batch, one for each other


def test_one_metric_per_batch_keeps_no_copy() -> None:
    batch_cache.last_batch.clear()
    request = RankingRequest.create("mrr", 3)
    for seed in range(3):
        request.evaluate(*_batch(seed))
    entry = batch_cache.last_batch.entry
    assert entry is not None and entry.snapshot is None


def test_deeper_request_ranks_again_and_shallower_one_reuses(rank_calls: list) -> None:
    preds, target = _batch()
    _means(RankingRequest.create("ndcg", 3), preds, target)
    _means(RankingRequest.create("ndcg", 10), preds, target)  # deeper: new pass
    shallow = _means(RankingRequest.create("ndcg", 2), preds, target)  # reuses depth 10
    _means(RankingRequest.create("auc", None), preds, target)  # whole list: new pass
    assert rank_calls == [3, 10, None]
    torch.testing.assert_close(shallow["ndcg@2"], rank_metrics(preds, target, "ndcg", 2)["ndcg@2"])


@pytest.mark.parametrize(
    "change",
    [
        "in_place_preds",
        "in_place_target",
        "new_tensor",
        "ties",
        "threshold",
        "mask",
        # writes that bump no version counter (issue 11, item 1)
        "numpy_preds",
        "numpy_target",
        "data_preds",
    ],
)
def test_anything_that_changes_the_ranking_is_not_reused(rank_calls: list, change: str) -> None:
    array_preds, array_target = (t.numpy().copy() for t in _batch())
    preds, target = torch.from_numpy(array_preds), torch.from_numpy(array_target)
    first = RankingRequest.create("mrr", 5)
    first.evaluate(preds, target)
    first.evaluate(preds, target)  # the same tensors twice: a copy is kept from now on
    first.evaluate(preds, target)  # and proves them unchanged
    assert len(rank_calls) == 2
    second = first
    mask = None
    if change == "in_place_preds":
        preds.mul_(-1)
    elif change == "in_place_target":
        target[0].zero_()
    elif change == "new_tensor":
        preds = preds.clone()
    elif change == "ties":
        second = RankingRequest.create("mrr", 5, ties="pessimistic")
    elif change == "threshold":
        second = RankingRequest.create("mrr", 5, relevance_threshold=2)
    elif change == "numpy_preds":
        array_preds[:] = array_preds[:, ::-1]
    elif change == "numpy_target":
        array_target[:] = array_target[::-1]
    elif change == "data_preds":
        preds.data[:, 0] = 100.0
    else:
        mask = torch.ones_like(preds, dtype=torch.bool)
    result = second.evaluate(preds, target, mask=mask).results["mrr@5"].values
    assert len(rank_calls) == 3
    expected = rank_metrics(
        preds.clone(),
        target.clone(),
        "mrr",
        5,
        mask=mask,
        ties=second.options.ties,
        relevance_threshold=second.options.relevance_threshold,
        reduction="none",
    )["mrr@5"]
    torch.testing.assert_close(result, expected)


def test_numpy_buffer_rewritten_between_calls_gives_the_new_numbers() -> None:
    """Issue 11, item 1: rank_metrics on a reused numpy-backed buffer."""
    batch_cache.last_batch.clear()
    buffer = numpy.zeros((2, 4), dtype=numpy.float32)
    preds = torch.from_numpy(buffer)
    target = torch.tensor([0, 1])
    got = []
    for first_item in range(4):  # the relevant items' scores change every time
        buffer[:] = 0.0
        buffer[0, first_item] = 1.0
        buffer[1, (first_item + 1) % 4] = 1.0
        got.append(float(rank_metrics(preds, target, "mrr", 4)["mrr@4"]))
        want = reference_rank_metrics(torch.tensor(buffer), target, "mrr", 4)["mrr@4"]
        assert got[-1] == pytest.approx(float(want), abs=1e-12)
    assert len(set(got)) > 1


def test_options_that_only_read_the_ranking_reuse_it(rank_calls: list) -> None:
    preds, target = _batch()
    _means(RankingRequest.create("map", 4), preds, target)
    a = _means(RankingRequest.create("map", 4, empty_target_action="skip"), preds, target)
    b = _means(RankingRequest.create("map", 4, ap_denominator="min_k_relevant"), preds, target)
    assert rank_calls == [4, 4]  # the first two: no copy of the batch was kept yet
    assert a["map@4"] == rank_metrics(preds, target, "map", 4, empty_target_action="skip")["map@4"]
    assert (
        b["map@4"]
        == rank_metrics(preds, target, "map", 4, ap_denominator="min_k_relevant")["map@4"]
    )


def test_a_freed_batch_is_not_matched_by_a_new_tensor_at_the_same_address(
    rank_calls: list,
) -> None:
    request = RankingRequest.create("mrr", 3)
    for seed in range(5):
        preds, target = _batch(seed)
        want = rank_metrics(preds.clone(), target.clone(), "mrr", 3, reduction="none")
        got = request.evaluate(preds, target).results["mrr@3"].values
        torch.testing.assert_close(got, want["mrr@3"])
        del preds, target
    assert len(rank_calls) == 10  # the reference and the request, every batch


def test_gradients_are_not_tracked() -> None:
    preds = torch.randn(3, 7, requires_grad=True)
    target = torch.randint(0, 2, (3, 7))
    evaluation = RankingRequest.create("ndcg", 3).evaluate(preds, target)
    assert not evaluation.results["ndcg@3"].values.requires_grad


def test_inputs_are_detached_only_where_they_carry_gradients() -> None:
    """An input with autograd history is read detached; one without is read as given
    (no view to make): the same numbers either way, and no gradient tracked."""
    from ranking_plugins.kernel.inputs.checks import check_inputs

    preds = torch.randn(12)
    target = torch.rand(12)
    indexes = torch.arange(3).repeat_interleave(4)
    mask = torch.rand(12) < 0.8
    given = check_inputs(preds, target, indexes, mask, None)
    assert all(found is kept for found, kept in zip(given, (preds, target, indexes, mask)))
    tracked = (preds.clone().requires_grad_(), target.clone().requires_grad_())
    found_preds, found_target, *_ = check_inputs(*tracked, indexes, mask, None)
    assert not found_preds.requires_grad and not found_target.requires_grad
    request = RankingRequest.create(["ndcg", "map"], None)
    plain = request.evaluate(preds, target, indexes=indexes, mask=mask)
    graded = request.evaluate(*tracked, indexes=indexes, mask=mask)
    for key in ("ndcg", "map"):
        assert not graded.results[key].values.requires_grad
        assert torch.equal(graded.results[key].values, plain.results[key].values)


def test_request_keys_follow_metric_then_ascending_k() -> None:
    request = RankingRequest.create(["ndcg", "auc", "mrr"], [10, 1, 5, 5])
    assert request.keys == ("ndcg@1", "ndcg@5", "ndcg@10", "auc", "mrr@1", "mrr@5", "mrr@10")


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"ties": "random"}, ValueError, "ties"),
        ({"gain": "exp_rank"}, ValueError, "gain"),
        ({"target_format": "grouped"}, ValueError, "target_format"),
        ({"weighted": 1}, TypeError, "weighted"),
        ({"adaptive_k": "yes"}, TypeError, "adaptive_k"),
        ({"validate_args": None}, TypeError, "validate_args"),
        ({"relevance_threshold": "2"}, TypeError, "relevance_threshold"),
    ],
)
def test_bad_options_fail_when_the_request_is_made(
    kwargs: dict, error: type, argument: str
) -> None:
    with pytest.raises(error, match=f"`{argument}`"):
        RankingRequest.create("mrr", 5, **kwargs)


# ------------------------------------------------------------------ Totals


def _per_query(
    seed: int, weighted: bool = False, q: int = 50
) -> tuple[RankingRequest, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    preds = torch.randn(q, 40, generator=g)
    target = (torch.rand(q, 40, generator=g) < 0.1).long() * torch.randint(1, 4, (q, 40))
    return (
        RankingRequest.create(["ndcg", "mrr"], [3, 10], empty_target_action="skip"),
        preds,
        target,
    )


@pytest.mark.parametrize("weighted", [False, True])
def test_merged_totals_equal_the_totals_of_all_queries(weighted: bool) -> None:
    request, preds, target = _per_query(1, weighted)
    parts = [
        Totals.of(request.evaluate(p, t), request.keys, weighted)
        for p, t in zip(preds.split([7, 30, 13]), target.split([7, 30, 13]), strict=True)
    ]
    merged = parts[0].merge(parts[1]).merge(parts[2])
    whole = Totals.of(request.evaluate(preds, target), request.keys, weighted)
    torch.testing.assert_close(merged.sums, whole.sums, rtol=1e-12, atol=1e-12)
    expected = rank_metrics(
        preds, target, ["ndcg", "mrr"], [3, 10], empty_target_action="skip", weighted=weighted
    )
    for key, value in merged.as_dict(merged.mean()).items():
        torch.testing.assert_close(value, expected[key], rtol=1e-12, atol=1e-12)


def test_standard_error_is_sample_sd_over_root_n() -> None:
    request, preds, target = _per_query(2)
    evaluation = request.evaluate(preds, target)
    totals = Totals.of(evaluation, request.keys, False)
    for key, se in totals.as_dict(totals.standard_error()).items():
        r = evaluation.results[key]
        values = r.values[r.counted].tolist()
        expected = statistics.stdev(values) / math.sqrt(len(values))
        assert se.item() == pytest.approx(expected, rel=1e-10)


def test_weighted_standard_error_uses_effective_sample_size() -> None:
    # integer weights w_i behave like w_i repeated observations only for the mean;
    # the reliability-weight variance with n_eff = (Σw)²/Σw² is what is reported
    x = torch.tensor([0.2, 0.9, 0.5, 1.0], dtype=torch.float64)
    w = torch.tensor([1.0, 3.0, 2.0, 2.0], dtype=torch.float64)
    scaled = (w * x).sum() * 2.0**-VALUE_SCALE
    sums = torch.stack([w.sum(), (w * x).sum(), (w * x * x).sum(), (w * w).sum(), scaled])
    sums = sums.unsqueeze(1)
    totals = Totals(("m",), sums)
    mean = float((w * x).sum() / w.sum())
    variance = float((w * (x - mean) ** 2).sum() / (w.sum() - (w * w).sum() / w.sum()))
    n_effective = float(w.sum() ** 2 / (w * w).sum())
    assert totals.mean().item() == pytest.approx(mean, rel=1e-12)
    assert totals.standard_error().item() == pytest.approx(
        math.sqrt(variance / n_effective), rel=1e-12
    )


@pytest.mark.parametrize("weighted", [False, True])
def test_means_of_ordinary_values_are_the_plain_formula_to_the_bit(weighted: bool) -> None:
    """The mean is Σw·x / Σw to the bit wherever Σw·x does not overflow, tiny values
    included (the scaled row, kept for values near the float64 limit, would lose
    the bits of values below 2^-958)."""
    request, preds, target = _per_query(3, weighted)
    evaluation = request.evaluate(preds, target)
    values, counted = result_matrices(evaluation.results, request.keys)
    weight = counted.to(torch.float64)
    if weighted:
        weight = weight * evaluation.relevant_count.unsqueeze(1)
    for scale in (1.0, 1e-200, 1e-300):
        x = torch.where(counted, values, 0.0) * scale
        table = ResultTable(request.keys, x, counted)
        totals = Totals.of(Evaluation(table, evaluation.relevant_count), request.keys, weighted)
        plain = (weight * x).sum(0) / weight.sum(0)
        assert torch.equal(totals.mean(), plain), scale


def test_empty_totals_give_nan_and_merging_other_keys_fails() -> None:
    totals = Totals.zeros(("mrr@5",))
    assert totals.mean().isnan().all() and totals.standard_error().isnan().all()
    with pytest.raises(ValueError, match="cannot merge"):
        totals.merge(Totals.zeros(("ndcg@5",)))


def test_all_trec_builds_each_distinct_cutoff_once_per_part(
    trec_eval_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Cutoff caches the statistics it computes: two equal cutoffs of one part
    # (the k of a whole-list request and the whole list itself) computed them twice.
    built: list[tuple[int, bool, tuple[float, ...]]] = []
    parts: list[ListStats] = []  # kept alive, so that no two parts share an id
    real = Cutoff.__init__

    def spying(self: Cutoff, stats: ListStats, k: torch.Tensor, *args, **keywords) -> None:  # type: ignore[no-untyped-def]
        real(self, stats, k, *args, **keywords)
        parts.append(stats)
        built.append((id(stats), self.whole_list, tuple(k.flatten().tolist())))

    monkeypatch.setattr(Cutoff, "__init__", spying)
    files = [str(trec_eval_dir / "qrels.test"), str(trec_eval_dir / "results.test")]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["evaluate", "-m", "all_trec", *files]) == 0
    assert built, "the spy saw no cutoff"
    repeated = [cutoff for cutoff, count in Counter(built).items() if count > 1]
    assert not repeated, f"cutoffs built more than once in one part: {repeated}"


def test_pairs_give_each_metric_its_own_cutoff_from_one_ranking(rank_calls: list) -> None:
    preds, target = _batch(3)
    pairs = [("map", None), ("ndcg", 10), ("precision", 5), ("ndcg", None), ("r_precision", None)]
    request = RankingRequest.create(pairs)
    assert request.keys == ("map", "ndcg@10", "precision@5", "ndcg", "r_precision")
    evaluation = request.evaluate(preds, target)
    assert rank_calls == [None]  # one ranking, of the whole lists, for every pair
    assert tuple(evaluation.results) == request.keys  # no key that was not asked
    for metrics, top_k in (
        (["map", "ndcg", "r_precision"], None),
        (["ndcg", "precision"], [5, 10]),
    ):
        separate = RankingRequest.create(metrics, top_k).evaluate(preds, target).results
        for key, expected in separate.items():
            if key in evaluation.results:
                got = evaluation.results[key]
                torch.testing.assert_close(got.values, expected.values, rtol=0, atol=0)
                assert torch.equal(got.counted, expected.counted)


def test_pairs_of_k_only_rank_to_the_largest_k(rank_calls: list) -> None:
    request = RankingRequest.create([("ndcg", 3), ("precision", 7)])
    assert request.depth == 7
    request.evaluate(*_batch(4))
    assert rank_calls == [7]


@pytest.mark.parametrize(
    ("metrics", "top_k", "message"),
    [
        ([("ndcg", 10)], 5, "`top_k=5`: `metrics` are \\(metric, k\\) pairs"),
        (["map", ("ndcg", 10)], None, "expected names or \\(metric, k\\) pairs"),
        ([("ndcg", 0)], None, "the k of \\('ndcg', 0\\) must be an int >= 1"),
        ([("ndcg", 2.5)], None, "must be an int >= 1, or None"),
        ([("nope", None)], None, "unknown metric 'nope'"),
        ([(3, None)], None, "must be a name"),
    ],
)
def test_bad_pairs_are_refused_naming_the_argument(
    metrics: list, top_k: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        RankingRequest.create(metrics, top_k)
