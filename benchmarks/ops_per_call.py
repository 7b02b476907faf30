"""How many ATen operations one call dispatches: the host's share of a GPU call.

On an accelerator each operation is at least one kernel launch, and a call of a
few dozen milliseconds of device work can spend most of its time launching.
The count is read on the CPU, where it is deterministic, with the kernel's
accelerator paths (``host_reads.ACCELERATOR_PATHS_ON_CPU = True``: the paths a
GPU takes, which read no value on the host) and without them (the CPU's own
paths). Each call runs on fresh tensors with the batch cache cleared, default
arguments, after one untimed warm-up call; a ``TorchDispatchMode`` counts every
operation that reaches ATen::

    python benchmarks/ops_per_call.py            # the table, full sizes
    python benchmarks/ops_per_call.py --quick    # small sizes (CI smoke; same counts)
    python benchmarks/ops_per_call.py --check    # exit 1 if a row misses its target

The targets apply to the accelerator paths.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ranking_plugins import rank_metrics
from ranking_plugins.batch_cache import last_batch
from ranking_plugins.kernel import host_reads

KS = (1, 5, 10, 20, 50, 100)
ALL_METRICS = ("hit_rate", "mrr", "ndcg", "map", "precision", "recall")
NEXT_ITEM_METRICS = ("hit_rate", "mrr", "ndcg")


class OpCounter(TorchDispatchMode):
    """Counts the ATen operations dispatched while it is active, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        self.ops[str(func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))


@dataclass
class Row:
    """One call of the table: its name, its target (accelerator paths) and how to run it.

    ``prepare`` builds the call's inputs (fresh tensors each time it is called),
    uncounted, and returns the call itself.
    """

    name: str
    target: int
    prepare: Callable[[], Callable[[], object]]


def rows(quick: bool, validate_args: bool = True) -> list[Row]:
    """The table's calls; ``validate_args=False``: the same calls as a GPU training loop
    makes them (the targets are for the defaults)."""
    gen = torch.Generator().manual_seed(0)
    q, n = (64, 2000) if quick else (1024, 20000)
    relevant = torch.rand(q, n, generator=gen).topk(5, dim=1).indices
    target = torch.zeros(q, n).scatter_(1, relevant, 1.0)
    q2, n2 = (64, 5000) if quick else (1024, 100000)
    item = torch.randint(n2, (q2,), generator=gen)
    graded = torch.rand(q, n, generator=gen).topk(20, dim=1).indices
    levels = torch.randint(1, 5, graded.shape, generator=gen)
    grades = torch.zeros(q, n).scatter_(1, graded, levels.float())
    nq, nc, nu = (1000, 100, 5) if quick else (10000, 100, 50)
    scores = torch.randn(nq, nc, generator=gen)
    grouped_target = (torch.rand(nq, nc, generator=gen) < 0.05).long()
    indexes = torch.arange(nq).unsqueeze(1).expand(nq, nc)
    per = nq // nu
    batches = [
        (
            scores[i : i + per].flatten(),
            grouped_target[i : i + per].flatten(),
            indexes[i : i + per].flatten(),
        )
        for i in range(0, nq, per)
    ]

    def fresh(rows_: int, cols: int) -> torch.Tensor:
        return torch.randn(rows_, cols, generator=gen)

    def dense(metrics: tuple[str, ...] | str, ks: tuple[int, ...] | int) -> Callable[[], object]:
        preds = fresh(q, n)
        return lambda: rank_metrics(preds, target.clone(), metrics, ks, validate_args=validate_args)

    def ids() -> Callable[[], object]:
        preds = fresh(q2, n2)
        return lambda: rank_metrics(
            preds, item.clone(), NEXT_ITEM_METRICS, KS, validate_args=validate_args
        )

    def graded_ndcg() -> Callable[[], object]:
        preds = fresh(q, n)
        return lambda: rank_metrics(preds, grades.clone(), "ndcg", 10, validate_args=validate_args)

    def grouped_metric() -> Any:
        from ranking_plugins.torchmetrics import RankingMetrics

        return RankingMetrics(["mrr", "ndcg", "map"], validate_args=validate_args)

    def grouped_compute() -> Callable[[], object]:
        metric = grouped_metric()
        for p, t, i in batches:
            metric.update(p.clone(), t.clone(), indexes=i.clone())
        return metric.compute

    def grouped_update() -> Callable[[], object]:
        metric = grouped_metric()
        p, t, i = (x.clone() for x in batches[0])
        return lambda: metric.update(p, t, indexes=i)

    shape = f"({q}, {n})"
    return [
        Row(f"W1: dense binary {shape}, 6 metrics x 6 ks", 120, lambda: dense(ALL_METRICS, KS)),
        Row(f"hit_rate@10 alone, {shape}", 50, lambda: dense("hit_rate", 10)),
        Row(f"W2: item ids ({q2}, {n2}), HR/MRR/NDCG x 6 ks", 100, ids),
        Row(f"W4: ndcg@10, float grades 0..4, {shape}", 80, graded_ndcg),
        Row(f"W3: TorchMetrics grouped, {nu} updates, compute", 120, grouped_compute),
        Row("W3: one update", 16, grouped_update),
    ]


def count(row: Row, accelerator_paths: bool) -> Counter[str]:
    """The operations of one call of ``row``, after one warm-up call on other tensors."""
    saved = host_reads.ACCELERATOR_PATHS_ON_CPU
    host_reads.ACCELERATOR_PATHS_ON_CPU = accelerator_paths
    try:
        last_batch.clear()
        row.prepare()()  # warm-up: lazy imports, first-call caches
        call = row.prepare()
        last_batch.clear()
        with OpCounter() as counter:
            call()
        last_batch.clear()
        return counter.ops
    finally:
        host_reads.ACCELERATOR_PATHS_ON_CPU = saved


def table(
    quick: bool, verbose: bool = False, validate_args: bool = True
) -> tuple[list[str], list[str]]:
    """The table's lines and the rows that miss their targets."""
    lines = [
        "| call | ATen ops, accelerator paths | target | ATen ops, CPU paths |",
        "| --- | ---: | ---: | ---: |",
    ]
    missed = []
    for row in rows(quick, validate_args):
        on_accelerator = count(row, True)
        on_cpu = count(row, False)
        total = sum(on_accelerator.values())
        mark = "" if total <= row.target else " (missed)"
        if mark:
            missed.append(f"{row.name}: {total} > {row.target}")
        lines.append(f"| {row.name} | {total}{mark} | ≤ {row.target} | {sum(on_cpu.values())} |")
        if verbose:
            print(row.name, dict(on_accelerator.most_common()), file=sys.stderr)
    return lines, missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument(
        "--verbose", action="store_true", help="also print each row's operations by name"
    )
    parser.add_argument(
        "--unchecked",
        action="store_true",
        help="every call with validate_args=False, as in a GPU training loop "
        "(the targets are for the defaults: --check does not fail on them)",
    )
    args = parser.parse_args(argv)
    lines, missed = table(args.quick, args.verbose, validate_args=not args.unchecked)
    if args.unchecked:
        missed = []
    print("\n".join(lines))
    for miss in missed:
        print(f"MISS: {miss}", file=sys.stderr)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
