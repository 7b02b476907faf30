"""The Ignite adapter (``ranking_plugins.ignite``): drop-in for ``ignite.metrics.rec_sys``.

Reference values come from the installed pytorch-ignite (its own metrics and
the printed outputs of its docstrings), from Ignite's documented 0.6 MRR, or
from :func:`ranking_plugins.rank_metrics`; none is typed in by hand.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import math
import re
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import torch

pytest.importorskip("ignite")

import ignite.metrics.rec_sys as ignite_rec_sys
from ignite.engine import Engine, Events, create_supervised_evaluator
from ignite.exceptions import NotComputableError
from ignite.metrics import Accuracy, MetricsLambda

import ranking_plugins.kernel
import ranking_plugins.request
from ranking_plugins import EmbeddingScores, rank_metrics
from ranking_plugins import ignite as rp
from ranking_plugins.totals import ROWS
from tests.host_reads import forbid_host_reads

CLASSES: dict[str, type[rp.BaseRankingMetric]] = {
    "hit_rate": rp.HitRate,
    "mrr": rp.MRR,
    "ndcg": rp.NDCG,
    "map": rp.MAP,
    "precision": rp.Precision,
    "recall": rp.Recall,
    "f1": rp.F1,
    "fall_out": rp.FallOut,
    "r_precision": rp.RPrecision,
    "mean_rank": rp.MeanRank,
    "auc": rp.AUC,
}
WHOLE_LIST = ("r_precision", "mean_rank", "auc")


def evaluator() -> Engine:
    """Ignite's ``default_evaluator`` of its docs: the batch is the output."""
    return Engine(lambda engine, batch: batch)


def run(metric: Any, batches: list[Any], name: str = "m") -> Any:
    engine = evaluator()
    metric.attach(engine, name)
    metrics = engine.run(batches).metrics
    # RankingMetrics flattens its dict into the engine's metrics
    return metrics[name] if name in metrics else dict(metrics)


def run_all(metrics: dict[str, Any], batches: list[Any]) -> dict[str, Any]:
    engine = evaluator()
    for name, metric in metrics.items():
        metric.attach(engine, name)
    return dict(engine.run(batches).metrics)


def tie_free_batch(
    gen: torch.Generator, rows: int, items: int, grades: str = "binary"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores without ties (a permutation per row) and targets, some rows empty."""
    preds = torch.stack([torch.randperm(items, generator=gen) for _ in range(rows)]).float()
    preds = preds / items + 0.001 * torch.rand(rows, items, generator=gen) / items
    if grades == "binary":
        target = (torch.rand(rows, items, generator=gen) < 0.2).float()
    elif grades == "graded":
        target = torch.randint(0, 5, (rows, items), generator=gen).float()
        target[torch.rand(rows, items, generator=gen) < 0.5] = 0
    else:  # fractional grades in [0, 3)
        target = torch.rand(rows, items, generator=gen) * 3
        target[torch.rand(rows, items, generator=gen) < 0.5] = 0
    target[::4] = 0  # every fourth query has no relevant item
    return preds, target


def ranked_batches(seed: int = 0, n: int = 4, rows: int = 6, items: int = 8) -> list[Any]:
    """Batches with ties (integer scores), for the adapter-vs-functional checks."""
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        preds = torch.randint(0, 4, (rows, items), generator=gen).float()
        target = torch.randint(0, 3, (rows, items), generator=gen).float()
        target[torch.rand(rows, items, generator=gen) < 0.5] = 0
        target[0] = 0
        batches.append((preds, target))
    return batches


def concat(batches: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])


def as_list(values: dict[str, torch.Tensor]) -> list[float]:
    return [float(v) for v in values.values()]


# ------------------------------------------- Ignite's printed docstring examples


def docstring_examples(cls: type) -> list[tuple[str, str]]:
    """(testcode, testoutput) pairs of a Sphinx docstring, as written in the source."""
    blocks = re.findall(
        r"\.\. (testcode|testoutput)::[^\n]*\n((?:[ \t]*\n|[ ]{12}[^\n]*\n)+)",
        (cls.__doc__ or "") + "\n",
    )
    codes = [textwrap.dedent(body).strip() + "\n" for kind, body in blocks if kind == "testcode"]
    outputs = [
        textwrap.dedent(body).strip() + "\n" for kind, body in blocks if kind == "testoutput"
    ]
    assert len(codes) == len(outputs)
    return list(zip(codes, outputs))


@pytest.mark.parametrize(
    ("name", "expected_examples"), [("HitRate", 3), ("NDCG", 2)], ids=["HitRate", "NDCG"]
)
def test_every_ignite_docstring_output(name: str, expected_examples: int) -> None:
    """Run each testcode of Ignite's own docstring with our class in its place."""
    examples = docstring_examples(getattr(ignite_rec_sys, name))
    assert len(examples) == expected_examples
    checker = doctest.OutputChecker()
    for code, want in examples:
        for cls in (getattr(ignite_rec_sys, name), getattr(rp, name)):
            out = io.StringIO()
            namespace = {"torch": torch, name: cls, "default_evaluator": evaluator()}
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
            got = out.getvalue()
            assert checker.check_output(want, got, doctest.ELLIPSIS), (cls, code, want, got)


Y_PRED = torch.tensor([[4.0, 2.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]])


@pytest.mark.parametrize(
    ("make", "y", "expected"),
    [
        # SPEC section 7 and Ignite's documented 0.6 MRR
        (
            lambda: rp.MRR(top_k=[1, 2, 3, 4]),
            [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]],
            [0.5, 0.75, 0.75, 0.75],
        ),
        (
            lambda: rp.MRR(top_k=[1, 2, 3, 4]),
            [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]],
            [0.0, 0.5, 0.5, 0.5],
        ),
        (
            lambda: rp.MRR(top_k=[1, 2, 3, 4], ignore_zero_hits=False),
            [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]],
            [0.0, 0.25, 0.25, 0.25],
        ),
        # SPEC section 7, HitRate
        (
            lambda: rp.HitRate(top_k=[1, 2, 3, 4]),
            [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]],
            [0.0, 1.0, 1.0, 1.0],
        ),
        (
            lambda: rp.HitRate(top_k=[1, 2, 3, 4], ignore_zero_hits=False),
            [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]],
            [0.0, 0.5, 0.5, 0.5],
        ),
    ],
    ids=["mrr", "mrr-ignore", "mrr-count-zero", "hit_rate", "hit_rate-count-zero"],
)
def test_published_examples(make: Callable[[], Any], y: list[list[float]], expected: Any) -> None:
    assert run(make(), [(Y_PRED, torch.tensor(y))]) == pytest.approx(expected, abs=1e-12)


