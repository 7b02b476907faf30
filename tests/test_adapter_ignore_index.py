"""TorchMetrics ``ignore_index`` is applied afresh to every batch.

A batch buffer reused from update to update and rewritten in place, through
a shared numpy array (which does not bump the tensor's version counter),
must be read as it is now, never as it was at an earlier update.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import ranking_plugins
from ranking_plugins import torchmetrics as rp

# three batches of 2 queries x 4 items; -1 marks entries to ignore
DENSE = [
    ([[4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0]], [[1, 0, -1, 0], [0, 0, 0, 1]]),
    ([[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]], [[1, -1, 0, 0], [0, 1, 0, 0]]),
    ([[2.0, 4.0, 1.0, 3.0], [3.0, 1.0, 4.0, 2.0]], [[0, -1, 1, 0], [1, 0, -1, 1]]),
]
# the same with relevant item ids (-1 is also the padding)
INDICES = [
    ([[4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0]], [[0, -7], [3, 1]]),
    ([[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]], [[0, 2], [-7, 1]]),
    ([[2.0, 4.0, 1.0, 3.0], [3.0, 1.0, 4.0, 2.0]], [[2, -7], [0, 3]]),
]


def reference(batches: list[tuple[Any, Any]], ignore_index: int, top_k: list[int]) -> Any:
    preds = torch.tensor([row for p, _ in batches for row in p])
    target = torch.tensor([row for _, t in batches for row in t])
    ignored = target == ignore_index
    if target.shape == preds.shape:  # dense: an ignored entry is dropped
        mask = ~ignored
        target = target.masked_fill(ignored, 0)
    else:  # item ids: an ignored id is padding
        mask = None
        target = target.masked_fill(ignored, -1)
    return ranking_plugins.rank_metrics(
        preds, target, ["mrr", "recall"], top_k, mask=mask, gain="linear"
    )


@pytest.mark.parametrize("layout", ["dense", "indices"])
@pytest.mark.parametrize("rewrite", ["both", "preds", "target"])
def test_a_buffer_rewritten_through_numpy_is_read_afresh(layout: str, rewrite: str) -> None:
    batches = DENSE if layout == "dense" else INDICES
    ignore_index = -1 if layout == "dense" else -7
    if rewrite == "preds":  # the same target every time
        batches = [(p, batches[0][1]) for p, _ in batches]
    elif rewrite == "target":  # the same scores every time
        batches = [(batches[0][0], t) for _, t in batches]
    preds_buffer = np.zeros((2, 4), dtype=np.float32)
    target_buffer = np.zeros(np.array(batches[0][1]).shape, dtype=np.int64)
    preds, target = torch.from_numpy(preds_buffer), torch.from_numpy(target_buffer)
    metric = rp.RankingMetrics(["mrr", "recall"], top_k=[1, 2], ignore_index=ignore_index)
    for batch_preds, batch_target in batches:
        preds_buffer[...] = batch_preds  # in place: the tensors' versions do not change
        target_buffer[...] = batch_target
        metric.update(preds, target)
    expected = reference(batches, ignore_index, [1, 2])
    result = metric.compute()
    assert list(result) == list(expected)
    for key in expected:
        torch.testing.assert_close(result[key], expected[key], rtol=1e-15, atol=0)


def test_the_issue_case_mrr_of_a_reused_buffer() -> None:
    """Three batches through one numpy-backed buffer: 1/3, not 1.0."""
    preds_buffer = np.zeros((1, 3), dtype=np.float32)
    preds = torch.from_numpy(preds_buffer)
    target = torch.tensor([[0, 0, 1]])
    metric = rp.MRR(top_k=3, ignore_index=-1)
    for row in ([1.0, 2.0, 3.0], [3.0, 2.0, 1.0], [2.0, 3.0, 1.0]):
        preds_buffer[0] = row
        metric.update(preds, target)
    assert float(metric.compute()) == pytest.approx((1 + 1 / 3 + 1 / 3) / 3, rel=1e-15)


@pytest.mark.parametrize("layout", ["dense", "indices"])
def test_ignore_index_still_drops_entries(layout: str) -> None:
    """The behaviour itself: an ignored grade is never ranked nor counted in R;
    an ignored item id is padding."""
    batches = DENSE if layout == "dense" else INDICES
    ignore_index = -1 if layout == "dense" else -7
    metric = rp.RankingMetrics(["mrr", "recall"], top_k=[1, 2], ignore_index=ignore_index)
    for batch_preds, batch_target in batches:
        metric.update(torch.tensor(batch_preds), torch.tensor(batch_target))
    expected = reference(batches, ignore_index, [1, 2])
    result = metric.compute()
    for key in expected:
        torch.testing.assert_close(result[key], expected[key], rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_grouped_updates_keep_copies_of_reused_buffers(dtype: torch.dtype) -> None:
    """Found by the fuzzer: grouped input already in the storage dtype (float64
    scores, int64 query ids) was kept as given, so a buffer rewritten through
    numpy before ``compute`` changed the queries of earlier updates."""
    preds_buffer = np.zeros(3, dtype=np.float64 if dtype == torch.float64 else np.int64)
    target_buffer = np.zeros(3, dtype=np.float64)
    index_buffer = np.zeros(3, dtype=np.int64)
    preds, target = torch.from_numpy(preds_buffer), torch.from_numpy(target_buffer)
    indexes = torch.from_numpy(index_buffer)
    metric = rp.RankingMetrics(["hit_rate", "mrr"], top_k=2, validate_args=True)
    batches = [([3, 2, 1], [0, 0, 1], 0), ([1, 2, 3], [0, 1, 0], 1), ([2, 3, 1], [1, 0, 0], 2)]
    for scores, grades, query in batches:
        preds_buffer[:] = scores
        target_buffer[:] = grades
        index_buffer[:] = query
        metric.update(preds, target, indexes=indexes)
    got = metric.compute()
    want = ranking_plugins.rank_metrics(
        torch.tensor([s for s, _, _ in batches], dtype=dtype).flatten(),
        torch.tensor([g for _, g, _ in batches], dtype=torch.float64).flatten(),
        ["hit_rate", "mrr"],
        2,
        indexes=torch.tensor([q for _, _, q in batches]).repeat_interleave(3),
    )
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], msg=key)
