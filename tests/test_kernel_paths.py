"""The kernel's shortcuts give the same numbers as its slow paths.

For @k metrics the kernel takes a top-k selection and completes only the rows
whose boundary tie group was cut (on the CPU); elsewhere it completes every
row, and with a whole-list metric it sorts whole rows. All three must agree.
"""

from __future__ import annotations

import pytest
import torch

import ranking_plugins.kernel as kernel
from ranking_plugins import rank_metrics
from ranking_plugins.kernel import host_reads

AT_K = ["hit_rate", "mrr", "precision", "recall", "f1", "map", "ndcg", "fall_out"]


@pytest.mark.parametrize("ties", kernel.TIES)
@pytest.mark.parametrize("seed", range(4))
def test_selection_paths_agree(ties: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = torch.Generator().manual_seed(seed)
    for trial in range(40):
        q = int(torch.randint(1, 6, (), generator=generator))
        n = int(torch.randint(1, 12, (), generator=generator))
        # few distinct scores: ties everywhere, often across the cutoff
        preds = torch.randint(0, 3, (q, n), generator=generator).float()
        if trial % 3 == 0:
            preds[torch.rand(q, n, generator=generator) < 0.2] = float("-inf")
        target = torch.randint(-1, 3, (q, n), generator=generator)
        mask = torch.rand(q, n, generator=generator) < 0.7 if trial % 2 else None
        ks = sorted(set(torch.randint(1, n + 3, (3,), generator=generator).tolist()))
        options = {"mask": mask, "ties": ties, "reduction": "none"}

        monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", False)
        cut_rows_only = rank_metrics(preds, target, AT_K, ks, **options)
        monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)
        every_row = rank_metrics(preds, target, AT_K, ks, **options)
        whole_rows = rank_metrics(preds, target, [*AT_K, "auc"], ks, **options)
        for key, values in cut_rows_only.items():
            torch.testing.assert_close(values, every_row[key], rtol=0, atol=1e-12)
            torch.testing.assert_close(values, whole_rows[key], rtol=0, atol=1e-12)


def test_cut_tie_group_is_completed_from_the_whole_row() -> None:
    # 6 items tie; only 2 fit in the top 2. The relevant one has the highest index.
    preds = torch.zeros(1, 6)
    target = torch.tensor([[0, 0, 0, 0, 0, 1]])
    first = rank_metrics(preds, target, ["hit_rate"], 2, ties="first")
    optimistic = rank_metrics(preds, target, ["hit_rate"], 2, ties="optimistic")
    average = rank_metrics(preds, target, ["hit_rate"], 2, ties="average")
    assert first["hit_rate@2"].item() == 0.0
    assert optimistic["hit_rate@2"].item() == 1.0
    assert average["hit_rate@2"].item() == pytest.approx(2 / 6)


def test_count_true_counts_every_row() -> None:
    flags = torch.rand(7, 1000) < 0.5
    assert torch.equal(kernel.count_true(flags), flags.sum(dim=1))
    assert torch.equal(kernel.count_true(flags[:, :3]), flags[:, :3].sum(dim=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.float64])
@pytest.mark.parametrize("accelerator_paths", [False, True])
@pytest.mark.parametrize("threshold", [None, 2.0])
def test_ideal_gains_shortcut_for_rows_with_one_relevant_grade(
    dtype: torch.dtype,
    accelerator_paths: bool,
    threshold: float | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows whose relevant items share one grade skip the selection; others must not."""
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator_paths)
    generator = torch.Generator().manual_seed(11)
    rows = []
    for kind in range(6):
        row = (torch.rand(30, generator=generator) < 0.2).to(torch.float64)
        if kind == 1:
            row = row * 3  # one grade, not 1
        elif kind == 2:
            row[row > 0] = torch.randint(1, 4, (int(row.sum()),), generator=generator).double()
        elif kind == 3:
            row[0], row[1] = 2.0, -1.0  # a negative grade: not "no negative"
        elif kind == 4:
            row[:] = 0.0  # nothing relevant
        elif kind == 5:
            row[3], row[4] = 2.0, 2.0 - 2.0**-8  # nearly equal grades
        rows.append(row)
    mixed = torch.stack(rows).to(dtype)  # half the rows need the selection
    mostly_one_grade = torch.cat([mixed, mixed[:1].expand(20, -1)])  # a few rows do
    for grades in (mixed, mostly_one_grade):
        for gain in ("exponential", "linear"):
            relevance = kernel.DenseGrades(grades, kernel.GainRule(threshold, gain))
            count = relevance.relevant_count()
            got = relevance.ideal_gains(12, count)
            want = relevance._top_gains(grades, 12)
            torch.testing.assert_close(got, want, rtol=0, atol=0)
