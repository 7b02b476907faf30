"""``ranking_plugins.torchmetrics``: state, collections, errors and the Metric protocol.

References come from :func:`ranking_plugins.rank_metrics` on the same inputs
(itself tested against trec_eval and the worked examples) or from a metric fed
the whole data in one go.
"""

from __future__ import annotations

import importlib
import io
import math
import pickle
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torchmetrics import MetricCollection

import ranking_plugins
import ranking_plugins.batch_cache
import ranking_plugins.kernel
import ranking_plugins.request
from ranking_plugins import torchmetrics as rp
from ranking_plugins.metrics import HOST_UNDER_AVERAGE, METRICS
from ranking_plugins.torchmetrics.errors import _torchmetrics_refusal
from tests.host_reads import forbid_host_reads

SINGLE = {
    "hit_rate": rp.HitRate,
    "mrr": rp.MRR,
    "ndcg": rp.NDCG,
    "map": rp.MAP,
    "precision": rp.Precision,
    "recall": rp.Recall,
    "f1": rp.F1,
    "fall_out": rp.FallOut,
    "r_precision": rp.RPrecision,
    "mean_rank": rp.MeanRank,
    "auc": rp.AUC,
}


def batches(seed: int, n: int = 3, rows: int = 6, cols: int = 8) -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        r = rows + i  # uneven batch sizes
        preds = torch.randn(r, cols, generator=g)
        target = torch.randint(0, 3, (r, cols), generator=g) * (
            torch.rand(r, cols, generator=g) < 0.4
        )
        out.append((preds, target))
    return out


