"""The accumulator every adapter keeps (issue 26, item 8): an adapter written as
docs/contributing.rst says ("Adding an adapter") gets every metric right,
the catalogue-level ones (coverage, gini, entropy, personalisation) included."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from ranking_plugins import rank_metrics
from ranking_plugins.accumulator import Accumulator
from ranking_plugins.kernel import ItemInputs
from ranking_plugins.options import Options
from ranking_plugins.request import RankingRequest

NAMES = ["ndcg", "mrr", "coverage", "gini", "entropy", "personalisation"]
KS = [2, 5]
NUM_ITEMS = 12


class MinimalAdapter:
    """An adapter as docs/contributing.rst's "Adding an adapter" describes it: one
    request in the constructor, ``request.evaluate`` per batch, an ``Accumulator``
    as the state, its ``values`` reported."""

    def __init__(self, metrics: list[str], top_k: list[int], **options: object) -> None:
        self.request = RankingRequest.create(
            metrics, top_k, Options.create(), items=ItemInputs.create(**options)
        )
        self.kept = Accumulator.empty(self.request)

    def update(self, preds: Tensor, target: Tensor) -> None:
        evaluation = self.request.evaluate(preds, target)
        self.kept = self.kept.merge(Accumulator.of(evaluation, self.request))

    def sync(self) -> None:
        """What a framework does across processes: add the flat tensors (here, of one)."""
        sums, exposure = self.kept.flat()
        self.kept = Accumulator.from_flat(self.request, sums.clone(), exposure.clone())

    def compute(self) -> dict[str, float]:
        values = self.kept.values(self.request)
        return dict(zip(self.request.keys, values.tolist(), strict=True))


def _batches() -> list[tuple[Tensor, Tensor]]:
    gen = torch.Generator().manual_seed(3)
    out = []
    for rows in (3, 5, 4):
        preds = torch.rand(rows, NUM_ITEMS, generator=gen).round(decimals=1)  # ties
        target = (torch.rand(rows, NUM_ITEMS, generator=gen) < 0.3).long()
        out.append((preds, target))
    return out


def test_a_minimal_adapter_gets_the_catalogue_metrics_right() -> None:
    batches = _batches()
    adapter = MinimalAdapter(NAMES, KS, num_items=NUM_ITEMS)
    for preds, target in batches:
        adapter.update(preds, target)
    adapter.sync()
    got = adapter.compute()
    preds = torch.cat([p for p, _ in batches])
    target = torch.cat([t for _, t in batches])
    expected = rank_metrics(preds, target, NAMES, KS)  # N: the columns
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert not math.isnan(got[key]), key
        assert got[key] == pytest.approx(float(value), rel=1e-12, abs=1e-12), key


def test_flat_round_trip_and_merge_are_sums() -> None:
    request = RankingRequest.create(
        ["ndcg", "coverage"], [3], Options.create(), items=ItemInputs.create(num_items=NUM_ITEMS)
    )
    (a_preds, a_target), (b_preds, b_target), _ = _batches()
    a = Accumulator.of(request.evaluate(a_preds, a_target), request, keep_per_query=True)
    b = Accumulator.of(request.evaluate(b_preds, b_target), request, keep_per_query=True)
    merged = a.merge(b)
    sums, exposure = merged.flat()
    assert exposure.shape == (Accumulator.exposure_size(request),)
    (a_sums, a_exposure), (b_sums, b_exposure) = a.flat(), b.flat()
    assert torch.equal(sums, a_sums + b_sums)
    assert torch.equal(exposure, a_exposure + b_exposure)
    assert merged.per_query is not None and merged.per_query.shape == (8, 1)
    back = Accumulator.from_flat(request, sums, exposure, merged.per_query)
    assert torch.equal(back.values(request), merged.values(request))
    assert torch.equal(back.values(request, "median"), merged.values(request, "median"))


def test_torchmetrics_loads_a_checkpoint_of_two_exposure_states() -> None:
    """Before the accumulator, TorchMetrics kept the exposure as two states (its sums,
    then ``<name>_queries``); such a checkpoint still loads, to the same values."""
    from ranking_plugins.torchmetrics import RankingMetrics

    metric = RankingMetrics(["coverage", "gini"], KS, num_items=NUM_ITEMS)
    metric.persistent(True)
    for preds, target in _batches():
        metric.update(preds, target)
    state = metric.state_dict()
    name = metric._exposure_name
    assert name is not None
    packed = state[name]
    state[name] = packed[:-1].view(3, len(KS), NUM_ITEMS)
    state[name + "_queries"] = packed[-1]
    restored = RankingMetrics(["coverage", "gini"], KS, num_items=NUM_ITEMS)
    restored.load_state_dict(state)
    got, expected = restored.compute(), metric.compute()
    assert all(torch.equal(got[key], expected[key]) for key in expected)


def _same_bits(found: Tensor, expected: Tensor) -> bool:
    """Equal to the bit: NaN where NaN, -0.0 apart from 0.0."""
    return found.dtype == expected.dtype and torch.equal(
        found.view(torch.int64), expected.view(torch.int64)
    )


@pytest.mark.parametrize(
    ("metrics", "top_k", "options", "aggregation"),
    [
        (["mrr", "ndcg", "map"], None, {}, "mean"),
        (["mrr", "ndcg", "map"], [1, 5], {"empty_target_action": "skip"}, "mean"),
        (["ndcg", "recall"], [3], {"weighted": True}, "mean"),
        (["dcg", "mean_rank"], None, {"empty_target_action": "pos"}, "mean"),
        (["ndcg", "mrr"], [2, 5], {}, "median"),
        (["ndcg", "coverage", "gini"], [2, 5], {}, "mean"),
    ],
)
def test_values_with_a_batch_are_those_of_the_merged_record(
    metrics: list[str], top_k: list[int] | None, options: dict[str, object], aggregation: str
) -> None:
    """``values_with`` (the mean from the sums it reads) gives the bits of merging the
    batch's whole record first, every aggregation and option."""
    request = RankingRequest.create(
        metrics, top_k, Options.create(**options), items=ItemInputs.create(num_items=NUM_ITEMS)
    )
    keep = aggregation != "mean"
    (a_preds, a_target), (b_preds, b_target), _ = _batches()
    b_target[0] = 0  # a query without a relevant item
    kept = Accumulator.of(request.evaluate(a_preds, a_target), request, keep)
    batch = request.evaluate(b_preds, b_target)
    expected = kept.merge(Accumulator.of(batch, request, keep)).values(request, aggregation)
    assert _same_bits(kept.values_with(batch, request, aggregation), expected)


