"""Sharded catalogues across processes: run under ``ignite.distributed.Parallel`` (gloo, CPU).

    python tests/sharded_worker.py NPROC OUT_DIR PORT

One spawned job per process count runs every case on the one process group
(``tests/test_sharded.py`` and ``tests/test_sharded_adapters.py`` read what
it wrote and compare it with one process holding the whole catalogue):

* kernel cases (:func:`cases`): per-query values of every metric at several k
  under every tie policy, with shards of unequal size, an empty shard,
  shards in another order than the processes, a process without queries,
  targets and exclusions on other shards, and constant scores (ties across
  every shard);
* exposure cases (:func:`exposure_values`): the beyond-accuracy metrics of
  every process's queries, on the same problems under every tie policy;
* error cases (:func:`error_cases`): each must raise ``ShardError`` on every
  process, and the group must still work afterwards;
* adapters (2 processes): the TorchMetrics ``RankingMetrics`` updated directly
  and the Ignite ``RankingMetrics`` on an ``Engine``, over two batches.

Each process writes ``OUT_DIR/rank{r}.pt``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from processes import parallel_main

METRICS = ["hit_rate", "mrr", "precision", "recall", "map", "ndcg", "r_precision", "auc"]
TOP_K = [1, 2, 3, 5]
TIES = ("average", "first", "pessimistic", "optimistic")


def cases(world: int) -> dict[str, dict[str, Any]]:
    """Name -> the whole problem: every process's queries, targets and exclusions, the shards."""
    gen = torch.Generator().manual_seed(world)
    found: dict[str, dict[str, Any]] = {}
    num_items, width = 11, 3
    if world == 2:
        shardings = {
            "unequal": [(0, 7), (7, 4)],
            "reversed": [(4, 7), (0, 4)],
            "one_empty": [(0, 11), (11, 0)],
        }
        query_counts = {"unequal": [3, 2], "reversed": [2, 4], "one_empty": [0, 4]}
    else:
        shardings = {
            "unequal": [(0, 2), (2, 6), (8, 3)],
            "one_empty": [(5, 6), (0, 0), (0, 5)],
        }
        query_counts = {"unequal": [2, 3, 1], "one_empty": [3, 0, 2]}
    for name, shards in shardings.items():
        for constant in (False, True):
            items = torch.randint(-1, 2, (num_items, width), generator=gen).to(torch.float64)
            if constant:  # every score of a query ties, across every shard
                items[:] = items[0]
            queries, targets, excluded = [], [], []
            for q in query_counts[name]:
                queries.append(torch.randint(-2, 3, (q, width), generator=gen).to(torch.float64))
                target = torch.randint(0, num_items, (q, 3), generator=gen)
                target[torch.rand(q, 3, generator=gen) < 0.3] = -1  # padding, some empty rows
                targets.append(target)
                exclude = torch.randint(0, num_items, (q, 2), generator=gen)
                exclude[torch.rand(q, 2, generator=gen) < 0.3] = -1
                excluded.append(exclude)
            found[f"{name}_{'constant' if constant else 'random'}"] = {
                "items": items,
                "shards": shards,
                "queries": queries,
                "targets": targets,
                "exclude": excluded,
            }
    return found


def shard_scores(case: dict[str, Any], rank: int, **overrides: Any) -> Any:
    from ranking_plugins import ShardedEmbeddingScores

    offset, size = case["shards"][rank]
    arguments: dict[str, Any] = {
        "query_emb": case["queries"][rank],
        "item_shard": case["items"][offset : offset + size],
        "exclude": case["exclude"][rank],
        "chunk_size": 3,  # several chunks per shard
        "item_offset": offset,
        "catalogue_size": case["items"].shape[0],
    }
    arguments.update(overrides)
    return ShardedEmbeddingScores(**arguments)


def per_query(
    scores: Any, target: torch.Tensor, ties: str, validate_args: bool = True
) -> dict[str, torch.Tensor]:
    from ranking_plugins import rank_metrics

    return rank_metrics(
        scores, target, METRICS, TOP_K, reduction="none", ties=ties, validate_args=validate_args
    )


def dense_reference(case: dict[str, Any], ties: str) -> list[dict[str, torch.Tensor]]:
    """One process, the whole score matrix: each process's rows of the per-query values."""
    from ranking_plugins import rank_metrics

    queries = torch.cat(case["queries"])
    preds = queries @ case["items"].T
    mask = torch.ones(preds.shape, dtype=torch.bool)
    exclude = torch.cat(case["exclude"])
    rows = torch.arange(len(queries)).unsqueeze(1).expand_as(exclude)
    keep = exclude >= 0
    mask[rows[keep], exclude[keep]] = False
    width = max(t.shape[1] for t in case["targets"])
    target = torch.cat(
        [torch.nn.functional.pad(t, (0, width - t.shape[1]), value=-1) for t in case["targets"]]
    )
    values = rank_metrics(preds, target, METRICS, TOP_K, mask=mask, reduction="none", ties=ties)
    ends = torch.tensor([len(q) for q in case["queries"]]).cumsum(0).tolist()
    starts = [0, *ends[:-1]]
    return [{k: v[s:e] for k, v in values.items()} for s, e in zip(starts, ends)]