def flat_batches(seed: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Grouped triples in three updates, queries spread across them."""
    g = torch.Generator().manual_seed(seed)
    indexes = torch.randint(0, 9, (60,), generator=g)
    preds = torch.randn(60, generator=g)
    target = (torch.rand(60, generator=g) < 0.3).long()
    return [(preds[a:b], target[a:b], indexes[a:b]) for a, b in ((0, 13), (13, 14), (14, 60))]


def reference(data: list[tuple[torch.Tensor, ...]], metrics: Any, top_k: Any, **options: Any):
    """rank_metrics on every batch at once (dense rows stacked / grouped triples joined)."""
    options.setdefault("gain", "linear")
    options.setdefault("fall_out_empty", "no_nonrelevant")  # TorchMetrics' rule (issue 26)
    if len(data[0]) == 3:
        preds, target, indexes = (torch.cat(parts) for parts in zip(*data))
        return ranking_plugins.rank_metrics(
            preds, target, metrics, top_k, indexes=indexes, **options
        )
    preds, target = (torch.cat(parts) for parts in zip(*data))
    return ranking_plugins.rank_metrics(preds, target, metrics, top_k, **options)


def assert_same(ours: Any, expected: Any) -> None:
    if isinstance(expected, dict):
        assert isinstance(ours, dict) and list(ours) == list(expected)
        for key in expected:
            torch.testing.assert_close(ours[key], expected[key], equal_nan=True)
    else:
        torch.testing.assert_close(ours, expected, equal_nan=True)


# ------------------------------------------------------------ results and form


@pytest.mark.parametrize("name", list(SINGLE))
def test_each_metric_equals_rank_metrics(name: str) -> None:
    data = batches(seed=1)
    at_k = METRICS[name].at_k
    metric = SINGLE[name](top_k=[1, 3, 5]) if at_k else SINGLE[name]()
    for preds, target in data:
        metric.update(preds, target)
    expected = reference(data, [name], [1, 3, 5])
    assert_same(metric.compute(), expected if at_k else expected[name])


def test_one_k_gives_a_scalar_several_give_a_dict() -> None:
    data = batches(seed=2)
    one, several, none = rp.NDCG(top_k=5), rp.NDCG(top_k=[10, 5, 5]), rp.NDCG()
    for preds, target in data:
        for metric in (one, several, none):
            metric.update(preds, target)
    expected = reference(data, ["ndcg"], [5, 10])
    assert_same(one.compute(), expected["ndcg@5"])
    assert_same(several.compute(), expected)
    assert_same(none.compute(), reference(data, ["ndcg"], None)["ndcg"])
    assert one.compute().ndim == 0


def test_ranking_metrics_always_a_dict_in_table_order() -> None:
    data = batches(seed=3)
    metric = rp.RankingMetrics(["ndcg", "auc", "mrr"], top_k=4)
    for preds, target in data:
        metric.update(preds, target)
    result = metric.compute()
    assert list(result) == ["ndcg@4", "auc", "mrr@4"]
    assert_same(result, reference(data, ["ndcg", "auc", "mrr"], 4))
    single = rp.RankingMetrics("mrr", top_k=4)
    single.update(*data[0])
    assert isinstance(single.compute(), dict)


@pytest.mark.parametrize(
    "options",
    [
        {"ties": "first"},
        {"ties": "pessimistic", "empty_target_action": "skip"},
        {"relevance_threshold": 2},
        {"gain": "exponential", "weighted": True},
        {"ap_denominator": "min_k_relevant", "empty_target_action": "pos"},
        {"adaptive_k": True},
    ],
)
def test_options_reach_the_kernel(options: dict[str, Any]) -> None:
    g = torch.Generator().manual_seed(4)
    data = [
        (torch.randint(0, 4, (5, 6), generator=g).float(), torch.randint(0, 3, (5, 6), generator=g))
        for _ in range(2)
    ]  # integer-valued scores: many ties
    names = ["ndcg", "map", "precision", "mrr"]
    metric = rp.RankingMetrics(names, top_k=[2, 8], **options)
    for preds, target in data:
        metric.update(preds, target)
    assert_same(metric.compute(), reference(data, names, [2, 8], **options))


def test_item_index_layout_and_mask() -> None:
    g = torch.Generator().manual_seed(5)
    preds = torch.randn(6, 10, generator=g)
    target = torch.randint(-1, 10, (6, 3), generator=g)
    mask = torch.rand(6, 10, generator=g) < 0.8
    metric = rp.RankingMetrics(["recall", "ndcg"], top_k=[3, 10])
    metric.update(preds[:4], target[:4], mask=mask[:4])
    metric.update(preds[4:], target[4:], mask=mask[4:])
    expected = ranking_plugins.rank_metrics(
        preds, target, ["recall", "ndcg"], [3, 10], mask=mask, gain="linear"
    )
    assert_same(metric.compute(), expected)


def test_grouped_layout_with_mask_and_mixed_layouts() -> None:
    flat = flat_batches(seed=6)
    dense = batches(seed=6, n=1)
    metric = rp.RankingMetrics(["mrr", "map"], top_k=[2, 5])
    masks = [torch.arange(len(p)) % 4 != 1 for p, _, _ in flat]
    for (preds, target, indexes), mask in zip(flat, masks):
        metric.update(preds, target, indexes=indexes, mask=mask)
    metric.update(*dense[0])
    preds, target, indexes = (torch.cat(parts) for parts in zip(*flat))
    grouped = ranking_plugins.rank_metrics(
        preds,
        target,
        ["mrr", "map"],
        [2, 5],
        indexes=indexes,
        mask=torch.cat(masks),
        reduction="none",
    )
    dense_values = ranking_plugins.rank_metrics(*dense[0], ["mrr", "map"], [2, 5], reduction="none")
    result = metric.compute()
    for key in result:
        torch.testing.assert_close(result[key], torch.cat([grouped[key], dense_values[key]]).mean())


def test_standard_error() -> None:
    data = batches(seed=7)
    metric = rp.MRR(top_k=[1, 5])
    for preds, target in data:
        metric.update(preds, target)
    per_query = reference(data, ["mrr"], [1, 5], reduction="none")
    result = metric.compute_standard_error()
    assert isinstance(result, dict)
    for key, values in per_query.items():
        expected = values.std() / math.sqrt(values.numel())
        torch.testing.assert_close(result[key], expected)
    empty = rp.MRR(top_k=1)
    empty.update(*[t[:1] for t in data[0]])
    assert torch.isnan(empty.compute_standard_error())  # one query: undefined


def test_no_counted_query_gives_nan() -> None:
    metric = rp.MRR(empty_target_action="skip")
    metric.update(torch.rand(2, 3), torch.zeros(2, 3))
    assert torch.isnan(metric.compute())


# ----------------------------------------------------------------- collections


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts calls of the rank kernel (``rank_batch``) as RankingRequest makes them."""
    calls: list[int] = []
    original = ranking_plugins.kernel.rank_batch

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(ranking_plugins.kernel, "rank_batch", counting)
    ranking_plugins.batch_cache.last_batch.clear()
    yield calls
    ranking_plugins.batch_cache.last_batch.clear()


def collection(**options: Any) -> MetricCollection:
    return MetricCollection(
        {
            "mrr": rp.MRR(top_k=10, **options),
            "ndcg": rp.NDCG(top_k=10, **options),
            "hit_rate": rp.HitRate(top_k=10, **options),
        }
    )


@pytest.mark.parametrize("options", [{}, {"ignore_index": -1}, {"validate_args": False}])
@pytest.mark.parametrize("call", ["update", "forward"])
def test_collection_ranks_each_batch_once(
    kernel_calls: list[int], options: dict[str, Any], call: str
) -> None:
    data = batches(seed=8, n=4, cols=12)
    metrics = collection(**options)
    steps = []
    for i, (preds, target) in enumerate(data):
        before = len(kernel_calls)
        if call == "update":
            metrics.update(preds, target)
        else:
            steps.append(metrics(preds, target))
        passes = len(kernel_calls) - before
        # the first batch is ranked twice: copies of a batch are kept (to prove the
        # next metric's inputs unchanged) only once the same `preds` came twice
        expected_passes = 2 if i == 0 else 1
        assert passes == expected_passes, f"batch {i}: {passes} passes"
    for step, batch in zip(steps, data, strict=False):  # forward: each batch's own value
        assert_same(step["mrr"], reference([batch], ["mrr"], 10)["mrr@10"])
    expected = reference(data, ["mrr", "ndcg", "hit_rate"], 10)
    result = metrics.compute()
    for name in ("mrr", "ndcg", "hit_rate"):
        assert_same(result[name], expected[f"{name}@10"])


def test_separate_metrics_would_rank_three_times(kernel_calls: list[int]) -> None:
    """The counter is real: different tensors (copies) are ranked again."""
    preds, target = batches(seed=9, n=1)[0]
    for metric in (rp.MRR(top_k=10), rp.NDCG(top_k=10), rp.HitRate(top_k=10)):
        metric.update(preds.clone(), target.clone())
    assert len(kernel_calls) == 3


@pytest.mark.parametrize("compute_groups", [True, False])
def test_compute_groups_do_not_mix_metrics_with_equal_first_states(compute_groups: bool) -> None:
    """First batch: every query hits at rank 1, so MRR@10 and HitRate@10 have equal
    sums. TorchMetrics would merge metrics with equal states into one compute
    group; the states are named after what they compute, so they are not."""
    first = (torch.tensor([[0.9, 0.1, 0.2], [0.1, 0.8, 0.3]]), torch.tensor([[1, 0, 0], [0, 1, 0]]))
    second = (
        torch.tensor([[0.9, 0.1, 0.2], [0.1, 0.8, 0.3]]),
        torch.tensor([[0, 0, 1], [1, 0, 0]]),
    )
    metrics = MetricCollection(
        {"mrr": rp.MRR(top_k=10), "hit_rate": rp.HitRate(top_k=10), "mrr2": rp.MRR(top_k=10)},
        compute_groups=compute_groups,
    )
    metrics.update(*first)
    metrics.update(*second)
    expected = reference([first, second], ["mrr", "hit_rate"], 10)
    result = metrics.compute()
    assert_same(result["mrr"], expected["mrr@10"])
    assert_same(result["mrr2"], expected["mrr@10"])
    assert_same(result["hit_rate"], expected["hit_rate@10"])
    if compute_groups:  # two identical MRR metrics may share one state
        assert ["mrr", "mrr2"] in list(metrics.compute_groups.values())
        assert ["hit_rate"] in list(metrics.compute_groups.values())


def test_collection_grouped_layout() -> None:
    flat = flat_batches(seed=10)
    metrics = collection()
    for preds, target, indexes in flat:
        metrics.update(preds, target, indexes=indexes)
    expected = reference(flat, ["mrr", "ndcg", "hit_rate"], 10)
    result = metrics.compute()
    for name in ("mrr", "ndcg", "hit_rate"):
        assert_same(result[name], expected[f"{name}@10"])


def grouped_collection(**options: Any) -> MetricCollection:
    return MetricCollection(
        {
            "mrr": rp.MRR(top_k=10, **options),
            "ndcg": rp.NDCG(top_k=10, **options),
            "map": rp.MAP(top_k=10, **options),
        }
    )


@pytest.mark.parametrize("options", [{}, {"ignore_index": 0}, {"validate_args": False}])
def test_collection_keeps_one_copy_and_ranks_grouped_state_once(
    kernel_calls: list[int], options: dict[str, Any]
) -> None:
    """Issue 12 item 4: MRR, NDCG and MAP over grouped updates: the metrics' states
    hold the same copy of each batch, and ``compute`` ranks it once for all three."""
    flat = flat_batches(seed=21)
    metrics = grouped_collection(**options)
    for preds, target, indexes in flat:
        metrics.update(preds, target, indexes=indexes)
    assert kernel_calls == []  # update keeps the triples; nothing is ranked yet
    states = [(m.flat_preds, m.flat_target, m.flat_indexes, m.flat_mask) for m in metrics.values()]
    for other in states[1:]:
        for mine, theirs in zip(states[0], other, strict=True):
            kept = [t for t in mine if t.numel()]
            assert len(kept) == len(flat)
            assert all(a is b for a, b in zip(kept, [t for t in theirs if t.numel()], strict=True))
    result = metrics.compute()
    assert len(kernel_calls) == 1
    ignore = options.get("ignore_index")
    kept = flat if ignore is None else [tuple(t[b[1] != ignore] for t in b) for b in flat]
    expected = reference(kept, ["mrr", "ndcg", "map"], 10)
    for name in ("mrr", "ndcg", "map"):
        assert_same(result[name], expected[f"{name}@10"])


def test_collection_grouped_state_is_ranked_again_after_another_update(
    kernel_calls: list[int],
) -> None:
    flat = flat_batches(seed=22)
    metrics = grouped_collection()
    metrics.update(*flat[0][:2], indexes=flat[0][2])
    first = metrics.compute()
    for preds, target, indexes in flat[1:]:
        metrics.update(preds, target, indexes=indexes)
    second = metrics.compute()
    assert len(kernel_calls) == 2
    assert_same(first["mrr"], reference(flat[:1], ["mrr"], 10)["mrr@10"])
    assert_same(second["mrr"], reference(flat, ["mrr"], 10)["mrr@10"])


def test_a_buffer_rewritten_between_two_metrics_updates_is_copied_again() -> None:
    """Sharing a copy needs the next metric's inputs proved equal to it, not only
    the same objects: a numpy-backed buffer rewritten in between is copied anew."""
    np = pytest.importorskip("numpy")
    buffer = np.array([0.9, 0.1, 0.5, 0.3], dtype=np.float64)
    preds = torch.from_numpy(buffer)
    target = torch.tensor([1, 0, 0, 1])
    indexes = torch.tensor([0, 0, 1, 1])
    first, second = rp.MRR(top_k=2), rp.MRR(top_k=2)
    first.update(preds, target, indexes=indexes)
    buffer[:] = [0.1, 0.9, 0.5, 0.3]  # bumps no version counter
    second.update(preds, target, indexes=indexes)
    assert first.flat_preds[-1] is not second.flat_preds[-1]
    assert_same(first.compute(), torch.tensor(0.75, dtype=torch.float64))
    assert_same(second.compute(), torch.tensor(0.5, dtype=torch.float64))


# ------------------------------------------------- state: save, merge, pickle


def fed(metric: rp.BaseRankingMetric, data: list[tuple[torch.Tensor, ...]]) -> rp.BaseRankingMetric:
    for batch in data:
        if len(batch) == 3:
            metric.update(batch[0], batch[1], indexes=batch[2])
        else:
            metric.update(*batch)
    return metric


def make() -> rp.RankingMetrics:
    return rp.RankingMetrics(["mrr", "ndcg", "auc"], top_k=[1, 4])


@pytest.mark.parametrize("layout", ["dense", "grouped", "both"])
def test_state_dict_round_trip_mid_epoch(layout: str) -> None:
    dense, flat = batches(seed=11), flat_batches(seed=11)
    data: list[tuple[torch.Tensor, ...]] = {
        "dense": list(dense),
        "grouped": list(flat),
        "both": [dense[0], flat[0], dense[1], flat[1], flat[2], dense[2]],
    }[layout]
    first = make()
    first.persistent(True)
    fed(first, data[:2])
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    restored = make()
    restored.persistent(True)
    restored.load_state_dict(torch.load(buffer, weights_only=False))
    fed(restored, data[2:])
    assert_same(restored.compute(), fed(make(), data).compute())


def test_merge_state() -> None:
    dense, flat = batches(seed=12), flat_batches(seed=12)
    a = fed(make(), [dense[0], flat[0], flat[1]])
    b = fed(make(), [dense[1], dense[2], flat[2]])
    a.merge_state(b)
    assert_same(a.compute(), fed(make(), dense + flat).compute())


def test_pickle_mid_epoch_and_reset() -> None:
    dense, flat = batches(seed=13), flat_batches(seed=13)
    metric = fed(make(), [dense[0], flat[0]])
    copy = pickle.loads(pickle.dumps(metric))
    fed(copy, [dense[1], flat[1]])
    assert_same(copy.compute(), fed(make(), [dense[0], flat[0], dense[1], flat[1]]).compute())
    copy.reset()
    with pytest.warns(UserWarning, match="before the ``update``"):
        assert all(v.isnan() for v in copy.compute().values())
    fed(copy, [dense[2], flat[2]])
    assert_same(copy.compute(), fed(make(), [dense[2], flat[2]]).compute())


def test_forward_returns_the_batch_value_and_accumulates() -> None:
    dense = batches(seed=14)
    metric = rp.NDCG(top_k=[2, 5])
    for preds, target in dense:
        assert_same(metric(preds, target), reference([(preds, target)], ["ndcg"], [2, 5]))
    assert_same(metric.compute(), reference(dense, ["ndcg"], [2, 5]))


# ------------------------------------------------------------ class attributes


@pytest.mark.parametrize("name", list(SINGLE))
def test_class_attributes_follow_the_metric_table(name: str) -> None:
    cls = SINGLE[name]
    entry = METRICS[name]
    assert cls.higher_is_better is entry.higher_is_better
    assert cls.is_differentiable is False
    assert cls.full_state_update is False
    assert cls.plot_lower_bound == entry.lower_bound
    assert cls.plot_upper_bound == entry.upper_bound


def test_lower_is_better_metrics() -> None:
    assert rp.MeanRank.higher_is_better is False
    assert rp.FallOut.higher_is_better is False
    assert rp.MeanRank.plot_upper_bound is None
    assert rp.RankingMetrics(["mrr", "ndcg"]).higher_is_better is True
    assert rp.RankingMetrics(["mrr", "fall_out"]).higher_is_better is None
    assert rp.RankingMetrics(["mean_rank"]).plot_upper_bound is None


def test_metric_keywords_reach_torchmetrics() -> None:
    metric = rp.MRR(top_k=3, compute_on_cpu=True, sync_on_compute=False)
    assert metric.compute_on_cpu and not metric.sync_on_compute
    with pytest.raises(ValueError, match="Unexpected keyword"):
        rp.MRR(top_k=3, not_an_option=1)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"top_k": 0}, "top_k"),
        ({"top_k": [3, "a"]}, "top_k"),
        ({"ties": "random"}, "ties"),
        ({"empty_target_action": "drop"}, "empty_target_action"),
        ({"ignore_index": 1.5}, "ignore_index"),
        ({"gain": "log"}, "gain"),
        ({"validate_args": "yes"}, "validate_args"),
        ({"target_format": "sparse"}, "target_format"),
    ],
)
def test_constructor_errors_name_the_argument(kwargs: dict[str, Any], argument: str) -> None:
    with pytest.raises((ValueError, TypeError), match=rf"\b{argument}\b"):
        rp.NDCG(**kwargs)


