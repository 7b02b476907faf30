"""Differential fuzzing of the TorchMetrics drop-ins against TorchMetrics itself.

Random grouped problems (a few queries of a few items, some ``-1`` targets dropped by
``ignore_index``, queries without relevant items, queries spread over several updates)
go through ``ranking_plugins.torchmetrics_functional.retrieval_*`` and the drop-in
classes, alone and inside ``MetricCollection``, ``BootStrapper`` (the same resamples:
one seed for both), ``MetricTracker`` and ``MinMaxMetric``; each must give the value
of TorchMetrics' own function or class in the same place, to float32 precision.

Tied scores are drawn among items of equal grade only (and among ignored entries):
TorchMetrics orders a tie group as its sort does, so ties of mixed grades have no one
value to compare with (the package's ``ties`` policies are checked against brute force
in ``tests/test_fuzz.py``). NDCG, whose ties TorchMetrics averages as the package does,
gets ties of mixed grades too. Documented differences are not drawn: MAP and AUROC at a
cutoff, fall-out, scores <= 0, AUROC of a query of relevant items only (undefined here:
drawn under ``"neg"`` only, where both count 0). ``empty_target_action="skip"`` with no counted query is
NaN here, 0.0 there (the one allowed difference).

The number of examples comes from the hypothesis profile (``conftest.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

pytest.importorskip("torchmetrics")

import torchmetrics.functional.retrieval as tmf
import torchmetrics.retrieval as tm
from torchmetrics import MetricCollection
from torchmetrics.wrappers import BootStrapper, MetricTracker, MinMaxMetric

from ranking_plugins import torchmetrics as rp
from ranking_plugins import torchmetrics_functional as rpf

SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def examples(weight: float) -> int:
    """``weight`` times the profile's ``max_examples``."""
    return max(1, round(settings.default.max_examples * weight))


