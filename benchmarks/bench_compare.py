"""Time Fisher's randomization test of ``ranking_plugins.compare`` against ranx's.

The issue's case: 10,000 random sign flips over 10,000 queries, 10 systems,
each of the 9 others against a baseline. The same per-query values go to

* ``randomization_test``: the bare vectorised test (one matrix of sign flips
  times the (queries x 9) matrix of differences, in float64 blocks);
* ``compare(..., test="randomization")``: what a user runs, with its default
  arguments (it adds the bootstrap interval, 10,000 resamples, the effect
  sizes and Holm's correction);
* ranx's ``fisher_randomization_test`` (numba, parallel) on the 9 baseline
  pairs: the same work; and ``ranx.statistical_tests.compute_statistical_significance``
  as ``ranx.compare(stat_test="fisher")`` calls it, which tests all 90
  ordered pairs of the 10 systems (timed only without ``--skip-ranx-all``).

ranking_plugins is timed ``--repeats`` times (seeds 0, 1, ...: fresh flips each
time; min and median printed), ranx once, each after a warm-up (numba
compiles on its first call), and
the p-values of both are printed: they differ only by the random flips
(ranx counts ``count / n``, ranking_plugins ``(count + 1) / (n + 1)``).

    python benchmarks/bench_compare.py                    # the issue's case
    python benchmarks/bench_compare.py --quick            # seconds (CI smoke run)
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from ranking_plugins.compare import compare, randomization_test


def per_query_values(queries: int, systems: int, seed: int) -> torch.Tensor:
    """Values in [0, 1] on a grid of 1/20 (ties and zero differences, as real metrics)."""
    generator = torch.Generator().manual_seed(seed)
    base = torch.rand(queries, 1, generator=generator, dtype=torch.float64)
    effect = torch.linspace(0.0, 0.02, systems, dtype=torch.float64)
    noise = 0.15 * torch.randn(queries, systems, generator=generator, dtype=torch.float64)
    return ((base + effect + noise).clamp(0, 1) * 20).round() / 20


CPU_SECONDS: list[float] = []


def timed(function, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Wall seconds and the result; the CPU seconds (all threads) go to CPU_SECONDS."""
    cpu = time.process_time()
    start = time.perf_counter()
    result = function(*args, **kwargs)
    seconds = time.perf_counter() - start
    CPU_SECONDS.append(time.process_time() - cpu)
    return seconds, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5, help="timings of ranking_plugins")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--quick", action="store_true", help="1,000 x 1,000, ranx on 1 pair")
    parser.add_argument("--skip-ranx", action="store_true", help="time ranking_plugins only")
    parser.add_argument(
        "--skip-ranx-all", action="store_true", help="skip ranx's all-pairs significance"
    )
    args = parser.parse_args()
    if args.quick:
        args.queries, args.permutations, args.skip_ranx_all = 1000, 1000, True
        args.repeats = 1
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    values = per_query_values(args.queries, args.systems, seed=0)
    differences = values[:, 1:] - values[:, :1]
    names = [f"system_{i}" for i in range(args.systems)]
    systems = {name: values[:, i] for i, name in enumerate(names)}
    print(
        f"{args.queries} queries x {args.systems} systems (9 against a baseline), "
        f"{args.permutations} permutations; torch threads {torch.get_num_threads()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )

    randomization_test(differences[:100], permutations=100)  # warm-up
    runs = [
        timed(randomization_test, differences, args.permutations, seed)
        for seed in range(args.repeats)
    ]
    ours_p = runs[0][1]
    times = sorted(t for t, _ in runs)
    ours_s = times[len(times) // 2]
    cpu = sorted(CPU_SECONDS[-args.repeats :])
    print(
        f"ranking_plugins randomization_test:      {ours_s:8.3f} s median, {times[0]:.3f} s min "
        f"of {args.repeats}; CPU time (all threads) {cpu[len(cpu) // 2]:.3f} s median"
    )
    users = [
        timed(
            compare,
            systems,
            baseline=names[0],
            test="randomization",
            permutations=args.permutations,
        )
        for _ in range(max(1, args.repeats // 2))
    ]
    report = users[0][1]
    user_times = sorted(t for t, _ in users)
    median = user_times[len(user_times) // 2]
    print(
        f"ranking_plugins compare (defaults):      {median:8.3f} s median of {len(users)} "
        "(with the bootstrap interval, 10,000 resamples)"
    )

    first, second = torch.triu_indices(args.systems, args.systems, 1)
    all_pairs = values[:, second] - values[:, first]
    pairs_s, _ = timed(randomization_test, all_pairs, args.permutations, 0)
    print(
        f"ranking_plugins randomization_test, all {all_pairs.shape[1]} pairs: {pairs_s:8.3f} s "
        f"(compare without a baseline; ranx.compare tests each pair twice)"
    )

    if args.skip_ranx:
        return
    try:
        from ranx.statistical_tests import compute_statistical_significance
        from ranx.statistical_tests.fisher_randomization_test import fisher_randomization_test
    except ImportError:
        print("ranx is not installed: its timings are skipped")
        return
    x = values.numpy()
    pairs = 1 if args.quick else args.systems - 1
    fisher_randomization_test(x[:100, 0], x[:100, 1], 10, 0.05, 42)  # numba compiles here
    start = time.perf_counter()
    ranx_p = [
        fisher_randomization_test(x[:, 0], x[:, i + 1], args.permutations, 0.05, 42)[0]
        for i in range(pairs)
    ]
    ranx_s = time.perf_counter() - start
    print(
        f"ranx fisher_randomization_test, {pairs} pair(s): {ranx_s:8.3f} s  "
        f"(ratio ranx / ranking_plugins median {ranx_s / ours_s * (args.systems - 1) / pairs:.1f}x "
        "for the same 9 pairs)"
    )
    print(
        "p-values, ranx vs ranking_plugins:",
        ", ".join(f"{a:.4f}/{b:.4f}" for a, b in zip(ranx_p, ours_p.tolist(), strict=False)),
    )
    assert [r.p_value for r in report.rows] == ours_p.tolist()
    if not args.skip_ranx_all:
        scores = {name: {"m": x[:, i]} for i, name in enumerate(names)}
        start = time.perf_counter()
        compute_statistical_significance(names, scores, "fisher", args.permutations, 0.05, 42)
        all_s = time.perf_counter() - start
        print(
            f"ranx compare's significance step (all {args.systems * (args.systems - 1)} "
            f"ordered pairs): {all_s:8.3f} s"
        )


if __name__ == "__main__":
    main()
