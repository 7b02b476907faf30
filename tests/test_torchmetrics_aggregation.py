"""``aggregation`` of the TorchMetrics adapters (issue 26): ``"median"``, ``"min"``,
``"max"`` and a callable, against ``torchmetrics.retrieval``'s own classes on the
same inputs (grouped and dense), and the state each keeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torchmetrics.retrieval as tm
from torchmetrics import MetricCollection

from ranking_plugins import torchmetrics as rp


def _squares(values: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """TorchMetrics' test suite's custom aggregation: the mean of the squares."""
    return (values**2).mean() if dim is None else (values**2).mean(dim=dim)


AGGREGATIONS: list[str | Callable[..., torch.Tensor]] = ["median", "min", "max", _squares]

#: alias name -> its keywords beyond empty_target_action and aggregation
CLASSES: dict[str, dict[str, Any]] = {
    "RetrievalMRR": {"top_k": 4},
    "RetrievalNormalizedDCG": {"top_k": 5},
    "RetrievalMAP": {},
    "RetrievalHitRate": {"top_k": 3},
    "RetrievalPrecision": {"top_k": 3},
    "RetrievalRecall": {"top_k": 4},
    "RetrievalFallOut": {"top_k": 3},
    "RetrievalRPrecision": {},
    "RetrievalAUROC": {},
}


def _grouped(seed: int, n: int = 300, queries: int = 25) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    indexes = torch.randint(0, queries, (n,), generator=g)
    preds = torch.rand(n, generator=g)
    target = (torch.rand(n, generator=g) < 0.25).long()
    return preds, target, indexes


def _theirs_and_ours(name: str, **kwargs: Any) -> tuple[Any, Any]:
    return getattr(tm, name)(**kwargs), getattr(rp, name)(**kwargs)


@pytest.mark.parametrize("aggregation", AGGREGATIONS, ids=str)
@pytest.mark.parametrize("empty_target_action", ["neg", "skip"])
@pytest.mark.parametrize("name", list(CLASSES))
def test_grouped_equals_torchmetrics(
    name: str, empty_target_action: str, aggregation: str | Callable[..., torch.Tensor]
) -> None:
    preds, target, indexes = _grouped(seed=len(name))
    theirs, ours = _theirs_and_ours(
        name, empty_target_action=empty_target_action, aggregation=aggregation, **CLASSES[name]
    )
    for part in (slice(0, 140), slice(140, None)):  # queries spread over both updates
        theirs.update(preds[part], target[part], indexes=indexes[part])
        ours.update(preds[part], target[part], indexes=indexes[part])
    expected = theirs.compute().double()
    got = ours.compute()
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    # the aggregation, not the mean, reached the number (a hit rate's squares are itself)
    if aggregation != "max" and not (name == "RetrievalHitRate" and callable(aggregation)):
        assert not torch.isclose(got, _mean_of(name, empty_target_action, preds, target, indexes))


def _mean_of(name: str, eta: str, *inputs: torch.Tensor) -> torch.Tensor:
    metric = getattr(rp, name)(empty_target_action=eta, **CLASSES[name])
    metric.update(inputs[0], inputs[1], indexes=inputs[2])
    return metric.compute()


@pytest.mark.parametrize("aggregation", AGGREGATIONS, ids=str)
@pytest.mark.parametrize("name", ["RetrievalNormalizedDCG", "RetrievalMRR", "RetrievalAUROC"])
def test_dense_equals_torchmetrics(
    name: str, aggregation: str | Callable[..., torch.Tensor]
) -> None:
    """Dense ``(Q, N)`` batches (no ``indexes``) against TorchMetrics given one id per row."""
    g = torch.Generator().manual_seed(3)
    kwargs = {"aggregation": aggregation, "top_k": 4} if name != "RetrievalAUROC" else {}
    kwargs["aggregation"] = aggregation
    theirs, ours = _theirs_and_ours(name, **kwargs)
    start = 0
    for rows in (7, 10, 6):
        preds = torch.randn(rows, 9, generator=g)
        target = torch.randint(0, 2, (rows, 9), generator=g) * (
            torch.rand(rows, 9, generator=g) < 0.5
        )
        ids = torch.arange(start, start + rows).unsqueeze(1).expand(rows, 9)
        start += rows
        theirs.update(preds, target, indexes=ids)
        ours.update(preds, target)
    torch.testing.assert_close(ours.compute(), theirs.compute().double(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("aggregation", AGGREGATIONS, ids=str)
def test_several_ks_aggregate_each_key(aggregation: str | Callable[..., torch.Tensor]) -> None:
    preds, target, indexes = _grouped(seed=7)
    ours = rp.NDCG(top_k=[1, 3, 10], aggregation=aggregation)
    collection = rp.RankingMetrics(["mrr", "hit_rate"], top_k=[2, 5], aggregation=aggregation)
    for metric in (ours, collection):
        metric.update(preds, target, indexes=indexes)
    got = {**ours.compute(), **collection.compute()}
    wanted = {
        "ndcg": tm.RetrievalNormalizedDCG,
        "mrr": tm.RetrievalMRR,
        "hit_rate": tm.RetrievalHitRate,
    }
    assert list(got) == [
        "ndcg@1",
        "ndcg@3",
        "ndcg@10",
        "mrr@2",
        "mrr@5",
        "hit_rate@2",
        "hit_rate@5",
    ]
    for key, value in got.items():
        metric, k = key.split("@")
        theirs = wanted[metric](top_k=int(k), aggregation=aggregation)
        theirs.update(preds, target, indexes=indexes)
        torch.testing.assert_close(value, theirs.compute().double(), rtol=0, atol=1e-6)


def test_median_is_the_lower_median_of_an_even_count() -> None:
    """Two queries, reciprocal ranks 1 and 1/2: torch.median's (and TorchMetrics') 0.5."""
    metric = rp.MRR(aggregation="median")
    metric.update(torch.tensor([[0.9, 0.1], [0.9, 0.1]]), torch.tensor([[1, 0], [0, 1]]))
    assert metric.compute().item() == 0.5


def test_dense_and_grouped_updates_are_aggregated_together() -> None:
    """A median over every query, whatever layout brought it (not a median per layout)."""
    preds, target, indexes = _grouped(seed=11)
    dense_preds = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4], [0.3, 0.2, 0.1]])
    dense_target = torch.tensor([[0, 0, 1], [0, 1, 0], [1, 0, 0]])
    ours = rp.MRR(aggregation="median")
    ours.update(dense_preds, dense_target)
    ours.update(preds, target, indexes=indexes)
    every = torch.cat(
        [torch.tensor([0.5, 1.0, 1.0], dtype=torch.float64), _per_query(preds, target, indexes)]
    )
    assert ours.compute().item() == every.median().item()


def _per_query(preds: torch.Tensor, target: torch.Tensor, indexes: torch.Tensor) -> torch.Tensor:
    metric = rp.MRR(keep_per_query=True)
    metric.update(preds, target, indexes=indexes)
    return metric.compute_per_query()["mrr"]


def test_skipped_queries_are_left_out_and_none_counted_is_nan() -> None:
    calls: list[torch.Tensor] = []

    def spy(values: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        calls.append(values)
        return values.max()

    metric = rp.MRR(empty_target_action="skip", aggregation=spy)
    metric.update(torch.tensor([[0.9, 0.1], [0.4, 0.6]]), torch.tensor([[0, 1], [0, 0]]))
    assert metric.compute().item() == 0.5
    assert len(calls) == 1 and calls[0].tolist() == [0.5]  # the skipped query is not a NaN there
    metric.reset()
    calls.clear()
    metric.update(torch.tensor([[0.4, 0.6]]), torch.tensor([[0, 0]]))
    assert torch.isnan(metric.compute())  # the mean's rule: TorchMetrics gives 0.0
    assert calls == []


def test_only_an_aggregation_other_than_the_mean_keeps_per_query_values() -> None:
    mean, median = rp.NDCG(top_k=3), rp.NDCG(top_k=3, aggregation="median")
    assert not any(name.startswith("per_query_") for name in mean._defaults)
    assert median.keep_per_query
    assert any(name.startswith("per_query_") for name in median._defaults)
    preds, target = torch.randn(5, 6), torch.randint(0, 2, (5, 6))
    median.update(preds, target)
    values = median.compute_per_query()["ndcg@3"]
    assert values.shape == (5,)
    torch.testing.assert_close(median.compute(), values[~values.isnan()].median())


def test_a_collection_of_mean_and_median_metrics_gives_each_its_own() -> None:
    preds, target = (
        torch.randn(9, 6, generator=torch.Generator().manual_seed(2)),
        torch.randint(0, 2, (9, 6), generator=torch.Generator().manual_seed(3)),
    )
    collection = MetricCollection({"mean": rp.MRR(), "median": rp.MRR(aggregation="median")})
    collection.update(preds, target)
    got = collection.compute()
    mean, median = rp.MRR(), rp.MRR(aggregation="median")
    for metric in (mean, median):
        metric.update(preds, target)
    assert got["mean"].item() == mean.compute().item()
    assert got["median"].item() == median.compute().item()


@pytest.mark.parametrize("bad", ["average", None, 3])
def test_an_unknown_aggregation_is_refused_in_torchmetrics_words(bad: object) -> None:
    with pytest.raises(ValueError, match="Argument `aggregation` must be one of") as info:
        rp.RetrievalMRR(aggregation=bad)  # type: ignore[arg-type]
    assert "`aggregation` must be one of ['mean', 'median', 'min', 'max']" in str(info.value)
    with pytest.raises(ValueError, match="Argument `aggregation`"):
        tm.RetrievalMRR(aggregation=bad)


def test_weighted_takes_only_the_mean() -> None:
    with pytest.raises(ValueError, match="`aggregation`='median' takes no `weighted=True`"):
        rp.MRR(aggregation="median", weighted=True)
    rp.MRR(weighted=True)  # the mean is weighted


def test_a_callable_must_return_one_number() -> None:
    metric = rp.MRR(aggregation=lambda values, dim=None: values)
    metric.update(torch.tensor([[0.9, 0.1], [0.4, 0.6]]), torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="`aggregation`: the callable must return one number"):
        metric.compute()