@dataclass
class Problem:
    """Grouped entries, and how they are split into updates."""

    preds: torch.Tensor
    target: torch.Tensor
    indexes: torch.Tensor
    parts: list[torch.Tensor]  # the positions of each update

    def batches(self) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        return [(self.preds[p], self.target[p], self.indexes[p]) for p in self.parts]

    def queries(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each query's kept entries (the -1 targets dropped), for the functions."""
        found = []
        for query in self.indexes.unique().tolist():
            keep = (self.indexes == query) & (self.target != -1)
            if keep.any():
                found.append((self.preds[keep], self.target[keep]))
        return found


@st.composite
def problems(draw: st.DrawFn, graded: bool = False, mixed_ties: bool = False) -> Problem:
    sizes = draw(st.lists(st.integers(1, 7), min_size=1, max_size=5), label="sizes")
    grades = st.sampled_from([-1, 0, 0, 1, 1, 2] if graded else [-1, 0, 0, 1, 1])
    total = sum(sizes)
    target = torch.tensor(draw(st.lists(grades, min_size=total, max_size=total)))
    groups = torch.tensor(draw(st.lists(st.integers(0, 3), min_size=total, max_size=total)))
    indexes = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    order = torch.tensor(draw(st.permutations(range(total)), label="order"))
    count = draw(st.integers(1, min(3, total)), label="updates")
    parts = [p for p in order.tensor_split(count) if p.numel()]
    for part in parts:  # TorchMetrics refuses an update whose entries are all ignored
        if (target[part] == -1).all():
            target[part[0]] = 0
    # one score per (group, grade): ties among equal grades only, unless mixed_ties
    scores = (groups if mixed_ties else groups * 4 + target + 1).float() + 1
    return Problem(scores, target, indexes, parts)


def assert_same(ours: Any, theirs: Any, what: str) -> None:
    if isinstance(theirs, dict):
        assert set(ours) == set(theirs), what
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{what}[{key}]")
        return
    if isinstance(theirs, tuple):
        for a, b in zip(ours, theirs, strict=True):
            assert_same(a, b, what)
        return
    if isinstance(theirs, torch.Tensor) and theirs.numel() != 1:
        assert ours.shape == theirs.shape, what
        for a, b in zip(ours.flatten(), theirs.flatten(), strict=True):
            assert_same(a, b, what)
        return
    ours_value, their_value = float(ours), float(theirs)
    if math.isnan(ours_value) and their_value == 0.0:
        return  # no query counted: NaN here, 0.0 in TorchMetrics
    assert ours_value == pytest.approx(their_value, abs=2e-6), what


# --------------------------------------------------------------------------- #
# the functions, one query at a time
# --------------------------------------------------------------------------- #
FUNCTIONS: list[tuple[str, Callable[..., Any], Callable[..., Any], bool]] = [
    # (name, ours, theirs, takes top_k)
    ("reciprocal_rank", rpf.retrieval_reciprocal_rank, tmf.retrieval_reciprocal_rank, True),
    ("hit_rate", rpf.retrieval_hit_rate, tmf.retrieval_hit_rate, True),
    ("precision", rpf.retrieval_precision, tmf.retrieval_precision, True),
    ("recall", rpf.retrieval_recall, tmf.retrieval_recall, True),
    ("r_precision", rpf.retrieval_r_precision, tmf.retrieval_r_precision, False),
    ("average_precision", rpf.retrieval_average_precision, tmf.retrieval_average_precision, False),
    ("auroc", rpf.retrieval_auroc, tmf.retrieval_auroc, False),
]


@settings(max_examples=examples(1), **SETTINGS)
@given(problem=problems(), top_k=st.one_of(st.none(), st.integers(1, 8)), data=st.data())
def test_functions(problem: Problem, top_k: int | None, data: st.DataObject) -> None:
    adaptive_k = data.draw(st.booleans(), label="adaptive_k")
    for preds, target in problem.queries():
        for name, ours, theirs, takes_k in FUNCTIONS:
            keywords: dict[str, Any] = {"top_k": top_k} if takes_k else {}
            if name == "precision":
                keywords["adaptive_k"] = adaptive_k
            assert_same(ours(preds, target, **keywords), theirs(preds, target, **keywords), name)


@settings(max_examples=examples(1), **SETTINGS)
@given(
    problem=problems(graded=True, mixed_ties=True), top_k=st.one_of(st.none(), st.integers(1, 8))
)
def test_ndcg_function_with_ties_of_mixed_grades(problem: Problem, top_k: int | None) -> None:
    for preds, target in problem.queries():
        ours = rpf.retrieval_normalized_dcg(preds, target, top_k=top_k)
        assert_same(ours, tmf.retrieval_normalized_dcg(preds, target, top_k=top_k), "ndcg")


# --------------------------------------------------------------------------- #
# the classes, alone and in TorchMetrics' wrappers
# --------------------------------------------------------------------------- #
#: (name, our class, TorchMetrics', takes top_k, graded targets)
CLASSES = [
    ("mrr", rp.RetrievalMRR, tm.RetrievalMRR, True, False),
    ("hit_rate", rp.RetrievalHitRate, tm.RetrievalHitRate, True, False),
    ("precision", rp.RetrievalPrecision, tm.RetrievalPrecision, True, False),
    ("recall", rp.RetrievalRecall, tm.RetrievalRecall, True, False),
    ("ndcg", rp.RetrievalNormalizedDCG, tm.RetrievalNormalizedDCG, True, True),
    ("r_precision", rp.RetrievalRPrecision, tm.RetrievalRPrecision, False, False),
    ("map", rp.RetrievalMAP, tm.RetrievalMAP, False, False),
    ("auroc", rp.RetrievalAUROC, tm.RetrievalAUROC, False, False),
]


@st.composite
def class_cases(draw: st.DrawFn) -> tuple[Any, ...]:
    name, ours, theirs, takes_k, graded = draw(st.sampled_from(CLASSES), label="class")
    # AUROC of a query of relevant items only: undefined here (empty), 0 there; alike
    # under "neg" only
    actions = ["neg"] if name == "auroc" else ["neg", "pos", "skip"]
    keywords: dict[str, Any] = {
        "empty_target_action": draw(st.sampled_from(actions)),
        "ignore_index": -1,
    }
    if takes_k:
        keywords["top_k"] = draw(st.one_of(st.none(), st.integers(1, 8)), label="top_k")
    if name == "precision":
        keywords["adaptive_k"] = draw(st.booleans(), label="adaptive_k")
    keywords["aggregation"] = draw(st.sampled_from(["mean", "mean", "median", "max"]))
    problem = draw(problems(graded=graded, mixed_ties=graded), label="problem")
    return name, ours, theirs, keywords, problem


def feed(metric: Any, problem: Problem) -> None:
    for preds, target, indexes in problem.batches():
        metric.update(preds, target, indexes=indexes)


@settings(max_examples=examples(1.5), **SETTINGS)
@given(case=class_cases())
def test_classes(case: tuple[Any, ...]) -> None:
    name, ours, theirs, keywords, problem = case
    found = [cls(**keywords) for cls in (ours, theirs)]
    for metric in found:
        feed(metric, problem)
    assert_same(found[0].compute(), found[1].compute(), name)


@settings(max_examples=examples(0.5), **SETTINGS)
@given(first=class_cases(), second=class_cases(), problem=problems())
def test_in_a_metric_collection(first, second, problem: Problem) -> None:
    """Two metrics with their own options, on one problem of binary targets."""
    collections = []
    for side in (1, 2):
        members = {}
        for label, case in (("a", first), ("b", second)):
            members[label] = case[side](**case[3])
        collections.append(MetricCollection(members))
    for collection in collections:
        feed(collection, problem)
    assert_same(collections[0].compute(), collections[1].compute(), "collection")


@settings(max_examples=examples(0.5), **SETTINGS)
@given(case=class_cases(), seed=st.integers(0, 2**16), quantile=st.booleans())
def test_in_a_bootstrapper(case: tuple[Any, ...], seed: int, quantile: bool) -> None:
    name, ours, theirs, keywords, problem = case
    found = []
    for cls in (theirs, ours):
        torch.manual_seed(seed)  # the same resamples for both
        wrapped = BootStrapper(
            cls(**keywords),
            num_bootstraps=3,
            quantile=torch.tensor([0.1, 0.9]) if quantile else None,
            raw=True,
            std=False,
        )
        try:
            feed(wrapped, problem)
            found.insert(0, wrapped.compute())
        except ValueError:
            # TorchMetrics refuses a resample of ignored entries only, or none at all
            # (the package takes both); nothing to compare
            assert cls is theirs
            reject()
    for key in found[1]:
        for ours_value, their_value in zip(
            found[0][key].flatten(), found[1][key].flatten(), strict=True
        ):
            if key == "raw" or not math.isnan(float(ours_value)):
                assert_same(ours_value, their_value, f"{name} {key}")


@settings(max_examples=examples(0.5), **SETTINGS)
@given(case=class_cases(), other=problems())
def test_in_a_tracker_and_min_max(case: tuple[Any, ...], other: Problem) -> None:
    name, ours, theirs, keywords, problem = case
    trackers, extremes = [], []
    for cls in (ours, theirs):
        tracker = MetricTracker(cls(**keywords))
        extreme = MinMaxMetric(cls(**keywords))
        for step in (problem, other):
            tracker.increment()
            feed(tracker, step)
            feed(extreme, step)
            extremes.append(extreme.compute())
        trackers.append(tracker)
    assert_same(trackers[0].compute_all(), trackers[1].compute_all(), f"{name} tracker")
    best = [tracker.best_metric(return_step=True) for tracker in trackers]
    values = trackers[1].compute_all()
    if (
        not torch.isnan(trackers[0].compute_all()).any()
        and values.unique().numel() == values.numel()
    ):
        assert best[0][1] == best[1][1], name
        assert_same(best[0][0], best[1][0], f"{name} best")
    if any(torch.isnan(found["raw"]) for found in extremes[:2]):
        return  # no query counted: NaN here (never a minimum or maximum), 0.0 there
    assert_same(extremes[0], extremes[2], f"{name} min-max")
    assert_same(extremes[1], extremes[3], f"{name} min-max")
