"""``RetrievalPrecisionRecallCurve`` and ``RetrievalRecallAtFixedPrecision`` (issue 26,
item 3) against TorchMetrics' classes, on random grouped inputs without tied scores.

TorchMetrics' own tests of both run in
``tests/peers/torchmetrics_retrieval/unittests/retrieval/test_precision_recall_curve.py``.
"""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("torchmetrics")

import torchmetrics.retrieval as tm

from ranking_plugins.torchmetrics import (
    RankingMetrics,
    RetrievalPrecisionRecallCurve,
    RetrievalRecallAtFixedPrecision,
)


def _grouped(seed: int, queries: int = 7, ignore: bool = False) -> list[tuple[torch.Tensor, ...]]:
    """Three batches of queries of 1 ... 12 items, queries split across batches, some
    without a relevant item, distinct scores (no ties); -1 targets where ``ignore``."""
    generator = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, 13, (queries,), generator=generator)
    indexes = torch.repeat_interleave(torch.arange(queries), sizes)
    total = int(sizes.sum())
    preds = torch.randperm(total, generator=generator).float() / total
    target = torch.rand(total, generator=generator) < 0.35
    target[indexes == 0] = False  # a query without relevant items
    target = target.long()
    if ignore:
        target[torch.rand(total, generator=generator) < 0.15] = -1
    order = torch.randperm(total, generator=generator)
    return [(preds[part], target[part], indexes[part]) for part in order.tensor_split(3)]


def _both(ours, theirs, batches):
    for preds, target, indexes in batches:
        ours.update(preds, target, indexes=indexes)
        theirs.update(preds, target, indexes=indexes)
    return ours.compute(), theirs.compute()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("max_k", [None, 1, 4, 20])
@pytest.mark.parametrize("adaptive_k", [False, True])
@pytest.mark.parametrize("empty_target_action", ["neg", "pos", "skip"])
@pytest.mark.parametrize("ignore_index", [None, -1])
def test_curve_equals_torchmetrics(seed, max_k, adaptive_k, empty_target_action, ignore_index):
    batches = _grouped(seed, ignore=ignore_index is not None)
    keywords = dict(
        max_k=max_k,
        adaptive_k=adaptive_k,
        empty_target_action=empty_target_action,
        ignore_index=ignore_index,
    )
    (precision, recall, top_k), expected = _both(
        RetrievalPrecisionRecallCurve(**keywords),
        tm.RetrievalPrecisionRecallCurve(**keywords),
        batches,
    )
    assert precision.dtype == recall.dtype == torch.float64
    torch.testing.assert_close(precision, expected[0].double(), atol=1e-6, rtol=0)
    torch.testing.assert_close(recall, expected[1].double(), atol=1e-6, rtol=0)
    assert torch.equal(top_k, expected[2])


@pytest.mark.parametrize("max_k", [3, 15])
@pytest.mark.parametrize("adaptive_k", [False, True])
def test_curve_is_ranking_metrics_precision_and_recall(max_k, adaptive_k):
    batches = _grouped(11)
    curve = RetrievalPrecisionRecallCurve(max_k=max_k, adaptive_k=adaptive_k)
    metrics = RankingMetrics(
        ["precision", "recall"], top_k=range(1, max_k + 1), adaptive_k=adaptive_k
    )
    for preds, target, indexes in batches:
        curve.update(preds, target, indexes)
        metrics.update(preds, target, indexes)
    precision, recall, _ = curve.compute()
    values = metrics.compute()
    assert torch.equal(
        precision, torch.stack([values[f"precision@{k}"] for k in range(1, max_k + 1)])
    )
    assert torch.equal(recall, torch.stack([values[f"recall@{k}"] for k in range(1, max_k + 1)]))


def test_max_k_none_is_the_longest_query_after_ignore_index():
    # query 1 has 4 entries, one ignored: the longest list is query 0's 3
    preds = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    target = torch.tensor([1, 0, 1, 0, -1, 1, 0])
    indexes = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    ours = RetrievalPrecisionRecallCurve(ignore_index=-1)(preds, target, indexes)
    theirs = tm.RetrievalPrecisionRecallCurve(ignore_index=-1)(preds, target, indexes)
    assert ours[2].tolist() == theirs[2].tolist() == [1, 2, 3]
    torch.testing.assert_close(ours[0], theirs[0].double())
    torch.testing.assert_close(ours[1], theirs[1].double())


def test_max_k_none_takes_no_dense_scores():
    metric = RetrievalPrecisionRecallCurve()
    with pytest.raises(ValueError, match="`indexes` cannot be None with `max_k=None`"):
        metric.update(torch.rand(2, 3), torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="whole_queries"):
        RetrievalPrecisionRecallCurve(whole_queries=True)


