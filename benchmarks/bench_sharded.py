"""A catalogue sharded across processes against one process holding it all (issue 18).

Simulated on one machine: ``--processes`` gloo processes on the CPU, each
holding ``--queries`` queries and one shard of an ``--items`` x ``--dim``
float32 item table (split as evenly as it goes), evaluate HR/MRR/NDCG@10 with
:class:`ranking_plugins.ShardedEmbeddingScores`; one process then evaluates
every process's queries against the whole table with
:class:`ranking_plugins.EmbeddingScores` (default arguments in both). Each
case runs in fresh processes; every repeat scores freshly made query
embeddings. Printed per case:

* time per batch: the median over repeats (sharded: the slowest process),
  and the CPU time of each process (less sensitive to a loaded machine);
* peak memory per process: the high-water mark (``VmHWM``, reset just before
  the call) minus the resident size just before it, the inputs already made;
* bytes per batch: the bytes of the tensors this process's collectives
  carried (``ranking_plugins.kernel.catalogue.sharded.traffic``), against the
  bytes of the gathered item table;
* whether each process's per-query values equal the one process's (they
  may differ only where BLAS rounds a float32 dot product differently in
  calls of other shapes and that reorders two nearly tied items; the tests,
  on exact scores, require equality).

``--exposure`` times coverage, gini and novelty@10 instead (the metrics of
item exposure, whose items cross processes: each shard's best 10 scores per
query, the cutoff score, and the items at or above it), through the
TorchMetrics ``RankingMetrics`` (an ``update`` per batch is timed; a
catalogue-level value needs every process's exposure, which ``compute``
sums once at the end), with one popularity vector for the whole catalogue
on every process. Its check compares the values ``compute`` gives after
every batch (warm-up included) on both sides: the largest difference.

    .venv/bin/python benchmarks/bench_sharded.py            # Q=1024/process, N=2,000,000, d=64
    .venv/bin/python benchmarks/bench_sharded.py --exposure # the same, coverage, gini, novelty
    .venv/bin/python benchmarks/bench_sharded.py --quick    # small smoke run (CI)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

METRICS, TOP_K = ["hit_rate", "mrr", "ndcg"], [10]
EXPOSURE_METRICS = ["coverage", "gini", "novelty"]
_ROWS_PER_BLOCK = 65536  # the table is made block by block, so a shard makes only its own


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _reset_peak() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (Linux)


def _items(start: int, stop: int, dim: int) -> torch.Tensor:
    """Rows [start, stop) of the item table, the same whichever process makes them."""
    blocks = []
    for block in range(
        start // _ROWS_PER_BLOCK, (stop - 1) // _ROWS_PER_BLOCK + 1 if stop > start else 0
    ):
        g = torch.Generator().manual_seed(1000 + block)
        rows = torch.randn(_ROWS_PER_BLOCK, dim, generator=g)
        low = max(start - block * _ROWS_PER_BLOCK, 0)
        high = min(stop - block * _ROWS_PER_BLOCK, _ROWS_PER_BLOCK)
        blocks.append(rows[low:high].clone())
    return torch.cat(blocks) if blocks else torch.empty(0, dim)


def _batch(rank: int, repeat: int, args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor]:
    """Process ``rank``'s queries and targets for one repeat (fresh tensors each time)."""
    g = torch.Generator().manual_seed(rank * 1000 + repeat)
    queries = torch.randn(args.queries, args.dim, generator=g)
    target = torch.randint(0, args.items, (args.queries,), generator=g)
    return queries, target


def _popularity(args: argparse.Namespace) -> torch.Tensor:
    """Every item's popularity (> 0), the whole catalogue, the same on every process."""
    g = torch.Generator().manual_seed(7)
    return torch.randint(1, 1000, (args.items,), generator=g).to(torch.float64)


