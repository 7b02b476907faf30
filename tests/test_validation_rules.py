"""Each rule on an argument is one function of ``ranking_plugins._validation``
(issue 24, "one home for each fact"): every entry point (the functions, the
Ignite and TorchMetrics adapters, the command) gives the verdict that function
gives, and says its problem, in its own framework's words around it.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from typing import Any

import pytest
import torch

from ranking_plugins import _validation as validation
from ranking_plugins import functional, rank_metrics
from ranking_plugins import ignite as ignite_adapter
from ranking_plugins import torchmetrics as torchmetrics_adapter
from ranking_plugins.cli import main, sample_path
from ranking_plugins.compare import compare
from ranking_plugins.kernel.inputs.items import ItemInputs
from ranking_plugins.lightning import RankingMetricsCallback
from ranking_plugins.metrics import METRICS
from ranking_plugins.options import Options
from ranking_plugins.request import RankingRequest, gain_threshold_problem

PREDS = torch.tensor([[0.3, 0.9, 0.1, 0.5], [0.8, 0.2, 0.6, 0.4]])
TARGET = torch.tensor([[0, 1, 0, 1], [1, 0, 0, 0]])


def verdict(make: Callable[[], object]) -> str | None:
    """None where ``make()`` is accepted, else its error's message."""
    try:
        make()
    except (ValueError, TypeError) as error:
        return str(error)
    return None


def command(capsys: pytest.CaptureFixture[str], *arguments: str) -> str | None:
    """None where ``ranking-plugins evaluate`` on the sample files accepts the
    arguments, else its usage error (exit status 2)."""
    qrels, run = sample_path("sample.qrels"), sample_path("sample.run")
    capsys.readouterr()
    try:
        status = main(["evaluate", str(qrels), str(run), *arguments])
    except SystemExit as done:
        assert done.code == 2
        return capsys.readouterr().err
    assert status == 0
    return None


# --------------------------------------------------------------------------- top_k

TOP_K = [
    3,
    [1, 3],
    (2, 2),
    None,
    torch.tensor(2),
    torch.tensor([1, 2]),
    0,
    -10,
    4.0,
    [],
    (),
    "5",
    [5, 0],
    [1, -3],
    [1, 2.5],
    [1, True],
    True,
    torch.tensor(2.0),
]


@pytest.mark.parametrize("top_k", TOP_K, ids=repr)
def test_top_k_has_one_verdict_in_every_entry_point(top_k: Any) -> None:
    problem = validation.top_k_problem(top_k)
    verdicts = {
        "rank_metrics": verdict(lambda: rank_metrics(PREDS, TARGET, ["mrr"], top_k)),
        "functional.mrr": verdict(lambda: functional.mrr(PREDS, TARGET, top_k=top_k)),
        "RankingRequest": verdict(lambda: RankingRequest.create("mrr", top_k)),
        "ignite": verdict(lambda: ignite_adapter.MRR(top_k=top_k)),
        "torchmetrics": verdict(lambda: torchmetrics_adapter.MRR(top_k=top_k)),
    }
    for entry, message in verdicts.items():
        assert (message is None) == (problem is None), (entry, message)
        if problem is not None:
            assert message is not None and problem.text in message, (entry, message)
    if problem is not None and problem.kind != "item":
        # the framework's own words first, where the framework refuses the value too
        assert verdicts["ignite"] is not None and verdicts["ignite"].startswith("top_k must")
        torchmetrics_words = "`top_k` has to be a positive integer or None"
        assert verdicts["torchmetrics"] is not None
        assert verdicts["torchmetrics"].startswith(torchmetrics_words)