def test_whole_list_metrics_take_no_top_k() -> None:
    with pytest.raises((TypeError, ValueError)):
        rp.MeanRank(top_k=5)  # type: ignore[call-arg]
    # AUC takes RetrievalAUROC's top_k (issue 26): the top k's AUC, auroc@k
    assert rp.AUC(top_k=5).keys == ("auroc@5",)


# ------------------------------------------------------------------ bad inputs


def _long(*shape: int) -> torch.Tensor:
    return torch.zeros(*shape, dtype=torch.long)


BAD_INPUTS: dict[str, Callable[[], dict[str, Any]]] = {
    "preds not a tensor": lambda: {"preds": [[0.1, 0.2]], "target": torch.ones(1, 2)},
    "preds 3-D": lambda: {"preds": torch.rand(2, 3, 4), "target": torch.ones(2, 3, 4)},
    "bool preds": lambda: {"preds": torch.ones(2, 3, dtype=torch.bool), "target": torch.ones(2, 3)},
    "NaN preds": lambda: {"preds": torch.tensor([[0.1, math.nan]]), "target": torch.ones(1, 2)},
    "NaN grades": lambda: {"preds": torch.rand(1, 2), "target": torch.tensor([[1.0, math.nan]])},
    "float target of another shape": lambda: {
        "preds": torch.rand(2, 4),
        "target": torch.ones(2, 5),
    },
    "item id out of range": lambda: {"preds": torch.rand(2, 4), "target": torch.tensor([1, 4])},
    "mask not bool": lambda: {
        "preds": torch.rand(2, 4),
        "target": torch.ones(2, 4),
        "mask": torch.ones(2, 4),
    },
    "mask of another shape": lambda: {
        "preds": torch.rand(2, 4),
        "target": torch.ones(2, 4),
        "mask": torch.ones(2, 3, dtype=torch.bool),
    },
    "complex target": lambda: {
        "preds": torch.rand(2, 4),
        "target": torch.ones(2, 4, dtype=torch.complex64),
    },
    "1-D preds without indexes": lambda: {"preds": torch.rand(6), "target": torch.ones(6)},
    "grouped: target of another length": lambda: {
        "preds": torch.rand(6),
        "target": torch.ones(5),
        "indexes": _long(6),
    },
    "grouped: float indexes": lambda: {
        "preds": torch.rand(6),
        "target": torch.ones(6),
        "indexes": torch.zeros(6),
    },
    "grouped: indexes not a tensor": lambda: {
        "preds": torch.rand(6),
        "target": torch.ones(6),
        "indexes": [0] * 6,
    },
    "grouped: mask of another length": lambda: {
        "preds": torch.rand(6),
        "target": torch.ones(6),
        "indexes": _long(6),
        "mask": torch.ones(5, dtype=torch.bool),
    },
    "grouped: NaN preds": lambda: {
        "preds": torch.tensor([0.1, math.nan]),
        "target": torch.ones(2),
        "indexes": _long(2),
    },
    "grouped: 2-D preds with 1-D indexes": lambda: {
        "preds": torch.rand(2, 3),
        "target": torch.ones(2, 3),
        "indexes": _long(2),
    },
}