def test_values_with_a_batch_rescue_a_mean_whose_sum_overflows() -> None:
    """dcg is unbounded: where Σx overflows float64 the mean is read from the sums
    scaled by 2^-64, as the merged record reads it (not inf)."""
    request = RankingRequest.create(["dcg"], None, Options.create(gain="linear"))
    preds = torch.tensor([[1.0, 0.0, 0.0]] * 2)
    target = torch.tensor([[1e308, 0.0, 0.0]] * 2, dtype=torch.float64)
    kept = Accumulator.of(request.evaluate(preds, target), request)
    batch = request.evaluate(preds, target)
    expected = kept.merge(Accumulator.of(batch, request)).values(request)
    found = kept.values_with(batch, request)
    assert _same_bits(found, expected)
    assert math.isclose(float(found[0]), 1e308, rel_tol=1e-15)


def test_from_flat_needs_the_exposure_of_catalogue_metrics() -> None:
    request = RankingRequest.create(
        ["coverage"], [3], Options.create(), items=ItemInputs.create(num_items=NUM_ITEMS)
    )
    sums = Accumulator.empty(request).flat()[0]
    with pytest.raises(ValueError, match="`exposure`"):
        Accumulator.from_flat(request, sums, None)
    plain = RankingRequest.create(["ndcg"], [3], Options.create())
    assert Accumulator.from_flat(plain, Accumulator.empty(plain).flat()[0], None).exposure is None