def test_dense_scores_with_max_k_equal_grouped():
    preds, target = torch.rand(4, 5), torch.randint(0, 2, (4, 5))
    indexes = torch.arange(4).repeat_interleave(5)
    dense = RetrievalPrecisionRecallCurve(max_k=6)(preds, target)
    grouped = RetrievalPrecisionRecallCurve(max_k=6)(preds.flatten(), target.flatten(), indexes)
    for a, b in zip(dense, grouped, strict=True):
        torch.testing.assert_close(a, b)


def test_skip_with_no_counted_query_is_nan_not_zero():
    """The documented difference of every class here: 0.0 in TorchMetrics."""
    preds, target, indexes = torch.rand(3), torch.zeros(3, dtype=torch.long), torch.zeros(3).long()
    precision, recall, _ = RetrievalPrecisionRecallCurve(max_k=2, empty_target_action="skip")(
        preds, target, indexes
    )
    assert precision.isnan().all() and recall.isnan().all()
    # no k reaches a precision of NaN: TorchMetrics' (0, max_k)
    assert RetrievalRecallAtFixedPrecision(0.0, max_k=2, empty_target_action="skip")(
        preds, target, indexes
    ) == (0.0, 2)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("min_precision", [0.0, 0.17, 0.41, 0.63, 0.88, 1.0])
@pytest.mark.parametrize("max_k", [None, 2, 9])
@pytest.mark.parametrize("adaptive_k", [False, True])
def test_recall_at_fixed_precision_equals_torchmetrics(seed, min_precision, max_k, adaptive_k):
    batches = _grouped(100 + seed, queries=4)
    keywords = dict(min_precision=min_precision, max_k=max_k, adaptive_k=adaptive_k)
    (recall, best_k), (expected_recall, expected_k) = _both(
        RetrievalRecallAtFixedPrecision(**keywords),
        tm.RetrievalRecallAtFixedPrecision(**keywords),
        batches,
    )
    assert math.isclose(recall.item(), expected_recall.item(), abs_tol=1e-6)
    assert best_k.item() == expected_k.item()


@pytest.mark.parametrize(
    ("min_precision", "expected"),
    [
        (0.0, (1.0, 4)),  # every k reaches it: the largest recall, at its largest k
        (0.5, (1.0, 4)),  # precision@4 = 2/4 reaches 0.5 exactly
        (0.6, (0.5, 1)),  # only k = 1 (precision 1)
        (1.0, (0.5, 1)),
    ],
)
def test_recall_at_fixed_precision_edges(min_precision, expected):
    preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
    target = torch.tensor([1, 0, 0, 1])
    indexes = torch.zeros(4, dtype=torch.long)
    ours = RetrievalRecallAtFixedPrecision(min_precision, max_k=4)(preds, target, indexes)
    theirs = tm.RetrievalRecallAtFixedPrecision(min_precision, max_k=4)(preds, target, indexes)
    assert (ours[0].item(), ours[1].item()) == expected
    assert (theirs[0].item(), theirs[1].item()) == expected


def test_recall_at_fixed_precision_when_no_k_reaches_it():
    """No k reaches the precision, or the best recall is 0: ``(0, max_k)``, as TorchMetrics."""
    preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
    indexes = torch.zeros(4, dtype=torch.long)
    for target, min_precision in (
        (torch.tensor([0, 0, 1, 1]), 0.6),
        (torch.tensor([0, 0, 0, 0]), 0.0),
    ):
        ours = RetrievalRecallAtFixedPrecision(min_precision, max_k=3)(preds, target, indexes)
        theirs = tm.RetrievalRecallAtFixedPrecision(min_precision, max_k=3)(preds, target, indexes)
        assert (ours[0].item(), ours[1].item()) == (theirs[0].item(), theirs[1].item()) == (0.0, 3)


@pytest.mark.parametrize(
    ("keywords", "match"),
    [
        ({"max_k": 0}, "`max_k` has to be a positive integer or None"),
        ({"max_k": 2.0}, "`max_k` has to be a positive integer or None"),
        ({"adaptive_k": 1}, "`adaptive_k` has to be a boolean"),
        (
            {"empty_target_action": "casual"},
            "Argument `empty_target_action` received a wrong value",
        ),
        ({"min_precision": 1}, "`min_precision` has to be a positive float between 0 and 1"),
        ({"min_precision": 1.5}, "`min_precision` has to be a positive float between 0 and 1"),
    ],
)
def test_arguments_refused_as_torchmetrics(keywords, match):
    with pytest.raises(ValueError, match=match):
        RetrievalRecallAtFixedPrecision(**keywords)
    with pytest.raises(ValueError, match=match):
        tm.RetrievalRecallAtFixedPrecision(**keywords)


