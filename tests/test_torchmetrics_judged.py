"""Issue 13's ``judged`` input in the TorchMetrics grouped layout kept until ``compute``.

Queries split across updates (and across processes), judged flags kept as a
"cat" state by the metrics that read a measure of judged items, ranked with
them at ``compute``: equal to ``rank_metrics`` on the concatenated inputs.
"""

from __future__ import annotations

import itertools
import operator
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from processes import spawn_and_wait
from reference import JUDGED_MEASURES, TIES

from ranking_plugins import rank_metrics

pytest.importorskip("torchmetrics")

from torchmetrics import MetricCollection

import ranking_plugins.torchmetrics.base as tm_base
import ranking_plugins.torchmetrics.grouped as tm_grouped
from ranking_plugins.torchmetrics import NDCG, RankingMetrics

KS = [1, 3, 10]


def _metrics(ties: str) -> list[str]:
    """Every judged measure exact under ``ties`` (infAP refuses "average" where
    ``rank_metrics`` does), and one metric that reads no judgment."""
    names = [*JUDGED_MEASURES, "ndcg"]
    try:
        rank_metrics(torch.ones(1, 2), torch.ones(1, 2), ["infap"], ties=ties)
    except ValueError:
        names.remove("infap")
    return names


def _problem(seed: int, queries: int = 6, items: int = 7):
    """(Q, N) scores with many ties, grades -1..2, unjudged and masked items, and the
    order in which their entries come as grouped (M,) entries."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    preds = torch.tensor(
        [[float(rng.choice([0, 1, 2, 3])) for _ in range(items)] for _ in range(queries)]
    )
    target = torch.tensor(
        [[rng.choice([-1, 0, 0, 1, 2]) for _ in range(items)] for _ in range(queries)]
    )
    judged = torch.rand(queries, items, generator=g) < 0.7
    mask = torch.rand(queries, items, generator=g) < 0.85
    order = torch.randperm(queries * items, generator=g)
    return preds, target, mask, judged, order


def _grouped(preds, target, mask, judged, order):
    """The entries in ``order``: (preds, target, indexes, mask, judged), each (M,)."""
    indexes = torch.arange(preds.shape[0]).repeat_interleave(preds.shape[1])
    return tuple(t.flatten()[order] for t in (preds, target, indexes, mask, judged))


def _assert_same(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert list(got) == list(expected)
    for key, value in expected.items():
        torch.testing.assert_close(
            got[key], value.to(torch.float64), rtol=0, atol=1e-12, equal_nan=True, msg=key
        )


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("seed", [0, 1])
def test_split_queries_match_rank_metrics(ties: str, seed: int) -> None:
    """Three updates that split the queries, the last one without ``judged`` (its
    entries count as judged); the per-query values (sorted query order) too."""
    preds, target, mask, judged, order = _problem(seed)
    flat = _grouped(preds, target, mask, judged, order)
    cuts = [0, 15, 29, preds.numel()]
    assert set(flat[2][:15].tolist()) & set(flat[2][15:29].tolist())  # split queries
    metrics = _metrics(ties)
    options = {"ties": ties, "empty_target_action": "skip", "gain": "linear"}
    metric = RankingMetrics(metrics, KS, keep_per_query=True, **options)
    for i, (lo, hi) in enumerate(itertools.pairwise(cuts)):
        p, t, x, m, j = (f[lo:hi] for f in flat)
        metric.update(p, t, x, mask=m, judged=None if i == 2 else j)
    # what was given, concatenated: the last update's entries judged
    given = flat[4].clone()
    given[cuts[2] :] = True
    assert not torch.equal(given, flat[4]) and not given.all()
    p, t, x, m, _ = flat
    grouped = {"indexes": x, "mask": m, "judged": given, **options}
    _assert_same(metric.compute(), rank_metrics(p, t, metrics, top_k=KS, **grouped))
    per_query = rank_metrics(p, t, metrics, top_k=KS, reduction="none", **grouped)
    _assert_same(metric.compute_per_query(), per_query)
    # the flags changed the numbers: without them, other values
    plain = rank_metrics(p, t, ["bpref", "unj"], top_k=KS, indexes=x, mask=m, **options)
    got = metric.compute()
    assert any(not torch.equal(got[k], v.double()) for k, v in plain.items())


def test_collection_mixes_judged_and_other_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain metric first, then two judged ones: the judged metrics keep one copy of
    each batch and share one ranking made with the flags; the plain one keeps its own
    grades (an unjudged item not relevant) and ranks them without flags."""
    preds, target, mask, judged, order = _problem(3)
    p, t, x, m, j = _grouped(preds, target, mask, judged, order)
    options = {"ties": "pessimistic", "empty_target_action": "skip", "gain": "linear"}
    collection = MetricCollection(
        {
            "plain": NDCG(top_k=3, **options),
            "bpref": RankingMetrics(["bpref", "unj"], KS, **options),
            "more": RankingMetrics(["judged", "rbp_resid", "infap"], KS, **options),
        },
        compute_groups=False,
    )
    for lo, hi in [(0, 20), (20, p.numel())]:
        collection.update(p[lo:hi], t[lo:hi], x[lo:hi], mask=m[lo:hi], judged=j[lo:hi])
    plain, first, second = (collection[name] for name in ("plain", "bpref", "more"))
    assert not hasattr(plain, "flat_judged")

    def kept(metric: Any, state: str) -> list[torch.Tensor]:  # less each metric's own empty seed
        return [tensor for tensor in getattr(metric, state) if tensor.numel()]

    for state in ("flat_preds", "flat_target", "flat_indexes", "flat_mask", "flat_judged"):
        assert len(kept(first, state)) == 2
        assert all(map(operator.is_, kept(first, state), kept(second, state)))
    # the plain metric keeps its own grades: an unjudged one as not relevant
    assert not any(map(operator.is_, kept(plain, "flat_target"), kept(first, "flat_target")))
    calls: list[bool] = []
    rank = tm_base._kernel_rank
    monkeypatch.setattr(
        tm_base, "_kernel_rank", lambda *a, **k: calls.append(True) or rank(*a, **k)
    )
    got = {name: metric.compute() for name, metric in collection.items()}
    assert len(calls) == 2
    grouped = {"indexes": x, "mask": m, "judged": j, **options}
    for name, metric in collection.items():
        names = [entry.name for entry in metric.request.metrics]
        expected = rank_metrics(p, t, names, top_k=metric.request.ks, **grouped)
        if name == "plain":
            torch.testing.assert_close(got[name], expected["ndcg@3"].double())
        else:
            _assert_same(got[name], expected)


