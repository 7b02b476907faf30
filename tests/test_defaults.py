"""One set of defaults: the package's gain is the command's, and each adapter keeps its
library's.

The package's default gain is linear (gain = grade), as in trec_eval, ranx, TorchMetrics
and scikit-learn, so ``rank_metrics`` and ``ranking-plugins evaluate`` give the same
numbers on the same data. Ignite's NDCG defaults to the exponential gain; its adapter
keeps that default and the TorchMetrics adapter TorchMetrics' linear one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from trec_files import random_collection, read_qrels, read_run, to_tensors

from ranking_plugins import rank_metrics
from ranking_plugins.options import Options

#: the measures that read the gain option (err's R = (2^g - 1) / 2^g_max reads the
#: grade), at 10 and over the whole list
AT_10, WHOLE = ["ndcg", "dcg"], ["ndcg", "g", "ndcg_rel", "rndcg"]
KEYS = [f"{m}@10" for m in AT_10] + WHOLE


def _command(qrels: Path, run: Path) -> dict[str, Any]:
    """``ranking-plugins evaluate --per-query --format json`` as a process, defaults only."""
    args = [sys.executable, "-m", "ranking_plugins", "evaluate", str(qrels), str(run)]
    args += [arg for key in KEYS for arg in ("-m", key)]
    done = subprocess.run(
        [*args, "--per-query", "--format", "json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _assert_python_equals_the_command(qrels: Path, run: Path) -> None:
    """rank_metrics with its defaults on the dense matrix of the files: the command's
    numbers to the bit, per query and mean."""
    document = _command(qrels, run)
    qids, preds, target, mask = to_tensors(read_qrels(qrels), read_run(run))
    assert list(document["per_query"]) == qids
    assert document["options"]["gain"] == Options().gain == "linear"
    per_query = rank_metrics(preds, target, WHOLE, None, mask=mask, reduction="none")
    per_query.update(rank_metrics(preds, target, AT_10, 10, mask=mask, reduction="none"))
    means = rank_metrics(preds, target, WHOLE, None, mask=mask)
    means.update(rank_metrics(preds, target, AT_10, 10, mask=mask))
    for key in KEYS:
        got = [document["per_query"][q][key] for q in qids]
        if key == "rndcg":  # its sums in another order on the command's layout: ulps apart
            assert got == pytest.approx(per_query[key].tolist(), rel=1e-14, abs=0), key
            assert document["metrics"][key] == pytest.approx(means[key].item(), rel=1e-14)
            continue
        assert got == per_query[key].tolist(), key
        assert document["metrics"][key] == means[key].item(), key
    # the data is graded: the exponential gain is another number
    exponential = rank_metrics(preds, target, "ndcg", 10, mask=mask, gain="exponential")
    assert exponential["ndcg@10"].item() != document["metrics"]["ndcg@10"]


def test_python_default_is_the_commands_on_trec_eval_collection(trec_eval_dir: Path) -> None:
    """qrels.rel_level has grades -1 to 4: 0.2656 by both, not 0.26xx by one only."""
    _assert_python_equals_the_command(
        trec_eval_dir / "qrels.rel_level", trec_eval_dir / "results.test"
    )


def test_python_default_is_the_commands_with_ties(tmp_path: Path) -> None:
    """Graded judgments (negative grades included), tied scores, unjudged and unretrieved
    documents."""
    qrels, run, *_ = random_collection(5, queries=12, grades=(-1, 0, 0, 1, 2, 3, 4))
    qrels_path, run_path = tmp_path / "graded.qrels", tmp_path / "tied.run"
    qrels_path.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    )
    # scores 0..142 in steps of 1/7, cut to 8 values: many ties within a query
    run_path.write_text(
        "".join(
            f"{q} Q0 {d} 0 {int(s) // 18} tied\n"
            for q, docs in run.items()
            for d, s in docs.items()
        )
    )
    _assert_python_equals_the_command(qrels_path, run_path)


def _graded(seed: int, queries: int = 12, items: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    """Tie-free scores (each library's tie rule aside) and grades 0 to 4."""
    g = torch.Generator().manual_seed(seed)
    preds = torch.randperm(queries * items, generator=g).view(queries, items).double()
    target = torch.randint(0, 5, (queries, items), generator=g)
    return preds / (queries * items), target


def test_ignite_adapter_keeps_ignites_exponential_default() -> None:
    from ignite.metrics import rec_sys as ignite_rec_sys

    from ranking_plugins import ignite as ignite_adapter

    preds, target = _graded(0)
    theirs, ours = ignite_rec_sys.NDCG([1, 3, 5]), ignite_adapter.NDCG([1, 3, 5])
    for metric in (theirs, ours):
        metric.reset()
        metric.update((preds, target))
    assert ours._request.options.gain == "exponential"
    assert ours.compute() == pytest.approx(theirs.compute(), rel=1e-6)  # Ignite's float32
    # and not the package's default: Ignite's rules, the package's gain
    package = rank_metrics(
        preds, target, "ndcg", [1, 3, 5], relevance_threshold=1.0, empty_target_action="skip"
    )
    assert ours.compute() != pytest.approx([v.item() for v in package.values()], rel=1e-3)


def test_torchmetrics_adapter_keeps_torchmetrics_linear_default() -> None:
    from torchmetrics import retrieval

    from ranking_plugins import torchmetrics as torchmetrics_adapter

    preds, target = _graded(1)
    indexes = torch.arange(preds.shape[0]).repeat_interleave(preds.shape[1])
    theirs = retrieval.RetrievalNormalizedDCG(top_k=5)
    ours = torchmetrics_adapter.NDCG(top_k=5)
    for metric in (theirs, ours):
        metric.update(preds.flatten(), target.flatten(), indexes=indexes)
    assert ours.request.options.gain == "linear"
    assert ours.compute().item() == pytest.approx(theirs.compute().item(), rel=1e-6)
    assert ours.compute() == rank_metrics(preds, target, "ndcg", 5)["ndcg@5"]
    exponential = rank_metrics(preds, target, "ndcg", 5, gain="exponential")["ndcg@5"]
    assert ours.compute() != pytest.approx(exponential.item(), rel=1e-3)


def test_lightning_callback_follows_the_package_default(tmp_path: Path) -> None:
    import lightning.pytorch as pl
    from torch.utils.data import DataLoader, TensorDataset

    from ranking_plugins.lightning import RankingMetricsCallback

    preds, target = _graded(2)

    class Graded(pl.LightningModule):
        """Returns the fixed scores and grades of the rows it is given."""

        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> Any:
            (rows,) = batch
            return {"preds": preds[rows], "target": target[rows]}

    callback = RankingMetricsCallback(metrics="ndcg", top_k=5)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        callbacks=[callback],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=str(tmp_path),
    )
    rows = DataLoader(TensorDataset(torch.arange(preds.shape[0])), batch_size=5)
    trainer.validate(Graded(), rows, verbose=False)
    logged = callback.last_results["validate"]["val/ndcg@5"].item()
    assert logged == pytest.approx(rank_metrics(preds, target, "ndcg", 5)["ndcg@5"].item())
    exponential = rank_metrics(preds, target, "ndcg", 5, gain="exponential")["ndcg@5"]
    assert logged != pytest.approx(exponential.item(), rel=1e-3)
