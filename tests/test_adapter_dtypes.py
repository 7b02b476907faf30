"""The adapters' state keeps its own dtypes whatever is done to the module.

* The running sums are float64 (SPEC section 4, "Aggregation") even after
  ``.to(torch.bfloat16)``, ``.half()``, ``.type(...)`` or ``set_dtype(...)`` --
  what Lightning's ``precision="bf16-true"`` does to a module's metrics.
* The grouped layout of the TorchMetrics adapter keeps every score exactly:
  integer scores above 2^53 (nanosecond timestamps) are not rounded to float64.

References are an uncast metric on the same batches or
:func:`ranking_plugins.rank_metrics`; equality is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

import ranking_plugins
from ranking_plugins import torchmetrics as rp

Cast = Callable[[rp.BaseRankingMetric], Any]


def _inside_a_module(cast: Callable[[torch.nn.Module], Any]) -> Cast:
    """Apply ``cast`` to a module holding the metric (as a LightningModule would)."""

    def apply(metric: rp.BaseRankingMetric) -> None:
        holder = torch.nn.Module()
        holder.metric = metric
        cast(holder)

    return apply


CASTS: dict[str, Cast] = {
    "to(bfloat16)": lambda m: m.to(torch.bfloat16),
    "to(float16)": lambda m: m.to(torch.float16),
    "to(cpu, bfloat16)": lambda m: m.to("cpu", torch.bfloat16),
    "half()": lambda m: m.half(),
    "bfloat16()": lambda m: m.bfloat16(),
    "type(float16)": lambda m: m.type(torch.float16),
    "set_dtype(float16)": lambda m: m.set_dtype(torch.float16),
    "set_dtype(bfloat16)": lambda m: m.set_dtype(torch.bfloat16),
    "set_dtype(float32)": lambda m: m.set_dtype(torch.float32),
    "module.to(bfloat16)": _inside_a_module(lambda h: h.to(torch.bfloat16)),
    "module.half()": _inside_a_module(lambda h: h.half()),
    "module.to(float16)": _inside_a_module(lambda h: h.to(torch.float16)),
}


def dense_batches(count: int, seed: int = 0) -> list[tuple[Tensor, Tensor]]:
    """``count`` batches of 4 queries over 50 items, one relevant item id each."""
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(4, 50, generator=g), torch.randint(0, 50, (4,), generator=g))
        for _ in range(count)
    ]


def assert_identical(ours: Any, expected: Any) -> None:
    """Same keys, same dtype (float64), same bits."""
    if isinstance(expected, dict):
        assert isinstance(ours, dict) and list(ours) == list(expected)
        for key in expected:
            assert_identical(ours[key], expected[key])
        return
    assert ours.dtype == torch.float64 == expected.dtype
    assert torch.equal(ours, expected) or (ours.isnan() & expected.isnan()).all(), (
        ours,
        expected,
    )


def state_dtypes(metric: rp.BaseRankingMetric) -> dict[str, torch.dtype]:
    out: dict[str, torch.dtype] = {}
    for name in metric._defaults:
        value = getattr(metric, name)
        tensors = value if isinstance(value, list) else [value]
        for tensor in tensors:
            assert out.setdefault(name, tensor.dtype) == tensor.dtype, name
    return out


# ----------------------------------------------------------- TorchMetrics sums


@pytest.mark.parametrize("cast", list(CASTS))
def test_sums_stay_float64_after_a_cast(cast: str) -> None:
    """1200 queries: a bfloat16 count stops at 256, a float16 one at 2048; the
    metric's own sums are not touched, so the result is bit for bit the uncast one."""
    data = dense_batches(300)
    metric = rp.RankingMetrics(["mrr", "hit_rate", "ndcg"], top_k=[1, 10])
    before = state_dtypes(metric)
    CASTS[cast](metric)
    assert state_dtypes(metric) == before
    reference = rp.RankingMetrics(["mrr", "hit_rate", "ndcg"], top_k=[1, 10])
    for preds, target in data:
        metric.update(preds, target)
        reference.update(preds, target)
    assert state_dtypes(metric) == before
    assert_identical(metric.compute(), reference.compute())
    assert_identical(metric.compute_standard_error(), reference.compute_standard_error())


@pytest.mark.parametrize("cast", ["to(bfloat16)", "half()", "set_dtype(float16)"])
def test_mrr_of_the_issue_after_a_cast(cast: str) -> None:
    """The issue's case: ``MRR(top_k=10)`` over 1000 batches after the cast."""
    data = dense_batches(1000, seed=1)
    metric, reference = rp.MRR(top_k=10), rp.MRR(top_k=10)
    CASTS[cast](metric)
    for preds, target in data:
        metric.update(preds, target)
        reference.update(preds, target)
    assert_identical(metric.compute(), reference.compute())


