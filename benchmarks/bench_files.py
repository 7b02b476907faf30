"""``ranking-plugins evaluate`` against a pytrec_eval script and ranx, each a whole process.

A TREC run of ``--queries`` x ``--docs`` lines (10,000 x 1,000 = 10M lines by
default) and its qrels (``--judged`` graded judgments per query, half of them
retrieved) are written to a temporary directory, once with document ids of 8
bytes (``D0001234``) and once with ids of 9 to 25 (``D1234_567``,
``clueweb09-en0000-00-00000``, ``msmarco_doc_00_123``: ``--ids``), then each
tool evaluates MAP, nDCG@10, P@10 and MRR from the files, as a user runs it:

* ``ranking-plugins evaluate QRELS RUN -m map -m ndcg@10 -m P@10 -m mrr`` (the
  defaults, and ``--ties first``, trec_eval's tie break);
* a pytrec_eval script: ``parse_qrel``, ``parse_run``, ``RelevanceEvaluator.evaluate``, means;
* a ranx script: ``Qrels.from_file``, ``Run.from_file``, ``evaluate`` (numba
  compiles on first use: one untimed run fills its cache first).

Each is timed as a fresh process (``--repeats`` runs of each tool in turn, the median) with its
peak RSS (``os.wait4``'s ``ru_maxrss`` of that process), and the means are
compared. ``--in-process`` also times, in this process, our command and
pytrec_eval's parse + evaluate without their imports (workload 6 of
``suite.py`` at 2,000 x 1,000).

    python benchmarks/bench_files.py                  # 10M lines, 8-byte ids then 9-25
    python benchmarks/bench_files.py --ids long       # 10M lines, ids of 9-25 bytes only
    python benchmarks/bench_files.py --quick          # tiny, a few seconds (CI)
    python benchmarks/bench_files.py --queries 2000 --in-process
    python benchmarks/bench_files.py --queries 1 --docs 3000000 --tools ours pytrec_eval
                                                      # one query over many blocks
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MB = 1024.0 * 1024.0
MEASURES = {"map": "map", "ndcg@10": "ndcg_cut_10", "precision@10": "P_10", "mrr": "recip_rank"}

PYTREC_EVAL = """
import statistics, sys, json, pytrec_eval
with open(sys.argv[1]) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f:
    run = pytrec_eval.parse_run(f)
names = {"map", "ndcg_cut.10", "P.10", "recip_rank"}
per_query = pytrec_eval.RelevanceEvaluator(qrels, names).evaluate(run)
keys = next(iter(per_query.values()))
print(json.dumps({m: statistics.fmean(v[m] for v in per_query.values()) for m in keys}))
"""

RANX = """
import sys, json
from ranx import Qrels, Run, evaluate
qrels = Qrels.from_file(sys.argv[1], kind="trec")
run = Run.from_file(sys.argv[2], kind="trec")
print(json.dumps(evaluate(qrels, run, ["map", "ndcg@10", "precision@10", "mrr"])))
"""


#: document ids: ``short`` ones of 8 bytes; ``long`` ones of 9 to 25 bytes in the styles
#: of real collections, a third each (ClueWeb's and MS MARCO's share their first 8 bytes)
ID_STYLES = ("short", "long")


def document_id(d: int, style: str) -> str:
    """Document ``d``'s id (``d`` < 10M) in ``style`` (:data:`ID_STYLES`)."""
    if style == "short":
        return f"D{d:07d}"
    if d % 3 == 0:  # 9 or 10 bytes
        return f"D{1000 + d // 1000}_{d % 1000:03d}"
    if d % 3 == 1:  # ClueWeb09's 25 bytes
        return f"clueweb09-en{d // 100_000:04d}-{d // 1000 % 100:02d}-{d % 1000:05d}"
    return f"msmarco_doc_{d // 100_000:02d}_{d % 100_000}"  # MS MARCO v2's 16 to 20 bytes


