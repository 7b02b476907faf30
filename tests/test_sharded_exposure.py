"""The exposure metrics refuse a sharded catalogue with a clear error (not yet computed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from ranking_plugins import ShardedEmbeddingScores, rank_metrics


@pytest.fixture
def one_process_group(tmp_path: Path):  # type: ignore[no-untyped-def]
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("metric", ["coverage", "novelty", "diversity"])
def test_exposure_metrics_name_the_sharded_input(one_process_group: None, metric: str) -> None:
    generator = torch.Generator().manual_seed(0)
    scores = ShardedEmbeddingScores(
        torch.randn(3, 4, generator=generator),
        torch.randn(6, 4, generator=generator),
        item_offset=0,
        catalogue_size=6,
    )
    inputs = {
        "novelty": {"item_popularity": torch.ones(6)},
        "diversity": {"item_categories": torch.arange(6) % 2},
    }.get(metric, {})
    with pytest.raises(ValueError, match="ShardedEmbeddingScores"):
        rank_metrics(scores, torch.tensor([0, 1, 2]), metrics=[metric], top_k=2, **inputs)
    # the accuracy metrics still work in the same group
    values = rank_metrics(scores, torch.tensor([0, 1, 2]), metrics=["hit_rate"], top_k=2)
    assert values["hit_rate@2"].isfinite().all()
