"""Worked examples of SPEC section 7 (functional API) and a ties example."""

from __future__ import annotations

import math

import pytest
import torch

from ranking_plugins import rank_metrics

Y_PRED = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
KS = [1, 2, 3, 4]


def at_ks(res, metric, ks=KS):
    return [float(res[f"{metric}@{k}"]) for k in ks]


@pytest.mark.parametrize("empty_target_action", ["skip", "neg"])
def test_ignite_mrr(empty_target_action):
    # both queries have a relevant item, so ignore_zero_hits does not matter
    y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    res = rank_metrics(
        Y_PRED, y, metrics=("mrr",), top_k=KS, empty_target_action=empty_target_action
    )
    assert list(res) == [f"mrr@{k}" for k in KS]
    assert at_ks(res, "mrr") == pytest.approx([0.5, 0.75, 0.75, 0.75], abs=1e-7)


def test_ignite_hit_rate_ignore_zero_hits():
    # Ignite's default ignore_zero_hits=True is empty_target_action="skip":
    # the second query has no relevant item and is left out of the mean.
    y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    res = rank_metrics(Y_PRED, y, metrics=("hit_rate",), top_k=KS, empty_target_action="skip")
    assert at_ks(res, "hit_rate") == pytest.approx([0.0, 1.0, 1.0, 1.0], abs=1e-7)


def test_ignite_hit_rate_keep_zero_hits():
    # ignore_zero_hits=False is empty_target_action="neg": the empty query counts 0
    y = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    res = rank_metrics(Y_PRED, y, metrics=("hit_rate",), top_k=KS, empty_target_action="neg")
    assert at_ks(res, "hit_rate") == pytest.approx([0.0, 0.5, 0.5, 0.5], abs=1e-7)
    res = rank_metrics(Y_PRED, y, metrics=("hit_rate",), top_k=KS)  # "neg" is the default
    assert at_ks(res, "hit_rate") == pytest.approx([0.0, 0.5, 0.5, 0.5], abs=1e-7)


def test_ml4ir_mrr_and_mean_rank():
    y_true = torch.tensor([[0, 0, 1], [0, 1, 0]])
    y_pred = torch.tensor([[0.1, 0.9, 0.8], [0.05, 0.95, 0.0]])
    res = rank_metrics(y_pred, y_true, metrics=("mrr", "mean_rank"), top_k=None)
    # query 1: the relevant item is ranked 2nd; query 2: 1st
    assert float(res["mrr"]) == pytest.approx(0.75, abs=1e-7)
    assert float(res["mean_rank"]) == pytest.approx(1.5, abs=1e-7)
    per_q = rank_metrics(y_pred, y_true, metrics=("mrr", "mean_rank"), top_k=None, reduction="none")
    assert per_q["mrr"].tolist() == pytest.approx([0.5, 1.0])
    assert per_q["mean_rank"].tolist() == pytest.approx([2.0, 1.0])


def test_torchmetrics_retrieval_map_grouped():
    indexes = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    preds = torch.tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2])
    target = torch.tensor([False, False, True, False, True, False, True])
    res = rank_metrics(preds, target, metrics=("map",), top_k=None, indexes=indexes)
    # query 0: AP 1; query 1: ranks 2 and 3 relevant -> (1/2 + 2/3) / 2 = 7/12
    assert float(res["map"]) == pytest.approx((1 + 7 / 12) / 2, abs=1e-7)
    assert round(float(res["map"]), 4) == 0.7917
    assert res["map"].dtype == torch.float64 and res["map"].shape == ()


# --- ties -----------------------------------------------------------------
# One query, scores [1, 1, 1, 0]: items 0, 1, 2 form a tie group (t=3) at
# ranks 1..3 (T=0 items before it); only item 1 is relevant (r=1).
#   first:       lower index first -> item 1 at rank 2          RR = 1/2
#   pessimistic: relevant after the non-relevant -> rank 3      RR = 1/3
#   optimistic:  relevant before the non-relevant -> rank 1     RR = 1
#   average:     SPEC 3, RR = Σ_{i=1}^{t-r+1} [C(t-i, r-1)/C(t, r)] / (T+i)
#                = Σ_{i=1}^{3} (1/3)/i = (1 + 1/2 + 1/3)/3 = 11/18
# With one relevant item AP = RR, and hit_rate@2 is P(rank <= 2):
#   first 1, pessimistic 0, optimistic 1, average 2/3 (ρ + (k−T)·r/t = 2/3).
TIES_RR = {"first": 1 / 2, "pessimistic": 1 / 3, "optimistic": 1.0, "average": 11 / 18}
TIES_HR2 = {"first": 1.0, "pessimistic": 0.0, "optimistic": 1.0, "average": 2 / 3}