def write_files(
    directory: Path, queries: int, docs: int, judged: int, seed: int, id_style: str = "short"
) -> tuple[Path, Path]:
    """A run in rank order (6-decimal scores, documents drawn from a corpus of 1M, or of
    ``docs`` when more) and its qrels; document ids in ``id_style``."""
    rng = random.Random(seed)
    qrels, run = directory / "bench.qrels", directory / "bench.run"
    corpus = max(1_000_000, docs)
    with open(run, "w") as run_file, open(qrels, "w") as qrels_file:
        for q in range(1, queries + 1):
            ids = rng.sample(range(corpus), docs)
            scores = sorted((rng.uniform(0.0, 30.0) for _ in ids), reverse=True)
            run_file.write(
                "".join(
                    f"{q} Q0 {document_id(d, id_style)} {rank} {s:.6f} bench\n"
                    for rank, (d, s) in enumerate(zip(ids, scores, strict=True), 1)
                )
            )
            chosen = set(rng.sample(ids, judged // 2))
            while len(chosen) < judged:
                chosen.add(rng.randrange(corpus))
            qrels_file.write(
                "".join(
                    f"{q} 0 {document_id(d, id_style)} {rng.randrange(3)}\n" for d in sorted(chosen)
                )
            )
    return qrels, run


def run_and_measure(command: list[str], cwd: Path) -> tuple[float, float, str, float]:
    """(seconds, peak RSS in MB, stdout, CPU seconds) of one fresh process (its own
    ``ru_maxrss``, ``ru_utime + ru_stime``: on a shared machine the CPU time is the steadier).

    It runs in ``cwd`` (the files' directory): ``python -m`` puts the working directory
    first on ``sys.path``, so from a checkout it would import that tree, not the one
    ``PYTHONPATH`` names (a before/after comparison would time one tree twice)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd)
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:5])} ... exited {child.returncode}")
    return seconds, usage.ru_maxrss / 1024, out.decode(), usage.ru_utime + usage.ru_stime


def means(tool: str, out: str) -> dict[str, float]:
    document = json.loads(out)
    if tool.startswith("ranking-plugins"):
        return {key: document["metrics"][key] for key in MEASURES}
    if tool == "pytrec_eval":
        return {key: document[name] for key, name in MEASURES.items()}
    return document  # ranx names them as we do


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--judged", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ids", choices=[*ID_STYLES, "both"], default="both",
        help="document ids of 8 bytes (D0001234), of 9-25 (D1234_567, "
        "clueweb09-en0000-00-00000, msmarco_doc_00_123), or both workloads (the default)",
    )  # fmt: skip
    parser.add_argument("--tools", nargs="+", default=None, help="ours ours-first pytrec_eval ranx")
    parser.add_argument("--in-process", action="store_true", help="also time in this process")
    parser.add_argument("--quick", action="store_true", help="tiny files, one run: a smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.docs, args.judged, args.repeats = 20, 100, 10, 1
        # ranx's first run compiles its numba kernels (about a minute): not in a smoke run
        args.tools = args.tools or ["ours", "ours-first", "pytrec_eval"]
    args.tools = args.tools or ["ours", "ours-first", "pytrec_eval", "ranx"]
    for id_style in ID_STYLES if args.ids == "both" else [args.ids]:
        workload(args, id_style)
    return 0


def workload(args: argparse.Namespace, id_style: str) -> None:
    """Write the files with ``id_style`` document ids, time each tool on them (one run of
    each in turn, ``--repeats`` times: the machine's load falls on all alike), print a table."""
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-files-") as directory:
        start = time.perf_counter()
        qrels, run = write_files(
            Path(directory), args.queries, args.docs, args.judged, args.seed, id_style
        )
        size = run.stat().st_size
        lines = args.queries * args.docs
        took = time.perf_counter() - start
        print(
            f"run: {lines:,} lines, {size / MB:,.0f} MB, {id_style} document ids "
            f"(written in {took:.0f} s)"
        )
        metrics = [a for m in ("map", "ndcg@10", "P@10", "mrr") for a in ("-m", m)]
        ours = [python, "-m", "ranking_plugins", "evaluate", str(qrels), str(run), *metrics]
        commands = {
            "ours": ("ranking-plugins evaluate", [*ours, "--format", "json"]),
            "ours-first": (
                "ranking-plugins evaluate --ties first",
                [*ours, "--ties", "first", "--format", "json"],
            ),
            "pytrec_eval": ("pytrec_eval", [python, "-c", PYTREC_EVAL, str(qrels), str(run)]),
            "ranx": ("ranx", [python, "-c", RANX, str(qrels), str(run)]),
        }
        if "ranx" in args.tools and not args.quick:
            run_and_measure(commands["ranx"][1], Path(directory))  # numba's cache, untimed
        # a smoke run tries --ties first once, on the first workload
        tools = [
            t for t in args.tools if not (args.quick and id_style != "short" and t == "ours-first")
        ]
        runs: dict[str, list[tuple[float, float, str, float]]] = {t: [] for t in tools}
        for _ in range(args.repeats):
            for tool in tools:
                runs[tool].append(run_and_measure(commands[tool][1], Path(directory)))
        rows = []
        for tool in tools:
            seconds = statistics.median(r[0] for r in runs[tool])
            cpu = statistics.median(r[3] for r in runs[tool])
            peak = max(r[1] for r in runs[tool])
            name = commands[tool][0]
            rows.append((name, seconds, peak, means(name, runs[tool][0][2]), cpu))
        load = os.getloadavg()
        print(f"load average {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}; {os.cpu_count()} CPUs")
        print(
            "| tool (whole process) | s | CPU s | peak RSS MB | x run file "
            "| MAP | nDCG@10 | P@10 | MRR |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name, seconds, peak, values, cpu in rows:
            numbers = " | ".join(f"{values[k]:.6f}" for k in MEASURES)
            print(
                f"| {name} | {seconds:.2f} | {cpu:.2f} | {peak:,.0f} | {peak * MB / size:.2f} "
                f"| {numbers} |"
            )
        by_name = {row[0]: (row[1], row[4]) for row in rows}
        if "ranking-plugins evaluate" in by_name:
            ours_s, ours_cpu = by_name["ranking-plugins evaluate"]
            for name, (seconds, cpu) in by_name.items():
                print(
                    f"{name}: {seconds / ours_s:.2f}x the time of ranking-plugins evaluate "
                    f"({cpu / ours_cpu:.2f}x its CPU time; {id_style} ids)"
                )
        if args.in_process:
            in_process(qrels, run, args.repeats)


def in_process(qrels: Path, run: Path, repeats: int) -> None:
    """Our command (``main``) and pytrec_eval's parse + evaluate, imports excluded, alternately."""
    import io
    from contextlib import redirect_stdout

    import pytrec_eval

    from ranking_plugins.cli import main as command

    argv = ["evaluate", str(qrels), str(run), "-m", "map", "-m", "ndcg@10", "-m", "P@10"]
    argv += ["-m", "mrr", "--format", "json"]

    def ours() -> None:
        with redirect_stdout(io.StringIO()):
            assert command(argv) == 0

    def peer() -> None:
        with open(qrels) as f:
            judgments = pytrec_eval.parse_qrel(f)
        with open(run) as f:
            results = pytrec_eval.parse_run(f)
        names = {"map", "ndcg_cut.10", "P.10", "recip_rank"}
        pytrec_eval.RelevanceEvaluator(judgments, names).evaluate(results)

    names = ("ranking-plugins evaluate", "pytrec_eval")
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    ours()  # warm-up: lazy imports (pyarrow), thread pools
    for _ in range(repeats):
        for name, fn in zip(names, (ours, peer), strict=True):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    medians = {name: statistics.median(t) for name, t in times.items()}
    cpu_medians = {name: statistics.median(t) for name, t in cpu.items()}
    load = os.getloadavg()
    print(f"in-process, imports excluded (load average {load[0]:.2f}):")
    for name, seconds in medians.items():
        print(f"  {name}: {seconds * 1000:,.0f} ms ({cpu_medians[name] * 1000:,.0f} ms CPU)")
    ratio = medians["pytrec_eval"] / medians["ranking-plugins evaluate"]
    cpu_ratio = cpu_medians["pytrec_eval"] / cpu_medians["ranking-plugins evaluate"]
    print(f"  pytrec_eval / ranking-plugins evaluate: {ratio:.2f}x ({cpu_ratio:.2f}x in CPU time)")


if __name__ == "__main__":
    sys.exit(main())