def test_plots_return_figure_and_axes():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    preds, target, indexes = _grouped(3)[0]
    curve = RetrievalPrecisionRecallCurve(max_k=5)
    curve.update(preds, target, indexes)
    fig, ax = curve.plot()
    assert ax.get_xlabel() == "Recall" and ax.get_ylabel() == "Precision"
    line = ax.get_lines()[0]
    precision, recall, _ = curve.compute()
    assert line.get_xdata().tolist() == recall.tolist()
    assert line.get_ydata().tolist() == precision.tolist()
    fixed = RetrievalRecallAtFixedPrecision(0.3, max_k=5)
    fixed.update(preds, target, indexes)
    fig, ax = fixed.plot()
    assert fig is not None and ax is not None


@pytest.mark.parametrize("cls", [RetrievalPrecisionRecallCurve, RetrievalRecallAtFixedPrecision])
def test_scriptable_as_every_torchmetrics_metric(cls):
    torch.jit.script(cls(max_k=3))


@pytest.mark.parametrize("aggregation", ["median", "min", "max"])
def test_max_k_none_applies_the_aggregation(aggregation):
    """The longest query's curves are aggregated as asked, as TorchMetrics', not averaged."""
    preds, target, indexes = _random_grouped(5)
    keywords = dict(aggregation=aggregation, ignore_index=-1)
    ours = RetrievalPrecisionRecallCurve(**keywords)(preds, target, indexes)
    theirs = tm.RetrievalPrecisionRecallCurve(**keywords)(preds, target, indexes)
    mean = RetrievalPrecisionRecallCurve(ignore_index=-1)(preds, target, indexes)
    torch.testing.assert_close(ours[0], theirs[0].double())
    torch.testing.assert_close(ours[1], theirs[1].double())
    assert not torch.equal(ours[0], mean[0])


def test_recall_at_fixed_precision_reaches_a_threshold_met_exactly():
    """precision@10 = (1/10 + 7/10) / 2 = 2/5 is 0.39999999999999997 in float64 and 0.4 in
    TorchMetrics' float32: k = 10 reaches ``min_precision=0.4`` there, and here."""
    preds = torch.arange(20, 0, -1).float()
    target = torch.zeros(20, dtype=torch.long)
    target[[9]] = 1  # query 0: its one relevant item last
    target[10:17] = 1  # query 1: 7 of 10 relevant, ranked first
    indexes = torch.arange(2).repeat_interleave(10)
    ours = RetrievalRecallAtFixedPrecision(0.4, max_k=10)(preds, target, indexes)
    theirs = tm.RetrievalRecallAtFixedPrecision(0.4, max_k=10)(preds, target, indexes)
    assert (theirs[0].item(), theirs[1].item()) == (1.0, 10)
    assert (ours[0].item(), ours[1].item()) == (1.0, 10)
    assert ours[0].dtype == torch.float64


def _random_grouped(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """2 ... 11 queries of 1 ... 14 items, distinct scores, about 15% of targets -1."""
    generator = torch.Generator().manual_seed(seed)
    queries = int(torch.randint(2, 12, (1,), generator=generator))
    sizes = torch.randint(1, 15, (queries,), generator=generator)
    indexes = torch.repeat_interleave(torch.arange(queries), sizes)
    total = int(sizes.sum())
    preds = torch.randperm(total, generator=generator).float() / total
    target = (torch.rand(total, generator=generator) < 0.4).long()
    target[torch.rand(total, generator=generator) < 0.15] = -1
    order = torch.randperm(total, generator=generator)  # queries spread over the batches
    return preds[order], target[order], indexes[order]


@pytest.mark.parametrize(
    ("seed", "aggregation"), [(19, "mean"), (25, "mean"), (1, "mean"), (2, "median")]
)
@pytest.mark.parametrize("max_k", [None, 6])
@pytest.mark.parametrize("adaptive_k", [False, True])
def test_recall_at_fixed_precision_is_torchmetrics_pair_at_exact_thresholds(
    seed, max_k, adaptive_k, aggregation
):
    """Every threshold a k of TorchMetrics' curve meets exactly (its float32 precisions),
    and round fractions: the same k and the same recall, to the bit."""
    preds, target, indexes = _random_grouped(seed)
    keywords = dict(max_k=max_k, adaptive_k=adaptive_k, ignore_index=-1, aggregation=aggregation)
    curve = tm.RetrievalPrecisionRecallCurve(**keywords)(preds, target, indexes)[0]
    thresholds = {float(p) for p in curve} | {0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.75}
    for min_precision in sorted(thresholds):
        ours = RetrievalRecallAtFixedPrecision(min_precision, **keywords)
        theirs = tm.RetrievalRecallAtFixedPrecision(min_precision, **keywords)
        for part in range(3):  # three updates
            batch = [t.tensor_split(3)[part] for t in (preds, target, indexes)]
            ours.update(*batch)
            theirs.update(*batch)
        (recall, best_k), (expected_recall, expected_k) = ours.compute(), theirs.compute()
        assert best_k.item() == expected_k.item(), min_precision
        assert recall.item() == expected_recall.item(), min_precision
