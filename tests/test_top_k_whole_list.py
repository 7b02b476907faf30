"""``top_k`` with None among its cutoffs: the whole list beside them (``[10, None]``),
everywhere ``top_k`` is taken. The whole list's keys are the bare names, as with
``top_k=None``, after each metric's cutoffs; the numbers are those of two calls, one
with the cutoffs and one with ``top_k=None``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ranking_plugins import functional as F
from ranking_plugins import rank_metrics
from ranking_plugins import torchmetrics_functional as TF

METRICS = ["mrr", "ndcg", "precision", "r_precision"]


def _dense(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    preds = torch.randint(0, 5, (6, 9), generator=generator).float()  # ties
    target = torch.randint(0, 3, (6, 9), generator=generator)
    return preds, target


def _two_calls(preds, target, metrics, ks, **options) -> dict[str, torch.Tensor]:
    cut = rank_metrics(preds, target, metrics, ks, **options)
    whole = rank_metrics(preds, target, metrics, None, **options)
    keys = [
        key
        for metric in metrics
        for key in [k for k in cut if k.partition("@")[0] == metric]
        + [k for k in whole if k == metric]
    ]
    both = {**cut, **whole}
    return {key: both[key] for key in dict.fromkeys(keys)}


def _equal(found: dict, expected: dict) -> None:
    assert list(found) == list(expected)
    for key, value in expected.items():
        torch.testing.assert_close(torch.as_tensor(found[key]).double(), value.double())


@pytest.mark.parametrize("top_k", [[10, None], [None, 3, 1], (2, None, 2)])
def test_rank_metrics(top_k) -> None:
    preds, target = _dense()
    ks = sorted({k for k in top_k if k is not None})
    found = rank_metrics(preds, target, METRICS, top_k, empty_target_action="skip")
    _equal(found, _two_calls(preds, target, METRICS, ks, empty_target_action="skip"))
    assert list(found)[: len(ks) + 1] == [f"mrr@{k}" for k in ks] + ["mrr"]


def test_only_none_is_the_whole_list() -> None:
    preds, target = _dense(1)
    _equal(rank_metrics(preds, target, METRICS, [None]), rank_metrics(preds, target, METRICS, None))


def test_single_metric_functions_stack_in_the_callers_order() -> None:
    preds, target = _dense(2)
    stacked = F.mrr(preds, target, top_k=[None, 2])
    torch.testing.assert_close(stacked[..., 0], F.mrr(preds, target, top_k=None))
    torch.testing.assert_close(stacked[..., 1], F.mrr(preds, target, top_k=2))
    one = TF.retrieval_normalized_dcg(preds[0], target[0], top_k=[3, None])
    torch.testing.assert_close(
        one,
        torch.stack(
            [
                TF.retrieval_normalized_dcg(preds[0], target[0], top_k=3),
                TF.retrieval_normalized_dcg(preds[0], target[0]),
            ]
        ),
    )


@pytest.mark.parametrize("top_k", [[0, None], [None, "a"], [None, 2.0]])
def test_other_ks_are_still_refused(top_k) -> None:
    with pytest.raises((TypeError, ValueError), match="positive ints"):
        rank_metrics(*_dense(), ["mrr"], top_k)


def test_torchmetrics_classes() -> None:
    pytest.importorskip("torchmetrics")
    from ranking_plugins.torchmetrics import RankingMetrics, RetrievalMRR, RetrievalNormalizedDCG

    preds, target = _dense(3)
    indexes = torch.arange(6).repeat_interleave(9)
    both = RankingMetrics(METRICS, top_k=[4, None])
    both.update(preds, target)
    _equal(both.compute(), _two_calls(preds, target, METRICS, [4], gain="linear"))
    # the drop-in classes, grouped: RetrievalMRR (whole list) beside MRR@3 in one metric
    mrr = RetrievalMRR(top_k=[3, None])
    mrr.update(preds.flatten(), target.flatten(), indexes)
    separate = [RetrievalMRR(top_k=3), RetrievalMRR()]
    for metric in separate:
        metric.update(preds.flatten(), target.flatten(), indexes)
    assert mrr.compute() == {"mrr@3": separate[0].compute(), "mrr": separate[1].compute()}
    assert list(RetrievalNormalizedDCG(top_k=[None, 5, 2]).keys) == ["ndcg@2", "ndcg@5", "ndcg"]


def test_ignite_metrics() -> None:
    pytest.importorskip("ignite")
    from ignite.engine import Engine

    from ranking_plugins import ignite as rp

    preds, target = _dense(4)
    engine = Engine(lambda engine, batch: batch)
    rp.MRR(top_k=[2, None]).attach(engine, "mrr")
    rp.RankingMetrics(["ndcg", "precision"], top_k=[None, 2], prefix_keys=True).attach(engine, "r")
    engine.run([(preds[:3], target[:3]), (preds[3:], target[3:])])
    metrics = engine.state.metrics
    # Ignite's NDCG gain is exponential; the adapter's default
    expected = _two_calls(preds, target, ["mrr"], [2])
    assert metrics["mrr"] == pytest.approx([float(v) for v in expected.values()])
    expected = _two_calls(preds, target, ["ndcg", "precision"], [2], gain="exponential")
    for key, value in expected.items():
        assert metrics[f"r/{key}"] == pytest.approx(float(value)), key


def test_lightning_callback(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    import lightning.pytorch as pl
    from lightning_helpers import NextItem, loader

    from ranking_plugins.lightning import RankingMetricsCallback

    callback = RankingMetricsCallback(metrics=["mrr", "ndcg"], top_k=[3, None])
    model = NextItem()
    run = pl.Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=[callback],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    run.validate(model, loader(seed=5, size=10, batch_size=4), verbose=False)
    recorded = [r for r in model.recorded if not r["sanity"]]
    preds, target, mask = (torch.cat([r[k] for r in recorded]) for k in ("preds", "target", "mask"))
    cut = rank_metrics(preds, target, ["mrr", "ndcg"], 3, mask=mask, gain="linear")
    whole = rank_metrics(preds, target, ["mrr", "ndcg"], None, mask=mask, gain="linear")
    for key, value in {**cut, **whole}.items():
        assert float(run.callback_metrics[f"val/{key}"]) == pytest.approx(float(value)), key


@pytest.mark.parametrize("accelerator_paths", [False, True])
@pytest.mark.parametrize("ties", ["average", "first"])
@pytest.mark.parametrize("graded", [False, True])
def test_the_whole_list_read_at_its_last_place_gives_the_gathered_numbers(
    accelerator_paths: bool, ties: str, graded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every item ranked (no mask, no padding): the whole list's cutoff reads each prefix
    sum's last place as a view, the stacked sums' and the ideal DCG's too; gathered at
    the same cutoffs, the numbers are the same bits."""
    from ranking_plugins.batch_cache import last_batch
    from ranking_plugins.kernel import host_reads
    from ranking_plugins.kernel.statistics.list_stats import ListStats
    from ranking_plugins.kernel.statistics.rank_stats import RankStats

    metrics = ["hit_rate", "mrr", "precision", "recall", "map", "ndcg", "dcg", "r_precision"]
    preds, target = _dense(6)
    target = target if graded else (target > 1).long()
    target[0] = 0  # a query without a relevant item
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator_paths)
    ends: list[bool] = []
    at = RankStats.at

    def noted(self: RankStats, *args: object, **kwargs: object) -> object:
        cutoff = at(self, *args, **kwargs)  # type: ignore[arg-type]
        ends.append(self._list_end is not None)
        return cutoff

    monkeypatch.setattr(RankStats, "at", noted)
    found = rank_metrics(preds, target, metrics, None, ties=ties, reduction="none")
    assert ends and all(ends)  # read at the lists' last place
    monkeypatch.setattr(RankStats, "at", ListStats.at)  # every cutoff gathered
    last_batch.clear()
    gathered = rank_metrics(preds, target, metrics, None, ties=ties, reduction="none")
    for key, value in gathered.items():
        assert torch.equal(found[key].view(torch.int64), value.view(torch.int64)), key
