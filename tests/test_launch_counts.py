"""The operations a call dispatches (each a kernel launch on an accelerator), and
the accelerator paths that cut them giving the CPU paths' numbers to the bit.

The counts are read on the CPU with the accelerator paths
(``host_reads.ACCELERATOR_PATHS_ON_CPU``), as ``benchmarks/ops_per_call.py``
reads them; each bound is the count that call has now, so a change that adds
operations to it shows here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import ranking_plugins.kernel as kernel
from ranking_plugins import rank_metrics
from ranking_plugins.batch_cache import last_batch
from ranking_plugins.kernel import host_reads

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import ops_per_call
from exact import assert_same_values

AT_K = ["hit_rate", "mrr", "precision", "recall", "f1", "map", "ndcg", "fall_out"]
WHOLE_LIST = ["auc", "r_precision", "mean_rank"]

#: the accelerator paths' operations of each call of ops_per_call's table (--quick sizes)
BOUNDS = {
    "W1: dense binary": 117,
    "hit_rate@10 alone": 44,
    "W2: item ids": 62,
    "W4: ndcg@10": 75,
    "W3: TorchMetrics grouped": 117,
    "W3: one update": 10,
}


@pytest.mark.parametrize("call", list(BOUNDS))
def test_operations_per_call_stay_within_their_bounds(call: str) -> None:
    (row,) = [row for row in ops_per_call.rows(quick=True) if row.name.startswith(call)]
    operations = ops_per_call.count(row, accelerator_paths=True)
    assert sum(operations.values()) <= BOUNDS[call], dict(operations.most_common())


def test_count_true_is_one_reduction_on_the_accelerator_paths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flags = torch.rand(5, 1000) < 0.5
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)
    with ops_per_call.OpCounter() as counter:
        counted = kernel.count_true(flags)
    assert torch.equal(counted, flags.sum(dim=1))
    assert sum(counter.ops.values()) == 1


@pytest.mark.parametrize("ties", kernel.TIES)
@pytest.mark.parametrize(
    "grades", ["binary float", "bool", "int", "float", "item ids", "one item id"]
)
def test_accelerator_paths_give_the_cpu_paths_bits(
    ties: str, grades: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ties across the cutoff, masks, rows without ties and rows of one score: every
    metric at every k, and the whole-list ones, equal to the bit on both paths."""
    generator = torch.Generator().manual_seed(3)
    for trial in range(12):
        q, n = int(torch.randint(1, 9, (), generator=generator)), 2 + trial * 3
        preds = torch.randint(0, 3, (q, n), generator=generator).float()
        if trial % 2:
            preds[: q // 2] = torch.randn(q // 2, n, generator=generator)  # no ties
        levels = torch.randint(0, 5, (q, n), generator=generator)
        target = {
            "binary float": (levels > 3).float(),
            "bool": levels > 3,
            "int": levels - 1,
            "float": levels.float() / 2,
            "item ids": torch.randint(-1, n, (q, 3), generator=generator),
            "one item id": torch.randint(-1, n, (q,), generator=generator),
        }[grades]
        ids = grades in ("item ids", "one item id")
        mask = torch.rand(q, n, generator=generator) < 0.8 if trial % 3 == 1 and not ids else None
        ks = sorted({1, 1 + trial % n, n, n + 2})
        metric_sets = [AT_K, ["hit_rate"], ["hit_rate", "mrr"], ["ndcg"]] + (
            [] if ids else [[*AT_K, *WHOLE_LIST]]
        )
        for gain in ("linear", "exponential"):
            for metrics in metric_sets:
                runs = []
                for accelerator in (False, True):
                    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator)
                    last_batch.clear()
                    runs.append(
                        rank_metrics(
                            preds,
                            target,
                            metrics,
                            ks,
                            mask=mask,
                            ties=ties,
                            gain=gain,
                            reduction="none",
                        )
                    )
                cpu, accelerator_run = runs
                assert_same_values(accelerator_run, cpu, f"(trial {trial}, {gain} gain)")


