"""TorchMetrics' ``MetricCollection`` compute groups over this package's metrics (issue 26).

In a group TorchMetrics updates only the first metric and sets its states, by
name, on the others. Every grouping gives each member the value it has alone,
or a ValueError naming ``compute_groups`` at ``compute``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor
from torchmetrics import Metric, MetricCollection

import ranking_plugins.torchmetrics as rp


def dense_batches() -> list[tuple[Tensor, Tensor]]:
    generator = torch.Generator().manual_seed(26)
    return [
        (torch.rand(6, 8, generator=generator), torch.randint(0, 3, (6, 8), generator=generator))
        for _ in range(3)
    ]


def grouped_batches() -> list[tuple[Tensor, Tensor, Tensor]]:
    """Queries split across batches; some grades are -1 (dropped by ``ignore_index=-1``)."""
    generator = torch.Generator().manual_seed(27)
    out = []
    for _ in range(3):
        indexes = torch.randint(0, 5, (30,), generator=generator)
        preds = torch.rand(30, generator=generator)
        target = torch.randint(-1, 3, (30,), generator=generator)
        out.append((preds, target, indexes))
    return out


def members() -> dict[str, Metric]:
    return {
        "mrr3": rp.MRR(top_k=3),
        "mrr5": rp.MRR(top_k=5),
        "ndcg": rp.NDCG(top_k=[3, 5]),
        "hr": rp.HitRate(top_k=3, ignore_index=-1),
        "fallout": rp.FallOut(top_k=3),
    }


def alone(feed: Callable[[Metric], None]) -> dict[str, Any]:
    values = {}
    for name, metric in members().items():
        feed(metric)
        result = metric.compute()
        if isinstance(result, dict):
            values.update(result)
        else:
            values[name] = result
    return values


def feed_dense(metric: Metric) -> None:
    for preds, target in dense_batches():
        metric.update(preds, target.clamp(min=0))


def feed_grouped(metric: Metric) -> None:
    for preds, target, indexes in grouped_batches():
        metric.update(preds, target, indexes=indexes)


def assert_values(result: dict[str, Tensor], expected: dict[str, Tensor]) -> None:
    assert result.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(result[key], value, equal_nan=True, msg=key)


GROUPINGS: list[Any] = [
    [["mrr3", "ndcg", "hr"]],
    [["mrr3", "mrr5"], ["hr", "fallout", "ndcg"]],
    [["fallout", "mrr5", "mrr3", "ndcg", "hr"]],
]


@pytest.mark.parametrize("groups", GROUPINGS)
def test_explicit_groups_of_the_grouped_layout_give_each_metric_its_value(groups: Any) -> None:
    """Grouped entries are one state of one name in every metric: every member reads
    them (the values differ: mrr@3 and mrr@5, and `hr` drops the -1 grades)."""
    expected = alone(feed_grouped)
    assert len({round(float(v), 6) for v in expected.values()}) == len(expected)
    collection = MetricCollection(members(), compute_groups=groups)
    feed_grouped(collection)
    assert_values(collection.compute(), expected)


@pytest.mark.parametrize("groups", GROUPINGS)
def test_explicit_groups_of_dense_batches_refuse_rather_than_give_nan(groups: Any) -> None:
    """Dense batches keep only each metric's own sums, named by what it computes: the
    other members of a group never see a batch (before: NaN, silently)."""
    collection = MetricCollection(members(), compute_groups=groups)
    feed_dense(collection)
    with pytest.raises(
        ValueError, match=r"`compute_groups`: .* \(compute_groups=True, the default"
    ):
        collection.compute()


def test_explicit_group_of_whole_queries_refuses() -> None:
    collection = MetricCollection(
        {"mrr3": rp.MRR(top_k=3, whole_queries=True), "mrr5": rp.MRR(top_k=5, whole_queries=True)},
        compute_groups=[["mrr3", "mrr5"]],
    )
    indexes = torch.tensor([0, 0, 0, 1, 1, 1])
    collection.update(torch.rand(6), torch.tensor([0, 0, 1, 1, 0, 0]), indexes=indexes)
    with pytest.raises(ValueError, match=r"MRR \(mrr@5\) is in a MetricCollection compute group"):
        collection.compute()


def test_explicit_groups_with_forward_give_each_metric_its_value() -> None:
    """TorchMetrics' ``forward`` runs every metric of a group: each keeps its own sums."""
    expected = alone(feed_dense)
    collection = MetricCollection(members(), compute_groups=[["mrr3", "mrr5", "ndcg", "hr"]])
    for preds, target in dense_batches():
        collection(preds, target.clamp(min=0))
    assert_values(collection.compute(), expected)


