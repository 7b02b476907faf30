"""A metric is a table entry: one added to ``METRICS`` reaches every entry point.

The new metric here, ``hits``, is the (expected) number of relevant items in
the top k, read from a statistic that already exists. Nothing but the table
entry is added, and ``rank_metrics``, the Ignite and TorchMetrics adapters and
the Lightning callback all compute it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from host_reads import forbid_host_reads
from ignite.engine import Engine
from lightning_helpers import NextItem, loader

from ranking_plugins import metrics as metric_table
from ranking_plugins import rank_metrics
from ranking_plugins.cli import main
from ranking_plugins.ignite import AUC as IgniteAUC
from ranking_plugins.ignite import NDCG as IgniteNDCG
from ranking_plugins.ignite import RankingMetrics as IgniteRankingMetrics
from ranking_plugins.kernel import Cutoff
from ranking_plugins.kernel.inputs.items import ItemInputs
from ranking_plugins.lightning import RankingMetricsCallback
from ranking_plugins.options import Options
from ranking_plugins.request import RankingRequest
from ranking_plugins.runs.names import TREC_EVAL_MEASURES, trec_eval_name
from ranking_plugins.torchmetrics import RankingMetrics as TorchMetricsRankingMetrics

KS = [1, 3, 5]


def _hits(c: Cutoff, options: Options) -> metric_table.MetricValue:
    return c.hits, (c.relevant_count > 0).expand_as(c.k)


@pytest.fixture
def hits_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = metric_table.Metric(name="hits", higher_is_better=True, value=_hits, upper_bound=None)
    monkeypatch.setitem(metric_table.METRICS, "hits", entry)


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    preds = torch.randint(0, 4, (6, 9), generator=g).float()  # ties on purpose
    target = torch.randint(0, 2, (6, 9), generator=g)
    return preds, target


def _expected(preds: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """hits@k = precision@k x k, the same statistic through an existing metric."""
    precision = rank_metrics(preds, target, "precision", KS)
    return {f"hits@{k}": float(precision[f"precision@{k}"]) * k for k in KS}


def test_metric_entries_are_keyword_only_and_at_k_follows_the_cutoff() -> None:
    with pytest.raises(TypeError):
        metric_table.Metric("hits", True, _hits)  # type: ignore[misc]
    assert metric_table.METRICS["ndcg"].at_k
    assert not metric_table.METRICS["auc"].at_k
    assert not metric_table.METRICS["r_precision"].at_k


def test_a_new_entry_reaches_rank_metrics(hits_metric: None) -> None:
    preds, target = _batch()
    got = rank_metrics(preds, target, "hits", KS)
    for key, value in _expected(preds, target).items():
        assert float(got[key]) == pytest.approx(value, abs=1e-12)


def test_a_new_entry_reaches_the_ignite_adapter(hits_metric: None) -> None:
    preds, target = _batch()
    engine = Engine(lambda engine, batch: batch)
    IgniteRankingMetrics(metrics=["hits"], top_k=KS).attach(engine, "ranking")
    state = engine.run([(preds[:3], target[:3]), (preds[3:], target[3:])])
    for key, value in _expected(preds, target).items():
        assert state.metrics[key] == pytest.approx(value, abs=1e-12)


def test_a_new_entry_reaches_the_torchmetrics_adapter(hits_metric: None) -> None:
    preds, target = _batch()
    metric = TorchMetricsRankingMetrics(["hits"], top_k=KS)
    metric.update(preds[:2], target[:2])
    metric.update(preds[2:], target[2:])
    got = metric.compute()
    for key, value in _expected(preds, target).items():
        assert float(got[key]) == pytest.approx(value, abs=1e-12)


def test_a_new_entry_reaches_the_lightning_callback(hits_metric: None, tmp_path: Path) -> None:
    model = NextItem()
    trainer = pl.Trainer(
        default_root_dir=tmp_path,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[RankingMetricsCallback(metrics=["hits"], top_k=KS, stages=["validate"])],
    )
    trainer.validate(model, loader(seed=4, size=8, batch_size=4), verbose=False)
    records = [r for r in model.recorded if not r["sanity"]]
    preds = torch.cat([r["preds"] for r in records])
    target = torch.cat([r["target"] for r in records])
    mask = torch.cat([r["mask"] for r in records])
    precision = rank_metrics(preds, target, "precision", KS, mask=mask)
    for k in KS:
        logged = float(trainer.callback_metrics[f"val/hits@{k}"])
        assert logged == pytest.approx(float(precision[f"precision@{k}"]) * k, abs=1e-6)


# -------------------------------------------- the facts of an entry drive what the package does


def test_host_under_average_marks_the_metrics_that_read_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under ``ties="average"`` on the accelerator paths, a metric reads a value on the host
    exactly when its entry says ``host_under_average`` (the no-sync tests of the adapters
    leave out the marked ones by that field)."""
    g = torch.Generator().manual_seed(0)
    preds = torch.randint(0, 3, (4, 8), generator=g).float()  # tie groups in every row
    target = torch.randint(0, 3, (4, 8), generator=g)
    judged = torch.rand(4, 8, generator=g) < 0.8
    subtopics = torch.randint(0, 3, (4, 8, 3), generator=g)  # the diversity measures' target
    reads = set()
    for name, metric in metric_table.METRICS.items():
        if metric.exposure:
            continue
        try:
            with forbid_host_reads(monkeypatch):
                rank_metrics(
                    preds,
                    subtopics if metric.intents else target,
                    [name],
                    3,
                    ties="average",
                    validate_args=False,
                    judged=judged if metric.judgments else None,
                )
        except AssertionError:
            reads.add(name)
    marked = {name for name, m in metric_table.METRICS.items() if m.host_under_average}
    assert reads == marked
    assert set(metric_table.HOST_UNDER_AVERAGE) == marked