#: the metrics of item exposure: per query, and of the catalogue (no per-query value)
EXPOSURE_PER_QUERY = ["novelty", "arp", "tail_share", "diversity"]
EXPOSURE_CATALOGUE = ["coverage", "gini", "entropy", "personalisation"]
EXPOSURE_K = [1, 2, 4, 12]  # 12: more than the 11 items


def item_inputs(num_items: int) -> dict[str, torch.Tensor]:
    """The item inputs, for the whole catalogue (every process is given all of them)."""
    gen = torch.Generator().manual_seed(7)
    popularity = torch.randint(1, 9, (num_items,), generator=gen).to(torch.float64)
    return {
        "item_popularity": popularity,
        "tail_items": popularity <= 3,
        "item_features": torch.randn(num_items, 3, generator=gen, dtype=torch.float64),
    }


def exposure_values(preds: Any, target: torch.Tensor, ties: str, **options: Any) -> dict[str, Any]:
    """Per-query exposure values and the catalogue-level values of these queries."""
    from ranking_plugins import rank_metrics

    items = item_inputs(11)
    values = dict(
        rank_metrics(
            preds,
            target,
            EXPOSURE_PER_QUERY,
            EXPOSURE_K,
            reduction="none",
            ties=ties,
            **items,
            **options,
        )
    )
    values.update(
        rank_metrics(preds, target, EXPOSURE_CATALOGUE, EXPOSURE_K, ties=ties, **items, **options)
    )
    return values  # fmt: skip


def exposure_references(case: dict[str, Any], ties: str) -> list[dict[str, dict[str, Any]]]:
    """Each process's queries on one process: the whole table (``EmbeddingScores``) and
    the dense matrix (excluded items masked)."""
    from ranking_plugins import EmbeddingScores

    found = []
    for queries, target, exclude in zip(case["queries"], case["targets"], case["exclude"]):
        whole = EmbeddingScores(queries, case["items"], exclude=exclude, chunk_size=3)
        preds = queries @ case["items"].T
        mask = torch.ones(preds.shape, dtype=torch.bool)
        for row, ids in enumerate(exclude.tolist()):
            mask[row, [i for i in ids if i >= 0]] = False
        found.append(
            {
                "embedding": exposure_values(whole, target, ties),
                "dense": exposure_values(preds, target, ties, mask=mask),
            }
        )
    return found


def error_cases(world: int) -> dict[str, dict[str, Any]]:
    """Name -> overrides of the "unequal_random" case per rank (None: as it is)."""
    case = cases(world)["unequal_random"]
    last = world - 1
    offset, size = case["shards"][last]
    return {
        "overlap": {last: {"item_offset": offset - 1, "item_shard": case["items"][offset - 1 : offset - 1 + size]}},
        "gap": {last: {"item_shard": case["items"][offset : offset + size - 1]}},
        "target_outside": {last: {"target": torch.full((len(case["queries"][last]), 1), 11)}},
        "exclude_outside": {0: {"exclude": torch.full((len(case["queries"][0]), 1), -2)}},
        "width_differs": {last: {"query_emb": torch.zeros(len(case["queries"][last]), 4, dtype=torch.float64), "item_shard": torch.zeros(size, 4, dtype=torch.float64)}},
        "catalogue_differs": {last: {"catalogue_size": 12}},
        "dtype_differs": {last: {"query_emb": case["queries"][last].float(), "item_shard": case["items"][offset : offset + size].float()}},
    }  # fmt: skip


def outside_ids(case: dict[str, Any], rank: int) -> dict[str, torch.Tensor]:
    """This process's targets and exclusions with ids outside the catalogue of 11 put in."""
    found = {}
    for key, name in (("target", "targets"), ("exclude", "exclude")):
        ids = case[name][rank].clone()
        ids[:, 0] = torch.tensor([11, -2, 40, 12, -5, 11])[: ids.shape[0]]
        found[key] = ids
    return found


