"""Time ``rank_metrics`` against a bare ``torch.topk`` on the same scores.

Every @k metric (hit_rate, mrr, precision, recall, f1, map, ndcg, fall_out)
at k = 1, 5, 10, 20, 50, 100 in one call, for three target layouts and every
tie policy, with and without ``validate_args``. The time is the median of
several runs after a warm-up, and is printed as a ratio to
``torch.topk(preds, 100)`` (the least any exact top-100 metric has to do),
timed alternately with it so that a change of load hits both alike. Three
copies of the scores are used in turn, so the package's reuse of the last
batch's ranking never answers a timed call.

Targets: dense layouts within 1.5x of topk, item-index targets within 1.0x.

    python benchmarks/bench_kernel.py                  # Q=1024, N=20000
    python benchmarks/bench_kernel.py --quick          # small smoke run (CI)
    python benchmarks/bench_kernel.py --device cuda --queries 4096
    python benchmarks/bench_kernel.py --score-levels 50   # scores with many ties
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ranking_plugins import rank_metrics

METRICS = ("hit_rate", "mrr", "precision", "recall", "f1", "map", "ndcg", "fall_out")
KS = (1, 5, 10, 20, 50, 100)
TIES = ("average", "first", "pessimistic", "optimistic")
LAYOUTS = ("dense bool", "dense float", "indices")
TARGET_RATIO = {"dense bool": 1.5, "dense float": 1.5, "indices": 1.0}


@dataclass
class Row:
    layout: str
    ties: str
    validate: bool
    ms: float
    topk_ms: float

    @property
    def ratio(self) -> float:
        return self.ms / self.topk_ms

    @property
    def target(self) -> float:
        return TARGET_RATIO[self.layout]

    @property
    def ok(self) -> bool:
        return self.ratio <= self.target


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", "-q", type=int, default=1024, help="Q, rows (default 1024)")
    parser.add_argument("--items", "-n", type=int, default=20000, help="N, items per row")
    parser.add_argument("--relevant", type=int, default=5, help="relevant items per row")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs (median is reported)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs first")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    parser.add_argument(
        "--dtype", default="float32", choices=["float16", "bfloat16", "float32", "float64"]
    )
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument(
        "--score-levels",
        type=int,
        default=0,
        help="round scores to this many distinct values (0: continuous, no ties)",
    )
    parser.add_argument("--ties", nargs="+", choices=TIES, default=list(TIES))
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and few repeats: a smoke run for CI"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit with status 1 if a row misses its target"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.items, args.repeats, args.warmup = 64, 2000, 3, 1
    return args


def make_inputs(args: argparse.Namespace) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    device = torch.device(args.device)
    gen = torch.Generator().manual_seed(args.seed)
    preds = torch.randn(args.queries, args.items, generator=gen)
    if args.score_levels > 0:
        preds = torch.floor((preds.clamp(-3, 3) + 3) / 6 * (args.score_levels - 1))
    preds = preds.to(device=device, dtype=getattr(torch, args.dtype))
    relevant = torch.rand(args.queries, args.items, generator=gen).argsort(dim=1)
    item_ids = relevant[:, : args.relevant].contiguous()
    dense = torch.zeros(args.queries, args.items, dtype=torch.bool)
    dense.scatter_(1, item_ids, True)
    targets = {
        "dense bool": dense.to(device),
        "dense float": dense.to(device=device, dtype=torch.float32),
        "indices": item_ids.to(device),
    }
    return preds, targets


def paired_ms(
    fn: Callable[[], object],
    baseline: Callable[[], object],
    device: torch.device,
    repeats: int,
    warmup: int,
) -> tuple[float, float]:
    """Median milliseconds of ``fn`` and of ``baseline``, timed alternately.

    Interleaving the two keeps their ratio honest on a machine whose load
    changes while the benchmark runs.
    """

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def timed(f: Callable[[], object]) -> float:
        sync()
        start = time.perf_counter()
        f()
        sync()
        return time.perf_counter() - start

    for _ in range(warmup):
        fn()
        baseline()
    fn_times, base_times = [], []
    for _ in range(repeats):
        base_times.append(timed(baseline))
        fn_times.append(timed(fn))
    return 1000.0 * statistics.median(fn_times), 1000.0 * statistics.median(base_times)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    preds, targets = make_inputs(args)
    topk_k = min(max(KS), args.items)
    # The package reuses the last batch's ranking for the same scores: three
    # score tensors in turn, so that every timed call ranks.
    score_tensors = itertools.cycle([preds, preds.clone(), preds.clone()])

    def topk() -> object:
        return torch.topk(preds, topk_k)

    rows: list[Row] = []
    for layout in args.layouts:
        target = targets[layout]
        for ties in args.ties:
            for validate in (False, True):

                def call(
                    target: torch.Tensor = target, ties: str = ties, validate: bool = validate
                ) -> object:
                    return rank_metrics(
                        next(score_tensors),
                        target,
                        metrics=METRICS,
                        top_k=KS,
                        ties=ties,
                        validate_args=validate,
                    )

                ms, topk_ms = paired_ms(call, topk, device, args.repeats, args.warmup)
                rows.append(Row(layout, ties, validate, ms, topk_ms))

    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"rank_metrics: {len(METRICS)} metrics x ks {KS}; Q={args.queries}, N={args.items}, "
        f"{args.relevant} relevant/row, {args.dtype}, device={device_name}, "
        f"threads={torch.get_num_threads()}, torch {torch.__version__}"
        + (f", score levels={args.score_levels}" if args.score_levels else "")
    )
    print(
        f"baseline torch.topk(preds, {topk_k}), timed alternately with each row; "
        f"medians of {args.repeats} runs after {args.warmup} warm-up"
    )
    if args.quick:
        print("--quick: sizes too small for the ratios to mean much; a smoke run only")
    print()
    header = (
        f"{'layout':<12} {'ties':<12} {'validate':<9} {'ms':>9} {'topk ms':>8} "
        f"{'x topk':>7} {'target':>7}  ok"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        target = f"<={row.target:.1f}"
        print(
            f"{row.layout:<12} {row.ties:<12} {row.validate!s:<9} {row.ms:>9.2f} "
            f"{row.topk_ms:>8.2f} {row.ratio:>7.2f} {target:>7}  {'yes' if row.ok else 'NO'}"
        )
    missed = [row for row in rows if not row.ok]
    print(f"\n{len(rows) - len(missed)} of {len(rows)} rows within target")
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