@pytest.mark.parametrize(
    "options",
    [
        {"ties": "average"},
        {"ties": "first", "relevance_threshold": 2},
        {"ties": "optimistic", "relevance_threshold": -0.5, "ignore_index": -2},
        {"ties": "pessimistic", "ignore_index": 0, "gain": "exponential"},
    ],
)
def test_metrics_without_judged_flags_treat_unjudged_as_not_relevant(options) -> None:
    """A metric that reads no judged measure keeps no flags, yet ``judged`` given in the
    grouped layout counts: an unjudged item is never relevant, as in ``rank_metrics``."""
    preds, target, mask, judged, order = _problem(5, queries=7, items=8)
    p, t, x, m, j = _grouped(preds, target, mask, judged, order)
    options = {"empty_target_action": "skip", "gain": "linear", **options}
    ignore_index = options.pop("ignore_index", None)
    if ignore_index is not None:
        t = t.masked_fill(torch.arange(t.numel()) % 5 == 0, ignore_index)
    names = ["ndcg", "map", "mrr", "precision", "recall", "r_precision", "auc", "mean_rank"]
    metric = RankingMetrics(names, KS, ignore_index=ignore_index, **options)
    assert not hasattr(metric, "flat_judged")
    for lo, hi in [(0, 25), (25, 40), (40, p.numel())]:
        metric.update(p[lo:hi], t[lo:hi], x[lo:hi], mask=m[lo:hi], judged=j[lo:hi])
    keep = torch.ones_like(m) if ignore_index is None else t != ignore_index
    p, t, x, m, j = (tensor[keep] for tensor in (p, t, x, m, j))
    grouped = {"indexes": x, "mask": m, **options}
    expected = rank_metrics(p, t, names, top_k=KS, judged=j, **grouped)
    _assert_same(metric.compute(), expected)
    plain = rank_metrics(p, t, names, top_k=KS, **grouped)
    assert any(not torch.equal(plain[k], v) for k, v in expected.items())  # the flags count


def _persistent(metric: Any) -> Any:
    metric.persistent(True)
    return metric