@pytest.mark.parametrize("k", [0, 1, 5])
def test_the_command_cutoff_follows_the_top_k_rule(
    k: int, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = command(capsys, "-m", f"mrr@{k}")
    assert (refused is None) == (validation.top_k_problem(k) is None), refused


# ------------------------------------------------------------------ the options

#: per option: values to try; each entry point's verdict must be the rule's
OPTION_VALUES: dict[str, list[object]] = {
    "rbp_persistence": [0.5, 0.999, 0, 1, 1.5, -0.1, math.nan, True, "0.5"],
    "relevance_threshold": [None, 1, 0.5, -2, math.nan, math.inf, -math.inf, True, "1"],
    "empty_target_action": ["neg", "pos", "skip", "error", "drop", None, 1],
    "adaptive_k": [True, False, 1, 0, None, "yes"],
    "target_format": [None, "dense", "indices", "sparse", 1],
    "ties": ["average", "first", "random", None],
    "ap_denominator": ["relevant", "min_k_relevant", "k"],
    "weighted": [True, False, 1],
    "validate_args": [True, False, None],
}

#: the rule each option is checked by (Options' field checks call these)
RULES: dict[str, Callable[[object], validation.Problem | None]] = {
    "rbp_persistence": validation.unit_interval_problem,
    "relevance_threshold": validation.finite_number_problem,
    "empty_target_action": lambda v: validation.choice_problem(v, validation.EMPTY_TARGET_ACTIONS),
    "adaptive_k": validation.flag_problem,
    "target_format": lambda v: (
        None if v is None else validation.choice_problem(v, validation.TARGET_FORMATS)
    ),
    "ties": lambda v: validation.choice_problem(
        v, ("average", "first", "pessimistic", "optimistic")
    ),
    "ap_denominator": lambda v: validation.choice_problem(v, validation.AP_DENOMINATORS),
    "weighted": validation.flag_problem,
    "validate_args": validation.flag_problem,
}

OPTION_CASES = [(name, value) for name, values in OPTION_VALUES.items() for value in values]


@pytest.mark.parametrize(
    ("name", "value"), OPTION_CASES, ids=[f"{n}={v!r}" for n, v in OPTION_CASES]
)
def test_each_option_has_one_verdict_in_every_entry_point(name: str, value: object) -> None:
    problem = RULES[name](value)
    keywords = {name: value}
    verdicts = {
        "Options": verdict(lambda: Options(**keywords)),  # type: ignore[arg-type]
        "rank_metrics": verdict(lambda: rank_metrics(PREDS, TARGET, ["mrr"], 2, **keywords)),
        "functional.ndcg": verdict(lambda: functional.ndcg(PREDS, TARGET, top_k=2, **keywords)),
        "ignite": verdict(lambda: ignite_adapter.MRR(top_k=2, **keywords)),
        # RankingMetrics takes every option; MRR refuses those MRR does not read by name
        "torchmetrics": verdict(
            lambda: torchmetrics_adapter.RankingMetrics(["mrr"], top_k=2, **keywords)
        ),
    }
    if name == "empty_target_action" and value is None:
        del verdicts["ignite"]  # Ignite's None: ignore_zero_hits decides (documented there)
    for entry, message in verdicts.items():
        assert (message is None) == (problem is None), (entry, message)
        if problem is not None:
            assert message is not None and f"`{name}` {problem.text}" in message, (entry, message)


@pytest.mark.parametrize(
    ("flag", "name", "value"),
    [
        ("--rbp-persistence", "rbp_persistence", "0.5"),
        ("--rbp-persistence", "rbp_persistence", "1"),
        ("--rbp-persistence", "rbp_persistence", "0"),
        ("--rbp-persistence", "rbp_persistence", "nan"),
        ("--relevance-threshold", "relevance_threshold", "1"),
        ("--relevance-threshold", "relevance_threshold", "nan"),
        ("--relevance-threshold", "relevance_threshold", "inf"),
        ("--relevance-threshold", "relevance_threshold", "-inf"),
    ],
)
def test_the_command_says_the_library_rule_with_its_flag(
    flag: str, name: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = RULES[name](float(value))
    refused = command(capsys, "-m", "rbp", f"{flag}={value}")
    assert (refused is None) == (problem is None), refused
    if problem is not None:
        assert refused is not None
        assert f"--{name.replace('_', '-')} {problem.text}" in refused


@pytest.mark.parametrize("threshold", [None, 1.0, 0.5, 0.0, -1.0])
@pytest.mark.parametrize("name", ["ndcg_rel", "rndcg", "ndcg"])
def test_the_gain_threshold_rule_is_the_same_in_the_library_and_the_command(
    name: str, threshold: float | None, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = gain_threshold_problem(METRICS[name], threshold)
    library = verdict(lambda: RankingRequest.create(name, None, relevance_threshold=threshold))
    assert (library is None) == (problem is None), library
    level = [] if threshold is None else [f"--relevance-threshold={threshold:g}"]
    said = command(capsys, "-m", name, *level)
    assert (said is None) == (problem is None), said
    if problem is not None:
        assert library is not None and problem in library
        assert said is not None and problem in said


# ------------------------------------------ counts and levels: compare and the rest


LEVELS = [0.05, 0.5, 0, 1, 1.5, -0.1, math.nan, True, "0.5"]
COUNTS = [1, 1000, 0, -1, 2.5, True, "3"]


@pytest.mark.parametrize("value", LEVELS, ids=repr)
def test_a_number_in_0_1_has_one_verdict(value: object) -> None:
    problem = validation.unit_interval_problem(value)
    verdicts = {
        "compare(alpha)": verdict(lambda: compare({}, alpha=value)),  # type: ignore[arg-type]
        "compare(confidence)": verdict(lambda: compare({}, confidence=value)),  # type: ignore[arg-type]
        "callback(confidence)": verdict(
            lambda: RankingMetricsCallback(["mrr"], 3, confidence=value)  # type: ignore[arg-type]
        ),
        "Options(rbp_persistence)": verdict(lambda: Options(rbp_persistence=value)),  # type: ignore[arg-type]
    }
    for entry, message in verdicts.items():
        if problem is None:
            # compare({}) then refuses the empty systems: not this rule's verdict
            assert message is None or "(0, 1)" not in message, (
                entry,
                message,
            )
        else:
            rule = problem.text.removeprefix("must be ")
            assert message is not None and rule in message, (entry, message)


@pytest.mark.parametrize("value", COUNTS, ids=repr)
def test_a_positive_int_has_one_verdict(value: object) -> None:
    problem = validation.positive_int_problem(value)
    verdicts = {
        "compare(permutations)": verdict(lambda: compare({}, permutations=value)),  # type: ignore[arg-type]
        "compare(resamples)": verdict(lambda: compare({}, resamples=value)),  # type: ignore[arg-type]
        "callback(resamples)": verdict(
            lambda: RankingMetricsCallback(["mrr"], 3, resamples=value)  # type: ignore[arg-type]
        ),
        "ItemInputs(num_items)": verdict(lambda: ItemInputs.create(num_items=value)),  # type: ignore[arg-type]
    }
    for entry, message in verdicts.items():
        if problem is None:
            assert message is None or "positive int" not in message, (entry, message)
        else:
            rule = problem.text.removeprefix("must be ")
            assert message is not None and rule in message, (entry, message)


@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    [
        ("--alpha", "1.5", validation.unit_interval_problem),
        ("--confidence", "0", validation.unit_interval_problem),
        ("--permutations", "0", validation.positive_int_problem),
        ("--resamples", "-2", validation.positive_int_problem),
    ],
)
def test_compare_command_says_compare_rules_with_its_flags(
    flag: str, value: str, rule: Callable[[object], validation.Problem | None], capsys: Any
) -> None:
    qrels, run = sample_path("sample.qrels"), sample_path("sample.run")
    problem = rule(float(value) if "." in value else int(value))
    assert problem is not None
    with pytest.raises(SystemExit) as done:
        main(["compare", str(qrels), str(run), str(run), flag, value])
    assert done.value.code == 2
    assert f"{flag} {problem.text}" in capsys.readouterr().err


def test_nan_grades_are_one_message_on_every_path() -> None:
    """The NaN-grades refusal of ``check_values`` and of the kernel's gain check."""
    grades = torch.tensor([[0.0, math.nan, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    for make in (
        lambda: rank_metrics(PREDS, grades, ["ndcg"], 2),
        lambda: rank_metrics(PREDS, grades, ["mrr"], 2),
        lambda: torchmetrics_adapter.NDCG(top_k=2)(PREDS, grades),
    ):
        assert verdict(make) == validation.NAN_GRADES


def test_argument_error_is_public_and_names_the_argument() -> None:
    import traceback

    import ranking_plugins

    assert "ArgumentError" in ranking_plugins.__all__
    assert ranking_plugins.ArgumentError is validation.ArgumentError
    with pytest.raises(ranking_plugins.ArgumentError) as info:
        rank_metrics(PREDS, TARGET, metrics=("rbp",), top_k=3, rbp_persistence=1.0)
    assert isinstance(info.value, ValueError)
    assert info.value.argument == "rbp_persistence"
    assert info.value.problem == "must be a number in (0, 1), got 1.0"
    assert str(info.value) == "`rbp_persistence` must be a number in (0, 1), got 1.0"
    # a traceback names the public class, not the private module it is defined in
    assert traceback.format_exception_only(info.value)[-1].startswith(
        "ranking_plugins.ArgumentError: `rbp_persistence`"
    )


def test_argument_error_survives_pickling() -> None:
    """A worker's refusal reaches its parent whole (multiprocessing pickles it)."""
    error = pickle.loads(pickle.dumps(validation.ArgumentError("top_k", "must be ...")))
    assert isinstance(error, validation.ArgumentError)
    assert (error.argument, error.problem, str(error)) == (
        "top_k",
        "must be ...",
        "`top_k` must be ...",
    )
