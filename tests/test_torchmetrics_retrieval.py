"""``ranking_plugins.torchmetrics`` equals ``torchmetrics.retrieval`` on tie-free inputs.

Random inputs with distinct positive scores (TorchMetrics' MRR, MAP,
Precision and Recall drop relevant items whose score is ≤ 0, a rule of its
own). The grouped layout is fed with every query spread over several updates;
the dense layout is fed row blocks and compared with TorchMetrics on the same
entries flattened with one query id per row. Tolerance: float32 precision
(TorchMetrics computes in float32, this package in float64).

Where TorchMetrics differs by design the test says so and compares only
where both define the same number:

* ``RetrievalMAP(top_k=k)`` divides by the relevant items *within the top k*;
  this package divides by R (trec_eval's map_cut), so MAP is compared at
  ``top_k=None`` only, and the difference at k is pinned below.
* ``RetrievalFallOut`` calls a query without *non-relevant* items empty
  (default ``"pos"``); here a query without *relevant* items is empty and
  counts 1 under ``"neg"``. Compared on queries that have both.
* ``RetrievalAUROC(top_k=k)`` is the AUROC of the top k only; ``AUC`` reads
  the whole list, so it is compared at ``top_k=None``.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torchmetrics import retrieval as tm

from ranking_plugins import torchmetrics as rp

ATOL = 1e-6
RTOL = 1e-5

Factory = Callable[..., Any]

# (ours, theirs, extra keyword arguments of both)
AT_K_PAIRS: dict[str, tuple[Factory, Factory]] = {
    "mrr": (rp.MRR, tm.RetrievalMRR),
    "ndcg": (rp.NDCG, tm.RetrievalNormalizedDCG),
    "hit_rate": (rp.HitRate, tm.RetrievalHitRate),
    "precision": (rp.Precision, tm.RetrievalPrecision),
    "recall": (rp.Recall, tm.RetrievalRecall),
}


def grouped_data(
    seed: int,
    num_queries: int = 40,
    max_items: int = 12,
    *,
    graded: bool = False,
    both_kinds: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flat (M,) triples: lists of 1..max_items items, distinct positive scores, shuffled."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(2 if both_kinds else 1, max_items + 1, (num_queries,), generator=g)
    indexes = torch.repeat_interleave(torch.arange(num_queries) * 7 + 3, sizes)
    total = int(sizes.sum())
    preds = (torch.randperm(total, generator=g) + 1).float() / total
    if graded:
        target = torch.randint(0, 4, (total,), generator=g)
    else:
        target = (torch.rand(total, generator=g) < 0.3).long()
    if both_kinds:  # every query gets a relevant and a non-relevant item
        starts = torch.cumsum(sizes, 0) - sizes
        target[starts] = 1
        target[starts + 1] = 0
    order = torch.randperm(total, generator=g)
    return preds[order], target[order], indexes[order]


def feed_grouped(metric: Any, preds: torch.Tensor, target: torch.Tensor, indexes: torch.Tensor):
    """Three updates of uneven size: most queries are spread over several of them."""
    cuts = [0, len(preds) // 5, len(preds) // 2, len(preds)]
    for lo, hi in itertools.pairwise(cuts):
        metric.update(preds[lo:hi], target[lo:hi], indexes=indexes[lo:hi])
    return metric.compute()


def dense_data(seed: int, rows: int = 30, cols: int = 9, *, both_kinds: bool = False):
    g = torch.Generator().manual_seed(seed)
    preds = ((torch.randperm(rows * cols, generator=g) + 1).float() / (rows * cols)).view(
        rows, cols
    )
    target = (torch.rand(rows, cols, generator=g) < 0.3).long()
    if both_kinds:
        target[:, 0] = 1
        target[:, 1] = 0
    return preds, target


def feed_dense_ours(metric: Any, preds: torch.Tensor, target: torch.Tensor):
    for lo, hi in ((0, 7), (7, 8), (8, len(preds))):
        metric.update(preds[lo:hi], target[lo:hi])
    return metric.compute()


def theirs_on_dense(metric: Any, preds: torch.Tensor, target: torch.Tensor):
    indexes = torch.arange(preds.shape[0]).unsqueeze(1).expand_as(preds)
    metric.update(preds.flatten(), target.flatten(), indexes=indexes.flatten())
    return metric.compute()


def close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, theirs.to(torch.float64), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("name", list(AT_K_PAIRS))
@pytest.mark.parametrize("top_k", [None, 1, 3, 20])
@pytest.mark.parametrize("empty_target_action", ["neg", "pos", "skip"])
def test_at_k_metrics_grouped(name: str, top_k: int | None, empty_target_action: str) -> None:
    ours_cls, theirs_cls = AT_K_PAIRS[name]
    preds, target, indexes = grouped_data(seed=zlib.crc32(f"{name}{top_k}".encode()))
    ours = feed_grouped(
        ours_cls(top_k=top_k, empty_target_action=empty_target_action), preds, target, indexes
    )
    theirs = theirs_cls(top_k=top_k, empty_target_action=empty_target_action)
    theirs.update(preds, target, indexes=indexes)
    close(ours, theirs.compute())


@pytest.mark.parametrize("name", list(AT_K_PAIRS))
@pytest.mark.parametrize("top_k", [None, 2, 5])
def test_at_k_metrics_dense(name: str, top_k: int | None) -> None:
    ours_cls, theirs_cls = AT_K_PAIRS[name]
    preds, target = dense_data(seed=len(name) + (top_k or 0))
    ours = feed_dense_ours(ours_cls(top_k=top_k), preds, target)
    close(ours, theirs_on_dense(theirs_cls(top_k=top_k), preds, target))


@pytest.mark.parametrize("top_k", [1, 4, 20])
def test_precision_adaptive_k(top_k: int) -> None:
    preds, target, indexes = grouped_data(seed=5, max_items=6)
    ours = feed_grouped(rp.Precision(top_k=top_k, adaptive_k=True), preds, target, indexes)
    theirs = tm.RetrievalPrecision(top_k=top_k, adaptive_k=True)
    theirs.update(preds, target, indexes=indexes)
    close(ours, theirs.compute())


@pytest.mark.parametrize("top_k", [None, 1, 3])
def test_ndcg_graded_uses_linear_gain_like_torchmetrics(top_k: int | None) -> None:
    preds, target, indexes = grouped_data(seed=11, graded=True)
    ours = feed_grouped(rp.NDCG(top_k=top_k), preds, target, indexes)
    theirs = tm.RetrievalNormalizedDCG(top_k=top_k)
    theirs.update(preds, target, indexes=indexes)
    close(ours, theirs.compute())
    # the exponential gain is a different number on graded targets
    exponential = feed_grouped(rp.NDCG(top_k=top_k, gain="exponential"), preds, target, indexes)
    assert not torch.isclose(exponential, ours)


def test_map_whole_list_grouped_and_dense() -> None:
    preds, target, indexes = grouped_data(seed=3)
    theirs = tm.RetrievalMAP()
    theirs.update(preds, target, indexes=indexes)
    close(feed_grouped(rp.MAP(), preds, target, indexes), theirs.compute())
    dense_preds, dense_target = dense_data(seed=3)
    close(
        feed_dense_ours(rp.MAP(), dense_preds, dense_target),
        theirs_on_dense(tm.RetrievalMAP(), dense_preds, dense_target),
    )


def test_map_at_k_differs_by_design() -> None:
    """TorchMetrics' AP@k divides by the hits in the top k, this package by R."""
    preds = torch.tensor([0.9, 0.8, 0.7, 0.6])
    target = torch.tensor([1, 0, 0, 1])
    indexes = torch.zeros(4, dtype=torch.long)
    theirs = tm.RetrievalMAP(top_k=2)
    theirs.update(preds, target, indexes=indexes)
    ours = rp.MAP(top_k=2)
    ours.update(preds, target, indexes=indexes)
    assert torch.isclose(theirs.compute(), torch.tensor(1.0))  # 1/1 over 1 hit
    close(ours.compute(), torch.tensor(0.5))  # 1/1 over R = 2
    assert torch.isclose(
        feed_grouped(rp.MAP(top_k=2, ap_denominator="min_k_relevant"), preds, target, indexes),
        torch.tensor(0.5, dtype=torch.float64),
    )