def kernel_error(case: dict[str, Any], **options: Any) -> BaseException:
    with pytest.raises((ValueError, TypeError)) as info:
        ranking_plugins.rank_metrics(
            case["preds"],
            case["target"],
            "ndcg",
            3,
            indexes=case.get("indexes"),
            mask=case.get("mask"),
            **options,
        )
    return info.value


@pytest.mark.parametrize("name", list(BAD_INPUTS))
@pytest.mark.parametrize("use", ["update", "forward", "collection"])
def test_bad_inputs_give_the_kernels_error(name: str, use: str) -> None:
    case = BAD_INPUTS[name]()
    expected = kernel_error(case)
    metric: Any = rp.NDCG(top_k=3)
    if use == "collection":
        metric = MetricCollection([metric, rp.MRR(top_k=3)])
    call = metric.update if use != "forward" else metric
    with pytest.raises((ValueError, TypeError)) as info:
        call(case["preds"], case["target"], indexes=case.get("indexes"), mask=case.get("mask"))
    assert_adapter_error(info.value, expected, case)


def assert_adapter_error(error: BaseException, expected: BaseException, case: dict) -> None:
    """The kernel's error; in the grouped layout, where TorchMetrics refuses the
    inputs too, its ValueError with its message first and the kernel's after
    (issue 12, item 7: tests/peers runs TorchMetrics' own tests)."""
    refused = None if "mask" in case else _torchmetrics_refusal(*map(case.get, TRIPLE))
    if refused is None:
        assert type(error) is type(expected)
        assert str(error) == str(expected)
    else:
        assert type(error) is ValueError
        assert str(error) == f"{refused}. {expected}"


