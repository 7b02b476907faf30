"""The options record: every option defined once, checked once, reaching every entry point."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import torch

from ranking_plugins import ignite as ignite_adapter
from ranking_plugins import rank_metrics
from ranking_plugins import torchmetrics as torchmetrics_adapter
from ranking_plugins.functional import RankOptions
from ranking_plugins.ignite import inputs as ignite_inputs
from ranking_plugins.kernel.inputs.items import ITEM_KEYWORDS
from ranking_plugins.options import OPTION_NAMES, OptionKeywords, Options
from ranking_plugins.request import RankingRequest

#: a value each option refuses, with the error type and a fragment of the message
BAD_VALUES: dict[str, tuple[object, type[Exception], str]] = {
    "ties": ("random", ValueError, "`ties` must be one of"),
    "relevance_threshold": (math.nan, ValueError, "`relevance_threshold` must be a finite"),
    "empty_target_action": ("drop", ValueError, "`empty_target_action` must be one of"),
    "gain": ("cubic", ValueError, "`gain` must be one of"),
    "ap_denominator": ("k", ValueError, "`ap_denominator` must be one of"),
    "adaptive_k": (1, TypeError, "`adaptive_k` must be a bool"),
    "weighted": ("yes", TypeError, "`weighted` must be a bool"),
    "rbp_persistence": (1.0, ValueError, r"`rbp_persistence` must be a number in \(0, 1\)"),
    "alpha": (1.0, ValueError, r"`alpha` must be a number in \[0, 1\)"),
    "beta": (1.5, ValueError, r"`beta` must be a number in \[0, 1\]"),
    "fall_out_empty": ("none", ValueError, "`fall_out_empty` must be one of"),
    "max_fpr": (0.0, ValueError, r"`max_fpr` must be None or a number in \(0, 1\]"),
    "target_format": ("sparse", ValueError, "`target_format` must be one of"),
    "validate_args": (None, TypeError, "`validate_args` must be a bool"),
}


def test_every_option_has_a_default_a_meaning_and_a_check() -> None:
    assert set(BAD_VALUES) == set(OPTION_NAMES)
    for f in dataclasses.fields(Options):
        assert f.default is not dataclasses.MISSING, f.name
        assert f.metadata["doc"].strip(), f.name
        assert callable(f.metadata["check"]), f.name
        assert f"``{f.name}``" in (Options.__doc__ or ""), f.name


def test_the_typed_keywords_are_the_fields() -> None:
    assert list(OptionKeywords.__annotations__) == list(OPTION_NAMES)
    assert set(OPTION_NAMES) <= set(RankOptions.__annotations__)
    assert set(OPTION_NAMES) <= set(torchmetrics_adapter.RankingOptions.__annotations__)
    ignite_names = set(ignite_adapter.IgniteOptions.__annotations__)
    # and the item inputs of the exposure metrics (issue 14) and keep_per_query
    # (issue 15), which are not options of the ranking
    assert ignite_names == set(ignite_inputs.IGNITE_OPTION_NAMES) | set(ITEM_KEYWORDS) | {
        "keep_per_query"
    }


@pytest.mark.parametrize("name", list(BAD_VALUES))
def test_each_bad_value_is_refused_by_the_record(name: str) -> None:
    value, error, message = BAD_VALUES[name]
    with pytest.raises(error, match=message):
        Options(**{name: value})


@pytest.mark.parametrize("name", list(BAD_VALUES))
def test_each_entry_point_refuses_it_with_the_same_message(name: str) -> None:
    value, error, message = BAD_VALUES[name]
    preds, target = torch.rand(2, 4), torch.tensor([[0, 1, 0, 0], [1, 0, 0, 0]])
    entry_points: list[Any] = [
        lambda: rank_metrics(preds, target, **{name: value}),
        lambda: RankingRequest.create("mrr", 3, **{name: value}),
    ]
    ignite_name = ignite_inputs.IGNITE_NAMES.get(name, name)
    if ignite_name == name:  # Ignite spells gain as gain_function, with its own message
        entry_points.append(lambda: ignite_adapter.MRR(top_k=3, **{name: value}))
    for make in entry_points:
        with pytest.raises(error, match=message):
            make()
    # where TorchMetrics checks an argument too, its ValueError comes first, ours after
    # (RankingMetrics takes every option; MRR refuses those MRR does not read by name)
    with pytest.raises((error, ValueError), match=message):
        torchmetrics_adapter.RankingMetrics(["mrr"], top_k=3, **{name: value})


def test_the_record_is_immutable_and_replace_checks_again() -> None:
    options = Options()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.ties = "first"  # type: ignore[misc]
    assert options.replace(ties="first").ties == "first"
    with pytest.raises(ValueError, match="`ties` must be one of"):
        options.replace(ties="random")


def test_an_unknown_keyword_is_refused_with_a_guess() -> None:
    with pytest.raises(TypeError, match=r"rank_metrics\(\).*'tie'.*did you mean 'ties'\?"):
        rank_metrics(torch.rand(1, 3), torch.tensor([[0, 1, 0]]), tie="first")
    with pytest.raises(TypeError, match=r"record or its keywords, not both"):
        RankingRequest.create("mrr", 3, Options(), ties="first")


def test_framework_defaults_are_translations_of_the_one_record() -> None:
    """The package's NDCG gain is linear, as are TorchMetrics' and the command's; Ignite's
    is exponential: each is the record with at most one field changed, and the numbers
    follow it."""
    preds = torch.tensor([[0.9, 0.5, 0.1]])
    target = torch.tensor([[1, 3, 0]])
    linear = rank_metrics(preds, target, "ndcg", 3)["ndcg@3"]
    exponential = rank_metrics(preds, target, "ndcg", 3, gain="exponential")["ndcg@3"]
    assert not torch.equal(linear, exponential)
    assert Options().gain == "linear"
    tm = torchmetrics_adapter.NDCG(top_k=3)
    assert tm.request.options == Options(fall_out_empty="no_nonrelevant")
    tm.update(preds, target)
    torch.testing.assert_close(tm.compute(), linear)
    ig = ignite_adapter.NDCG(3, relevance_threshold=None, ignore_zero_hits=False)
    assert ig._request.options == Options(gain="exponential")
    ig.update((preds, target))
    assert ig.compute() == pytest.approx([float(exponential)], abs=1e-12)