@pytest.mark.parametrize("top_k", [None, 1, 3, 20])
def test_fall_out_on_queries_with_both_kinds(top_k: int | None) -> None:
    preds, target, indexes = grouped_data(seed=8, both_kinds=True)
    theirs = tm.RetrievalFallOut(top_k=top_k)
    theirs.update(preds, target, indexes=indexes)
    close(feed_grouped(rp.FallOut(top_k=top_k), preds, target, indexes), theirs.compute())
    dense_preds, dense_target = dense_data(seed=8, both_kinds=True)
    close(
        feed_dense_ours(rp.FallOut(top_k=top_k), dense_preds, dense_target),
        theirs_on_dense(tm.RetrievalFallOut(top_k=top_k), dense_preds, dense_target),
    )


def test_fall_out_of_a_query_without_relevant_items_is_torchmetrics() -> None:
    """A query without relevant items counts its fall-out, as TorchMetrics (issue 26;
    it was empty here, 1 under "neg"); the package's rule by ``fall_out_empty``."""
    preds = torch.tensor([0.9, 0.8, 0.7])
    target = torch.tensor([0, 0, 0])
    indexes = torch.zeros(3, dtype=torch.long)
    theirs = tm.RetrievalFallOut(top_k=1)
    theirs.update(preds, target, indexes=indexes)
    ours = rp.FallOut(top_k=1)
    ours.update(preds, target, indexes=indexes)
    assert torch.isclose(theirs.compute(), torch.tensor(1 / 3))
    assert ours.compute().item() == pytest.approx(1 / 3)
    package = rp.FallOut(top_k=1, fall_out_empty="no_relevant")
    package.update(preds, target, indexes=indexes)
    assert package.compute().item() == 1.0


