"""One check per grouped batch in the TorchMetrics adapter (issue 26, item 8)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

pytest.importorskip("torchmetrics")

import ranking_plugins.request
import ranking_plugins.torchmetrics.base as tm_base
from ranking_plugins.torchmetrics import RankingMetrics


def test_judged_flags_are_checked_once_per_update(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    check = tm_base.check_judged

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return check(*args, **kwargs)

    monkeypatch.setattr(tm_base, "check_judged", counting)
    metric = RankingMetrics(["bpref", "ndcg"], top_k=3)
    preds = torch.rand(2, 4)
    target = torch.tensor([[1, 0, 1, 0], [0, 1, 0, 0]])
    indexes = torch.tensor([[0] * 4, [1] * 4])
    judged = torch.tensor([[True, True, False, True], [True, True, True, False]])
    metric.update(preds, target, indexes=indexes, judged=judged)  # any shape, flattened
    assert len(calls) == 1
    metric.update(preds.flatten(), target.flatten(), indexes=indexes.flatten())
    assert len(calls) == 2


def test_a_refused_layout_is_refused_at_update_without_ranking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ranked: list[int] = []
    rank = ranking_plugins.request.RankingRequest.rank

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        ranked.append(1)
        return rank(self, *args, **kwargs)

    monkeypatch.setattr(ranking_plugins.request.RankingRequest, "rank", counting)
    metric = RankingMetrics(["novelty"], top_k=2, item_popularity=torch.rand(4))
    with pytest.raises(ValueError, match="the grouped layout"):
        metric.update(torch.rand(4), torch.tensor([1, 0, 0, 1]), indexes=torch.tensor([0, 0, 1, 1]))
    assert ranked == []