# --------------------------------------- random tie-free inputs vs installed Ignite


@pytest.mark.parametrize("ignore_zero_hits", [True, False])
@pytest.mark.parametrize("top_k", [[1], [1, 3, 5], [2, 8], 4], ids=str)
@pytest.mark.parametrize("seed", [0, 1])
def test_hit_rate_equals_ignite(ignore_zero_hits: bool, top_k: Any, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    batches = [tie_free_batch(gen, rows, 8) for rows in (5, 9, 1, 7)]
    ours = rp.HitRate(top_k=top_k, ignore_zero_hits=ignore_zero_hits)
    theirs = ignite_rec_sys.HitRate(top_k=top_k, ignore_zero_hits=ignore_zero_hits)
    got = run_all({"ours": ours, "theirs": theirs}, batches)
    assert len(got["ours"]) == len(got["theirs"])
    assert got["ours"] == pytest.approx(got["theirs"], rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("ignore_zero_hits", [True, False])
@pytest.mark.parametrize("gain_function", ["exp_rank", "linear_rank"])
@pytest.mark.parametrize(
    ("grades", "relevance_threshold"),
    [("binary", 1.0), ("graded", 1.0), ("graded", 3.0), ("fractional", 0.5), ("fractional", 2)],
)
@pytest.mark.parametrize("top_k", [[1, 3, 5], [2, 8], [6]], ids=str)
def test_ndcg_equals_ignite(
    ignore_zero_hits: bool, gain_function: str, grades: str, relevance_threshold: float, top_k: Any
) -> None:
    gen = torch.Generator().manual_seed(len(grades) + int(relevance_threshold * 10))
    batches = [tie_free_batch(gen, rows, 8, grades) for rows in (5, 9, 1, 7)]
    options = {
        "ignore_zero_hits": ignore_zero_hits,
        "relevance_threshold": relevance_threshold,
        "gain_function": gain_function,
    }
    got = run_all(
        {
            "ours": rp.NDCG(top_k, **options),
            "theirs": ignite_rec_sys.NDCG(top_k, **options),
        },
        batches,
    )
    assert got["ours"] == pytest.approx(got["theirs"], rel=1e-6, abs=1e-7)


def test_ndcg_default_threshold_is_ignites() -> None:
    """Fractional grades below 1 are not relevant for NDCG by default, as in Ignite."""
    gen = torch.Generator().manual_seed(3)
    batches = [tie_free_batch(gen, 6, 8, "fractional") for _ in range(3)]
    got = run_all(
        {"ours": rp.NDCG([1, 4]), "theirs": ignite_rec_sys.NDCG([1, 4])},
        batches,
    )
    assert got["ours"] == pytest.approx(got["theirs"], rel=1e-6, abs=1e-7)


def test_hit_rate_relevance_is_ignites_for_fractional_grades() -> None:
    """HitRate counts any grade above 0 as a hit, as Ignite's does (no threshold there)."""
    gen = torch.Generator().manual_seed(4)
    batches = [tie_free_batch(gen, 6, 8, "fractional") for _ in range(3)]
    got = run_all(
        {
            "ours": rp.HitRate([1, 2, 3]),
            "theirs": ignite_rec_sys.HitRate([1, 2, 3]),
        },
        batches,
    )
    assert got["ours"] == pytest.approx(got["theirs"], rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("ignore_zero_hits", [True, False])
def test_k_larger_than_the_list(ignore_zero_hits: bool) -> None:
    """Ignite's HitRate raises for k > number of items; we read the list as padded
    with non-relevant items (trec_eval), as ``rank_metrics`` does. Ignite's NDCG
    already does the same and agrees."""
    gen = torch.Generator().manual_seed(5)
    batches = [tie_free_batch(gen, 6, 5, "graded") for _ in range(2)]
    top_k = [3, 5, 7, 20]
    with pytest.raises(RuntimeError):
        run(ignite_rec_sys.HitRate(top_k=top_k, ignore_zero_hits=ignore_zero_hits), batches)
    action = "skip" if ignore_zero_hits else "neg"
    preds, target = concat(batches)
    expected = rank_metrics(
        preds, target, "hit_rate", top_k, empty_target_action=action, ties="first"
    )
    ours = run(rp.HitRate(top_k=top_k, ignore_zero_hits=ignore_zero_hits), batches)
    assert ours == pytest.approx(as_list(expected), abs=1e-12)
    assert ours[-1] == ours[1]  # nothing to hit after the list's end
    ndcg = run_all(
        {
            "ours": rp.NDCG(top_k, ignore_zero_hits=ignore_zero_hits),
            "theirs": ignite_rec_sys.NDCG(top_k, ignore_zero_hits=ignore_zero_hits),
        },
        batches,
    )
    assert ndcg["ours"] == pytest.approx(ndcg["theirs"], rel=1e-6, abs=1e-7)


# ----------------------------------------------- every class vs rank_metrics


@pytest.mark.parametrize("metric", list(CLASSES))
@pytest.mark.parametrize("ignore_zero_hits", [True, False])
def test_every_class_equals_rank_metrics(metric: str, ignore_zero_hits: bool) -> None:
    """Scores with ties and graded targets: the adapter adds the batches up exactly."""
    batches = ranked_batches(seed=7)
    cls = CLASSES[metric]
    top_k = [1, 3, 10]
    if metric in WHOLE_LIST:
        ours = cls(ignore_zero_hits=ignore_zero_hits)
    else:
        ours = cls(top_k, ignore_zero_hits=ignore_zero_hits)
    # the class's Ignite defaults, spelt as the package's options
    options: dict[str, Any] = {"empty_target_action": "skip" if ignore_zero_hits else "neg"}
    if metric == "ndcg":
        options.update(relevance_threshold=1.0, gain="exponential")
    if metric == "map":
        options["ap_denominator"] = "min_k_relevant"
    preds, target = concat(batches)
    expected = rank_metrics(
        preds, target, metric, None if metric in WHOLE_LIST else top_k, **options
    )
    got = run(ours, batches)
    if metric in WHOLE_LIST:
        assert isinstance(got, float)
        assert got == pytest.approx(as_list(expected)[0], rel=1e-12, abs=1e-12)
    else:
        assert isinstance(got, list)
        assert got == pytest.approx(as_list(expected), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    "options",
    [
        {"ties": "pessimistic"},
        {"ties": "optimistic", "relevance_threshold": 2},
        {"gain_function": "linear_rank", "weighted": True},
        {"ap_denominator": "relevant", "adaptive_k": True},
        {"empty_target_action": "pos"},
    ],
    ids=["pessimistic", "optimistic-threshold", "linear-weighted", "ap-R-adaptive", "pos"],
)
def test_package_options_reach_the_kernel(options: dict[str, Any]) -> None:
    batches = ranked_batches(seed=11, items=12)
    names = ["hit_rate", "mrr", "ndcg", "map", "precision", "auc"]
    ours = run(rp.RankingMetrics(names, [2, 5, 20], **options), batches, name="all")
    preds, target = concat(batches)
    kernel_options = dict(options)
    # Ignite's gain_function, its default exp_rank included
    kernel_options["gain"] = {"exp_rank": "exponential", "linear_rank": "linear"}[
        kernel_options.pop("gain_function", "exp_rank")
    ]
    kernel_options.setdefault("empty_target_action", "skip")
    expected = rank_metrics(preds, target, names, [2, 5, 20], **kernel_options)
    assert ours == pytest.approx({k: float(v) for k, v in expected.items()}, rel=1e-12)


def test_top_k_none_is_the_whole_list_and_a_float() -> None:
    batches = ranked_batches(seed=2)
    got = run(rp.MRR(top_k=None), batches)
    preds, target = concat(batches)
    expected = rank_metrics(preds, target, "mrr", None, empty_target_action="skip")
    assert isinstance(got, float)
    assert got == pytest.approx(float(expected["mrr"]), rel=1e-12)


def test_top_k_is_sorted_and_deduplicated() -> None:
    metric = rp.HitRate(top_k=[5, 1, 5, 3])
    assert metric.top_k == [1, 3, 5]
    assert len(run(metric, ranked_batches())) == 3


def test_defaults_match_ignite() -> None:
    assert rp.HitRate().top_k == ignite_rec_sys.HitRate().top_k == [1]
    assert rp.MRR().top_k == rp.MAP().top_k == [10]  # Ignite 0.6's documented default
    with pytest.raises(TypeError):
        rp.NDCG()  # type: ignore[call-arg]  # top_k is required, as in Ignite
    with pytest.raises(TypeError):
        ignite_rec_sys.NDCG()  # type: ignore[call-arg]
    ndcg = rp.NDCG([3])
    assert ndcg._request.options.rule.relevance_threshold == 1.0
    assert ndcg._request.options.rule.gain == "exponential"
    assert rp.HitRate()._request.options.rule.relevance_threshold is None
    assert rp.HitRate()._request.options.empty_target_action == "skip"
    assert rp.HitRate(ignore_zero_hits=False)._request.options.empty_target_action == "neg"


def test_ndcg_positional_arguments_in_ignites_order() -> None:
    """NDCG(top_k, ignore_zero_hits, relevance_threshold, gain_function, output_transform)."""
    batch = ranked_batches(seed=3, n=1)[0]
    transform = lambda output: (output[1], output[0])  # noqa: E731
    ours = rp.NDCG([2, 4], False, 2.0, "linear_rank", transform)
    theirs = ignite_rec_sys.NDCG([2, 4], False, 2.0, "linear_rank", transform)
    swapped = [(batch[1], batch[0] + 0.01 * torch.arange(8.0))]  # scores without ties
    got = run_all({"ours": ours, "theirs": theirs}, swapped)
    assert got["ours"] == pytest.approx(got["theirs"], rel=1e-6)


# --------------------------------------------------------- NotComputableError, reset


@pytest.mark.parametrize("metric", list(CLASSES))
def test_not_computable_before_any_counted_query(metric: str) -> None:
    cls = CLASSES[metric]
    m = cls() if metric in WHOLE_LIST else cls([1, 2]) if metric == "ndcg" else cls()
    with pytest.raises(NotComputableError):
        m.compute()
    m.update((torch.rand(3, 4), torch.zeros(3, 4)))  # no relevant item: skipped
    with pytest.raises(NotComputableError):
        m.compute()


def test_counted_empty_queries_are_computable() -> None:
    m = rp.MRR([1, 2], ignore_zero_hits=False)
    m.update((torch.rand(3, 4), torch.zeros(3, 4)))
    assert m.compute() == [0.0, 0.0]


def test_reset_forgets_everything() -> None:
    batches = ranked_batches(seed=4)
    m = rp.NDCG([1, 5])
    for b in batches:
        m.update(b)
    m.reset()
    with pytest.raises(NotComputableError):
        m.compute()
    m.update(batches[0])
    expected = rank_metrics(
        *batches[0], "ndcg", [1, 5], relevance_threshold=1.0, empty_target_action="skip",
        gain="exponential",
    )  # fmt: skip
    assert m.compute() == pytest.approx(as_list(expected), rel=1e-12)


def test_engine_resets_each_epoch() -> None:
    batches = ranked_batches(seed=5)
    engine = evaluator()
    rp.MRR([3]).attach(engine, "mrr")
    first = engine.run(batches).metrics["mrr"]
    second = engine.run(batches, max_epochs=3).metrics["mrr"]
    assert first == second


# ------------------------------------------------------------ state_dict mid-epoch


def test_state_dict_round_trip_mid_epoch() -> None:
    batches = ranked_batches(seed=6, n=5)
    saved: dict[str, Any] = {}
    engine = evaluator()
    metric = rp.RankingMetrics(["mrr", "ndcg", "auc"], [1, 3])
    metric.attach(engine, "ranking")

    @engine.on(Events.ITERATION_COMPLETED(once=2))
    def save(engine: Engine) -> None:
        saved["state"] = metric.state_dict()

    full = engine.run(batches).metrics
    resumed = rp.RankingMetrics(["mrr", "ndcg", "auc"], [1, 3])
    resumed.load_state_dict(saved["state"])
    for batch in batches[2:]:
        resumed.update(batch)
    assert resumed.compute() == pytest.approx({k: full[k] for k in resumed.keys}, rel=1e-12)
    # what was saved is the first two batches' state, not a view of the live one
    early = rp.RankingMetrics(["mrr", "ndcg", "auc"], [1, 3])
    early.load_state_dict(saved["state"])
    reference = rp.RankingMetrics(["mrr", "ndcg", "auc"], [1, 3])
    for batch in batches[:2]:
        reference.update(batch)
    assert early.compute() == reference.compute()


# ------------------------------------------------- engine glue: evaluator, lambdas


def test_create_supervised_evaluator() -> None:
    torch.manual_seed(0)
    users, items = 40, 12
    model = torch.nn.Linear(5, items)
    x = torch.randn(users, 5)
    y = (torch.rand(users, items) < 0.25).float()
    loader = [(x[i : i + 16], y[i : i + 16]) for i in range(0, users, 16)]
    engine = create_supervised_evaluator(
        model,
        metrics={
            "ndcg": rp.NDCG(top_k=[5, 10]),
            "mrr": rp.MRR(top_k=5),
            "ranking": rp.RankingMetrics(["recall", "map"], top_k=[5]),
        },
    )
    metrics = engine.run(loader).metrics
    with torch.no_grad():
        scores = model(x)
    ndcg = rank_metrics(
        scores, y, "ndcg", [5, 10], relevance_threshold=1.0, empty_target_action="skip"
    )
    assert metrics["ndcg"] == pytest.approx(as_list(ndcg), rel=1e-9)
    mrr = rank_metrics(scores, y, "mrr", 5, empty_target_action="skip")
    assert metrics["mrr"] == pytest.approx(as_list(mrr), rel=1e-9)
    assert set(metrics) == {"ndcg", "mrr", "recall@5", "map@5"}


def test_ranking_metrics_result_modes() -> None:
    batches = ranked_batches(seed=8)
    flat = run_all({"r": rp.RankingMetrics(["mrr", "auc"], [1, 2])}, batches)
    assert set(flat) == {"mrr@1", "mrr@2", "auc"}
    both = run_all(
        {"r": rp.RankingMetrics(["mrr", "auc"], [1, 2], metrics_result_mode="both")}, batches
    )
    assert both["r"] == {k: both[k] for k in ("mrr@1", "mrr@2", "auc")}
    assert {k: both[k] for k in flat} == flat


# ----------------------------------- two metrics writing one key of state.metrics (issue 24)


def masked_batches(seed: int) -> list[dict[str, torch.Tensor]]:
    """Dict outputs with a mask that hides some items, so masked and unmasked values differ."""
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for preds, target in ranked_batches(seed=seed):
        mask = torch.rand(preds.shape, generator=gen) < 0.7
        batches.append(
            {"y_pred": preds + torch.rand(preds.shape, generator=gen), "y": target, "mask": mask}
        )
    return batches


def unmasked(output: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return output["y_pred"], output["y"]


def test_two_ranking_metrics_writing_one_key_are_refused_at_attach() -> None:
    engine = evaluator()
    rp.RankingMetrics(["mrr", "ndcg"], [3], output_transform=unmasked).attach(engine, "unmasked")
    masked = rp.RankingMetrics(["mrr"], [3])
    with pytest.raises(ValueError, match=r"'masked' and .* 'unmasked' both write 'mrr@3'") as error:
        masked.attach(engine, "masked")
    assert "prefix_keys=True" in str(error.value)
    assert not masked.is_attached(engine)  # refused before anything was attached


def test_prefix_keys_keeps_both_values_under_the_attach_name() -> None:
    batches = masked_batches(seed=31)
    engine = evaluator()
    rp.RankingMetrics(["mrr", "ndcg"], [3], output_transform=unmasked).attach(engine, "unmasked")
    rp.RankingMetrics(["mrr", "ndcg"], [3], prefix_keys=True).attach(engine, "masked")
    rp.RankingMetrics(["mrr"], [3], metrics_result_mode="named").attach(engine, "named")
    metrics = engine.run(batches).metrics
    preds, target, mask = (torch.cat([b[k] for b in batches]) for k in ("y_pred", "y", "mask"))
    options: dict[str, Any] = {"empty_target_action": "skip", "gain": "exponential"}
    plain = rank_metrics(preds, target, ["mrr", "ndcg"], [3], **options)
    hidden = rank_metrics(preds, target, ["mrr", "ndcg"], [3], mask=mask, **options)
    assert set(metrics) == {"mrr@3", "ndcg@3", "masked/mrr@3", "masked/ndcg@3", "named"}
    for key in ("mrr@3", "ndcg@3"):
        assert metrics[key] == pytest.approx(float(plain[key]), rel=1e-12)
        assert metrics[f"masked/{key}"] == pytest.approx(float(hidden[key]), rel=1e-12)
    assert metrics["named"]["mrr@3"] == metrics["masked/mrr@3"]
    assert metrics["mrr@3"] != metrics["masked/mrr@3"]  # the two really differ here


def test_prefix_keys_with_both_modes_and_its_check() -> None:
    both = run_all(
        {"r": rp.RankingMetrics(["mrr"], [1], metrics_result_mode="both", prefix_keys=True)},
        ranked_batches(seed=32),
    )
    assert set(both) == {"r/mrr@1", "r"}
    assert both["r"] == {"mrr@1": both["r/mrr@1"]}
    with pytest.raises(TypeError, match="`prefix_keys` must be a bool"):
        rp.RankingMetrics(prefix_keys="yes")  # type: ignore[arg-type]


def test_a_flat_key_equal_to_another_metrics_name_is_refused() -> None:
    engine = evaluator()
    rp.MRR([3]).attach(engine, "mrr@3")
    with pytest.raises(
        ValueError, match="'ranking' and MRR attached as 'mrr@3' both write 'mrr@3'"
    ):
        rp.RankingMetrics(["mrr"], [3]).attach(engine, "ranking")
    # the same names for single metrics: Ignite would keep only the last one
    with pytest.raises(ValueError, match="attach them under different names"):
        rp.NDCG([3]).attach(engine, "mrr@3")


def test_a_metric_of_another_library_on_the_same_key_is_refused_before_any_batch() -> None:
    seen: list[Any] = []
    engine = Engine(lambda engine, batch: seen.append(batch) or batch)
    rp.MRR([3]).attach(engine, "score")
    Accuracy().attach(engine, "score")  # attached after ours: seen when the run starts
    with pytest.raises(
        ValueError, match="MRR attached as 'score' and Accuracy attached as 'score'"
    ):
        engine.run(ranked_batches(seed=33))
    assert seen == []


def test_detached_metric_frees_its_keys_and_one_metric_may_have_two_usages() -> None:
    engine = evaluator()
    first = rp.RankingMetrics(["mrr"], [3])
    first.attach(engine, "first")
    first.detach(engine)
    rp.RankingMetrics(["mrr"], [3]).attach(engine, "second")
    # one scalar metric under two names (per batch and per epoch) writes two keys
    mrr = rp.MRR([3])
    mrr.attach(engine, "mrr_batch", usage="batch_wise")
    mrr.attach(engine, "mrr_epoch")
    metrics = engine.run(ranked_batches(seed=34)).metrics
    assert {"mrr@3", "mrr_batch", "mrr_epoch"} <= set(metrics)


def test_metrics_lambda_arithmetic() -> None:
    batches = ranked_batches(seed=9)
    mrr, ndcg, auc = rp.MRR([1, 5]), rp.NDCG([1, 5]), rp.AUC()
    ranking = rp.RankingMetrics(["precision", "recall"], [5])
    blend = (mrr[1] + ndcg[1]) / 2
    one_minus_auc = 1 - auc
    f1 = MetricsLambda(
        lambda p, r: 2 * p * r / (p + r), ranking["precision@5"], ranking["recall@5"]
    )
    got = run_all(
        {"blend": blend, "1-auc": one_minus_auc, "f1": f1, "mrr": mrr, "ndcg": ndcg, "auc": auc},
        batches,
    )
    assert got["blend"] == pytest.approx((got["mrr"][1] + got["ndcg"][1]) / 2, rel=1e-12)
    assert got["1-auc"] == pytest.approx(1 - got["auc"], rel=1e-12)
    preds, target = concat(batches)
    pr = rank_metrics(preds, target, ["precision", "recall"], 5, empty_target_action="skip")
    p, r = float(pr["precision@5"]), float(pr["recall@5"])
    assert got["f1"] == pytest.approx(2 * p * r / (p + r), rel=1e-12)


# ------------------------------------------------------ one ranking per batch


def count_rank_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = ranking_plugins.kernel.rank_batch

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(ranking_plugins.kernel, "rank_batch", counting)
    ranking_plugins.batch_cache.last_batch.clear()
    return calls


def test_metrics_on_one_engine_rank_each_batch_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_rank_passes(monkeypatch)
    batches = ranked_batches(seed=10, n=3)
    top_k = [1, 5, 10]
    metrics = {
        "mrr": rp.MRR(top_k),
        # the relevance rule must be the same for the ranking to be shared; Ignite's
        # NDCG defaults to relevance_threshold=1.0 where HitRate and MRR take y > 0
        "ndcg": rp.NDCG(top_k, relevance_threshold=None),
        "hit_rate": rp.HitRate(top_k),
        "map": rp.MAP(top_k),
    }
    got = run_all(metrics, batches)
    # the first batch is ranked twice: copies of a batch are kept (to prove the
    # next metric's inputs unchanged) only once the same `y_pred` came twice
    assert len(calls) == len(batches) + 1
    # and the shared ranking gives each metric its own numbers
    preds, target = concat(batches)
    for name in metrics:
        options = {"ap_denominator": "min_k_relevant"} if name == "map" else {}
        expected = rank_metrics(
            preds, target, name, top_k, empty_target_action="skip", gain="exponential", **options
        )
        assert got[name] == pytest.approx(as_list(expected), rel=1e-12)


def test_ignite_default_relevance_rules_rank_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """With Ignite's own defaults NDCG (grade >= 1) and MRR (grade > 0) read a batch
    under different relevance rules, so each rule ranks once."""
    calls = count_rank_passes(monkeypatch)
    batches = ranked_batches(seed=10, n=3)
    run_all({"mrr": rp.MRR([5]), "hr": rp.HitRate([5]), "ndcg": rp.NDCG([5])}, batches)
    assert len(calls) == 2 * len(batches) + 1  # the first batch: once more (see above)


# ------------------------------------------------------------- engine outputs


def test_mask_in_a_three_tuple_and_a_dict() -> None:
    batches = ranked_batches(seed=12)
    gen = torch.Generator().manual_seed(0)
    masks = [torch.rand(p.shape, generator=gen) < 0.8 for p, _ in batches]
    triples = [(p, t, m) for (p, t), m in zip(batches, masks)]
    dicts = [{"y_pred": p, "y": t, "mask": m, "loss": 0.0} for p, t, m in triples]
    preds, target = concat(batches)
    expected = rank_metrics(
        preds,
        target,
        "ndcg",
        [2, 4],
        mask=torch.cat(masks),
        relevance_threshold=1.0,
        empty_target_action="skip",
        gain="exponential",
    )
    assert run(rp.NDCG([2, 4]), triples) == pytest.approx(as_list(expected), rel=1e-12)
    assert run(rp.NDCG([2, 4]), dicts) == pytest.approx(as_list(expected), rel=1e-12)


def test_grouped_layout_through_a_dict() -> None:
    gen = torch.Generator().manual_seed(13)
    sizes = [[3, 5, 1], [4, 4], [6]]
    batches, start = [], 0
    for batch_sizes in sizes:
        indexes = torch.cat(
            [torch.full((n,), start + i, dtype=torch.long) for i, n in enumerate(batch_sizes)]
        )
        start += len(batch_sizes)
        preds = torch.randint(0, 3, (len(indexes),), generator=gen).float()
        target = (torch.rand(len(indexes), generator=gen) < 0.4).long()
        batches.append({"y_pred": preds, "y": target, "indexes": indexes})
    expected = rank_metrics(
        torch.cat([b["y_pred"] for b in batches]),
        torch.cat([b["y"] for b in batches]),
        ["mrr", "recall"],
        [1, 3],
        indexes=torch.cat([b["indexes"] for b in batches]),
        empty_target_action="neg",
    )
    got = run(rp.RankingMetrics(["mrr", "recall"], [1, 3], ignore_zero_hits=False), batches)
    assert got == pytest.approx({k: float(v) for k, v in expected.items()}, rel=1e-12)


def test_item_index_targets() -> None:
    gen = torch.Generator().manual_seed(14)
    preds = torch.rand(10, 20, generator=gen)
    target = torch.randint(-1, 20, (10, 3), generator=gen)
    got = run(rp.MRR([1, 5, 30]), [(preds[:4], target[:4]), (preds[4:], target[4:])])
    expected = rank_metrics(preds, target, "mrr", [1, 5, 30], empty_target_action="skip")
    assert got == pytest.approx(as_list(expected), rel=1e-12)


def test_lists_of_per_query_tensors_are_unrolled() -> None:
    """Ignite's unrolling: two lists of 1-D tensors, one query each (any length)."""
    gen = torch.Generator().manual_seed(15)
    lengths = [3, 7, 5, 1, 4]
    preds = [torch.rand(n, generator=gen) for n in lengths]
    target = [(torch.rand(n, generator=gen) < 0.5).long() for n in lengths]
    target[0][0] = 1
    got = run(
        rp.RankingMetrics(["mrr", "ndcg"], [2]), [(preds[:2], target[:2]), (preds[2:], target[2:])]
    )
    indexes = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    expected = rank_metrics(
        torch.cat(preds),
        torch.cat(target),
        ["mrr", "ndcg"],
        [2],
        indexes=indexes,
        empty_target_action="skip",
    )
    assert got == pytest.approx({k: float(v) for k, v in expected.items()}, rel=1e-12)
    with pytest.raises(TypeError, match="y_pred"):
        # with skip_unrolling the lists reach update, which asks for tensors
        run(rp.MRR([2], skip_unrolling=True), [(preds[:2], target[:2])])


BAD_OUTPUTS: dict[str, tuple[Any, str]] = {
    "4-tuple": ((torch.rand(2, 3), torch.ones(2, 3), None, None), r"\(y_pred, y\).*4 items"),
    "1-tuple": ((torch.rand(2, 3),), r"\(y_pred, y\).*1 items"),
    "bare tensor": (torch.rand(2, 3), r"\(y_pred, y\).*Tensor"),
    "dict without y_pred": ({"y": torch.ones(2, 3), "preds": torch.rand(2, 3)}, r"'y_pred'"),
    "dict without y": ({"y_pred": torch.rand(2, 3)}, r"no \['y'\]"),
    "list y_pred": (([[0.1, 0.2]], torch.ones(1, 2)), r"`y_pred`.*torch.Tensor"),
    "numpy y": ((torch.rand(2, 3), None), r"`y`.*torch.Tensor"),
    "int mask": ((torch.rand(2, 3), torch.ones(2, 3), 1), r"`mask`.*Tensor or None"),
}


@pytest.mark.parametrize("case", list(BAD_OUTPUTS))
def test_wrong_engine_output_names_what_was_expected(case: str) -> None:
    output, message = BAD_OUTPUTS[case]
    with pytest.raises((ValueError, TypeError), match=message):
        run(rp.MRR([1]), [output])


# ------------------------------------------------ the kernel's errors, unchanged


def raises_naming(argument: str) -> Any:
    return pytest.raises((ValueError, TypeError), match=rf"(?i)\b{argument}\b")


BAD_INPUTS: dict[str, tuple[str, dict[str, Any]]] = {
    "NaN preds": (
        "preds",
        {"y_pred": torch.tensor([[0.1, math.nan], [0.2, 0.3]]), "y": torch.ones(2, 2)},
    ),
    "preds 3-D": ("preds", {"y_pred": torch.rand(2, 3, 4), "y": torch.ones(2, 3, 4)}),
    "bool preds": ("preds", {"y_pred": torch.rand(2, 4) > 0.5, "y": torch.ones(2, 4)}),
    "float target of another shape": (
        "target",
        {"y_pred": torch.rand(2, 4), "y": torch.ones(2, 5)},
    ),
    "item id out of range": (
        "target",
        {"y_pred": torch.rand(2, 4), "y": torch.tensor([[0, 4], [1, 2]])},
    ),
    "mask of another shape": (
        "mask",
        {
            "y_pred": torch.rand(2, 4),
            "y": torch.ones(2, 4),
            "mask": torch.ones(2, 3, dtype=torch.bool),
        },
    ),
    "int mask": (
        "mask",
        {
            "y_pred": torch.rand(2, 4),
            "y": torch.ones(2, 4),
            "mask": torch.ones(2, 4, dtype=torch.long),
        },
    ),
    "grouped without indexes": ("indexes", {"y_pred": torch.rand(6), "y": torch.ones(6)}),
    "float indexes": (
        "indexes",
        {"y_pred": torch.rand(6), "y": torch.ones(6), "indexes": torch.zeros(6)},
    ),
    "NaN grades": (
        "target",
        {"y_pred": torch.rand(2, 2), "y": torch.tensor([[1.0, math.nan], [0.0, 1.0]])},
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
@pytest.mark.parametrize(
    "cls", [rp.MRR, rp.NDCG, rp.AUC, rp.RankingMetrics], ids=lambda c: c.__name__
)
def test_bad_inputs_give_the_kernels_error(case: str, cls: type) -> None:
    argument, output = BAD_INPUTS[case]
    metric = cls([1, 2]) if cls in (rp.MRR, rp.NDCG) else cls()
    with raises_naming(argument):
        run(metric, [output])


def test_empty_target_action_error() -> None:
    metric = rp.MRR([2], empty_target_action="error")
    with pytest.raises(ValueError, match="target"):
        run(metric, [(torch.rand(2, 3), torch.tensor([[1.0, 0, 0], [0, 0, 0]]))])


BAD_ARGUMENTS: dict[str, tuple[str, Callable[[], Any]]] = {
    "top_k 0": ("top_k", lambda: rp.HitRate(top_k=0)),
    "top_k [3, -1]": ("top_k", lambda: rp.NDCG([3, -1])),
    "top_k float": ("top_k", lambda: rp.MRR(2.5)),
    "top_k empty": ("top_k", lambda: rp.MAP([])),
    "gain_function": ("gain_function", lambda: rp.NDCG([1], gain_function="exponential")),
    "ignore_zero_hits": ("ignore_zero_hits", lambda: rp.MRR(ignore_zero_hits="yes")),
    "ties": ("ties", lambda: rp.MRR(ties="random")),
    "relevance_threshold": ("relevance_threshold", lambda: rp.MRR(relevance_threshold="1")),
    "empty_target_action": (
        "empty_target_action",
        lambda: rp.MRR(empty_target_action="ignore"),
    ),
    "ap_denominator": ("ap_denominator", lambda: rp.MAP(ap_denominator="k")),
    "metrics": ("metrics", lambda: rp.RankingMetrics(["mrr", "nope"])),
    "skip_unrolling": ("skip_unrolling", lambda: rp.MRR(skip_unrolling=None)),
    "validate_args": ("validate_args", lambda: rp.AUC(validate_args=1)),
}


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS))
def test_bad_constructor_arguments_name_the_argument(case: str) -> None:
    argument, make = BAD_ARGUMENTS[case]
    with raises_naming(argument):
        make()


def test_metrics_result_mode_is_ignites_check() -> None:
    with pytest.raises(ValueError, match="metrics_result_mode"):
        rp.RankingMetrics(metrics_result_mode="flat")


def test_missing_ignite_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name == "ignite" or name.startswith("ignite."):
            monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]
    monkeypatch.delitem(sys.modules, "ranking_plugins.ignite")
    with pytest.raises(ImportError, match=re.escape('pip install "ranking-plugins[ignite]"')):
        import ranking_plugins.ignite  # noqa: F401


# -------------------------------------------------------------------- devices


def test_state_lives_on_the_metric_device_in_float64() -> None:
    m = rp.NDCG([1, 2, 3])
    assert m._sums.dtype == torch.float64
    assert m._sums.shape == (ROWS, 3)
    assert m._sums.device == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_update_does_not_synchronise_on_the_inputs_device() -> None:
    batches = [(p.cuda(), t.cuda()) for p, t in ranked_batches(seed=16)]
    metrics = [
        rp.RankingMetrics(
            ["mrr", "ndcg", "map", "auc"], [1, 5], device="cuda", validate_args=False
        ),
        rp.HitRate([1, 3], device="cuda", validate_args=False),
    ]
    for m in metrics:
        m.update(batches[0])  # warm-up (lazy CUDA initialisation may synchronise)
        m.reset()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for batch in batches:
            for m in metrics:
                m.update(batch)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    preds, target = concat([(p.cpu(), t.cpu()) for p, t in batches])
    expected = rank_metrics(preds, target, "hit_rate", [1, 3], empty_target_action="skip")
    assert metrics[1].compute() == pytest.approx(as_list(expected), rel=1e-12)
    cpu_metric = rp.RankingMetrics(["mrr", "ndcg", "map", "auc"], [1, 5])
    for batch in batches:
        cpu_metric.update(batch)  # inputs on the GPU, state on the CPU
    assert cpu_metric.compute() == pytest.approx(metrics[0].compute(), rel=1e-12)


@pytest.mark.parametrize(
    # not "grouped": putting flat lists into padded rows needs the number of queries and
    # the longest list on the host (documented in the module)
    "layout",
    ["dense ties", "dense masked", "one item id", "three item ids", "embeddings"],
)
@pytest.mark.parametrize("metrics", [("mrr", "ndcg", "hit_rate", "map"), ("auc", "mean_rank")])
def test_update_reads_nothing_back_to_the_host_without_validate_args(
    layout: str, metrics: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What would synchronise an accelerator is made to fail on the CPU (tests/host_reads.py)."""
    g = torch.Generator().manual_seed(21)
    preds = torch.randint(0, 4, (6, 9), generator=g).float()  # ties, cut at k
    output: dict[str, Any] = {"y_pred": preds, "y": torch.randint(0, 2, (6, 9), generator=g)}
    if layout == "dense masked":
        output["mask"] = torch.rand(6, 9, generator=g) < 0.8
    elif layout == "one item id":
        output["y"] = torch.randint(-1, 9, (6,), generator=g)
    elif layout == "three item ids":
        output["y"] = torch.randint(-1, 9, (6, 3), generator=g)
    elif layout == "grouped":
        output = {
            "y_pred": preds.flatten(),
            "y": output["y"].flatten(),
            "indexes": torch.randint(0, 5, (54,), generator=g),
        }
    elif layout == "embeddings":
        users, items = (
            torch.randint(-1, 2, (6, 2), generator=g),
            torch.randint(-1, 2, (9, 2), generator=g),
        )
        output = {
            "y_pred": EmbeddingScores(users.float(), items.float(), chunk_size=4),
            "y": torch.randint(-1, 9, (6, 2), generator=g),
        }
    metric = rp.RankingMetrics(list(metrics), [1, 3], validate_args=False)
    with forbid_host_reads(monkeypatch):
        metric.update(output)
    y_pred = output["y_pred"]
    dense = y_pred.query_emb @ y_pred.item_emb.T if layout == "embeddings" else y_pred
    expected = rank_metrics(
        dense,
        output["y"],
        list(metrics),
        [1, 3],
        mask=output.get("mask"),
        indexes=output.get("indexes"),
        empty_target_action="skip",
    )
    result = metric.compute()
    assert result.keys() == expected.keys()
    for key, value in expected.items():
        assert result[key] == pytest.approx(value.item(), abs=1e-12, nan_ok=True)


def test_load_state_dict_of_another_metric_is_refused() -> None:
    saved = rp.NDCG([1, 2, 3]).state_dict()
    with pytest.raises(ValueError, match=rf"shape \({ROWS}, 2\)"):
        rp.NDCG([1, 2]).load_state_dict(saved)