def test_fall_out_empty_queries_differ_under_neg_by_design() -> None:
    """A query without non-relevant items under "neg": 1 here (the worst fall-out), 0 there."""
    preds = torch.tensor([0.9, 0.8, 0.7])
    target = torch.tensor([1, 1, 1])
    indexes = torch.zeros(3, dtype=torch.long)
    theirs = tm.RetrievalFallOut(top_k=1, empty_target_action="neg")
    ours = rp.FallOut(top_k=1, empty_target_action="neg")
    assert theirs(preds, target, indexes=indexes).item() == 0.0
    assert ours(preds, target, indexes=indexes).item() == 1.0


@pytest.mark.parametrize("empty_target_action", ["neg", "pos", "skip"])
def test_r_precision(empty_target_action: str) -> None:
    preds, target, indexes = grouped_data(seed=21)
    theirs = tm.RetrievalRPrecision(empty_target_action=empty_target_action)
    theirs.update(preds, target, indexes=indexes)
    ours = rp.RPrecision(empty_target_action=empty_target_action)
    close(feed_grouped(ours, preds, target, indexes), theirs.compute())
    dense_preds, dense_target = dense_data(seed=21)
    close(
        feed_dense_ours(rp.RPrecision(), dense_preds, dense_target),
        theirs_on_dense(tm.RetrievalRPrecision(), dense_preds, dense_target),
    )


def test_auc_equals_auroc_on_the_whole_list() -> None:
    # TorchMetrics gives 0 to a query whose items are all relevant; so does
    # "neg" here (the AUC of such a query is undefined). The data has both.
    preds, target, indexes = grouped_data(seed=13)
    theirs = tm.RetrievalAUROC()
    theirs.update(preds, target, indexes=indexes)
    close(feed_grouped(rp.AUC(), preds, target, indexes), theirs.compute())
    dense_preds, dense_target = dense_data(seed=13)
    close(
        feed_dense_ours(rp.AUC(), dense_preds, dense_target),
        theirs_on_dense(tm.RetrievalAUROC(), dense_preds, dense_target),
    )


def test_torchmetrics_documentation_example() -> None:
    """RetrievalMAP's documented example: 0.7917."""
    indexes = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    preds = torch.tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2])
    target = torch.tensor([False, False, True, False, True, False, True])
    theirs = tm.RetrievalMAP()
    ours = rp.MAP()
    assert torch.isclose(theirs(preds, target, indexes=indexes), torch.tensor(0.7917), atol=1e-4)
    close(ours(preds, target, indexes=indexes), theirs.compute())


def test_multidimensional_grouped_input_is_flattened_like_torchmetrics() -> None:
    preds, target, indexes = grouped_data(seed=4, num_queries=10)
    m = len(preds) // 2 * 2
    shape = (2, m // 2)
    ours = rp.NDCG(top_k=3)
    ours.update(preds[:m].view(shape), target[:m].view(shape), indexes=indexes[:m].view(shape))
    theirs = tm.RetrievalNormalizedDCG(top_k=3)
    theirs.update(preds[:m].view(shape), target[:m].view(shape), indexes=indexes[:m].view(shape))
    close(ours.compute(), theirs.compute())


@pytest.mark.parametrize("name", ["mrr", "ndcg", "hit_rate", "recall"])
def test_ignore_index_grouped_and_dense(name: str) -> None:
    ours_cls, theirs_cls = AT_K_PAIRS[name]
    preds, target, indexes = grouped_data(seed=17)
    g = torch.Generator().manual_seed(1)
    target = torch.where(torch.rand(len(target), generator=g) < 0.2, -100, target)
    theirs = theirs_cls(top_k=3, ignore_index=-100)
    theirs.update(preds, target, indexes=indexes)
    ours = feed_grouped(ours_cls(top_k=3, ignore_index=-100), preds, target, indexes)
    close(ours, theirs.compute())

    # an ignored grade that would be relevant (2) is dropped too: not ranked, not in R
    dense_preds, dense_target = dense_data(seed=17)
    g = torch.Generator().manual_seed(2)
    dense_target = torch.where(torch.rand(dense_target.shape, generator=g) < 0.2, 2, dense_target)
    dense_target[:, 0] = 0  # no row loses every item (TorchMetrics would drop the query)
    ours = feed_dense_ours(ours_cls(top_k=3, ignore_index=2), dense_preds, dense_target)
    theirs = theirs_on_dense(theirs_cls(top_k=3, ignore_index=2), dense_preds, dense_target)
    close(ours, theirs)
    unmasked = feed_dense_ours(ours_cls(top_k=3), dense_preds, dense_target)
    assert not torch.isclose(unmasked, ours)