TRIPLE = ("preds", "target", "indexes")


@pytest.mark.parametrize(
    "name", [n for n in BAD_INPUTS if "NaN" not in n and "out of range" not in n]
)
def test_shape_and_dtype_errors_without_validate_args(name: str) -> None:
    case = BAD_INPUTS[name]()
    expected = kernel_error(case, validate_args=False)
    metric = rp.NDCG(top_k=3, validate_args=False)
    with pytest.raises((ValueError, TypeError)) as info:
        metric.update(
            case["preds"], case["target"], indexes=case.get("indexes"), mask=case.get("mask")
        )
    assert_adapter_error(info.value, expected, case)


def test_a_failed_update_leaves_the_state_alone() -> None:
    metric = rp.RankingMetrics(["mrr"], top_k=2)
    data = batches(seed=15, n=1)
    metric.update(*data[0])
    flat = BAD_INPUTS["grouped: NaN preds"]()
    with pytest.raises(ValueError):
        metric.update(flat["preds"], flat["target"], indexes=flat["indexes"])
    assert_same(metric.compute(), reference(data, ["mrr"], 2))


@pytest.mark.parametrize("layout", ["dense", "indices", "grouped"])
@pytest.mark.parametrize("top_k", [[1, 3], None])
def test_update_never_reads_tensor_values_without_validate_args(
    layout: str, top_k: list[int] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """validate_args=False: ``update`` never synchronises (no .item(), bool(), int(),
    .tolist(), .nonzero() or boolean-mask indexing), on CPU observed by patching them.

    On the CPU the kernel may read values where that saves work (it costs no
    sync there); the test runs the kernel's accelerator paths, which must not."""
    g = torch.Generator().manual_seed(16)
    preds = torch.randn(5, 7, generator=g)
    if layout == "dense":
        args: tuple[Any, ...] = (preds, torch.randint(0, 2, (5, 7), generator=g))
        kwargs: dict[str, Any] = {"mask": torch.rand(5, 7, generator=g) < 0.9}
    elif layout == "indices":
        args, kwargs = (preds, torch.randint(-1, 7, (5, 2), generator=g)), {}
    else:
        args = (preds.flatten(), torch.randint(0, 2, (35,), generator=g))
        kwargs = {"indexes": torch.randint(0, 4, (35,), generator=g)}
    # issue 14: own tests; issue 13: those computed on the host under "average" too
    names = [
        name for name, m in METRICS.items() if not m.exposure and name not in HOST_UNDER_AVERAGE
    ]
    metric = rp.RankingMetrics(names, top_k=top_k, validate_args=False, ignore_index=-7)

    with forbid_host_reads(monkeypatch):
        metric.update(*args, **kwargs)
    result = metric.compute()
    expected = ranking_plugins.rank_metrics(*args, names, top_k, gain="linear", **kwargs)
    assert_same(result, expected)


# ---------------------------------------------------------------------- plot


def test_plot_against_k() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = batches(seed=17)
    metric = fed(rp.RankingMetrics(["mrr", "ndcg", "auc"], top_k=[1, 3, 5]), data)
    fig, ax = metric.plot()
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["mrr", "ndcg", "auc"]
    expected = reference(data, ["mrr", "ndcg", "auc"], [1, 3, 5])
    assert list(lines[0].get_xdata()) == [1, 3, 5]
    assert list(lines[1].get_ydata()) == pytest.approx(
        [float(expected[f"ndcg@{k}"]) for k in (1, 3, 5)]
    )
    assert list(lines[2].get_ydata()) == pytest.approx([float(expected["auc"])] * 3)
    plt.close(fig)

    single = fed(rp.MRR(top_k=3), data)
    fig, ax = single.plot()  # one value: TorchMetrics' single-value plot
    assert len(ax.get_lines()) >= 1
    plt.close(fig)
    fig, ax = single.plot([single.compute(), single.compute()])  # values over time
    plt.close(fig)


# -------------------------------------------------------------- missing extra


def test_missing_torchmetrics_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torchmetrics", None)
    monkeypatch.delitem(sys.modules, "ranking_plugins.torchmetrics")
    with pytest.raises(ImportError, match=r'pip install "ranking-plugins\[torchmetrics\]"'):
        importlib.import_module("ranking_plugins.torchmetrics")


@pytest.mark.parametrize("options", [{}, {"ignore_index": 2}])
def test_updates_under_inference_mode(kernel_calls: list[int], options: dict[str, Any]) -> None:
    """Lightning evaluates under torch.inference_mode: inference tensors have no
    version counter, but a ranking is reused on proved-equal content, so they
    share one ranking per batch as any tensor does (the first batch twice), and
    the numbers are unchanged."""
    data = batches(seed=18)
    metrics = collection(**options)
    with torch.inference_mode():
        inference_data = [(p.clone(), t.clone()) for p, t in data]
        for preds, target in inference_data:
            metrics.update(preds, target)
    assert len(kernel_calls) == len(data) + 1
    result = metrics.compute()
    expected_metrics = collection(**options)
    for preds, target in data:
        expected_metrics.update(preds, target)
    assert_same(result, expected_metrics.compute())


def test_the_base_class_keeps_its_earlier_name() -> None:
    """Issue 12: ``RankingMetric`` (one letter from ``RankingMetrics``) is now
    ``BaseRankingMetric``, as in the Ignite adapter; the old name still imports."""
    from ranking_plugins.torchmetrics import RankingMetric

    assert RankingMetric is rp.BaseRankingMetric
    assert issubclass(rp.RankingMetrics, rp.BaseRankingMetric)
    assert "RankingMetric" not in rp.__all__