@pytest.mark.parametrize("cast", list(CASTS))
def test_cast_mid_epoch_and_after_compute(cast: str) -> None:
    """A cast between updates changes neither the sums so far nor a cached result."""
    data = dense_batches(400, seed=2)
    metric, reference = rp.MRR(top_k=10), rp.MRR(top_k=10)
    for preds, target in data[:300]:
        metric.update(preds, target)
        reference.update(preds, target)
    first = metric.compute()
    CASTS[cast](metric)
    assert_identical(metric.compute(), first)  # the cached result
    for preds, target in data[300:]:
        metric.update(preds, target)
        reference.update(preds, target)
    assert_identical(metric.compute(), reference.compute())


@pytest.mark.parametrize("cast", list(CASTS))
def test_grouped_states_are_not_cast(cast: str) -> None:
    """Scores that differ only in float64 and query ids above 2048 survive a cast
    (the grouped layout keeps its entries until ``compute``)."""
    preds = torch.tensor([1.0, 1.0 + 2**-30, 2.0 + 2**-40, 2.0, 0.5], dtype=torch.float64)
    target = torch.tensor([0, 1, 1, 0, 1])
    indexes = torch.tensor([5000, 5000, 5001, 5001, 5001])
    metric = rp.RankingMetrics(["mrr", "ndcg"], top_k=[1, 3])
    metric.update(preds[:3], target[:3], indexes=indexes[:3])
    CASTS[cast](metric)
    metric.update(preds[3:], target[3:], indexes=indexes[3:])
    reference = ranking_plugins.rank_metrics(
        preds, target, ["mrr", "ndcg"], [1, 3], indexes=indexes, gain="linear"
    )
    assert_identical(metric.compute(), reference)
    assert float(metric.compute()["mrr@1"]) == 1.0


def test_a_collection_cast_keeps_every_member_in_float64() -> None:
    from torchmetrics import MetricCollection

    data = dense_batches(300, seed=3)
    members = {"mrr": rp.MRR(top_k=10), "hit_rate": rp.HitRate(top_k=10)}
    collection = MetricCollection(members).to(torch.bfloat16)
    for preds, target in data:
        collection.update(preds, target)
    result = collection.compute()
    for name, cls in (("mrr", rp.MRR), ("hit_rate", rp.HitRate)):
        reference = cls(top_k=10)
        for preds, target in data:
            reference.update(preds, target)
        assert_identical(result[name], reference.compute())


