"""Fall-out's empty query (issue 26): TorchMetrics computes the fall-out of a query
without relevant items (it needs only non-relevant ones) and calls a query without
non-relevant items empty; ``fall_out_empty="no_nonrelevant"`` is that rule, the
TorchMetrics adapter's default."""

from __future__ import annotations

import pytest
import torch
from torchmetrics.retrieval import RetrievalFallOut

import ranking_plugins
from ranking_plugins.torchmetrics import FallOut, RankingMetrics

# query 0: no relevant item; query 1: both; query 2: no non-relevant item
INDEXES = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
PREDS = torch.tensor([0.9, 0.2, 0.5, 0.1, 0.7, 0.3, 0.4, 0.6, 0.2])
TARGET = torch.tensor([0, 0, 0, 1, 0, 1, 1, 1, 1])


@pytest.mark.parametrize("top_k", [1, 2, None])
@pytest.mark.parametrize("action", ["pos", "skip", None])
def test_the_adapter_gives_retrieval_fall_out_values(top_k: int | None, action: str | None) -> None:
    """Before: query 0 was empty (1 under every action but skip), unreachable."""
    theirs = RetrievalFallOut(
        top_k=top_k, **({} if action is None else {"empty_target_action": action})
    )
    ours = FallOut(top_k=top_k, **({} if action is None else {"empty_target_action": action}))
    expected = theirs(PREDS, TARGET, indexes=INDEXES)
    torch.testing.assert_close(ours(PREDS, TARGET, indexes=INDEXES), expected.double())


def test_neg_counts_the_worst_fall_out() -> None:
    """The documented difference: "neg" is the worst value here (1), 0 in TorchMetrics."""
    value = FallOut(top_k=1, empty_target_action="neg")(PREDS, TARGET, indexes=INDEXES)
    assert float(value) == pytest.approx((1 / 3 + 1 + 1) / 3)


def test_error_names_the_query_without_non_relevant_items() -> None:
    with pytest.raises(ValueError, match=r"no negative target.*query 2 has no non-relevant item"):
        FallOut(empty_target_action="error")(PREDS, TARGET, indexes=INDEXES)


def test_the_package_default_and_the_option() -> None:
    preds = PREDS.reshape(3, 3)
    target = TARGET.reshape(3, 3)
    per_query = {"reduction": "none", "empty_target_action": "skip"}
    default = ranking_plugins.rank_metrics(preds, target, "fall_out", 1, **per_query)["fall_out@1"]
    torch.testing.assert_close(
        default, torch.tensor([torch.nan, 1.0, 0.0], dtype=torch.float64), equal_nan=True
    )
    option = ranking_plugins.rank_metrics(
        preds, target, "fall_out", 1, fall_out_empty="no_nonrelevant", **per_query
    )["fall_out@1"]
    torch.testing.assert_close(
        option, torch.tensor([1 / 3, 1.0, torch.nan], dtype=torch.float64), equal_nan=True
    )
    # the adapter's default, and the package's rule there by the option
    adapter = RankingMetrics(["fall_out", "mrr"], top_k=1, empty_target_action="skip")
    assert float(adapter(PREDS, TARGET, indexes=INDEXES)["fall_out@1"]) == pytest.approx(2 / 3)
    package_rule = FallOut(top_k=1, empty_target_action="skip", fall_out_empty="no_relevant")
    assert float(package_rule(PREDS, TARGET, indexes=INDEXES)) == 0.5


def test_a_bad_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="`fall_out_empty` must be one of"):
        FallOut(fall_out_empty="none")  # type: ignore[typeddict-item]


@pytest.mark.parametrize("top_k", [1, 2, None])
def test_the_function_gives_retrieval_fall_out_of_a_query_without_relevant_items(
    top_k: int | None,
) -> None:
    """Before: ``retrieval_fall_out`` gave 1 for query 0, the class its fall-out."""
    from torchmetrics.functional.retrieval import retrieval_fall_out as theirs

    from ranking_plugins.torchmetrics_functional import retrieval_fall_out as ours

    for query in (0, 1):
        rows = INDEXES.eq(query)
        expected = theirs(PREDS[rows], TARGET[rows], top_k=top_k)
        torch.testing.assert_close(ours(PREDS[rows], TARGET[rows], top_k=top_k), expected.double())
    # no non-relevant item: the empty query under "neg", the worst fall-out (0 in TorchMetrics)
    rows = INDEXES.eq(2)
    assert float(ours(PREDS[rows], TARGET[rows], top_k=top_k)) == 1.0