def _all_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, float]:
    assert main(argv) == 0
    rows = (line.split("\t") for line in capsys.readouterr().out.splitlines())
    return {name.strip(): float(value) for name, query, value in rows if query == "all"}


def _graded_files(tmp_path: Path) -> list[str]:
    """Grades 0, 1 and 2, and a grade 2 in every query (so that -l 2 leaves none empty)."""
    qrels, run = tmp_path / "graded.qrels", tmp_path / "graded.run"
    grades = {"q1": {"d1": 1, "d2": 2, "d3": 0, "d4": 1}, "q2": {"d1": 2, "d2": 1, "d3": 1}}
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, ds in grades.items() for d, g in ds.items()))
    ranked = {"q1": ["d1", "d3", "d2", "d4"], "q2": ["d3", "d2", "d1"]}
    run.write_text(
        "".join(
            f"{q} Q0 {d} {rank} {10 - rank} r\n"
            for q, ds in ranked.items()
            for rank, d in enumerate(ds, 1)
        )
    )
    return [str(qrels), str(run)]


def test_trec_eval_graded_marks_the_measures_that_ignore_the_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In trec_eval's layout ``-l 2`` leaves every measure marked ``trec_eval_graded`` alone,
    and the mark alone decides it (unmarked, ndcg reads the level)."""
    files = _graded_files(tmp_path)
    names = [trec_eval_name(n, None) for n, m in metric_table.METRICS.items() if m.trec_eval_graded]
    assert names and all(name in TREC_EVAL_MEASURES for name in names)
    argv = ["evaluate", *files, "--format", "trec_eval", "-m", ",".join(names)]
    plain = _all_line(capsys, argv)
    assert _all_line(capsys, [*argv, "-l", "2"]) == plain
    unmarked = dataclasses.replace(metric_table.METRICS["ndcg"], trec_eval_graded=False)
    monkeypatch.setitem(metric_table.METRICS, "ndcg", unmarked)
    assert _all_line(capsys, [*argv, "-l", "2"])["ndcg"] != plain["ndcg"]


NEEDING = [name for name, m in metric_table.METRICS.items() if m.needs]


@pytest.mark.parametrize("name", NEEDING)
def test_needs_names_the_item_inputs_an_entry_reads(name: str) -> None:
    """Without its inputs a metric says which it reads; with more than one of them, that it
    reads one (diversity: features or categories)."""
    metric = metric_table.METRICS[name]
    with pytest.raises(ValueError, match=" or ".join(f"`{n}`" for n in metric.needs)):
        RankingRequest.create([name], 3)
    inputs = {
        "item_popularity": torch.tensor([1.0, 2.0, 3.0]),
        "tail_items": torch.tensor([True, False, True]),
        "item_features": torch.eye(3),
        "item_categories": torch.tensor([0, 1, 0]),
    }
    for given in metric.needs:  # each one alone is enough
        RankingRequest.create([name], 3, items=ItemInputs.create(**{given: inputs[given]}))
    if len(metric.needs) > 1:
        every = ItemInputs.create(**{given: inputs[given] for given in metric.needs})
        with pytest.raises(ValueError, match=f"{name} reads one of .*not both"):
            RankingRequest.create([name], 3, items=every)


def test_inputs_problem_refuses_item_inputs_for_its_entry_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """novelty's entry refuses a popularity of 0; arp, over the same input, takes it; an
    entry given an ``inputs_problem`` refuses with its words."""
    zero = ItemInputs.create(item_popularity=torch.tensor([0.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="novelty needs `item_popularity` > 0"):
        RankingRequest.create(["novelty"], 3, items=zero)
    RankingRequest.create(["arp"], 3, items=zero)
    strict = dataclasses.replace(
        metric_table.METRICS["arp"],
        name="strict_arp",
        inputs_problem=lambda items: (
            "strict_arp: no zero popularity"
            if items.popularity is not None and bool((items.popularity == 0).any())
            else None
        ),
    )
    monkeypatch.setitem(metric_table.METRICS, "strict_arp", strict)
    with pytest.raises(ValueError, match="strict_arp: no zero popularity"):
        RankingRequest.create(["arp", "strict_arp"], 3, items=zero)
    positive = ItemInputs.create(item_popularity=torch.tensor([1.0, 2.0, 3.0]))
    RankingRequest.create(["strict_arp"], 3, items=positive)


@pytest.mark.parametrize("field", ["judgments", "exposure"])
def test_layout_refusals_name_the_metrics_of_the_table(
    field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal of the grouped layout by the exposure metrics lists the table's
    exposure metrics (a new one too); likewise the measures of judged items."""
    new = dataclasses.replace(metric_table.METRICS["coverage"], name="new_one", exposure=False)
    monkeypatch.setitem(metric_table.METRICS, "new_one", dataclasses.replace(new, **{field: True}))
    names = metric_table.metric_names(lambda m: getattr(m, field))
    assert "new_one" in names.split(", ")
    assert {n for n, m in metric_table.METRICS.items() if getattr(m, field)} == set(
        names.split(", ")
    )
    if field == "exposure":
        preds, target = torch.tensor([0.3, 0.2, 0.1]), torch.tensor([1, 0, 0])
        request = RankingRequest.create(["coverage"], 2)
        with pytest.raises(ValueError, match=f"item exposure \\({names}\\)"):
            request.evaluate(preds, target, indexes=torch.tensor([0, 0, 1]))


