"""sentence-transformers' InformationRetrievalEvaluator against this package's, same embeddings.

Both evaluators are called (``evaluator(model)``, their defaults: MRR@10,
NDCG@10, accuracy, precision and recall at 1, 3, 5, 10, MAP@100, cosine,
``corpus_chunk_size=50000``) on a "model" whose ``encode_query`` and
``encode_document`` return precomputed float32 embeddings (the corpus
rows the evaluator asks for, a view; fresh tensors each repeat), so what is
timed is the scoring, ranking and metrics, not a network. Each evaluator runs
in a fresh subprocess per case; printed per case:

* the median time of a call over ``--repeats`` (after one warm-up call), and
  the process's CPU time per call (steadier on a loaded machine);
* peak memory: the process's high-water mark during the calls (``VmHWM``,
  reset just before) minus its resident size just before them, the
  embeddings already made;
* whether the two evaluators' values agree (every key, to 1e-9; random
  float32 embeddings, no ties).

A third worker times the floor both evaluators share: the model's
``similarity`` (cosine) of every query with each ``corpus_chunk_size`` chunk
of documents, nothing else; each evaluator's time is printed as a multiple of it.

    .venv/bin/python benchmarks/bench_evaluators.py           # Q=1000, N=200,000, d=384
    .venv/bin/python benchmarks/bench_evaluators.py --items 1000000
    .venv/bin/python benchmarks/bench_evaluators.py --quick   # a few seconds (CI)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

EVALUATORS = {
    "sentence_transformers": (
        "sentence_transformers.sentence_transformer.evaluation.InformationRetrievalEvaluator"
    ),
    "ranking_plugins": "ranking_plugins.sentence_transformers.InformationRetrievalEvaluator",
}

#: the worker of the floor: the scores alone, chunk by chunk
FLOOR = "product_floor"

#: both evaluators' default corpus_chunk_size
CHUNK_SIZE = 50000


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _reset_peak() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (Linux)


class _Card:
    def set_evaluation_metrics(self, *args: Any) -> None:
        pass


class PrecomputedModel:
    """What the evaluators call of a model, returning fixed embeddings: the corpus
    texts are their row numbers, so a chunk of texts is a slice (a view)."""

    similarity_fn_name = "cosine"
    model_card_data = _Card()

    def __init__(self, query_emb: torch.Tensor, corpus_emb: torch.Tensor) -> None:
        self.query_emb, self.corpus_emb = query_emb, corpus_emb

    @staticmethod
    def _rows(table: torch.Tensor, texts: list[str]) -> torch.Tensor:
        first, last = int(texts[0]), int(texts[-1])
        assert last - first + 1 == len(texts)
        return table[first : last + 1]

    def encode_query(self, texts: list[str], **_: Any) -> torch.Tensor:
        return self._rows(self.query_emb, texts)

    def encode_document(self, texts: list[str], **_: Any) -> torch.Tensor:
        return self._rows(self.corpus_emb, texts)

    def similarity(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        from sentence_transformers.util.similarity import cos_sim

        return cos_sim(a, b)


def _problem(
    args: argparse.Namespace,
) -> tuple[dict[str, str], dict[str, str], dict[str, set[str]]]:
    """Ids that sort as they are numbered, so both evaluators hold the corpus in one order."""
    width = len(str(args.items))
    corpus = {f"{i:0{width}d}": str(i) for i in range(args.items)}
    queries = {f"q{i:06d}": str(i) for i in range(args.queries)}
    g = torch.Generator().manual_seed(1)
    picks = torch.randint(0, args.items, (args.queries, args.relevant), generator=g).tolist()
    relevant = {
        qid: {f"{d:0{width}d}" for d in row} for qid, row in zip(queries, picks, strict=True)
    }
    return queries, corpus, relevant


def _embeddings(args: argparse.Namespace, repeat: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + repeat)
    return (
        torch.randn(args.queries, args.dim, generator=g),
        torch.randn(args.items, args.dim, generator=g),
    )


class _Floor:
    """The scores both evaluators compute: one ``similarity`` call per corpus chunk."""

    def __call__(self, model: PrecomputedModel) -> dict[str, float]:
        table = model.corpus_emb
        for start in range(0, table.shape[0], CHUNK_SIZE):
            scores = model.similarity(model.query_emb, table[start : start + CHUNK_SIZE])
            del scores
        return {}


def worker(args: argparse.Namespace) -> None:
    """One evaluator, ``--repeats`` timed calls after a warm-up, a JSON line out."""
    evaluator: Any
    if args.worker == FLOOR:
        import sentence_transformers.util.similarity  # noqa: F401  # not timed: imported first

        evaluator = _Floor()
    else:
        module, _, name = EVALUATORS[args.worker].rpartition(".")
        cls = getattr(__import__(module, fromlist=[name]), name)
        queries, corpus, relevant = _problem(args)
        evaluator = cls(
            queries, corpus, relevant, show_progress_bar=False, corpus_chunk_size=CHUNK_SIZE
        )
    times, cpu, values = [], [], {}
    peak = 0
    for repeat in range(args.repeats + 1):
        model = PrecomputedModel(*_embeddings(args, repeat))
        before = _status("VmRSS")
        _reset_peak()
        start, start_cpu = time.perf_counter(), time.process_time()
        result = evaluator(model)
        elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        peak = max(peak, _status("VmHWM") - before)
        del model
        if repeat == 0:
            values = result  # the warm-up's values, compared between evaluators
            continue
        times.append(elapsed)
        cpu.append(elapsed_cpu)
    print(
        json.dumps(
            {
                "median_s": statistics.median(times),
                "cpu_s": statistics.median(cpu),
                "peak_mb": peak / 2**20,
                "values": values,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--relevant", type=int, default=3, help="relevant documents per query")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="Q=100, N=5,000, d=64, 1 repeat")
    parser.add_argument("--worker", choices=[*EVALUATORS, FLOOR], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.queries, args.items, args.dim, args.repeats = 100, 5000, 64, 1
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.worker:
        worker(args)
        return
    flags = [
        f"--queries={args.queries}",
        f"--items={args.items}",
        f"--dim={args.dim}",
        f"--relevant={args.relevant}",
        f"--repeats={args.repeats}",
    ] + ([f"--threads={args.threads}"] if args.threads is not None else [])
    print(
        f"Q={args.queries:,} queries x N={args.items:,} documents x d={args.dim}, "
        f"{args.relevant} relevant per query, float32, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, load average "
        + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    results = {}
    root = Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    for name in [*EVALUATORS, FLOOR]:
        done = subprocess.run(
            [sys.executable, __file__, f"--worker={name}", *flags],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
    peer, ours, floor = results["sentence_transformers"], results["ranking_plugins"], results[FLOOR]
    print(
        "| evaluator | median s per call | CPU s per call | peak extra MB "
        "| x floor (median) | x floor (CPU) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, result in results.items():
        print(
            f"| {name} | {result['median_s']:.3f} | {result['cpu_s']:.3f} | "
            f"{result['peak_mb']:,.0f} | {result['median_s'] / floor['median_s']:.2f} | "
            f"{result['cpu_s'] / floor['cpu_s']:.2f} |"
        )
    ratio = peer["median_s"] / ours["median_s"]
    same = list(peer["values"]) == list(ours["values"]) and all(
        abs(peer["values"][k] - ours["values"][k]) <= 1e-9 for k in peer["values"]
    )
    print(f"\nsentence_transformers / ranking_plugins: {ratio:.2f}x; values equal: {same}")
    print(f"uptime load average after the run: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