def _first_hit_problem(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores of few values (tie groups cut by the list's end, relevant members past it),
    -inf and inf scores, a row whose only relevant item scores -inf, rows of one score,
    rows without a relevant item."""
    generator = torch.Generator().manual_seed(5)
    q, n = 12, 30
    preds = torch.randint(0, 4, (q, n), generator=generator).float()
    preds[0] = torch.randn(n, generator=generator)  # no ties
    preds[1, :5] = float("-inf")
    preds[2, 7:] = float("inf")
    preds[3] = 1.0  # one group: the whole row
    target = (torch.rand(q, n, generator=generator) < 0.15).float()
    target[4] = 0.0  # nothing relevant
    target[5], preds[5, 9] = 0.0, float("-inf")
    target[5, 9] = 2.0  # its only relevant item scores -inf
    target[6] = 1.0  # everything relevant
    return preds.to(dtype), target


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("metrics", [["hit_rate"], ["mrr"], ["hit_rate", "mrr"]])
def test_first_hits_from_counts_give_the_ranked_lists_bits(
    dtype: torch.dtype, metrics: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request of first hits alone, on the accelerator paths, describes each list by
    its first relevant group (FirstHitStats, no ranking): the CPU paths' numbers to the
    bit, at every k (past the lists too), for every empty-target action and ``judged``."""
    from ranking_plugins.kernel.statistics.first_hits import FirstHitStats

    preds, target = _first_hit_problem(dtype)
    judged = torch.rand(preds.shape, generator=torch.Generator().manual_seed(6)) < 0.7
    made: list[int] = []
    init = FirstHitStats.__init__

    def counted(self: FirstHitStats, *args: object) -> None:
        made.append(1)
        init(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(FirstHitStats, "__init__", counted)
    for ks in ([1], [2, 5, 30], [3, 40]):
        for options in ({}, {"judged": judged}, {"empty_target_action": "neg"}):
            runs = []
            for accelerator in (False, True):
                monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", accelerator)
                last_batch.clear()
                runs.append(rank_metrics(preds, target, metrics, ks, reduction="none", **options))
            cpu, accelerator_run = runs
            assert_same_values(accelerator_run, cpu)
    assert len(made) == 9  # every accelerator run, none on the CPU paths


def test_first_hit_statistics_serve_a_later_request_of_other_metrics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The statistics of a hit_rate call, reused by a call of other metrics on the same
    tensors, rank the lists then: that call's numbers are a fresh ranking's."""
    from ranking_plugins.kernel.statistics import first_hits

    preds, target = _first_hit_problem(torch.float32)
    ranked: list[int] = []
    rank = first_hits.rank

    def counted(*args: object) -> object:
        ranked.append(1)
        return rank(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(first_hits, "rank", counted)
    monkeypatch.setattr(host_reads, "ACCELERATOR_PATHS_ON_CPU", True)
    last_batch.clear()
    for _ in range(2):  # kept for reuse from the second call on the same tensors
        rank_metrics(preds, target, "hit_rate", 10)
    assert not ranked
    got = rank_metrics(preds, target, [*AT_K, "err"], [1, 10], reduction="none")
    assert ranked  # served by the first-hit statistics, which ranked when read
    last_batch.clear()
    want = rank_metrics(preds, target, [*AT_K, "err"], [1, 10], reduction="none")
    assert_same_values(got, want)
    # the exposure metrics need the items of each list: ranked, not served by them
    last_batch.clear()
    for _ in range(2):
        rank_metrics(preds, target, "hit_rate", 10)
    exposure = rank_metrics(preds, target, ["hit_rate", "coverage"], 10, reduction="mean")
    assert exposure["coverage@10"].isfinite()


def _graded(dtype: torch.dtype, q: int = 6, n: int = 5200) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores with ties and grades 0..4 on long rows (the top grades found through blocks)."""
    generator = torch.Generator().manual_seed(8)
    preds = torch.randint(0, 50, (q, n), generator=generator).float()
    grades = torch.zeros(q, n, dtype=torch.long)
    grades[:, :20] = torch.randint(0, 5, (q, 20), generator=generator)
    grades[1] = 0  # nothing relevant
    grades[2, 3] = 4  # one relevant grade only
    columns = torch.randperm(n, generator=generator)
    return preds, grades[:, columns].to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("metrics", [["ndcg"], ["hit_rate"], ["hit_rate", "mrr", "ndcg"]])
def test_float_grades_take_the_integer_grades_path(
    dtype: torch.dtype, metrics: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Float grades (as Ignite and TorchMetrics users pass them) find their top grades
    through block maxima as integer grades do, with no walk counting R where no metric
    reads it; the numbers are the integer grades' to the bit."""
    from ranking_plugins.kernel.inputs import relevance

    walks: list[int] = []
    summary = relevance.DenseGrades.summary

    def counted(self: relevance.DenseGrades) -> relevance.GradeSummary | None:
        walks.append(1)
        return summary(self)

    preds, grades = _graded(dtype)
    monkeypatch.setattr(relevance.DenseGrades, "summary", counted)
    for gain in ("exponential", "linear"):
        last_batch.clear()
        got = rank_metrics(preds, grades, metrics, [1, 5, 10], gain=gain, reduction="none")
        assert not walks
        want = rank_metrics(preds, grades.long(), metrics, [1, 5, 10], gain=gain, reduction="none")
        assert_same_values(got, want, f"({gain} gain)")
    # a metric that reads R still counts it
    rank_metrics(preds, grades, ["recall"], 10)
    assert walks


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_top_grades_of_long_float_rows_from_blocks_equal_topk(dtype: torch.dtype) -> None:
    from ranking_plugins.kernel.inputs.relevance import through_blocks, top_grades

    generator = torch.Generator().manual_seed(4)
    grades = (torch.randint(-4, 9, (7, 6000), generator=generator) / 2).to(dtype)
    grades[0, 17] = float("nan")  # ranked first by topk, and by the blocks' maxima
    grades[1] = float("-inf")
    grades[2, 3000:] = float("inf")
    for k in (1, 3, 10):
        assert through_blocks(grades, k)
        got, want = top_grades(grades, k), torch.topk(grades, k, dim=1).values
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_a_first_call_imports_no_symbolic_algebra() -> None:
    """``torch.broadcast_shapes`` imports sympy on its first call (a quarter of a second
    or more): a user's first call of the package's metrics must not pay for it."""
    import subprocess

    code = (
        "import sys, torch\n"
        "from ranking_plugins import rank_metrics\n"
        "grades = (torch.rand(4, 50) < 0.2).float()\n"
        "rank_metrics(torch.randn(4, 50), grades, ['mrr', 'ndcg', 'precision', 'map'], [1, 5])\n"
        "rank_metrics(torch.randn(4, 50), torch.randint(0, 50, (4, 1)), ['ndcg'])\n"
        "print('sympy' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", done.stdout + done.stderr
