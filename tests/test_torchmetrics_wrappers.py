"""The TorchMetrics classes inside TorchMetrics' wrappers: ``BootStrapper``,
``MinMaxMetric``, ``MetricTracker``, ``metric + other`` (CompositionalMetric) and
``MetricCollection.plot``. A class of one k gives the values of TorchMetrics' own class
wrapped alike; a metric of several keys, which those wrappers cannot take (they need one
tensor), is refused with a message that says what works."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torchmetrics")

import torchmetrics.retrieval as tm
from torchmetrics import MetricCollection
from torchmetrics.wrappers import BootStrapper, MetricTracker, MinMaxMetric

from ranking_plugins import torchmetrics as rp
from ranking_plugins import torchmetrics_functional as rpf


def _batches(seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for step in range(3):
        indexes = torch.arange(4).repeat_interleave(6) + 4 * step
        preds = torch.randperm(24, generator=generator).float() / 24  # no ties
        target = (torch.rand(24, generator=generator) < 0.4).long()
        batches.append((preds, target, indexes))
    return batches


def _feed(metric, batches) -> None:
    for preds, target, indexes in batches:
        metric.update(preds, target, indexes=indexes)


def _close(ours, theirs) -> None:
    if isinstance(theirs, dict):
        assert ours.keys() == theirs.keys()
        for key in theirs:
            _close(ours[key], theirs[key])
        return
    torch.testing.assert_close(ours.double(), theirs.double(), atol=1e-6, rtol=0)


@pytest.mark.parametrize("quantile", [torch.tensor([0.05, 0.95]), 0.9, None])
def test_bootstrapper_gives_torchmetrics_values(quantile) -> None:
    """A float32 tensor ``quantile`` (torch.quantile takes one dtype) works, as there."""
    found = []
    for cls in (rp.RetrievalMRR, tm.RetrievalMRR):
        torch.manual_seed(7)  # the same resamples for both
        wrapped = BootStrapper(cls(top_k=3), num_bootstraps=5, quantile=quantile, raw=True)
        _feed(wrapped, _batches())
        found.append(wrapped.compute())
    _close(*found)


@pytest.mark.parametrize(
    "make",
    [
        lambda: BootStrapper(rp.RetrievalMRR(top_k=[1, 3])),
        lambda: MinMaxMetric(rp.RetrievalNormalizedDCG(top_k=[1, 3])),
        lambda: rp.RetrievalMRR(top_k=[1, 3]) + rp.RetrievalMRR(),
        lambda: rp.RankingMetrics(["mrr"], top_k=3) * 2,
    ],
    ids=["BootStrapper", "MinMaxMetric", "CompositionalMetric", "RankingMetrics"],
)
def test_a_wrapper_of_one_tensor_refuses_several_keys_clearly(make) -> None:
    wrapped = make()
    _feed(wrapped, _batches())
    with pytest.raises(ValueError, match=r"computes a dict of \d values .*: .*one k"):
        wrapped.compute()


def test_minmax_and_composition_of_one_k_give_torchmetrics_values() -> None:
    ours = MinMaxMetric(rp.RetrievalNormalizedDCG(top_k=3))
    theirs = MinMaxMetric(tm.RetrievalNormalizedDCG(top_k=3))
    for batch in _batches():
        ours.update(batch[0], batch[1], indexes=batch[2])
        theirs.update(batch[0], batch[1], indexes=batch[2])
        _close(ours.compute(), theirs.compute())
    composed = [cls(top_k=2) + cls() * 0.5 for cls in (rp.RetrievalMRR, tm.RetrievalMRR)]
    for metric in composed:
        _feed(metric, _batches(1))
    _close(composed[0].compute(), composed[1].compute())


def _collection(module, several: bool) -> MetricCollection:
    top_k = [1, 3] if several and module is rp else 3
    return MetricCollection(
        {"ndcg": module.RetrievalNormalizedDCG(top_k=top_k), "mrr": module.RetrievalMRR()}
    )


def test_metric_tracker_best_metric_as_torchmetrics() -> None:
    found = []
    for module in (rp, tm):
        tracker = MetricTracker(_collection(module, several=False))
        for seed in range(3):
            tracker.increment()
            _feed(tracker, _batches(seed))
        found.append(tracker.best_metric(return_step=True))
    assert found[0][1] == found[1][1]
    for key, value in found[1][0].items():
        assert found[0][0][key] == pytest.approx(value, abs=1e-6)


def test_metric_tracker_refuses_best_of_several_keys_and_keeps_compute_all() -> None:
    tracker = MetricTracker(_collection(rp, several=True))
    for seed in range(2):
        tracker.increment()
        _feed(tracker, _batches(seed))
    assert tracker.compute_all()["ndcg@3"].shape == (2,)
    with pytest.raises(ValueError, match=r"best_metric\(\) picks .*compute_all"):
        tracker.best_metric()


def test_metric_collection_plot() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    one = _collection(rp, several=False)
    _feed(one, _batches())
    assert len(one.plot()) == 2
    several = _collection(rp, several=True)
    _feed(several, _batches())
    with pytest.raises(ValueError, match=r"MetricCollection.plot\(\) .*together=True"):
        several.plot()
    assert several.plot(together=True) is not None


@pytest.mark.parametrize("top_k", [np.int64(2), torch.tensor(2), np.int32(3)])
@pytest.mark.parametrize(
    "name",
    [
        "retrieval_precision",
        "retrieval_recall",
        "retrieval_hit_rate",
        "retrieval_reciprocal_rank",
        "retrieval_normalized_dcg",
        "retrieval_auroc",
    ],
)
def test_functional_top_k_of_numpy_or_tensor_is_one_k(name, top_k) -> None:
    """The argument check takes them as one k: the value of that int k (was: TypeError,
    not iterable)."""
    preds, target = torch.tensor([0.5, 0.3, 0.2, 0.1, 0.7]), torch.tensor([0, 1, 0, 1, 0])
    function = getattr(rpf, name)
    assert torch.equal(
        function(preds, target, top_k=top_k), function(preds, target, top_k=int(top_k))
    )