class _Evaluation:
    """What a batch is timed on: ``rank_metrics`` per query, or with ``--exposure`` an
    ``update`` of the TorchMetrics adapter (the values: ``compute`` at the end)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.metric: Any = None
        if args.exposure:
            from ranking_plugins.torchmetrics import RankingMetrics

            self.metric = RankingMetrics(
                EXPOSURE_METRICS, top_k=TOP_K, item_popularity=_popularity(args)
            )

    def __call__(self, scores: Any, target: torch.Tensor) -> dict[str, list[float]]:
        from ranking_plugins import rank_metrics

        if self.metric is not None:
            self.metric.update(scores, target)
            return {}
        values = rank_metrics(scores, target, METRICS, TOP_K, reduction="none")
        return {k: v.tolist() for k, v in values.items()}

    def final(self) -> dict[str, float]:
        if self.metric is None:
            return {}
        return {k: float(v) for k, v in self.metric.compute().items()}


def _shards(args: argparse.Namespace) -> list[tuple[int, int]]:
    bounds = [args.items * r // args.processes for r in range(args.processes + 1)]
    return [(bounds[r], bounds[r + 1] - bounds[r]) for r in range(args.processes)]


def _measure(call: Any, report: dict[str, Any], barrier: Any = None) -> Any:
    """Run ``call``, adding its wall and CPU seconds and peak extra memory to ``report``."""
    if barrier is not None:
        barrier()
    rss = _status("VmRSS")
    _reset_peak()
    start, cpu = time.perf_counter(), time.process_time()
    result = call()
    report["seconds"].append(time.perf_counter() - start)
    report["cpu_seconds"].append(time.process_time() - cpu)
    report["peak"].append(_status("VmHWM") - rss)
    return result


def _sharded(rank: int, args: argparse.Namespace, port: int, out: str) -> None:
    from ranking_plugins import ShardedEmbeddingScores
    from ranking_plugins.kernel.catalogue.sharded import traffic

    torch.set_num_threads(args.threads)
    world = args.processes
    dist.init_process_group("gloo", f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    offset, size = _shards(args)[rank]
    shard = _items(offset, offset + size, args.dim)
    report: dict[str, Any] = {"seconds": [], "cpu_seconds": [], "peak": [], "values": []}
    report["bytes"] = []
    evaluate = _Evaluation(args)
    for repeat in range(args.repeats + 1):  # the first is a warm-up, dropped below
        queries, target = _batch(rank, repeat, args)
        scores = ShardedEmbeddingScores(
            queries, shard, item_offset=offset, catalogue_size=args.items
        )
        before = traffic.bytes
        values = _measure(lambda s=scores, t=target: evaluate(s, t), report, dist.barrier)
        report["bytes"].append(traffic.bytes - before)
        report["values"].append(values)
    report = {key: values[1:] for key, values in report.items()}
    report["final"] = evaluate.final()
    Path(out, f"sharded{rank}.json").write_text(json.dumps(report))
    dist.destroy_process_group()


def _whole(_: int, args: argparse.Namespace, out: str) -> None:
    from ranking_plugins import EmbeddingScores

    torch.set_num_threads(args.threads)
    items = _items(0, args.items, args.dim)
    report: dict[str, Any] = {"seconds": [], "cpu_seconds": [], "peak": [], "values": []}
    evaluate = _Evaluation(args)
    for repeat in range(args.repeats + 1):  # the first is a warm-up, dropped below
        batches = [_batch(rank, repeat, args) for rank in range(args.processes)]
        queries = torch.cat([q for q, _ in batches])
        target = torch.cat([t for _, t in batches])
        scores = EmbeddingScores(queries, items)
        values = _measure(lambda s=scores, t=target: evaluate(s, t), report)
        report["values"].append(values)
    report = {key: values[1:] for key, values in report.items()}
    report["final"] = evaluate.final()
    Path(out, "whole.json").write_text(json.dumps(report))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", "-q", type=int, default=1024, help="queries per process")
    parser.add_argument("--items", "-n", type=int, default=2_000_000)
    parser.add_argument("--dim", "-d", type=int, default=64)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument(
        "--exposure", action="store_true", help="time coverage, gini, novelty@10 instead"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.items, args.dim, args.repeats = 32, 5000, 16, 1

    with tempfile.TemporaryDirectory() as out:
        mp.spawn(_sharded, args=(args, _free_port(), out), nprocs=args.processes)
        mp.spawn(_whole, args=(args, out), nprocs=1)
        sharded = [
            json.loads(Path(out, f"sharded{r}.json").read_text()) for r in range(args.processes)
        ]
        whole = json.loads(Path(out, "whole.json").read_text())

    per_batch = [max(run["seconds"][i] for run in sharded) for i in range(args.repeats)]
    equal = True
    for i in range(args.repeats):
        for key, values in whole["values"][i].items():
            got = [v for run in sharded for v in run["values"][i][key]]
            equal &= got == values
    # --exposure: every process's compute() against the one process's
    differences = [
        abs(run["final"][key] - value) for run in sharded for key, value in whole["final"].items()
    ]
    if differences:
        equal = all(run["final"] == whole["final"] for run in sharded)
    table_bytes = args.items * args.dim * 4
    exchanged = int(statistics.median(b for run in sharded for b in run["bytes"]))
    result = {
        "metrics": EXPOSURE_METRICS if args.exposure else METRICS,
        "top_k": TOP_K,
        "queries_per_process": args.queries,
        "items": args.items,
        "dim": args.dim,
        "processes": args.processes,
        "threads_per_process": args.threads,
        "sharded_seconds": statistics.median(per_batch),
        "one_process_seconds": statistics.median(whole["seconds"]),
        "sharded_cpu_seconds_per_process": [statistics.median(r["cpu_seconds"]) for r in sharded],
        "one_process_cpu_seconds": statistics.median(whole["cpu_seconds"]),
        "shard_mib_per_process": [size * args.dim * 4 / 2**20 for _, size in _shards(args)],
        "sharded_peak_mib_per_process": [max(run["peak"]) / 2**20 for run in sharded],
        "one_process_peak_mib": max(whole["peak"]) / 2**20,
        "bytes_exchanged_per_batch": exchanged,
        "bytes_of_gathered_table": table_bytes,
        "equal_values": equal,
        "largest_difference": max(differences, default=0.0),
        "values": whole["final"],
    }
    print(json.dumps(result))
    print(
        f"sharded over {args.processes} processes: {result['sharded_seconds']:.2f} s per batch, "
        f"one process: {result['one_process_seconds']:.2f} s "
        f"({result['one_process_seconds'] / result['sharded_seconds']:.2f}x)"
    )
    cpu = ", ".join(f"{c:.2f}" for c in result["sharded_cpu_seconds_per_process"])
    print(f"CPU time: {cpu} s per process, one process {result['one_process_cpu_seconds']:.2f} s")
    peaks = ", ".join(f"{p:.1f}" for p in result["sharded_peak_mib_per_process"])
    print(
        f"peak extra memory: {peaks} MiB per process, "
        f"one process {result['one_process_peak_mib']:.1f} MiB"
    )
    print(
        f"bytes exchanged per batch per process: {exchanged:,} against {table_bytes:,} to gather "
        f"the table ({table_bytes / exchanged:,.0f}x less); values equal: {equal}"
        + (f" (largest difference {result['largest_difference']:.3g})" if differences else "")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
