"""The diversity measures through the TorchMetrics and Ignite adapters: a (Q, N, S) target
of subtopic grades in the dense layout, batch by batch, gives ``rank_metrics``' values."""

from __future__ import annotations

import pytest
import torch

from ranking_plugins import ArgumentError, rank_metrics

NAMES = ["alpha_ndcg", "err_ia", "nrbp", "ap_ia", "subtopic_recall", "ndcg"]
TOP_K = [2, 5]


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Two batches of (Q, N) scores with ties and (Q, N, S) grades 0-2."""
    generator = torch.Generator().manual_seed(0)
    batches = []
    for queries in (3, 4):
        preds = torch.randint(0, 4, (queries, 7), generator=generator).double()
        target = torch.randint(0, 3, (queries, 7, 3), generator=generator)
        target[target == 1] = 0  # sparser judgments
        batches.append((preds, target))
    return batches


def _expected(**options: object) -> dict[str, torch.Tensor]:
    batches = _batches()
    preds = torch.cat([p for p, _ in batches])
    target = torch.cat([t for _, t in batches])
    return rank_metrics(preds, target, NAMES, top_k=TOP_K, reduction="none", **options)


def test_torchmetrics_takes_subtopic_targets() -> None:
    pytest.importorskip("torchmetrics")
    from ranking_plugins.torchmetrics import RankingMetrics

    metric = RankingMetrics(NAMES, top_k=TOP_K, alpha=0.3, keep_per_query=True)
    for preds, target in _batches():
        metric.update(preds, target)
    expected = _expected(alpha=0.3)
    per_query = metric.compute_per_query()
    means = metric.compute()
    for key, values in expected.items():
        assert torch.allclose(per_query[key], values, atol=1e-12), key
        assert float(means[key]) == pytest.approx(float(values.mean()), abs=1e-12), key


def test_ignite_takes_subtopic_targets() -> None:
    pytest.importorskip("ignite")
    from ranking_plugins.ignite import RankingMetrics

    metric = RankingMetrics(NAMES, top_k=TOP_K, beta=0.7, keep_per_query=True)
    for preds, target in _batches():
        metric.update((preds, target))
    expected = _expected(beta=0.7)
    per_query = metric.compute_per_query()
    means = metric.compute()
    for key, values in expected.items():
        assert torch.allclose(per_query[key], values, atol=1e-12), key
        assert means[key] == pytest.approx(float(values.mean()), abs=1e-12), key


def test_torchmetrics_ignore_index_of_subtopic_grades() -> None:
    """An item ignored in every subtopic leaves its list; an entry ignored in some
    subtopics is no judgment there (grade 0)."""
    pytest.importorskip("torchmetrics")
    from ranking_plugins.torchmetrics import RankingMetrics

    preds, target = _batches()[0]
    ignored = target.clone()
    ignored[0, 1] = -1  # item 1 of query 0: dropped
    ignored[1, 2, 0] = -1  # item 2 of query 1: no judgment for subtopic 0
    metric = RankingMetrics(NAMES, top_k=TOP_K, ignore_index=-1, keep_per_query=True)
    metric.update(preds, ignored)
    per_query = metric.compute_per_query()
    kept = [0, 2, 3, 4, 5, 6]
    query_0 = rank_metrics(preds[:1, kept], target[:1, kept], NAMES, top_k=TOP_K)
    zeroed = target[1:2].clone()
    zeroed[0, 2, 0] = 0
    query_1 = rank_metrics(preds[1:2], zeroed, NAMES, top_k=TOP_K)
    for key in query_0:
        assert float(per_query[key][0]) == pytest.approx(float(query_0[key]), abs=1e-12), key
        assert float(per_query[key][1]) == pytest.approx(float(query_1[key]), abs=1e-12), key


def test_adapters_refuse_what_the_diversity_measures_cannot_read() -> None:
    pytest.importorskip("torchmetrics")
    pytest.importorskip("ignite")
    from ranking_plugins.ignite import RankingMetrics as IgniteMetrics
    from ranking_plugins.torchmetrics import RankingMetrics

    preds, target = _batches()[0]
    indexes = torch.arange(preds.shape[0]).repeat_interleave(preds.shape[1])
    with pytest.raises(ArgumentError, match=r"`indexes` is not taken by the diversity measures"):
        RankingMetrics(["alpha_ndcg"], top_k=2).update(
            preds.flatten(), target[..., 0].flatten(), indexes=indexes
        )
    for metric in (RankingMetrics(["alpha_ndcg"], top_k=2), IgniteMetrics(["alpha_ndcg"], top_k=2)):
        update = metric.update if isinstance(metric, RankingMetrics) else None
        with pytest.raises(ArgumentError, match=r"`target` must hold subtopic judgments"):
            if update is not None:
                update(preds, target[..., 0])
            else:
                metric.update((preds, target[..., 0]))
    for make in (RankingMetrics, IgniteMetrics):
        with pytest.raises(ArgumentError, match=r"`alpha` must be a number in \[0, 1\)"):
            make(["alpha_ndcg"], top_k=2, alpha=1.0)
        with pytest.raises(ValueError, match="top_k"):
            make(["alpha_ndcg"], top_k=0)