def test_identical_metrics_share_a_group_of_dense_batches() -> None:
    expected = alone(feed_dense)["mrr3"]
    collection = MetricCollection(
        {"a": rp.MRR(top_k=3), "b": rp.MRR(top_k=3, validate_args=False)},
        compute_groups=[["a", "b"]],
    )
    feed_dense(collection)
    result = collection.compute()
    assert_values(result, {"a": expected, "b": expected})


@pytest.mark.parametrize("feed", [feed_dense, feed_grouped], ids=["dense", "grouped"])
def test_automatic_groups_give_each_metric_its_value(feed: Callable[[Metric], None]) -> None:
    expected = alone(feed)
    collection = MetricCollection(members())  # compute_groups=True, the default
    feed(collection)
    assert_values(collection.compute(), expected)
    collection.reset()  # and again, once TorchMetrics has formed its groups
    feed(collection)
    assert_values(collection.compute(), expected)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (rp.RankingMetrics(["bpref"]), rp.MRR()),  # the flags kept, not applied by MRR
        (rp.MRR(), rp.RankingMetrics(["bpref"])),  # the flags bpref reads not kept
    ],
    ids=["flags-kept-by-first", "flags-read-by-second"],
)
def test_explicit_groups_with_judged_flags_refuse(first: Metric, second: Metric) -> None:
    collection = MetricCollection(
        {"first": first, "second": second}, compute_groups=[["first", "second"]]
    )
    indexes = torch.tensor([0, 0, 0, 1, 1, 1])
    judged = torch.tensor([True, False, True, True, True, False])
    collection.update(
        torch.rand(6), torch.tensor([1, 1, 0, 1, 0, 1]), indexes=indexes, judged=judged
    )
    with pytest.raises(ValueError, match=r"`compute_groups`: .* judged flags"):
        collection.compute()


def test_grouped_scores_are_checked_once_at_update() -> None:
    """``compute`` trusts the check ``update`` made of the kept scores (no second NaN
    pass): a NaN written into the kept state afterwards is not looked for again."""
    preds, target, indexes = grouped_batches()[0]
    metric = rp.NDCG(top_k=3)
    with pytest.raises(ValueError, match="NaN"):
        metric.update(torch.full_like(preds, torch.nan), target, indexes=indexes)
    metric.reset()
    metric.update(preds, target, indexes=indexes)
    metric.flat_preds[-1][0] = torch.nan  # after the check: compute does not look again
    assert torch.isfinite(metric.compute())


def test_scores_kept_unchecked_are_checked_at_compute_by_a_metric_that_validates() -> None:
    """A group's first metric with ``validate_args=False`` keeps NaN scores unchecked; a
    member that validates still refuses them at ``compute`` (the count of unchecked
    batches travels with the entries)."""
    preds, target, indexes = grouped_batches()[0]
    preds = preds.clone()
    preds[3] = torch.nan
    collection = MetricCollection(
        {"quiet": rp.NDCG(top_k=3, validate_args=False), "strict": rp.MRR(top_k=3)},
        compute_groups=[["quiet", "strict"]],
    )
    collection.update(preds, target, indexes=indexes)
    collection.update(preds, target, indexes=indexes)  # the second update reaches "quiet" only
    with pytest.raises(ValueError, match="NaN"):
        collection["strict"].compute()