@pytest.mark.parametrize("ties", list(TIES_RR))
def test_ties_binary(ties):
    preds = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    target = torch.tensor([[0, 1, 0, 0]])
    res = rank_metrics(preds, target, metrics=("mrr", "map"), top_k=None, ties=ties)
    assert float(res["mrr"]) == pytest.approx(TIES_RR[ties], abs=1e-12)
    assert float(res["map"]) == pytest.approx(TIES_RR[ties], abs=1e-12)
    res = rank_metrics(preds, target, metrics=("hit_rate",), top_k=2, ties=ties)
    assert float(res["hit_rate@2"]) == pytest.approx(TIES_HR2[ties], abs=1e-12)


# Graded, gain="linear": scores [2, 1, 1, 1, 0], grades [0, 0, 2, 1, 0].
# Item 0 at rank 1 (gain 0); items 1, 2, 3 tie at ranks 2..4; item 4 rank 5.
# IDCG = 2/log2(2) + 1/log2(3).
#   first:       items 1, 2, 3 -> gains 0, 2, 1 at ranks 2, 3, 4: DCG = 2/log2(4) + 1/log2(5)
#   pessimistic: non-relevant first, then lower grades: 0, 1, 2: DCG = 1/log2(4) + 2/log2(5)
#   optimistic:  the reverse, 2, 1, 0:                          DCG = 2/log2(3) + 1/log2(4)
#   average:     mean gain of the group (0+2+1)/3 = 1 on each of ranks 2..4:
#                DCG = 1/log2(3) + 1/log2(4) + 1/log2(5)
_L = math.log2
_IDCG = 2 / _L(2) + 1 / _L(3)
TIES_NDCG = {
    "first": (2 / _L(4) + 1 / _L(5)) / _IDCG,  # 0.54379...
    "pessimistic": (1 / _L(4) + 2 / _L(5)) / _IDCG,  # 0.51744...
    "optimistic": (2 / _L(3) + 1 / _L(4)) / _IDCG,  # 0.66967...
    "average": (1 / _L(3) + 1 / _L(4) + 1 / _L(5)) / _IDCG,  # 0.59356...
}


@pytest.mark.parametrize("ties", list(TIES_NDCG))
def test_ties_graded_ndcg(ties):
    preds = torch.tensor([[2.0, 1.0, 1.0, 1.0, 0.0]])
    target = torch.tensor([[0, 0, 2, 1, 0]])
    res = rank_metrics(preds, target, metrics=("ndcg",), top_k=None, ties=ties, gain="linear")
    assert float(res["ndcg"]) == pytest.approx(TIES_NDCG[ties], abs=1e-12)


def test_tie_policies_are_four_different_numbers():
    assert len({round(v, 9) for v in TIES_RR.values()}) == 4
    assert len({round(v, 9) for v in TIES_NDCG.values()}) == 4


def test_policies_agree_without_ties():
    preds = torch.tensor([[0.3, 0.9, 0.1, 0.5, 0.7], [0.2, 0.4, 0.6, 0.8, 1.0]])
    target = torch.tensor([[0, 2, 0, 1, 0], [1, 0, 0, 3, 0]])
    metrics = ("hit_rate", "mrr", "precision", "recall", "f1", "map", "ndcg", "fall_out")
    outs = [
        rank_metrics(preds, target, metrics=metrics, top_k=[1, 3, 7], ties=t, reduction="none")
        for t in ("average", "first", "pessimistic", "optimistic")
    ]
    for key in outs[0]:
        for other in outs[1:]:
            torch.testing.assert_close(outs[0][key], other[key], rtol=0, atol=1e-12, msg=key)