def test_a_low_precision_state_dict_is_loaded_as_float64() -> None:
    """A checkpoint written while the sums were bfloat16 (before this fix) or
    by hand: the loaded state goes back to the storage dtypes."""
    data = dense_batches(10, seed=4)
    saved = rp.MRR(top_k=10)
    saved.persistent(True)
    for preds, target in data[:5]:
        saved.update(preds, target)
    state = {
        key: [t.to(torch.float32) for t in value]
        if isinstance(value, list)
        else value.to(torch.float32)
        for key, value in saved.state_dict().items()
    }
    restored = rp.MRR(top_k=10)
    restored.persistent(True)
    restored.load_state_dict(state)
    assert state_dtypes(restored) == state_dtypes(rp.MRR(top_k=10))
    reference = rp.MRR(top_k=10)
    for preds, target in data:
        reference.update(preds, target)
    for preds, target in data[5:]:
        restored.update(preds, target)
    assert restored.compute().dtype == torch.float64
    torch.testing.assert_close(restored.compute(), reference.compute(), rtol=1e-6, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_moves_still_move_the_states() -> None:
    data = dense_batches(300, seed=5)
    metric = rp.MRR(top_k=10).to("cuda", torch.bfloat16)
    assert all(d == torch.float64 for d in state_dtypes(metric).values() if d.is_floating_point)
    reference = rp.MRR(top_k=10)
    for preds, target in data:
        metric.update(preds.cuda().bfloat16(), target.cuda())
        reference.update(preds.bfloat16(), target)
    flat = (torch.tensor([3, 2**60 + 1, 2**60]), torch.tensor([0, 1, 0]), torch.tensor([7, 7, 7]))
    metric.update(*(t.cuda() for t in flat[:2]), indexes=flat[2].cuda())
    reference.update(flat[0], flat[1], indexes=flat[2])
    assert metric.device.type == "cuda"
    ours = metric.compute()
    assert ours.device.type == "cuda"
    torch.testing.assert_close(ours.cpu(), reference.compute(), rtol=0, atol=1e-15)
    metric.cpu()
    assert metric.device.type == "cpu"
    assert all(
        t.device.type == "cpu"
        for name in metric._defaults
        for t in (
            getattr(metric, name)
            if isinstance(getattr(metric, name), list)
            else [getattr(metric, name)]
        )
    )


def test_cpu_device_moves_keep_the_states() -> None:
    metric = rp.MRR(top_k=10)
    metric.update(*dense_batches(1)[0])
    before = metric.compute()
    metric.to("cpu").to(torch.device("cpu"), torch.bfloat16).cpu()
    assert metric.device == torch.device("cpu")
    assert_identical(metric.compute(), before)


# ------------------------------------------------------------ Lightning bf16


def test_bf16_true_trainer_logs_the_float64_value(tmp_path: Path) -> None:
    """A LightningModule holding ``ranking_plugins.torchmetrics.MRR`` under
    ``precision="bf16-true"``: Lightning casts the module (and so the metric) to
    bfloat16; the logged value is the float64 mean of the bfloat16 scores."""
    import lightning.pytorch as pl
    from lightning_helpers import NextItem, loader

    class WithMetric(NextItem):
        def __init__(self) -> None:
            super().__init__()
            self.mrr = rp.MRR(top_k=5)

        def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
            out = self._evaluate("validate", batch, dataloader_idx)
            self.mrr.update(out["preds"], out["target"], mask=out["mask"])
            self.log("val/mrr@5", self.mrr, on_epoch=True, batch_size=len(out["target"]))
            return out

    model = WithMetric()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        precision="bf16-true",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.validate(model, loader(seed=21, size=600, batch_size=100), verbose=False)
    assert model.layer.weight.dtype == torch.bfloat16  # the cast really happened
    records = [r for r in model.recorded if not r["sanity"]]
    assert len(records) == 6
    preds, target, mask = (torch.cat([r[k] for r in records]) for k in ("preds", "target", "mask"))
    assert preds.dtype == torch.bfloat16
    expected = ranking_plugins.rank_metrics(preds, target, ["mrr"], 5, mask=mask)["mrr@5"]
    logged = trainer.callback_metrics["val/mrr@5"]
    assert float(logged) == pytest.approx(float(expected), rel=1e-12, abs=0)
    assert state_dtypes(model.mrr)[model.mrr._sums_name] == torch.float64


# ---------------------------------------------------------------- Ignite sums


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_ignite_sums_stay_float64(dtype: torch.dtype) -> None:
    from ranking_plugins import ignite

    data = dense_batches(300, seed=6)
    metric, reference = ignite.MRR(top_k=10), ignite.MRR(top_k=10)
    for preds, target in data[:150]:
        metric.update((preds, target))
    state = metric.state_dict()
    (per_rank,) = state["__metric_state_per_rank"]
    per_rank["_sums"] = per_rank["_sums"].to(dtype)
    metric.load_state_dict(state)
    assert metric._sums.dtype == torch.float64
    for preds, target in data[150:]:
        metric.update((preds.to(dtype), target))
    for preds, target in data:
        reference.update((preds, target))
    assert metric._sums.dtype == torch.float64
    # the scores of the second half were cast, so only the dtype and the count are exact
    assert metric._sums[0].tolist() == reference._sums[0].tolist()


# ------------------------------------------------ TorchMetrics grouped scores

BIG = 2**60  # above 2^53: float64 can no longer tell BIG from BIG + 1


def test_grouped_integer_scores_above_2_53_are_exact() -> None:
    """The issue's case: int64 scores 2^60 and 2^60 + 1 (nanosecond timestamps)."""
    preds = torch.tensor([BIG, BIG + 1])
    target = torch.tensor([0, 1])
    indexes = torch.tensor([0, 0])
    names = ["mrr", "hit_rate", "ndcg", "map", "auc"]
    expected = ranking_plugins.rank_metrics(
        preds, target, names, [1, 2], indexes=indexes, gain="linear"
    )
    assert float(expected["mrr@1"]) == 1.0
    metric = rp.RankingMetrics(names, top_k=[1, 2])
    metric.update(preds, target, indexes=indexes)
    assert_identical(metric.compute(), expected)
    single = rp.MRR(top_k=1)
    single.update(preds, target, indexes=indexes)
    assert float(single.compute()) == 1.0


SCORE_DTYPES = [
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]


@pytest.mark.parametrize("dtype", SCORE_DTYPES, ids=str)
def test_grouped_scores_of_every_dtype_equal_rank_metrics(dtype: torch.dtype) -> None:
    """Queries spread over three updates, many ties; huge integers where they fit."""
    g = torch.Generator().manual_seed(7)
    indexes = torch.randint(0, 9, (60,), generator=g)
    small = torch.randint(0, 6, (60,), generator=g)
    if dtype == torch.int64:
        preds = BIG + small  # distinct only above 2^53
    elif dtype.is_floating_point:
        preds = (small.to(torch.float64) / 3).to(dtype)
    else:
        preds = small.to(dtype)
    target = torch.randint(0, 3, (60,), generator=g)
    names = ["mrr", "ndcg", "map", "auc", "precision"]
    metric = rp.RankingMetrics(names, top_k=[1, 3])
    for lo, hi in ((0, 13), (13, 14), (14, 60)):
        metric.update(preds[lo:hi], target[lo:hi], indexes=indexes[lo:hi])
    expected = ranking_plugins.rank_metrics(
        preds, target, names, [1, 3], indexes=indexes, gain="linear"
    )
    assert_identical(metric.compute(), expected)


def test_grouped_integer_scores_with_dense_batches_and_ignore_index() -> None:
    dense = dense_batches(2, seed=8)
    preds = torch.tensor([BIG + 2, BIG + 1, BIG, BIG + 3, 5])
    target = torch.tensor([0, 1, -1, 1, 0])
    indexes = torch.tensor([3, 3, 3, 4, 4])
    metric = rp.MRR(top_k=[1, 3], ignore_index=-1)
    metric.update(*dense[0])
    metric.update(preds, target, indexes=indexes)
    metric.update(*dense[1])
    keep = target != -1
    expected_flat = ranking_plugins.rank_metrics(
        preds[keep], target[keep], ["mrr"], [1, 3], indexes=indexes[keep], reduction="none"
    )
    expected_dense = ranking_plugins.rank_metrics(
        torch.cat([dense[0][0], dense[1][0]]),
        torch.cat([dense[0][1], dense[1][1]]),
        ["mrr"],
        [1, 3],
        reduction="none",
    )
    result = metric.compute()
    for k in (1, 3):
        values = torch.cat([expected_dense[f"mrr@{k}"], expected_flat[f"mrr@{k}"]])
        torch.testing.assert_close(result[f"mrr@{k}"], values.mean(), rtol=1e-15, atol=0)
    assert float(expected_flat["mrr@1"].mean()) == 0.5  # query 3: BIG + 1 ranks 2nd


@pytest.mark.parametrize("first", ["integer", "float"])
def test_grouped_integer_and_float_scores_are_refused_at_update(first: str) -> None:
    ints = (torch.tensor([BIG, BIG + 1]), torch.tensor([0, 1]), torch.tensor([0, 0]))
    floats = (torch.tensor([0.5, 0.25]), torch.tensor([1, 0]), torch.tensor([1, 1]))
    batches = [ints, floats] if first == "integer" else [floats, ints]
    metric = rp.MRR(top_k=2)
    metric.update(batches[0][0], batches[0][1], indexes=batches[0][2])
    before = metric.compute()
    with pytest.raises(ValueError, match=r"`preds`.*either floating-point or integer") as info:
        metric.update(batches[1][0], batches[1][1], indexes=batches[1][2])
    assert str(batches[1][0].dtype) in str(info.value)
    assert_identical(metric.compute(), before)  # the failed update left the state alone
    metric.update(batches[0][0], batches[0][1], indexes=batches[0][2])  # the same kind works
    # an empty batch of the other kind adds nothing and is not refused
    metric.update(batches[1][0][:0], batches[1][1][:0], indexes=batches[1][2][:0])
    # after a reset the other kind is welcome
    metric.reset()
    metric.update(batches[1][0], batches[1][1], indexes=batches[1][2])
    assert float(metric.compute()) == 1.0


def test_grouped_integer_and_float_scores_are_refused_at_compute_after_a_merge() -> None:
    """Another process's scores arrive at ``compute`` (``merge_state`` stands in
    for the gather): the mixture is refused there, naming ``preds``."""
    ints, floats = rp.MRR(top_k=2), rp.MRR(top_k=2)
    ints.update(torch.tensor([BIG, BIG + 1]), torch.tensor([0, 1]), indexes=torch.tensor([0, 0]))
    floats.update(torch.tensor([0.5, 0.25]), torch.tensor([1, 0]), indexes=torch.tensor([1, 1]))
    ints.merge_state(floats)
    with pytest.raises(ValueError, match=r"`preds`.*2 floating-point and 2 integer"):
        ints.compute()


def test_grouped_uint64_scores_are_refused() -> None:
    metric = rp.MRR(top_k=2)
    with pytest.raises(TypeError, match=r"`preds`.*uint64"):
        metric.update(
            torch.tensor([1, 2], dtype=torch.uint64), torch.tensor([0, 1]), torch.tensor([0, 0])
        )


def test_grouped_states_of_a_metric_that_never_updated() -> None:
    """What an idle process contributes to the gather: empty states of the storage dtypes."""
    metric = rp.MRR(top_k=2)
    dtypes = state_dtypes(metric)
    assert dtypes["flat_preds"] == torch.float64
    assert dtypes["flat_preds_int"] == torch.int64
    assert dtypes["flat_indexes"] == torch.int64
    metric.set_dtype(torch.float16)
    metric.reset()
    assert state_dtypes(metric) == dtypes
