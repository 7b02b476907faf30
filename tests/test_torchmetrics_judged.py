"""Issue 13's ``judged`` input in the TorchMetrics grouped layout kept until ``compute``.

Queries split across updates (and across processes), judged flags kept as a
"cat" state by the metrics that read a measure of judged items, ranked with
them at ``compute``: equal to ``rank_metrics`` on the concatenated inputs.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch
from processes import spawn_and_wait
from reference import JUDGED_MEASURES, TIES

from ranking_plugins import rank_metrics

pytest.importorskip("torchmetrics")

from torchmetrics import MetricCollection  # noqa: E402

import ranking_plugins.torchmetrics as tm  # noqa: E402
from ranking_plugins.torchmetrics import NDCG, RankingMetrics  # noqa: E402

KS = [1, 3, 10]


def _metrics(ties: str) -> list[str]:
    """Every judged measure exact under ``ties`` (infAP refuses "average" where
    ``rank_metrics`` does), and one metric that reads no judgment."""
    names = [*JUDGED_MEASURES, "ndcg"]
    try:
        rank_metrics(torch.ones(1, 2), torch.ones(1, 2), ["infap"], ties=ties)
    except ValueError:
        names.remove("infap")
    return names


def _problem(seed: int, queries: int = 6, items: int = 7):
    """(Q, N) scores with many ties, grades -1..2, unjudged and masked items, and the
    order in which their entries come as grouped (M,) entries."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    preds = torch.tensor(
        [[float(rng.choice([0, 1, 2, 3])) for _ in range(items)] for _ in range(queries)]
    )
    target = torch.tensor(
        [[rng.choice([-1, 0, 0, 1, 2]) for _ in range(items)] for _ in range(queries)]
    )
    judged = torch.rand(queries, items, generator=g) < 0.7
    mask = torch.rand(queries, items, generator=g) < 0.85
    order = torch.randperm(queries * items, generator=g)
    return preds, target, mask, judged, order


def _grouped(preds, target, mask, judged, order):
    """The entries in ``order``: (preds, target, indexes, mask, judged), each (M,)."""
    indexes = torch.arange(preds.shape[0]).repeat_interleave(preds.shape[1])
    return tuple(t.flatten()[order] for t in (preds, target, indexes, mask, judged))


def _assert_same(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert list(got) == list(expected)
    for key, value in expected.items():
        torch.testing.assert_close(
            got[key], value.to(torch.float64), rtol=0, atol=1e-12, equal_nan=True, msg=key
        )


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("seed", [0, 1])
def test_split_queries_match_rank_metrics(ties: str, seed: int) -> None:
    """Three updates that split the queries, the last one without ``judged`` (its
    entries count as judged); the per-query values (sorted query order) too."""
    preds, target, mask, judged, order = _problem(seed)
    flat = _grouped(preds, target, mask, judged, order)
    cuts = [0, 15, 29, preds.numel()]
    assert set(flat[2][:15].tolist()) & set(flat[2][15:29].tolist())  # split queries
    metrics = _metrics(ties)
    options = {"ties": ties, "empty_target_action": "skip", "gain": "linear"}
    metric = RankingMetrics(metrics, KS, keep_per_query=True, **options)
    for i, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
        p, t, x, m, j = (f[lo:hi] for f in flat)
        metric.update(p, t, x, mask=m, judged=None if i == 2 else j)
    # what was given, concatenated: the last update's entries judged
    given = flat[4].clone()
    given[cuts[2] :] = True
    assert not torch.equal(given, flat[4]) and not given.all()
    p, t, x, m, _ = flat
    grouped = {"indexes": x, "mask": m, "judged": given, **options}
    _assert_same(metric.compute(), rank_metrics(p, t, metrics, top_k=KS, **grouped))
    per_query = rank_metrics(p, t, metrics, top_k=KS, reduction="none", **grouped)
    _assert_same(metric.compute_per_query(), per_query)
    # the flags changed the numbers: without them, other values
    plain = rank_metrics(p, t, ["bpref", "unj"], top_k=KS, indexes=x, mask=m, **options)
    got = metric.compute()
    assert any(not torch.equal(got[k], v.double()) for k, v in plain.items())
