"""The kernel's share of ``ranking-plugins evaluate`` on workload 6, part by part (issue 16).

The command hands the kernel dense padded rows already in run order: ``preds``
(Q, L) non-increasing over the retrieved items, ``target`` grades (-inf for an
unjudged retrieved document), and ``mask`` False for the padding and for the
judged documents the run did not retrieve (at the end of each row, score 0).
This times ``rank`` and the two requests' ``read`` (map + mrr on whole lists,
ndcg@10 + P@10 from the same ranking) on fresh tensors each time, single thread,
the median of ``--repeats``.

    python benchmarks/bench_ranked_rows.py                   # Q=2000, 1000 docs, 60 judged
    python benchmarks/bench_ranked_rows.py --shuffled        # the same rows, not in order
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import Tensor

from ranking_plugins.request import RankingRequest
from ranking_plugins.runs.evaluation import COMMAND_DEFAULTS


def make_rows(queries: int, docs: int, judged: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Rows as the command builds them: retrieved in run order, then unretrieved judged."""
    g = torch.Generator().manual_seed(seed)
    length = docs + judged // 2
    # 6-decimal scores in [0, 30), sorted descending (a few ties, as in bench_files.py)
    scores = (torch.rand(queries, docs, generator=g, dtype=torch.float64) * 30e6).round() / 1e6
    preds = torch.zeros(queries, length, dtype=torch.float64)
    preds[:, :docs] = scores.sort(dim=1, descending=True).values
    target = torch.full((queries, length), -torch.inf, dtype=torch.float64)
    grades = torch.randint(0, 3, (queries, judged), generator=g).to(torch.float64)
    retrieved = torch.rand(queries, docs, generator=g).argsort(dim=1)[:, : judged // 2]
    target.scatter_(1, retrieved, grades[:, : judged // 2])
    target[:, docs:] = grades[:, judged // 2 :]
    mask = torch.zeros(queries, length, dtype=torch.bool)
    mask[:, :docs] = True
    return preds, target, mask


def shuffle_rows(preds: Tensor, target: Tensor, mask: Tensor, seed: int) -> tuple[Tensor, ...]:
    order = torch.rand(preds.shape, generator=torch.Generator().manual_seed(seed)).argsort(dim=1)
    return tuple(t.gather(1, order) for t in (preds, target, mask))


def time_parts(args: argparse.Namespace, ties: str) -> dict[str, float]:
    options = COMMAND_DEFAULTS.replace(ties=ties)
    whole = RankingRequest.create(["map", "mrr"], None, options)
    at_k = RankingRequest.create(["ndcg", "precision"], [10], options)
    base = make_rows(args.queries, args.docs, args.judged, args.seed)
    if args.shuffled:
        base = shuffle_rows(*base, seed=args.seed + 1)
    times: dict[str, list[float]] = {"rank": [], "read map+mrr": [], "read ndcg+P@10": []}
    for _ in range(args.repeats + 1):
        preds, target, mask = (t.clone() for t in base)  # fresh tensors: no cache hit
        start = time.perf_counter()
        ranked = whole.rank(preds, target, mask=mask)
        mid = time.perf_counter()
        whole.read(ranked)
        after = time.perf_counter()
        at_k.read(ranked)
        end = time.perf_counter()
        for name, seconds in zip(times, (mid - start, after - mid, end - after), strict=True):
            times[name].append(seconds)
    medians = {name: statistics.median(values[1:]) * 1e3 for name, values in times.items()}
    medians["total"] = sum(medians.values())
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--judged", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shuffled", action="store_true", help="rows not in run order")
    parser.add_argument("--ties", nargs="+", default=["average", "first"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for ties in args.ties:
        parts = time_parts(args, ties)
        print(f"ties={ties:8s} " + "  ".join(f"{k} {v:7.1f} ms" for k, v in parts.items()))


if __name__ == "__main__":
    main()