def _updated(metric: Any, seed: int = 7, with_judged: bool = True) -> Any:
    preds, target, mask, judged, order = _problem(seed)
    p, t, x, m, j = _grouped(preds, target, mask, judged, order)
    for lo, hi in [(0, 20), (20, p.numel())]:
        metric.update(
            p[lo:hi], t[lo:hi], x[lo:hi], mask=m[lo:hi], judged=j[lo:hi] if with_judged else None
        )
    return metric


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_state_dict_round_trip() -> None:
    """The judged flags are saved and loaded with the other kept entries."""
    names, options = ["bpref", "unj", "ndcg"], {"ties": "first"}
    saved = _updated(_persistent(RankingMetrics(names, KS, **options)))
    state = saved.state_dict()
    assert "flat_judged" in state
    loaded = _persistent(RankingMetrics(names, KS, **options))
    loaded.load_state_dict(state)
    _assert_same(loaded.compute(), saved.compute())
    # loaded, then updated again: as a metric given both
    _updated(loaded, seed=8)
    both = _updated(_updated(RankingMetrics(names, KS, **options)), seed=8)
    _assert_same(loaded.compute(), both.compute())


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_state_dict_saved_without_judged_flags() -> None:
    """A state saved before the grouped layout kept judged flags (when it took no
    ``judged``) loads as every entry judged."""
    names = ["bpref", "judged"]
    saved = _updated(_persistent(RankingMetrics(names, KS)), with_judged=False)
    state = saved.state_dict()
    del state["flat_judged"]
    loaded = _persistent(RankingMetrics(names, KS))
    loaded.load_state_dict(state)
    _assert_same(loaded.compute(), saved.compute())


def test_metric_without_judged_measures_keeps_its_state_keys() -> None:
    plain = _persistent(NDCG(top_k=3))
    keys = set(plain.state_dict())
    assert "flat_judged" not in keys
    unchecked = tm_grouped.UNCHECKED_STATE
    assert keys == {plain._sums_name, *tm_grouped.FLAT_STATES, unchecked}
    judged = _persistent(RankingMetrics(["ndcg", "bpref"], 3))
    expected = {judged._sums_name, *tm_grouped.FLAT_STATES, unchecked, "flat_judged"}
    assert set(judged.state_dict()) == expected


@pytest.mark.parametrize("name", ["bpref", "ndcg"])
@pytest.mark.parametrize(
    ("judged", "error", "words"),
    [
        (
            torch.ones(5, dtype=torch.bool),
            ValueError,
            r"`judged` must have the shape of `preds` \(6,\)",
        ),
        (torch.ones(6), TypeError, "`judged` must be a bool"),
        ([True] * 6, TypeError, "`judged` must be a torch.Tensor"),
        (torch.ones(3, 2, dtype=torch.bool), ValueError, "`judged` must have the shape"),
    ],
)
def test_bad_judged(name: str, judged: Any, error: type, words: str) -> None:
    metric = RankingMetrics([name], 3)
    preds, target, indexes = torch.rand(6), torch.ones(6), torch.tensor([0, 0, 0, 1, 1, 1])
    with pytest.raises(error, match=words):
        metric.update(preds, target, indexes, judged=judged)
    # TorchMetrics' 2-D retrieval input: checked against the shape given
    with pytest.raises(ValueError, match=r"`judged` must have the shape of `preds` \(2, 3\)"):
        metric.update(
            preds.view(2, 3),
            target.view(2, 3),
            indexes.view(2, 3),
            judged=torch.ones(3, 2, dtype=torch.bool),
        )
    assert metric.flat_target[-1].numel() == 0  # nothing kept


# ------------------------------------------------------------------ 2 processes (gloo)


def _ddp_updates() -> dict[str, list[list[dict[str, Any]]]]:
    """Per scenario, per rank, the grouped updates; queries split across the ranks."""
    preds, target, mask, judged, order = _problem(11)
    p, t, x, m, j = _grouped(preds, target, mask, judged, order)

    def part(lo: int, hi: int, with_judged: bool = True) -> dict[str, Any]:
        given = {"judged": j[lo:hi]} if with_judged else {}
        return {
            "preds": p[lo:hi],
            "target": t[lo:hi],
            "indexes": x[lo:hi],
            "mask": m[lo:hi],
            **given,
        }

    end = p.numel()
    return {
        "split": [[part(0, 12), part(12, 20, with_judged=False)], [part(20, end)]],
        "one_rank_idle": [[part(0, 30), part(30, end)], []],
    }


def _ddp_metrics() -> dict[str, Any]:
    return {
        "judged": RankingMetrics(["bpref", "infap", "unj", "rbp_resid", "ndcg"], KS, ties="first"),
        "plain": NDCG(top_k=3),
    }


