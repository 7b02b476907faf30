"""The TorchMetrics adapter's ``whole_queries=True``: grouped batches ranked at ``update``.

Each batch holds whole queries, so the numbers must equal those of the
default path (entries kept until ``compute``) exactly, while the state stays
the float64 sums whatever the number of updates.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torchmetrics import MetricCollection

from ranking_plugins.torchmetrics import MAP, MRR, NDCG, RankingMetrics


def batches(
    queries: int = 40, candidates: int = 12, updates: int = 5, integer: bool = False
) -> list[dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(7)
    preds = torch.randn(queries, candidates, generator=gen)
    if integer:
        preds = (preds * 3).round().long()  # many ties
    target = torch.randint(0, 3, (queries, candidates), generator=gen)
    # uneven list lengths: the last entries of some queries are dropped
    keep = torch.rand(queries, candidates, generator=gen) < 0.8
    ids = torch.arange(queries).unsqueeze(1).expand(queries, candidates)
    mask = torch.rand(queries, candidates, generator=gen) < 0.9
    per = queries // updates
    out = []
    for low in range(0, queries, per):
        rows = slice(low, low + per)
        k = keep[rows]
        out.append(
            {
                "preds": preds[rows][k],
                "target": target[rows][k],
                "indexes": ids[rows][k] * 7 + 3,  # ids need not be 0..Q-1
                "mask": mask[rows][k],
            }
        )
    return out


def run(metric: Any, data: list[dict[str, torch.Tensor]], with_mask: bool) -> Any:
    for batch in data:
        metric.update(
            batch["preds"],
            batch["target"],
            indexes=batch["indexes"],
            mask=batch["mask"] if with_mask else None,
        )
    return metric.compute()


OPTIONS: list[dict[str, Any]] = [
    {},
    {"ties": "first", "empty_target_action": "skip"},
    {"ignore_index": 2, "gain": "exponential"},
    {"relevance_threshold": 2, "weighted": True, "validate_args": False},
]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("integer", [False, True], ids=["float scores", "int scores"])
def test_numbers_equal_to_the_default_path(
    options: dict[str, Any], with_mask: bool, integer: bool
) -> None:
    data = batches(integer=integer)
    metrics = ("mrr", "ndcg", "map", "recall", "auc")
    kept = run(RankingMetrics(metrics, top_k=[1, 5], **options), data, with_mask)
    ranked = run(
        RankingMetrics(metrics, top_k=[1, 5], whole_queries=True, **options), data, with_mask
    )
    assert kept.keys() == ranked.keys()
    for key in kept:
        torch.testing.assert_close(ranked[key], kept[key], rtol=1e-12, atol=1e-12, equal_nan=True)


def test_state_is_constant_size() -> None:
    metric = RankingMetrics(("mrr", "ndcg"), whole_queries=True)
    for batch in batches(updates=8):
        metric.update(batch["preds"], batch["target"], indexes=batch["indexes"])
    assert all(t.numel() == 0 for lists in metric._flat_lists() for t in lists)
    kept = RankingMetrics(("mrr", "ndcg"))
    for batch in batches(updates=8):
        kept.update(batch["preds"], batch["target"], indexes=batch["indexes"])
    assert sum(t.numel() for t in kept.flat_preds) > 0


def test_collection_equals_one_metric() -> None:
    data = batches()
    collection = MetricCollection(
        {
            "mrr": MRR(whole_queries=True),
            "ndcg": NDCG(whole_queries=True),
            "map": MAP(whole_queries=True),
        }
    )
    got = run(collection, data, with_mask=False)
    one = run(RankingMetrics(("mrr", "ndcg", "map"), whole_queries=True), data, with_mask=False)
    for name in ("mrr", "ndcg", "map"):
        torch.testing.assert_close(got[name], one[name], rtol=0, atol=0)


def test_split_query_counts_twice_as_documented() -> None:
    """Not detected (documented): each batch's part of a query is a query of its own."""
    preds = torch.tensor([0.9, 0.1, 0.8, 0.2])
    target = torch.tensor([0, 1, 1, 0])
    indexes = torch.zeros(4, dtype=torch.long)
    split = MRR(whole_queries=True)
    split.update(preds[:2], target[:2], indexes=indexes[:2])
    split.update(preds[2:], target[2:], indexes=indexes[2:])
    whole = MRR()
    whole.update(preds[:2], target[:2], indexes=indexes[:2])
    whole.update(preds[2:], target[2:], indexes=indexes[2:])
    assert math.isclose(float(whole.compute()), 1 / 2)  # one query: first relevant at 2
    assert math.isclose(float(split.compute()), (1 / 2 + 1) / 2)  # two queries


def test_nan_scores_refused_at_update() -> None:
    metric = MRR(whole_queries=True)
    with pytest.raises(ValueError, match="`preds` must not contain NaN"):
        metric.update(
            torch.tensor([0.1, math.nan]), torch.tensor([1, 0]), indexes=torch.tensor([0, 0])
        )


def test_bad_option_named() -> None:
    with pytest.raises(TypeError, match="whole_queries"):
        MRR(whole_queries="yes")  # type: ignore[arg-type]