def _sharp(metric: metric_table.Metric, k: int | None) -> str:
    return metric.name if k is None or not metric.at_k else f"{metric.name}#{k}"


@pytest.mark.parametrize("top_k", [[1, 3], None])
def test_every_result_key_is_spelled_by_result_key(
    top_k: list[int] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Respelled in ``metrics.result_key`` alone, the keys of the request, ``rank_metrics``
    and both adapters follow, and keep their values."""
    names = ["ndcg", "auc", "mrr"]
    preds, target = _batch()
    before = rank_metrics(preds, target, names, top_k)
    monkeypatch.setattr(metric_table, "result_key", _sharp)
    keys = [
        _sharp(metric_table.METRICS[n], k)
        for n in names
        for k in (top_k if top_k and metric_table.METRICS[n].at_k else [None])
    ]
    assert list(RankingRequest.create(names, top_k).keys) == keys
    got = rank_metrics(preds, target, names, top_k)
    assert list(got) == keys
    assert [float(v) for v in got.values()] == [float(v) for v in before.values()]
    torchmetrics = TorchMetricsRankingMetrics(names, top_k=top_k)
    torchmetrics.update(preds, target)
    assert list(torchmetrics.compute()) == keys
    ignite = IgniteRankingMetrics(metrics=names, top_k=top_k)
    ignite.update((preds, target))
    assert list(ignite.compute()) == keys


def test_ignite_gives_a_list_exactly_where_a_metric_has_columns_per_k() -> None:
    """One metric's ``compute``: a list over the ks of ``result_columns``, else one float."""
    preds, target = _batch()
    for metric, expected in [
        (IgniteNDCG(top_k=[3]), list),
        (IgniteNDCG(top_k=None), float),
        (IgniteAUC(), float),
    ]:
        metric.update((preds, target))
        assert isinstance(metric.compute(), expected)
