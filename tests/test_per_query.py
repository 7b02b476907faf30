"""Per-query values kept by the adapters (keep_per_query=True), the Lightning
callback's confidence intervals, and both fed to ranking_plugins.compare."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import torch
from processes import spawn_and_wait

from ranking_plugins import rank_metrics
from ranking_plugins.compare import bootstrap_interval, compare

KEYS_METRICS, KEYS_K = ["mrr", "ndcg"], [1, 3]


def dense_batches(
    seed: int, sizes: tuple[int, ...] = (4, 6, 3)
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for rows in sizes:
        preds = torch.randint(0, 5, (rows, 7), generator=g).float()  # ties
        target = torch.randint(0, 3, (rows, 7), generator=g) * (
            torch.rand(rows, 7, generator=g) < 0.4
        )
        target[0] = 0  # an empty query per batch
        out.append((preds, target))
    return out


def grouped_batch(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    indexes = torch.randint(0, 5, (30,), generator=g)
    return torch.randn(30, generator=g), (torch.rand(30, generator=g) < 0.3).long(), indexes


def reference(
    batches: list[tuple[torch.Tensor, torch.Tensor]], **options: Any
) -> dict[str, torch.Tensor]:
    parts = [
        rank_metrics(p, t, KEYS_METRICS, KEYS_K, reduction="none", **options) for p, t in batches
    ]
    return {key: torch.cat([part[key] for part in parts]) for key in parts[0]}


def test_torchmetrics_per_query_values_in_update_order_then_grouped() -> None:
    from ranking_plugins.torchmetrics import RankingMetrics

    metric = RankingMetrics(KEYS_METRICS, KEYS_K, keep_per_query=True, empty_target_action="skip")
    batches = dense_batches(0)
    for preds, target in batches:
        metric.update(preds, target)
    preds, target, indexes = grouped_batch(1)
    metric.update(preds[:12], target[:12], indexes=indexes[:12])
    metric.update(preds[12:], target[12:], indexes=indexes[12:])  # queries span updates
    got = metric.compute_per_query()
    dense = reference(batches, empty_target_action="skip", gain="linear")
    grouped = rank_metrics(
        preds,
        target,
        KEYS_METRICS,
        KEYS_K,
        indexes=indexes,
        reduction="none",
        empty_target_action="skip",
        gain="linear",
    )
    assert list(got) == list(metric.keys)
    for key in got:
        expected = torch.cat([dense[key], grouped[key]])
        torch.testing.assert_close(got[key], expected, equal_nan=True, rtol=0, atol=1e-15)
        assert bool(got[key].isnan().any())  # skipped queries are NaN
    means = metric.compute()
    for key in got:
        assert means[key].item() == pytest.approx(got[key].nanmean().item(), abs=1e-12)
    metric.reset()
    assert all(v.numel() == 0 for v in metric.compute_per_query().values())


def test_torchmetrics_whole_queries_keeps_per_query_values() -> None:
    from ranking_plugins.torchmetrics import MRR

    metric = MRR(top_k=3, whole_queries=True, keep_per_query=True)
    preds, target, indexes = grouped_batch(2)
    metric.update(preds, target, indexes=indexes)
    expected = rank_metrics(preds, target, "mrr", 3, indexes=indexes, reduction="none")["mrr@3"]
    torch.testing.assert_close(metric.compute_per_query()["mrr@3"], expected, rtol=0, atol=0)


def test_per_query_values_need_the_option() -> None:
    from ranking_plugins.ignite import MRR as IgniteMRR
    from ranking_plugins.torchmetrics import MRR

    with pytest.raises(RuntimeError, match="keep_per_query=True"):
        MRR(top_k=3).compute_per_query()
    with pytest.raises(RuntimeError, match="keep_per_query=True"):
        IgniteMRR(top_k=3).compute_per_query()
    with pytest.raises(TypeError, match="`keep_per_query` must be a bool"):
        MRR(keep_per_query="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="`keep_per_query` must be a bool"):
        IgniteMRR(keep_per_query=1)  # type: ignore[arg-type]


def test_ignite_engine_per_query_values_compare_two_models() -> None:
    from ignite.engine import Engine

    from ranking_plugins.ignite import RankingMetrics

    batches_a, batches_b = dense_batches(3), dense_batches(3)
    g = torch.Generator().manual_seed(9)
    batches_b = [
        (p + 3 * t + torch.rand(p.shape, generator=g), t) for p, t in batches_b
    ]  # a better model
    values = {}
    for name, batches in (("a", batches_a), ("b", batches_b)):
        evaluator = Engine(lambda engine, batch: batch)
        metric = RankingMetrics(KEYS_METRICS, KEYS_K, keep_per_query=True)
        metric.attach(evaluator, "ranking")
        evaluator.run(batches)
        values[name] = metric.compute_per_query()
        expected = reference(batches, empty_target_action="skip", gain="exponential")
        for key in values[name]:
            torch.testing.assert_close(
                values[name][key], expected[key], equal_nan=True, rtol=0, atol=1e-15
            )
    report = compare(values, test="randomization", correction="none")
    assert [r.metric for r in report.rows] == list(values["a"])
    assert report.dropped_queries  # the empty queries (NaN under ignore_zero_hits) left out
    assert all(r.difference > 0 for r in report.rows)


def test_lightning_logs_bootstrap_intervals(tmp_path: Path) -> None:
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import CSVLogger
    from lightning_helpers import NextItem, loader

    from ranking_plugins.lightning import RankingMetricsCallback

    callback = RankingMetricsCallback(
        metrics=["mrr", "ndcg"], top_k=[3], confidence=0.9, resamples=200
    )
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=[callback],
        logger=CSVLogger(str(tmp_path), name="run", version=0),
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    model = NextItem()
    trainer.validate(model, loader(seed=2, size=23, batch_size=5), verbose=False)
    with open(tmp_path / "run" / "version_0" / "metrics.csv", newline="") as file:
        row = next(csv.DictReader(file))
    records = [r for r in model.recorded if not r["sanity"]]
    for key in ("mrr@3", "ndcg@3"):
        name, k = key.split("@")
        per_query = torch.cat(
            [
                rank_metrics(
                    r["preds"],
                    r["target"],
                    name,
                    int(k),
                    mask=r["mask"],
                    reduction="none",
                    gain="linear",
                )[key]
                for r in records
            ]
        )
        low, high = bootstrap_interval(per_query, 0.9, 200, seed=0)
        assert float(row[f"val/{key}_ci_low"]) == pytest.approx(low.item(), abs=1e-6)
        assert float(row[f"val/{key}_ci_high"]) == pytest.approx(high.item(), abs=1e-6)
        assert low.item() <= float(row[f"val/{key}"]) <= high.item()
        assert float(trainer.callback_metrics[f"val/{key}_ci_low"]) == pytest.approx(
            low.item(), abs=1e-6
        )


def test_lightning_confidence_errors() -> None:
    from ranking_plugins.lightning import RankingMetricsCallback

    with pytest.raises(ValueError, match="`confidence` must be None or a number in \\(0, 1\\)"):
        RankingMetricsCallback(confidence=1.0)
    with pytest.raises(ValueError, match="`resamples` must be a positive int"):
        RankingMetricsCallback(confidence=0.9, resamples=0)


# --------------------------------------------------------------------------- 2 processes, gloo


def _worker(rank: int, init_file: str, out_dir: str) -> None:
    import torch.distributed as dist
    from ignite.engine import Engine

    from ranking_plugins.ignite import RankingMetrics as IgniteMetrics
    from ranking_plugins.torchmetrics import RankingMetrics as TorchMetricsMetrics

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        batches = dense_batches(5, (4, 6, 3, 5))
        mine = batches[:3] if rank == 0 else batches[3:]  # uneven shares
        preds, target, indexes = grouped_batch(6)
        lo, hi = (0, 17) if rank == 0 else (17, 30)  # queries split across processes
        tm = TorchMetricsMetrics(KEYS_METRICS, KEYS_K, keep_per_query=True)
        for p, t in mine:
            tm.update(p, t)
        tm.update(preds[lo:hi], target[lo:hi], indexes=indexes[lo:hi])
        ig = IgniteMetrics(KEYS_METRICS, KEYS_K, keep_per_query=True)
        evaluator = Engine(lambda engine, batch: batch)
        ig.attach(evaluator, "ranking")
        evaluator.run(mine)
        torch.save(
            {"torchmetrics": tm.compute_per_query(), "ignite": ig.compute_per_query()},
            Path(out_dir) / f"rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(
    not torch.distributed.is_available(), reason="torch.distributed is not available"
)
def test_per_query_state_syncs_over_two_gloo_processes(tmp_path: Path) -> None:
    spawn_and_wait(_worker, (str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    batches = dense_batches(5, (4, 6, 3, 5))
    preds, target, indexes = grouped_batch(6)
    dense_tm = reference(batches, gain="linear")
    grouped = rank_metrics(
        preds, target, KEYS_METRICS, KEYS_K, indexes=indexes, reduction="none", gain="linear"
    )
    dense_ig = reference(batches, empty_target_action="skip", gain="exponential")
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        for key in dense_tm:
            expected = torch.cat([dense_tm[key], grouped[key]])
            torch.testing.assert_close(
                got["torchmetrics"][key], expected, equal_nan=True, rtol=0, atol=1e-15
            )
            torch.testing.assert_close(
                got["ignite"][key], dense_ig[key], equal_nan=True, rtol=0, atol=1e-15
            )


def test_catalogue_metrics_have_no_per_query_values_in_either_adapter() -> None:
    """Beside an exposure metric, only the per-query metrics keep values."""
    from ranking_plugins import functional
    from ranking_plugins.ignite import RankingMetrics as IgniteRankingMetrics
    from ranking_plugins.torchmetrics import RankingMetrics as TorchMetricsRankingMetrics

    generator = torch.Generator().manual_seed(5)
    preds = torch.rand(6, 9, generator=generator, dtype=torch.float64)
    target = (torch.rand(6, 9, generator=generator) < 0.3).float()
    metrics = ("ndcg", "coverage")
    expected = functional.rank_metrics(preds, target, metrics=("ndcg",), top_k=3, reduction="none")
    tm = TorchMetricsRankingMetrics(metrics=metrics, top_k=3, keep_per_query=True, num_items=9)
    tm.update(preds, target)
    ignite = IgniteRankingMetrics(metrics=metrics, top_k=3, keep_per_query=True, num_items=9)
    ignite.update((preds, target))
    for per_query in (tm.compute_per_query(), ignite.compute_per_query()):
        assert set(per_query) == {"ndcg@3"}
        torch.testing.assert_close(per_query["ndcg@3"], expected["ndcg@3"], rtol=0, atol=1e-12)
    assert "coverage@3" in tm.compute()