def _ddp_results(metrics: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, metric in metrics.items():
        out[name] = metric.compute()
        out[name + "_se"] = metric.compute_standard_error()
    return out


def ddp_worker(rank: int, init_file: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        saved = {}
        for scenario, per_rank in _ddp_updates().items():
            metrics = _ddp_metrics()
            for update in per_rank[rank]:
                for metric in metrics.values():
                    metric.update(**update)
            saved[scenario] = _ddp_results(metrics)
        torch.save(saved, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed")
def test_two_processes_match_one(tmp_path: Path) -> None:
    """Each process holds part of the queries (one never updates in a scenario): every
    process gets the single-process values."""
    assert set(_ddp_updates()["split"][0][0]["indexes"].tolist()) & set(
        _ddp_updates()["split"][1][0]["indexes"].tolist()
    )
    spawn_and_wait(ddp_worker, (str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    for scenario, per_rank in _ddp_updates().items():
        metrics = _ddp_metrics()
        for updates in per_rank:
            for update in updates:
                for metric in metrics.values():
                    metric.update(**update)
        expected = _ddp_results(metrics)
        # and the single-process values are rank_metrics' on the concatenated entries
        updates = [update for per in per_rank for update in per]
        p, t, x, m = (
            torch.cat([u[k] for u in updates]) for k in ("preds", "target", "indexes", "mask")
        )
        j = torch.cat([u.get("judged", torch.ones_like(u["mask"])) for u in updates])
        judged = metrics["judged"]
        names = [entry.name for entry in judged.request.metrics]
        reference = rank_metrics(
            p, t, names, top_k=KS, indexes=x, mask=m, judged=j, ties="first", gain="linear"
        )
        _assert_same(expected["judged"], reference)
        for rank in range(2):
            got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)[scenario]
            for name, value in expected.items():
                if isinstance(value, dict):
                    _assert_same(got[name], value)
                else:
                    torch.testing.assert_close(got[name], value, rtol=0, atol=1e-12, equal_nan=True)


def test_lightning_callback_grouped_judged() -> None:
    """The callback passes a step output's "judged" key in the grouped layout too, with
    queries spread over every batch (kept until the epoch's end)."""
    pytest.importorskip("lightning")
    import lightning.pytorch as pl
    from lightning_helpers import NUM_ITEMS, NextItem, loader

    from ranking_plugins.lightning import RankingMetricsCallback

    seen: list[tuple[torch.Tensor, ...]] = []

    class Grouped(NextItem):
        def validation_step(self, batch, batch_idx, dataloader_idx=0):
            features, target, mask = batch
            preds = self(features)
            grades = torch.nn.functional.one_hot(target, NUM_ITEMS)
            rows = torch.arange(len(target)).unsqueeze(1).expand_as(preds)
            indexes = rows % 3  # queries 0, 1 and 2 in every batch
            judged = (rows + torch.arange(NUM_ITEMS) + batch_idx) % 4 != 0
            out = {
                "preds": preds.flatten(),
                "target": grades.flatten(),
                "indexes": indexes.flatten(),
                "mask": mask.flatten(),
                "judged": judged.flatten(),
            }
            seen.append(tuple(v.detach() for v in out.values()))
            return out

    metrics, ks = ["bpref", "unj", "judged", "ndcg"], [1, 3]
    callback = RankingMetricsCallback(metrics=metrics, top_k=ks, ties="first")
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=[callback],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.validate(Grouped(), loader(seed=5, size=10, batch_size=4), verbose=False)
    p, t, x, m, j = (torch.cat(parts) for parts in zip(*seen, strict=True))
    expected = rank_metrics(
        p, t, metrics, top_k=ks, indexes=x, mask=m, judged=j, ties="first", gain="linear"
    )
    for key, value in expected.items():
        assert float(trainer.callback_metrics[f"val/{key}"]) == pytest.approx(float(value)), key


@pytest.mark.parametrize("validate_args", [True, False])
def test_forward_gives_the_batch_value_and_accumulates(validate_args: bool) -> None:
    """``metric(...)`` (TorchMetrics' forward) with ``judged``: the batch's value, and the
    flags accumulated for ``compute``; also without the value checks."""
    preds, target, mask, judged, order = _problem(9)
    p, t, x, m, j = _grouped(preds, target, mask, judged, order)
    names, options = ["bpref", "judged", "map"], {"ties": "optimistic", "gain": "linear"}
    metric = RankingMetrics(names, KS, validate_args=validate_args, **options)
    for lo, hi in [(0, 21), (21, p.numel())]:
        batch = metric(p[lo:hi], t[lo:hi], x[lo:hi], mask=m[lo:hi], judged=j[lo:hi])
        part = {"indexes": x[lo:hi], "mask": m[lo:hi], "judged": j[lo:hi], **options}
        _assert_same(batch, rank_metrics(p[lo:hi], t[lo:hi], names, top_k=KS, **part))
    grouped = {"indexes": x, "mask": m, "judged": j, **options}
    _assert_same(metric.compute(), rank_metrics(p, t, names, top_k=KS, **grouped))