def run_kernel_cases(rank: int, world: int) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for name, case in cases(world).items():
        for ties in TIES:
            scores = shard_scores(case, rank)
            validate = ties in ("average", "pessimistic")  # both paths, default included
            report[f"{name}/{ties}"] = per_query(scores, case["targets"][rank], ties, validate)
        for ties in TIES:
            scores = shard_scores(case, rank)
            report[f"exposure/{name}/{ties}"] = exposure_values(scores, case["targets"][rank], ties)
    for name, overrides in error_cases(world).items():
        case = cases(world)["unequal_random"]
        mine = dict(overrides.get(rank, {}))
        target = mine.pop("target", case["targets"][rank])
        # ids outside the catalogue are read with validate_args=True only (issue 24)
        validate = name.endswith("_outside")
        try:
            per_query(shard_scores(case, rank, **mine), target, "average", validate_args=validate)
            report[f"error/{name}"] = None
        except Exception as error:  # the test checks the type and the message
            report[f"error/{name}"] = (type(error).__name__, str(error))
    # without validate_args they are padding, as for EmbeddingScores (issue 24, row 10)
    case = cases(world)["unequal_random"]
    outside = outside_ids(case, rank)
    for ties in ("average", "first"):
        scores = shard_scores(case, rank, exclude=outside["exclude"])
        report[f"outside/{ties}"] = per_query(scores, outside["target"], ties, validate_args=False)
    # a group of the wrong size: a group of process 0 only, which holds part of the table
    import torch.distributed as dist

    alone = dist.new_group([0])
    case = cases(world)["unequal_random"]
    try:  # process 0: a gap; the others: not members of the group at all
        per_query(shard_scores(case, rank, group=alone), case["targets"][rank], "average")
        report["error/group_too_small"] = None
    except Exception as error:
        report["error/group_too_small"] = (type(error).__name__, str(error))
    # bad item inputs: on every process (raised before any collective), and on one
    # process only (stated and raised on every process); differing options
    items = item_inputs(11)
    short = {"item_popularity": items["item_popularity"][:-1]}
    one_short = short if rank == world - 1 else {}
    for name, options in {
        "items_short": short,
        "items_short_on_one": one_short,
        "ties_differ": {"ties": "first" if rank == 0 else "average"},
        "validate_differs": {"validate_args": rank != 0},
        "depth_differs": {"top_k": [2] if rank == 0 else [3]},
    }.items():
        from ranking_plugins import rank_metrics

        metrics = ["novelty"] if name.startswith("items") else ["coverage", "mrr"]
        arguments: dict[str, Any] = {
            "top_k": [2],
            "item_popularity": items["item_popularity"],
            **options,
        }
        try:
            rank_metrics(shard_scores(case, rank), case["targets"][rank], metrics, **arguments)
            report[f"error/{name}"] = None
        except Exception as error:
            report[f"error/{name}"] = (type(error).__name__, str(error))
    # the group still works after the errors: one more case, every process in it
    case = cases(world)["unequal_random"]
    report["after_errors"] = per_query(shard_scores(case, rank), case["targets"][rank], "first")
    return report


def adapter_batches() -> list[dict[str, Any]]:
    """Two batches of the 2-process "unequal_random" problem (different queries)."""
    first = cases(2)["unequal_random"]
    second = cases(2)["reversed_random"]
    second = {**second, "items": first["items"], "shards": first["shards"]}
    return [first, second]


ADAPTER_METRICS = ["mrr", "ndcg", "hit_rate", "map", "coverage", "gini", "novelty", "diversity"]


def run_adapters(rank: int) -> dict[str, Any]:
    from ignite.engine import Engine

    from ranking_plugins import ignite as rp_ignite
    from ranking_plugins import torchmetrics as rp_tm

    report: dict[str, Any] = {}
    items = item_inputs(11)
    metric = rp_tm.RankingMetrics(ADAPTER_METRICS, top_k=[1, 3, 5], **items)
    for case in adapter_batches():
        metric.update(shard_scores(case, rank), case["targets"][rank])
    report["torchmetrics"] = {k: float(v) for k, v in metric.compute().items()}

    engine = Engine(lambda engine, case: (shard_scores(case, rank), case["targets"][rank]))
    rp_ignite.RankingMetrics(ADAPTER_METRICS, [1, 3, 5], **items).attach(engine, "ranking")
    state = engine.run(adapter_batches())
    # the engine spreads RankingMetrics' dict into its own keys
    report["ignite"] = {k: float(state.metrics[k]) for k in report["torchmetrics"]}
    return report


def single_process_adapters() -> dict[str, float]:
    """What one process gets from the whole score matrix of both batches."""
    from ranking_plugins import rank_metrics

    preds, targets, masks = [], [], []
    for case in adapter_batches():
        for rank, queries in enumerate(case["queries"]):
            scores = queries @ case["items"].T
            mask = torch.ones(scores.shape, dtype=torch.bool)
            for row, ids in enumerate(case["exclude"][rank].tolist()):
                mask[row, [i for i in ids if i >= 0]] = False
            preds.append(scores)
            masks.append(mask)
            targets.append(case["targets"][rank])
    values = rank_metrics(
        torch.cat(preds),
        torch.cat(targets),
        ADAPTER_METRICS,
        [1, 3, 5],
        mask=torch.cat(masks),
        **item_inputs(11),
    )
    return {k: float(v) for k, v in values.items()}


def worker(local_rank: int, out_dir: str) -> None:
    import ignite.distributed as idist

    torch.set_num_threads(1)
    rank, world = idist.get_rank(), idist.get_world_size()
    report = {"world": world, **run_kernel_cases(rank, world)}
    if world == 2:
        report.update(run_adapters(rank))
    torch.save(report, Path(out_dir) / f"rank{rank}.pt")


if __name__ == "__main__":
    parallel_main(worker)
