"""The diversity measures on TREC files, against ir_measures with pyndeval.

A diversity collection written as files (``qid subtopic docid rel`` qrels, a
6-column run): ``--queries`` x ``--docs`` retrieved documents, 5 subtopics,
``--judged`` judged documents per query (half of them retrieved), each judged
per subtopic with grades 0..2; scores distinct within a query. Each side timed
from the files to the means of alpha-nDCG@20, ERR-IA@20, NRBP, P-IA@20,
AP-IA and StRecall@20:

* ``evaluate_run(qrels_path, run_path, measures)``;
* ir_measures' ``read_trec_qrels`` / ``read_trec_run`` and one ``calc_aggregate``
  per measure (several with different parameters in one call give zeros), its
  pyndeval provider.

The largest difference of the means is printed beside the times.

    python benchmarks/bench_diversity.py                # 10,000 x 1,000 x 5
    python benchmarks/bench_diversity.py --quick        # 200 x 100, seconds (CI)
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

MEASURES = ["alpha_nDCG@20", "ERR_IA@20", "NRBP", "P_IA@20", "AP_IA", "StRecall@20"]


def write_files(directory: str, queries: int, docs: int, judged: int, seed: int) -> tuple[str, str]:
    rng = random.Random(seed)
    qrels_path = os.path.join(directory, "div.qrels")
    run_path = os.path.join(directory, "div.run")
    with open(qrels_path, "w") as qrels, open(run_path, "w") as run:
        for q in range(queries):
            retrieved = [f"D{q}_{n}" for n in range(docs)]
            judged_docs = rng.sample(retrieved, judged // 2) + [
                f"J{q}_{n}" for n in range(judged - judged // 2)
            ]
            lines = []
            for doc in judged_docs:
                for s in range(1, 6):
                    if rng.random() < 0.4:
                        lines.append(f"{q} {s} {doc} {rng.choice((0, 1, 1, 2))}\n")
            qrels.writelines(lines)
            order = rng.sample(range(docs), docs)
            run.writelines(
                f"{q} Q0 {doc} {rank + 1} {docs - rank} bench\n"
                for rank, doc in zip(range(docs), (retrieved[i] for i in order), strict=True)
            )
    return qrels_path, run_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--docs", type=int, default=1_000)
    parser.add_argument("--judged", type=int, default=60)
    parser.add_argument("--quick", action="store_true", help="200 x 100")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.queries, args.docs = 200, 100
    import ir_measures

    from ranking_plugins import evaluate_run

    with tempfile.TemporaryDirectory() as directory:
        qrels_path, run_path = write_files(
            directory, args.queries, args.docs, args.judged, args.seed
        )
        start = time.perf_counter()
        mine = evaluate_run(qrels_path, run_path, MEASURES, unretrieved_queries="count")
        own = time.perf_counter() - start
        start = time.perf_counter()
        theirs = {}
        qrels = list(ir_measures.read_trec_qrels(qrels_path))
        run = list(ir_measures.read_trec_run(run_path))
        for name in MEASURES:
            measure = ir_measures.parse_measure(name)
            theirs[name] = ir_measures.calc_aggregate([measure], qrels, run)[measure]
        other = time.perf_counter() - start
    worst = max(abs(mine.means[name] - theirs[name]) for name in MEASURES)
    print(f"{args.queries} queries x {args.docs} documents, 5 subtopics, {args.judged} judged")
    print("| what | seconds | max |mean - pyndeval| |")
    print("| --- | ---: | ---: |")
    print(f"| `evaluate_run(qrels_path, run_path, 6 measures)` | {own:.2f} | {worst:.2e} |")
    print(f"| ir_measures + pyndeval (read, 6 `calc_aggregate`) | {other:.2f} | 0 |")
    print(f"speed-up: {other / own:.1f}x")


if __name__ == "__main__":
    main()
