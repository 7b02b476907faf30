"""``validate_args=True`` finds NaN scores inside the kernel's own passes (issue 17).

A NaN score comes first out of a top-k and out of a descending sort, and the
counting path finds it from the comparisons it makes; the grades' largest
values are read once and reused for the ideal gains. These tests put a NaN
in every place each path could miss it and check the same error as the
separate check gave; and that the numbers with validation equal those without.
"""

from __future__ import annotations

import math

import pytest
import torch

from ranking_plugins import rank_metrics
from ranking_plugins.batch_cache import last_batch
from ranking_plugins.kernel import ranked_batch
from ranking_plugins.kernel.inputs import checks
from ranking_plugins.kernel.inputs.relevance import GainRule

NAN_MESSAGE = r"^`preds` must not contain NaN$"
Q, N = 6, 40


def scores(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(Q, N, generator=torch.Generator().manual_seed(3)).to(dtype)


def grades() -> torch.Tensor:
    return (torch.rand(Q, N, generator=torch.Generator().manual_seed(4)) < 0.2).float()


PATHS = {
    # top-k selection (every metric @k, k < N)
    "top-k": {"metrics": ("ndcg", "mrr"), "top_k": 5},
    # whole rows sorted
    "sort": {"metrics": ("auc", "ndcg"), "top_k": None},
}
PLACES = [(0, 0), (2, N - 1), (5, 17)]


@pytest.fixture(autouse=True)
def _no_cache() -> None:
    last_batch.clear()


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("place", PLACES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_dense_nan_found_by_ranking(path: str, place: tuple[int, int], dtype: torch.dtype) -> None:
    preds = scores(dtype)
    preds[place] = math.nan
    with pytest.raises(ValueError, match=NAN_MESSAGE):
        rank_metrics(preds, grades(), **PATHS[path])  # type: ignore[arg-type]


@pytest.mark.parametrize("place", PLACES, ids=str)
@pytest.mark.parametrize("ties", ["average", "first", "pessimistic", "optimistic"])
@pytest.mark.parametrize("at_target", [False, True], ids=["elsewhere", "at the target"])
def test_item_id_nan_found_by_counting(place: tuple[int, int], ties: str, at_target: bool) -> None:
    preds = scores()
    item = torch.arange(Q) * 3
    if at_target:
        place = (place[0], int(item[place[0]]))
    preds[place] = math.nan
    with pytest.raises(ValueError, match=NAN_MESSAGE):
        rank_metrics(preds, item, ("hit_rate", "mrr"), None, ties=ties)


def test_counting_with_ties_and_nan() -> None:
    """A row with ties and a NaN: the tied count is checked again, exactly."""
    preds = torch.zeros(3, 10)
    preds[1, 4] = math.nan
    with pytest.raises(ValueError, match=NAN_MESSAGE):
        rank_metrics(preds, torch.tensor([0, 1, 2]), "mrr", None)
    preds[1, 4] = 0.0  # ties only: no error, the numbers of validate_args=False
    last_batch.clear()
    checked = rank_metrics(preds, torch.tensor([0, 1, 2]), ("mrr", "auc"), None)
    last_batch.clear()
    unchecked = rank_metrics(
        preds, torch.tensor([0, 1, 2]), ("mrr", "auc"), None, validate_args=False
    )
    assert checked == unchecked


def test_one_item_list_with_nan() -> None:
    with pytest.raises(ValueError, match=NAN_MESSAGE):
        rank_metrics(torch.tensor([[math.nan], [1.0]]), torch.tensor([0, 0]), "mrr", None)


def test_masked_nan_still_an_error() -> None:
    """A mask parks scores below the others: a NaN there is still refused."""
    preds = scores()
    preds[1, 3] = math.nan
    mask = torch.ones(Q, N, dtype=torch.bool)
    mask[1, 3] = False
    for metrics, k in (("ndcg", 5), ("auc", None)):
        with pytest.raises(ValueError, match=NAN_MESSAGE):
            rank_metrics(preds, grades(), metrics, k, mask=mask)


def test_grouped_nan_found_by_ranking() -> None:
    preds = torch.randn(30)
    preds[7] = math.nan
    target = (torch.arange(30) % 4 == 0).long()
    indexes = torch.arange(30) // 7  # lists of 7 and one of 2: two length classes
    for k in (3, None):
        with pytest.raises(ValueError, match=NAN_MESSAGE):
            rank_metrics(preds, target, ("mrr", "ndcg"), k, indexes=indexes)


def test_whole_rows_in_blocks_checked_when_ranked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows sorted in blocks (ranked when read) are checked up front, in ``rank``."""
    monkeypatch.setattr(ranked_batch, "WHOLE_ROW_BLOCK_ELEMENTS", N * 2)
    preds = scores()
    preds[4, 9] = math.nan
    with pytest.raises(ValueError, match=NAN_MESSAGE):
        rank_metrics(preds, grades(), ("auc",), None)


@pytest.mark.parametrize(
    "target",
    [
        grades(),
        (grades() * 3).long(),
        (grades() * 3).to(torch.int8),
        grades().bool(),
        torch.rand(Q, N, generator=torch.Generator().manual_seed(5)).double(),
    ],
    ids=["float 0/1", "int64", "int8", "bool", "float64 graded"],
)
@pytest.mark.parametrize("gain", ["exponential", "linear"])
@pytest.mark.parametrize("top_k", [5, None])
def test_numbers_equal_without_validation(
    target: torch.Tensor, gain: str, top_k: int | None
) -> None:
    preds = scores()
    preds[0, :5] = preds[0, 5]  # a tie across the cutoff
    metrics = ("ndcg", "map", "mrr", "recall")
    checked = rank_metrics(preds, target, metrics, top_k, gain=gain)
    last_batch.clear()
    unchecked = rank_metrics(preds, target, metrics, top_k, gain=gain, validate_args=False)
    assert checked == unchecked


@pytest.mark.parametrize(
    ("dtype", "gain", "reads"),
    [
        (torch.bool, "exponential", False),
        (torch.uint8, "exponential", False),
        (torch.int8, "exponential", False),
        (torch.int16, "exponential", True),  # 2^32767 - 1 overflows
        (torch.int64, "exponential", True),
        (torch.int64, "linear", False),
        (torch.float32, "linear", True),  # NaN possible
    ],
)
def test_grades_read_only_when_the_dtype_allows_a_bad_value(
    dtype: torch.dtype, gain: str, reads: bool
) -> None:
    read = []

    class Watched(torch.Tensor):
        def amax(self, *args: object, **kwargs: object) -> torch.Tensor:  # type: ignore[override]
            read.append(True)
            return super().amax(*args, **kwargs)  # type: ignore[arg-type]

    target = torch.ones(3, 4, dtype=dtype).as_subclass(Watched)
    checks.check_grades(target, GainRule(None, gain), 4)
    assert bool(read) == reads


def test_grades_nan_and_overflow_still_refused() -> None:
    target = grades().double()
    target[2, 2] = math.nan
    with pytest.raises(ValueError, match="`target` must not contain NaN grades"):
        rank_metrics(scores(), target, "ndcg", 5)
    big = torch.zeros(Q, N, dtype=torch.int16)
    big[1, 1] = 2000
    with pytest.raises(ValueError, match="overflows float64"):
        rank_metrics(scores(), big, "ndcg", 5, gain="exponential")
