"""The Ignite adapter refuses keywords it does not know, as the functional API
and the TorchMetrics adapter do: ``HitRate(top_k=1, tie="first")`` must not
silently keep ``ties="average"``, nor ``NDCG(5, gain="linear")`` the
exponential gain.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

from ranking_plugins import ignite as rp
from ranking_plugins.ignite import inputs as ignite_inputs
from ranking_plugins.kernel.inputs.items import ITEM_KEYWORDS

#: every public metric class of the module, with its required arguments
CLASSES: dict[str, Callable[..., Any]] = {
    "HitRate": rp.HitRate,
    "NDCG": lambda **kw: rp.NDCG(5, **kw),
    "MRR": rp.MRR,
    "MAP": rp.MAP,
    "Precision": rp.Precision,
    "Recall": rp.Recall,
    "F1": rp.F1,
    "FallOut": rp.FallOut,
    "RPrecision": rp.RPrecision,
    "MeanRank": rp.MeanRank,
    "AUC": rp.AUC,
    "RankingMetrics": rp.RankingMetrics,
    "BaseRankingMetric": lambda **kw: rp.BaseRankingMetric(metrics=["mrr"], **kw),
}

OPTIONS = list(rp.IgniteOptions.__annotations__)


@pytest.mark.parametrize("name", list(CLASSES))
def test_a_misspelt_option_is_refused_with_a_hint(name: str) -> None:
    with pytest.raises(TypeError) as info:
        CLASSES[name](tie="first")
    message = str(info.value)
    assert message.startswith(f"{name}() got an unexpected keyword argument 'tie'"), message
    assert "did you mean 'ties'?" in message
    for accepted in ("ignore_zero_hits", "output_transform", "device", "ties", "gain_function"):
        assert accepted in message, accepted
    assert ("top_k" in message) is (name not in ("RPrecision", "MeanRank", "AUC"))


@pytest.mark.parametrize("name", list(CLASSES))
def test_an_unknown_keyword_is_refused(name: str) -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'reduction'"):
        CLASSES[name](reduction="sum")


def test_the_issue_cases() -> None:
    with pytest.raises(TypeError, match=r"HitRate\(\).*'tie'.*did you mean 'ties'\?"):
        rp.HitRate(top_k=1, tie="first")
    with pytest.raises(TypeError, match=r"NDCG\(\).*'gain'.*did you mean 'gain_function'\?"):
        rp.NDCG(5, gain="linear")


def test_several_unknown_keywords_are_named_together() -> None:
    with pytest.raises(TypeError) as info:
        rp.MRR(tie="first", ignore_index=-1)
    message = str(info.value)
    assert message.startswith(
        "MRR() got unexpected keyword arguments 'tie' (did you mean 'ties'?), 'ignore_index'; "
        "it accepts: top_k, "
    ), message


@pytest.mark.parametrize("keyword", ["metrics", "metrics_result_mode"])
@pytest.mark.parametrize(
    "name", [n for n in CLASSES if n not in ("RankingMetrics", "BaseRankingMetric")]
)
def test_a_single_metric_takes_no_metrics_keyword(name: str, keyword: str) -> None:
    """``MRR(metrics=["hit_rate"])`` used to compute the hit rate under MRR's name."""
    value = ["hit_rate"] if keyword == "metrics" else "both"
    with pytest.raises(
        TypeError, match=rf"{name}\(\) got an unexpected keyword argument '{keyword}'"
    ):
        CLASSES[name](**{keyword: value})


@pytest.mark.parametrize("name", list(CLASSES))
def test_every_documented_option_is_still_accepted(name: str) -> None:
    values: dict[str, Any] = {
        "ties": "first",
        "empty_target_action": "skip",
        "ap_denominator": "relevant",
        "adaptive_k": True,
        "weighted": False,
        "rbp_persistence": 0.9,  # issue 13
        "fall_out_empty": "no_relevant",  # issue 26
        "max_fpr": 0.5,  # issue 26
        "alpha": 0.5,  # the diversity measures
        "beta": 0.5,
        "target_format": "dense",
        "validate_args": False,
        "relevance_threshold": 1.0,
        "gain_function": "linear_rank",
        # the item inputs of the exposure metrics (issue 14); None: not given
        "item_popularity": None,
        "tail_items": None,
        "item_features": None,
        "item_categories": None,
        "num_items": None,
        # per-query values for ranking_plugins.compare (issue 15)
        "keep_per_query": True,
    }
    assert set(values) == set(OPTIONS)
    metric = CLASSES[name](**values)  # NDCG takes the last two as its own parameters
    request = metric._request
    assert request.options.ties == "first"
    assert request.options.target_format == "dense"


def test_the_options_still_reach_the_kernel() -> None:
    """The keywords that were silently dropped now change the numbers (or raise)."""
    y_pred = torch.tensor([[1.0, 1.0, 0.0]])
    y = torch.tensor([[0.0, 1.0, 0.0]])
    average, first = rp.HitRate(top_k=1), rp.HitRate(top_k=1, ties="first")
    for metric in (average, first):
        metric.update((y_pred, y))
    assert average.compute() == [0.5]
    assert first.compute() == [0.0]
    graded = torch.tensor([[0.0, 3.0, 1.0]])
    exp, linear = rp.NDCG(3), rp.NDCG(3, gain_function="linear_rank")
    for metric in (exp, linear):
        metric.update((torch.tensor([[3.0, 1.0, 2.0]]), graded))
    assert exp.compute() != linear.compute()


def test_the_message_lists_the_accepted_keywords_in_signature_order() -> None:
    with pytest.raises(TypeError) as info:
        rp.RankingMetrics(tie="first")
    listed = re.search(r"accepts: (.*)$", str(info.value))
    assert listed is not None
    names = listed.group(1).rstrip(".").split(", ")
    assert names[:8] == [
        "metrics",
        "top_k",
        "ignore_zero_hits",
        "output_transform",
        "device",
        "skip_unrolling",
        "metrics_result_mode",
        "prefix_keys",  # RankingMetrics' own (issue 24: keys of two metrics apart)
    ]
    # then the options, keep_per_query (issue 15), the item inputs of the
    # exposure metrics (issue 14)
    assert names[8:] == [*ignite_inputs.IGNITE_OPTION_NAMES, "keep_per_query", *ITEM_KEYWORDS]


def test_the_typed_keywords_are_the_options_in_ignite_spelling() -> None:
    assert set(OPTIONS) == set(ignite_inputs.IGNITE_OPTION_NAMES) | set(ITEM_KEYWORDS) | {
        "keep_per_query"
    }
