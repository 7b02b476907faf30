"""The package on a GPU: same numbers as the CPU, no sync in ``update``, and timings.

On a CUDA machine (``--device cuda``, the default) it

(a) checks every metric, layout (dense float and bool grades, item ids,
    grouped) and tie policy equal to the CPU result, at cutoffs and on whole
    lists, and that NaN scores are refused on the device as on the CPU;
(b) runs every adapter's ``update`` (Ignite, TorchMetrics, and the
    TorchMetrics grouped layout the Lightning callback uses) with
    ``validate_args=False`` under ``torch.cuda.set_sync_debug_mode("error")``
    and fails on any synchronisation; the grouped layout ranked per batch
    (the Ignite adapter's, and the update at which TorchMetrics'
    ``whole_queries=True`` ranks its pending batches) needs the number of
    queries on the host, a documented exception, reported apart;
(c) times workloads 1, 2, 3 and 5 of ``suite.py`` with the default arguments
    against ``torch.topk`` on the same device, the Ignite pair and
    ``torchmetrics.retrieval``.

Exit status 1 if (a) or (b) fails. ``--device cpu`` runs (a) and (c) on the
CPU against itself (with the accelerator's read-free paths) and (b)'s calls
without the sync check: the smoke run CI makes::

    python benchmarks/gpu.py                      # on a CUDA machine
    python benchmarks/gpu.py --device cpu --quick # CI
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ranking_plugins import EmbeddingScores, rank_metrics
from ranking_plugins.batch_cache import last_batch
from ranking_plugins.kernel import host_reads

METRICS = (
    "hit_rate",
    "mrr",
    "ndcg",
    "map",
    "precision",
    "recall",
    "f1",
    "fall_out",
    "r_precision",
    "mean_rank",
    "auc",
)
AT_K = ("hit_rate", "mrr", "ndcg", "map", "precision", "recall", "f1", "fall_out")
TIES = ("average", "first", "pessimistic", "optimistic")
KS = (1, 5, 10, 20, 50, 100)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="small sizes (CI)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--no-timing", action="store_true", help="only (a) and (b)")
    return parser.parse_args(argv)


# ------------------------------------------------------------------ (a) equality


def layouts(device: torch.device, gen: torch.Generator) -> Iterator[tuple[str, dict[str, Any]]]:
    q, n = 12, 30
    preds = (torch.randn(q, n, generator=gen) * 2).round() / 2  # many ties
    grades = torch.randint(0, 4, (q, n), generator=gen) * (torch.rand(q, n, generator=gen) < 0.3)
    grades[0] = 0  # a query without relevant items
    mask = torch.rand(q, n, generator=gen) < 0.8
    ids = torch.randint(-1, n, (q, 3), generator=gen)
    flat = torch.arange(q).repeat_interleave(n)
    keep = torch.rand(q * n, generator=gen) < 0.7  # uneven list lengths
    cases: dict[str, dict[str, Any]] = {
        "dense float grades": {"preds": preds, "target": grades.float()},
        "dense int grades, mask": {"preds": preds, "target": grades, "mask": mask},
        "dense bool": {"preds": preds, "target": grades > 0},
        "item ids (Q, T)": {"preds": preds, "target": ids},
        "item id (Q,)": {"preds": preds, "target": ids[:, 0].clamp(min=0)},
        "grouped": {
            "preds": preds.flatten()[keep],
            "target": grades.flatten()[keep],
            "indexes": flat[keep],
        },
    }
    for name, inputs in cases.items():
        yield name, {key: value.to(device) for key, value in inputs.items()}


def check_equal(device: torch.device) -> list[str]:
    """(a): every metric, layout and tie policy equal on ``device`` and on the CPU."""
    failures = []
    gen = torch.Generator().manual_seed(0)
    cpu = torch.device("cpu")
    for name, inputs in layouts(device, gen):
        on_cpu = {key: value.to(cpu) for key, value in inputs.items()}
        for ties in TIES:
            for metrics, top_k in ((AT_K, [1, 3, 10, 40]), (METRICS, None)):
                options = {"ties": ties, "empty_target_action": "skip"}
                want = rank_metrics(metrics=metrics, top_k=top_k, **on_cpu, **options)
                last_batch.clear()
                got = rank_metrics(metrics=metrics, top_k=top_k, **inputs, **options)
                last_batch.clear()
                for key, value in want.items():
                    other = got[key].to(cpu)
                    if not torch.allclose(other, value, rtol=1e-9, atol=1e-12, equal_nan=True):
                        failures.append(f"{name}, ties={ties}, {key}: {float(other)} != {value}")
        preds = inputs["preds"].clone()
        preds.view(-1)[1] = float("nan")
        try:
            rank_metrics(preds, inputs["target"], "mrr", None, indexes=inputs.get("indexes"))
            failures.append(f"{name}: NaN scores accepted on {device}")
        except ValueError as error:
            if "`preds` must not contain NaN" not in str(error):
                failures.append(f"{name}: NaN scores refused with {error}")
        last_batch.clear()
    return failures


# ------------------------------------------------------------------ (b) no sync


def adapter_updates(device: torch.device) -> dict[str, tuple[bool, Callable[[], None]]]:
    """name -> (may synchronise (documented), one ``update`` with validate_args=False)."""
    from ranking_plugins.ignite import RankingMetrics as IgniteMetrics
    from ranking_plugins.torchmetrics import RankingMetrics as TorchMetrics

    gen = torch.Generator().manual_seed(1)
    q, n = 64, 500
    preds = torch.randn(q, n, generator=gen).to(device)
    grades = (torch.rand(q, n, generator=gen) < 0.05).float().to(device)
    ids = torch.randint(n, (q, 2), generator=gen).to(device)
    flat = (
        preds.flatten(),
        grades.flatten(),
        torch.arange(q, device=device).repeat_interleave(n),
    )
    items = torch.randn(5000, 16, generator=gen).to(device)
    embeddings = EmbeddingScores(torch.randn(q, 16, generator=gen).to(device), items)
    ks = [1, 10, 100]
    metrics = ("hit_rate", "mrr", "ndcg", "map")

    def ignite(output: Any) -> Callable[[], None]:
        metric = IgniteMetrics(metrics, top_k=ks, validate_args=False, device=device)
        return lambda: metric.update(output)

    def tm(
        *inputs: Any, indexes: Any = None, whole_queries: bool = False, ignore_index: Any = None
    ) -> Callable[[], None]:
        metric = TorchMetrics(
            metrics,
            top_k=ks,
            validate_args=False,
            whole_queries=whole_queries,
            ignore_index=ignore_index,
        ).to(device)
        return lambda: metric.update(*inputs, indexes=indexes)

    return {
        "ignite dense": (False, ignite((preds, grades))),
        "ignite item ids": (False, ignite((preds, ids))),
        "ignite embeddings": (False, ignite((embeddings, ids[:, 0]))),
        "ignite grouped": (True, ignite({"y_pred": flat[0], "y": flat[1], "indexes": flat[2]})),
        "torchmetrics dense": (False, tm(preds, grades)),
        "torchmetrics dense, ignore_index": (False, tm(preds, grades, ignore_index=0)),
        "torchmetrics item ids": (False, tm(preds, ids)),
        "torchmetrics embeddings": (False, tm(embeddings, ids[:, 0])),
        "torchmetrics grouped (kept; the Lightning callback's)": (
            False,
            tm(flat[0], flat[1], indexes=flat[2]),
        ),
        # kept pending below the cap (``pending.PENDING_ENTRIES``); the update that
        # reaches it ranks the pending batches, as the Ignite grouped update does
        "torchmetrics grouped, whole_queries=True (pending)": (
            False,
            tm(flat[0], flat[1], indexes=flat[2], whole_queries=True),
        ),
    }


def check_no_sync(device: torch.device) -> tuple[list[str], list[str]]:
    """(b): failures, and notes (syncs in the documented exceptions)."""
    failures: list[str] = []
    notes: list[str] = []
    cuda = device.type == "cuda"
    for name, (may_sync, update) in adapter_updates(device).items():
        update()  # warm-up: lazy initialisation may sync, and is not an update's cost
        last_batch.clear()
        mode = contextlib.nullcontext()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
        try:
            with mode:
                update()
        except RuntimeError as error:
            if not cuda or "synchroniz" not in str(error):
                raise
            (notes if may_sync else failures).append(f"{name}: {str(error).splitlines()[0]}")
        finally:
            if cuda:
                torch.cuda.set_sync_debug_mode(0)
        last_batch.clear()
    return failures, notes


# ------------------------------------------------------------------ (c) timing


def timed(device: torch.device, fn: Callable[[], object], repeats: int) -> float:
    """Median milliseconds of ``fn`` (after one warm-up), the device synchronised around it."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    fn()
    times = []
    for _ in range(repeats):
        last_batch.clear()
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def timings(device: torch.device, quick: bool, repeats: int) -> list[tuple[str, str, float, float]]:
    """(workload, row, ms, x the workload's floor) on ``device``, default arguments."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    import suite

    from ranking_plugins.torchmetrics import RankingMetrics as TorchMetrics

    gen = torch.Generator().manual_seed(0)
    rows: list[tuple[str, str, float, float]] = []

    def turns(shape: tuple[int, ...]) -> Callable[[], torch.Tensor]:
        tensors = [torch.randn(shape, generator=gen).to(device) for _ in range(3)]
        at = [0]

        def next_tensor() -> torch.Tensor:
            at[0] = (at[0] + 1) % 3
            return tensors[at[0]]

        return next_tensor

    def add(workload: str, entries: dict[str, Callable[[], object]], count: int) -> None:
        floor_name = next(iter(entries))
        floor = timed(device, entries[floor_name], count)
        for name, fn in entries.items():
            ms = floor if name == floor_name else timed(device, fn, count)
            rows.append((workload, name, ms, ms / floor))

    from ignite.metrics.rec_sys import NDCG, HitRate

    # workload 1
    q, n = (64, 2000) if quick else (1024, 20000)
    preds = turns((q, n))
    relevant = torch.rand(q, n, generator=gen).topk(5, dim=1).indices
    target = torch.zeros(q, n).scatter_(1, relevant, 1.0).to(device)
    tq = 8 if quick else 64
    small = (preds()[:tq].contiguous(), target[:tq].contiguous())
    retrieval_1 = suite.retrieval_collection([(m, k) for m in suite.ALL_METRICS for k in KS]).to(
        device
    )
    pair = suite.ignite_cycle(
        HitRate(top_k=list(KS), device=device), NDCG(top_k=list(KS), device=device)
    )
    add(
        "W1",
        {
            "torch.topk(preds, 100)": lambda: torch.topk(preds(), 100),
            "rank_metrics": lambda: rank_metrics(preds(), target, suite.ALL_METRICS, KS),
            "ignite rec_sys HitRate + NDCG": lambda: pair((preds(), target)),
        },
        repeats,
    )
    flat_small = suite.flat(*(t.cpu() for t in small))
    flat_small = (
        *(t.to(device) for t in flat_small[:2]),
        {"indexes": flat_small[2]["indexes"].to(device)},
    )
    add(
        f"W1 (Q={tq})",
        {
            "torch.topk(preds, 100)": lambda: torch.topk(small[0], 100),
            "rank_metrics": lambda: rank_metrics(*small, suite.ALL_METRICS, KS),
            "torchmetrics.retrieval (36 objects)": lambda: suite.tm_cycle(
                retrieval_1, [flat_small]
            ),
        },
        min(repeats, 3),
    )
    # workload 2
    q, n = (64, 5000) if quick else (1024, 100000)
    preds = turns((q, n))
    item = torch.randint(n, (q,), generator=gen).to(device)
    dense_item = torch.zeros(q, n, device=device).scatter_(1, item.unsqueeze(1), 1.0)
    add(
        "W2",
        {
            "torch.topk(preds, 100)": lambda: torch.topk(preds(), 100),
            "rank_metrics": lambda: rank_metrics(preds(), item, suite.NEXT_ITEM_METRICS, KS),
            "ignite rec_sys HitRate + NDCG": lambda: pair((preds(), dense_item)),
        },
        repeats,
    )
    # workload 3
    queries, candidates, updates = (200, 100, 5) if quick else (10000, 100, 50)
    scores = torch.randn(queries, candidates, generator=gen).to(device)
    grades = (torch.rand(queries, candidates, generator=gen) < 0.05).long().to(device)
    ids = torch.arange(queries, device=device).unsqueeze(1).expand(queries, candidates)
    per = queries // updates
    batches = [
        (
            scores[i : i + per].flatten(),
            grades[i : i + per].flatten(),
            {"indexes": ids[i : i + per].flatten()},
        )
        for i in range(0, queries, per)
    ]
    mets = ("mrr", "ndcg", "map")
    kept = TorchMetrics(mets).to(device)
    whole = TorchMetrics(mets, whole_queries=True).to(device)
    retrieval_3 = suite.retrieval_collection([(m, None) for m in mets]).to(device)
    add(
        "W3",
        {
            "torch.sort of every query's candidates": lambda: torch.sort(
                scores, dim=1, descending=True
            ),
            "torchmetrics RankingMetrics": lambda: suite.tm_cycle(kept, batches),
            "torchmetrics RankingMetrics, whole_queries=True": lambda: suite.tm_cycle(
                whole, batches
            ),
            "torchmetrics.retrieval MRR + NDCG + MAP": lambda: suite.tm_cycle(retrieval_3, batches),
        },
        min(repeats, 3),
    )
    # workload 5
    q, n, d = (64, 20000, 16) if quick else (1024, 1_000_000, 64)
    chunk = 4096 if quick else 32768
    query = torch.randn(q, d, generator=gen).to(device)
    items = torch.randn(n, d, generator=gen).to(device)
    item = torch.randint(n, (q,), generator=gen).to(device)
    add(
        "W5",
        {
            "chunked q @ chunk.T + topk(100) merged": lambda: suite.chunked_topk(
                query, items, 100, chunk
            ),
            "rank_metrics(EmbeddingScores)": lambda: rank_metrics(
                EmbeddingScores(query, items, chunk_size=chunk), item, suite.NEXT_ITEM_METRICS, KS
            ),
        },
        min(repeats, 3),
    )
    return rows


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: run with --device cpu for the CPU-runnable parts")
        return 2
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device: {name}, torch {torch.__version__}")
    # on the CPU, take the accelerator's read-free paths (what a GPU runs)
    saved = host_reads.ACCELERATOR_PATHS_ON_CPU
    host_reads.ACCELERATOR_PATHS_ON_CPU = device.type == "cpu"
    try:
        failures = check_equal(device)
        print(f"(a) CPU equality: {'PASS' if not failures else 'FAIL'}")
        for line in failures:
            print(f"    {line}")
        sync_failures, notes = check_no_sync(device)
        checked = "checked" if device.type == "cuda" else "not checked on the CPU (calls only)"
        print(f"(b) no sync in update ({checked}): {'PASS' if not sync_failures else 'FAIL'}")
        for line in sync_failures:
            print(f"    {line}")
        for line in notes:
            print(f"    documented exception: {line}")
    finally:
        host_reads.ACCELERATOR_PATHS_ON_CPU = saved
    if not args.no_timing:
        print("(c) timings, default arguments:")
        print("| workload | row | ms | x floor |")
        print("| --- | --- | ---: | ---: |")
        for workload, row, ms, ratio in timings(device, args.quick, args.repeats):
            print(f"| {workload} | {row} | {ms:,.2f} | {ratio:,.2f} |")
    return 1 if failures or sync_failures else 0


if __name__ == "__main__":
    sys.exit(main())
