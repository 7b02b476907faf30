"""An item catalogue sharded across processes: exact ranks from counts, no gathered table.

:class:`ShardedEmbeddingScores` describes the score matrix of the queries of
every process of a ``torch.distributed`` group against a catalogue whose
item table is split into contiguous shards, one per process.
:func:`sharded_stats` gives each process the rank statistics of its own
queries against the whole catalogue, exactly as
:func:`~ranking_plugins.kernel.catalogue.chunked.embedding_stats` gives them
on one process holding the whole table and every query:

1. every process states its sizes (one small all-gather) and all of them
   take the same decision on them: errors are raised on every process alike;
2. the query embeddings and the target and excluded ids are all-gathered
   (Q x d, Q x (T + X) per process);
3. each target's score is computed by the shard that holds the target and
   shared (an all-reduce of a (Q, T) tensor, zero where not owned);
4. every process counts, for every process's queries, the items of its own
   shard above and tied with each target
   (:class:`~ranking_plugins.kernel.statistics.counting.RankCounter`, with the
   shard's global item ids); counts add up over any split of the catalogue,
   so a reduce-scatter of the (C, Q, T) counts gives each process its
   queries' counts over the whole catalogue, ties across shards included.

For the metrics of item exposure (``top_depth``: the largest k),
:func:`_top_across_shards` adds what the top k of each query holds, ties
included: each shard's best k scores go to the query's owner, which finds
the cutoff score; every shard learns it and sends the owner its items at or
above it (the cutoff's tie group from a second walk of the shard), which
the owner ranks as :class:`EmbeddingScores` ranks its own candidates.

What crosses processes per batch is the query embeddings and ids, (Q, T)
scores and (C, Q, T) counts, and for the exposure metrics (Q, k) scores and
the candidates; :data:`traffic` adds up their bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from numbers import Integral
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import Tensor

from ranking_plugins import _validation as validation
from ranking_plugins.kernel.catalogue.checks import (
    ShardError,
    check_embedding_targets,
    check_exclude,
    check_scoring,
)
from ranking_plugins.kernel.catalogue.chunked import EmbeddingScores, ScoreFn, listed_scores
from ranking_plugins.kernel.catalogue.top_lists import (
    chunk_tops,
    excluded_in_chunk,
    ranked_candidates,
)
from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.inputs.checks import item_ids_in_catalogue
from ranking_plugins.kernel.inputs.parts import lowest
from ranking_plugins.kernel.inputs.relevance import GainRule, ItemIds
from ranking_plugins.kernel.ranking.tie_groups import TIES, RankedList
from ranking_plugins.kernel.statistics.count_stats import CountStats
from ranking_plugins.kernel.statistics.counting import RankCounter, distinct_ids

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup


@dataclass(frozen=True, eq=False)
class ShardedEmbeddingScores:
    """The score matrix of every process's queries against a catalogue sharded across processes.

    Each process of ``group`` holds one contiguous shard of the item table,
    items ``item_offset, ..., item_offset + len(item_shard) - 1`` of a
    catalogue of ``catalogue_size`` items, and its own queries. Passed where
    ``preds`` goes, with item-index targets (global item ids), it gives every
    process the metrics of its own queries against the whole catalogue:
    every metric, at every k, under every tie policy, what
    :class:`~ranking_plugins.EmbeddingScores` gives on one process holding
    the whole table and every process's queries, ties across shards and
    targets or exclusions on other shards included.

    Each evaluation is collective: every process of ``group`` must evaluate
    the same number of batches, in the same order (a process without queries
    passes ``(0, d)`` query embeddings).

    Args:
        query_emb: (Q, d) this process's queries; Q may differ between processes.
        item_shard: (n, d) this process's rows of the item table (n may be 0).
        score_fn: as for :class:`~ranking_plugins.EmbeddingScores`; the same
            function on every process (also called with no items, to learn
            its dtype).
        exclude: (Q, X) global ids of items not ranked for each query, on any
            shard, ``-1`` for padding.
        chunk_size: items scored at once; memory grows as (all processes'
            queries) x chunk_size.
        item_offset: the global id of ``item_shard``'s first row.
        catalogue_size: N, the items of the whole catalogue; the same on every
            process.
        group: the process group, one process per shard (None: the default
            group).

    Shards that overlap or leave a gap; ``catalogue_size``, embedding widths,
    ``ties``, ``validate_args`` or the exposure metrics' largest k that differ
    between processes; item inputs of another catalogue size; and, with
    ``validate_args=True``, target or excluded ids outside the catalogue raise
    :class:`ShardError` on every process. With ``validate_args=False`` such an
    id is padding, as for :class:`~ranking_plugins.EmbeddingScores` and every
    other layout (it names no item: no shard holds it, none reads a score for it).

    The metrics of item exposure take their item inputs for the whole
    catalogue (global ids), given to every process.
    """

    query_emb: Tensor
    item_shard: Tensor
    score_fn: ScoreFn | None = None
    exclude: Tensor | None = None
    chunk_size: int = 32768
    item_offset: int = field(kw_only=True)
    catalogue_size: int = field(kw_only=True)
    group: ProcessGroup | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        _check_sharded_scores(self)

    @property
    def num_queries(self) -> int:
        return self.query_emb.shape[0]

    @property
    def device(self) -> torch.device:
        return self.query_emb.device

    def tensors(self) -> tuple[Tensor, ...]:
        """The tensors this process's part of the scores depends on."""
        found = (self.query_emb, self.item_shard, self.exclude)
        return tuple(t for t in found if t is not None)

    def scores_against_shard(self, query_emb: Tensor) -> EmbeddingScores:
        """The scores of ``query_emb`` against this process's shard (local item ids)."""
        return EmbeddingScores(query_emb, self.item_shard, self.score_fn, None, self.chunk_size)


def _check_sharded_scores(scores: ShardedEmbeddingScores) -> None:
    """What :class:`~ranking_plugins.ShardedEmbeddingScores` checks when it is made."""
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "ShardedEmbeddingScores needs torch.distributed: call "
            "torch.distributed.init_process_group first (Lightning's DDP strategy "
            "and ignite.distributed.Parallel do)"
        )
    if dist.get_rank(scores.group) < 0:
        raise ShardError("`group`: this process is not a member of the process group")
    check_scoring(
        scores.query_emb, scores.item_shard, "item_shard", "n", scores.score_fn, scores.chunk_size
    )
    for name in ("item_offset", "catalogue_size"):
        value = getattr(scores, name)
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise TypeError(f"`{name}` must be an int, got {value!r}")
        if value < 0:
            raise ValueError(f"`{name}` must be a non-negative int, got {value}")
    check_exclude(scores.exclude, scores.query_emb.shape[0])
    validation.check_same_device(
        query_emb=scores.query_emb, item_shard=scores.item_shard, exclude=scores.exclude
    )


class Traffic:
    """Bytes of the tensors this process's collectives carried (for the benchmark).

    All-gather: the gathered tensor; all-reduce: the tensor; reduce-scatter:
    the input (every process's part); all-to-all: what this process receives.
    """

    def __init__(self) -> None:
        self.bytes = 0
        self.collectives = 0

    def add(self, *tensors: Tensor) -> None:
        self.bytes += sum(t.numel() * t.element_size() for t in tensors)
        self.collectives += 1


traffic = Traffic()

#: dtypes a process may send (codes are their positions)
_DTYPES = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
)
#: what each process states about its inputs, in this order
_FIELDS = (
    "problem",
    "queries",
    "query_width",
    "query_dtype",
    "shard_width",
    "item_offset",
    "shard_size",
    "catalogue_size",
    "score_dtype",
    "targets",
    "excluded",
    "ties",
    "validate_args",
    "depth",
)


def _all_gather(tensor: Tensor, group: ProcessGroup | None, world: int) -> list[Tensor]:
    parts = [torch.empty_like(tensor) for _ in range(world)]
    dist.all_gather(parts, tensor.contiguous(), group=group)
    traffic.add(*parts)
    return parts


def _dtype_code(name: str, dtype: torch.dtype) -> int:
    if dtype not in _DTYPES:
        raise TypeError(f"`{name}`: {dtype} cannot be sent between processes")
    return _DTYPES.index(dtype)


def _local_inputs(
    scores: ShardedEmbeddingScores,
    target: Tensor,
    rule: GainRule,
    validate_args: bool,
    check_catalogue: Callable[[int], None] | None,
) -> tuple[str | None, Tensor, dict[str, int], ShardedEmbeddingScores]:
    """This process's checked ids (Q, T), statement and ``scores`` (``exclude`` in range).

    A problem comes back as a message, not raised.
    """
    query_emb, num_items = scores.query_emb, scores.catalogue_size
    stated = {
        "queries": scores.num_queries,
        "query_width": query_emb.shape[1],
        "shard_width": scores.item_shard.shape[1],
        "item_offset": scores.item_offset,
        "shard_size": scores.item_shard.shape[0],
        "catalogue_size": num_items,
        "excluded": 0 if scores.exclude is None else scores.exclude.shape[1],
    }
    ids = torch.empty((scores.num_queries, 0), dtype=torch.int64, device=query_emb.device)
    try:
        if check_catalogue is not None:  # the item inputs describe the whole catalogue
            check_catalogue(num_items)
        checked = check_embedding_targets(target, query_emb)
        # as for EmbeddingScores: an id outside the catalogue is an error, or padding
        # without validate_args (on every process alike: validate_args is stated)
        checked = item_ids_in_catalogue("target", checked, num_items, validate_args)
        if scores.exclude is not None:
            exclude = scores.exclude.detach().to(torch.int64)
            exclude = item_ids_in_catalogue("exclude", exclude, num_items, validate_args)
            if not validate_args:
                scores = replace(scores, exclude=exclude)
        if validate_args:
            validation.check_values(query_emb, None, None, num_items)
        probe = scores.scores_against_shard(query_emb).score(scores.item_shard[:0])
        stated["query_dtype"] = _dtype_code("query_emb", query_emb.dtype)
        stated["score_dtype"] = _dtype_code("score_fn's scores", probe.dtype)
        ids = distinct_ids(ItemIds(checked, num_items, rule).item_ids)
    except (TypeError, ValueError, RuntimeError) as error:
        return str(error), ids, stated, scores
    stated["targets"] = ids.shape[1]
    return None, ids, stated, scores


def _layout_problem(table: list[dict[str, int]]) -> str | None:
    """What is wrong with the processes' statements taken together (the same everywhere)."""
    world = len(table)

    def differ(key: str, what: str) -> str | None:
        values = [row[key] for row in table]
        if len(set(values)) == 1:
            return None
        if key.endswith("dtype"):
            shown = ", ".join(str(_DTYPES[v]) for v in values)
        elif key == "ties":
            shown = ", ".join(repr(TIES[v]) for v in values)
        elif key == "validate_args":
            shown = ", ".join(str(bool(v)) for v in values)
        else:
            shown = ", ".join(map(str, values))
        return f"{what} differs across the processes of the group: {shown} (process 0, 1, ...)"

    for key, what in (
        ("ties", "`ties`"),
        ("validate_args", "`validate_args`"),
        ("depth", "the deepest k of the exposure metrics (-1: none asked)"),
        ("catalogue_size", "`catalogue_size`"),
        ("query_width", "the embedding width of `query_emb`"),
        ("shard_width", "the embedding width of `item_shard`"),
        ("query_dtype", "the dtype of `query_emb`"),
        ("score_dtype", "the dtype of `score_fn`'s scores"),
    ):
        problem = differ(key, what)
        if problem:
            return problem
    size = table[0]["catalogue_size"]
    shards = sorted(
        (row["item_offset"], row["item_offset"] + row["shard_size"], rank)
        for rank, row in enumerate(table)
        if row["shard_size"] > 0
    )
    for start, end, rank in shards:
        if end > size:
            return (
                f"the shard of process {rank} (items [{start}, {end})) reaches beyond "
                f"`catalogue_size` = {size}: check `item_offset` and `catalogue_size`"
            )
    covered, previous = 0, (0, 0, -1)
    for start, end, rank in shards:
        if start < covered:
            return (
                f"the shards of the {world} processes of `group` overlap: process "
                f"{previous[2]} holds items [{previous[0]}, {previous[1]}) and process "
                f"{rank} items [{start}, {end}); each item must be in exactly one shard "
                "(is `group` the group of one copy of the table, one process per shard?)"
            )
        if start > covered:
            return _gap(world, covered, start, size)
        covered, previous = end, (start, end, rank)
    return _gap(world, covered, size, size) if covered < size else None


def _gap(world: int, start: int, end: int, size: int) -> str:
    return (
        f"the shards of the {world} processes of `group` leave items [{start}, {end}) of the "
        f"{size} in `catalogue_size` in no shard (is `group` missing the processes of "
        "other shards, or an `item_offset` wrong?)"
    )


def sharded_stats(
    scores: ShardedEmbeddingScores,
    target: Tensor,
    *,
    ties: str,
    rule: GainRule,
    validate_args: bool,
    top_depth: int | None = None,
    check_catalogue: Callable[[int], None] | None = None,
) -> CountStats:
    """Rank statistics of this process's queries over the whole sharded catalogue.

    ``top_depth``: also the ranked list of each query's first ``top_depth``
    places with their catalogue ids (``top_list``, what the exposure metrics
    read), from the candidates of every shard (:func:`_top_across_shards`).
    ``check_catalogue(catalogue_size)`` raises when the item inputs describe
    another catalogue (its error is raised on every process).

    Collective over ``scores.group``: every process must call it for its batch.
    """
    group = scores.group
    world, me = dist.get_world_size(group), dist.get_rank(group)
    device = scores.device
    with torch.no_grad():
        problem, ids, stated, scores = _local_inputs(
            scores, target, rule, validate_args, check_catalogue
        )
        stated["ties"] = TIES.index(ties)
        stated["validate_args"] = int(validate_args)
        stated["depth"] = -1 if top_depth is None else top_depth
        statement = [int(problem is not None)] + [stated.get(key, 0) for key in _FIELDS[1:]]
        gathered = _all_gather(torch.tensor(statement, device=device), group, world)
        table = [dict(zip(_FIELDS, row.tolist(), strict=True)) for row in gathered]
        if any(row["problem"] for row in table):
            messages: list[str | None] = [None] * world
            dist.all_gather_object(messages, problem, group=group)
            raise ShardError(
                "; ".join(
                    f"process {rank} of the group: {message}"
                    for rank, message in enumerate(messages)
                    if message is not None
                )
            )
        layout_problem = _layout_problem(table)
        if layout_problem is not None:
            raise ShardError(layout_problem)
        relevance = ItemIds(ids, scores.catalogue_size, rule)
        return _count_across_shards(scores, relevance, table, me, ties, validate_args, top_depth)


def _count_across_shards(
    scores: ShardedEmbeddingScores,
    relevance: ItemIds,
    table: list[dict[str, int]],
    me: int,
    ties: str,
    validate_args: bool,
    top_depth: int | None,
) -> CountStats:
    group, world, device = scores.group, len(table), scores.device
    num_items, ids = scores.catalogue_size, relevance.item_ids
    score_dtype = _DTYPES[table[0]["score_dtype"]]
    queries = [row["queries"] for row in table]
    most_queries = max(queries)
    most_targets = max(row["targets"] for row in table)
    most_excluded = max(row["excluded"] for row in table)
    exclude = scores.exclude
    if sum(queries) == 0 or num_items == 0:
        # nothing to count or rank anywhere (the same decision on every process)
        nothing = torch.zeros(ids.shape, dtype=torch.float64, device=device)
        return RankCounter(ids, nothing, num_items, ties, exclude=exclude).stats()

    # 2. every process's queries, target ids and excluded ids, rows padded to one count
    pad = most_queries - scores.num_queries
    own_rows = torch.nn.functional.pad(scores.query_emb, (0, 0, 0, pad))
    listed = torch.full((most_queries, most_targets + most_excluded), -1, device=device)
    listed[: scores.num_queries, : ids.shape[1]] = ids
    if exclude is not None:
        listed[: scores.num_queries, most_targets : most_targets + exclude.shape[1]] = exclude
    rows = [slice(0, q) for q in queries]
    all_queries = torch.cat(
        [part[r] for part, r in zip(_all_gather(own_rows, group, world), rows, strict=True)]
    )
    all_listed = torch.cat(
        [part[r] for part, r in zip(_all_gather(listed, group, world), rows, strict=True)]
    )
    all_ids = all_listed[:, :most_targets]
    all_exclude = all_listed[:, most_targets:] if most_excluded else None
    if most_targets == 0:  # no target anywhere: nothing to count (decided on gathered data)
        nothing = torch.zeros(ids.shape, dtype=torch.float64, device=device)
        result = RankCounter(ids, nothing, num_items, ties, exclude=exclude)
    else:
        result = _counts(
            scores, all_queries, all_ids, all_exclude, queries, me, ties, validate_args, score_dtype
        )
    stats = result.stats()
    if top_depth is not None:
        stats.top_list = _top_across_shards(
            scores, all_queries, all_exclude, queries, me, top_depth, relevance, ties, score_dtype
        )
        stats.num_items = num_items
    return stats


def _counts(
    scores: ShardedEmbeddingScores,
    all_queries: Tensor,
    all_ids: Tensor,
    all_exclude: Tensor | None,
    queries: list[int],
    me: int,
    ties: str,
    validate_args: bool,
    score_dtype: torch.dtype,
) -> RankCounter:
    """This process's queries' counts over every shard (steps 3 and 4)."""
    group, device = scores.group, scores.device
    num_items, most_queries = scores.catalogue_size, max(queries)

    # 3. each target's score, from the shard that holds it
    local = scores.scores_against_shard(all_queries)
    offset, size = scores.item_offset, scores.item_shard.shape[0]
    owned = (all_ids >= offset) & (all_ids < offset + size)
    may_read = host_reads_are_free(all_ids) or validate_args
    target_scores = torch.zeros(all_ids.shape, dtype=score_dtype, device=device)
    if size > 0 and not (may_read and not bool(owned.any())):
        found = listed_scores(local, torch.where(owned, all_ids - offset, -1), may_read)
        target_scores = torch.where(owned, found.to(score_dtype), target_scores)
    dist.all_reduce(target_scores, group=group)
    traffic.add(target_scores)

    # 4. this shard's counts for every query, summed over the shards
    counter = RankCounter(all_ids, target_scores, num_items, ties, exclude=all_exclude)
    nan = False
    for start in local.chunks():
        block = local.score_chunk(start)
        if validate_args and not nan:
            nan = validation.has_nan(block)
        counter.add(block, offset + start)
        del block  # freed before the next chunk is scored
    changed = may_read and bool(counter.changed_rows().any())
    counts = counter.counts()
    flags = torch.tensor([int(nan), int(changed)], device=device)
    ends = torch.tensor(queries).cumsum(0).tolist()
    parts = []
    for end, q in zip(ends, queries, strict=True):
        part = torch.nn.functional.pad(counts[:, end - q : end], (0, 0, 0, most_queries - q))
        parts.append(torch.cat((part.flatten(), flags)))
    mine = torch.empty_like(parts[0])
    dist.reduce_scatter(mine, parts, group=group)
    traffic.add(*parts)
    if validate_args or may_read:
        nan_shards, changed_shards = mine[-2:].tolist()
        if nan_shards:
            raise ValueError("`score_fn` gave NaN scores")
        if changed_shards:
            raise ValueError(
                "`score_fn` gave different scores to the same (query, item) pairs in two "
                "calls over the same items; ShardedEmbeddingScores needs a deterministic "
                "`score_fn` (see torch.use_deterministic_algorithms)"
            )
    own = slice(ends[me] - queries[me], ends[me])
    own_exclude = None if all_exclude is None else all_exclude[own]
    result = RankCounter(all_ids[own], target_scores[own], num_items, ties, own_exclude)
    result.set_counts(mine[:-2].view(counts.shape[0], most_queries, -1)[:, : queries[me]])
    return result


def _top_across_shards(
    scores: ShardedEmbeddingScores,
    all_queries: Tensor,
    all_exclude: Tensor | None,
    queries: list[int],
    me: int,
    depth: int,
    relevance: ItemIds,
    ties: str,
    score_dtype: torch.dtype,
) -> RankedList:
    """The ranked list of this process's queries' first ``depth`` places, catalogue ids.

    5. every shard finds, for every process's queries, its best ``depth`` + 1
       scores (excluded items and missing places at the lowest score); the
       process owning a query merges them (an all-to-all of (Q, depth)
       scores) into the score ``b`` at place ``depth`` of the whole catalogue,
       and every shard learns every query's ``b`` (an all-gather of Q scores);
    6. every shard sends the owner its ranked items scoring ``b`` or more:
       those above (among its best ``depth``) and every member of the tie
       group at ``b`` (a second walk of the shard, only for the rows whose
       place ``depth`` + 1 still scores ``b``): counts, then ids and scores,
       all-to-all;
    7. the owner ranks these candidates
       (:func:`~ranking_plugins.kernel.catalogue.top_lists.ranked_candidates`),
       the same candidates :class:`EmbeddingScores` keeps for the whole table.
    """
    group, world, device = scores.group, len(queries), scores.device
    num_items, offset = scores.catalogue_size, scores.item_offset
    size = scores.item_shard.shape[0]
    total, mine = sum(queries), queries[me]
    bottom = lowest(score_dtype)
    # this shard's ids of the excluded items (-1: elsewhere or padding)
    local_exclude = None
    if all_exclude is not None:
        inside = (all_exclude >= offset) & (all_exclude < offset + size)
        local_exclude = torch.where(inside, all_exclude - offset, -1)
    shard = EmbeddingScores(
        all_queries, scores.item_shard, scores.score_fn, local_exclude, scores.chunk_size
    )
    # 5. the shard's best `depth` + 1 (ranked ones; the rest at the lowest score): the
    # first `depth` give the cutoff, the next one says whether its tie group goes on
    top_values = torch.full((total, depth + 1), bottom, dtype=score_dtype, device=device)
    top_ids = torch.full((total, depth + 1), num_items, dtype=torch.int64, device=device)
    if size > 0:
        values, found = chunk_tops(shard, min(depth + 1, size))
        top_values[:, : values.shape[1]] = values.to(score_dtype)
        top_ids[:, : found.shape[1]] = found + offset
    ranked = top_ids < num_items
    if all_exclude is not None:
        ranked &= ~(top_ids.unsqueeze(-1) == all_exclude.unsqueeze(1)).any(dim=-1)
    top_values = torch.where(ranked, top_values, torch.full_like(top_values, bottom))
    sent = [q * depth for q in queries]
    received = _all_to_all(top_values[:, :depth].flatten(), sent, [mine * depth] * world, group)
    merged = received.view(world, mine, depth).permute(1, 0, 2).reshape(mine, world * depth)
    own_cut = merged.topk(depth, dim=1).values[:, -1]
    padded = torch.nn.functional.pad(own_cut, (0, max(queries) - mine), value=0)
    cut = torch.cat(
        [part[:q] for part, q in zip(_all_gather(padded, group, world), queries, strict=True)]
    )
    # 6. this shard's ranked items scoring `cut` or more, for every query
    walk = top_values[:, depth] == cut if size > depth + 1 else None
    rows, ids, values = _at_or_above(shard, offset, top_ids, top_values, ranked, cut, walk)
    counts = torch.bincount(rows, minlength=total)
    owners = torch.repeat_interleave(
        torch.arange(world, device=device), torch.tensor(queries, device=device)
    )
    send = torch.zeros(world, dtype=torch.int64, device=device).index_add_(0, owners, counts)
    from_each = _all_to_all(counts, queries, [mine] * world, group).view(world, mine)
    sizes = from_each.sum(1).tolist()
    got_ids = _all_to_all(ids, send.tolist(), sizes, group)
    got_values = _all_to_all(values, send.tolist(), sizes, group)
    # 7. the owner's candidates: rows padded with id N
    row_of = torch.repeat_interleave(
        torch.arange(mine, device=device).repeat(world), from_each.flatten()
    )
    row_of, order = row_of.sort(stable=True)
    per_row = torch.bincount(row_of, minlength=mine)
    width = max(int(per_row.max()) if mine else 0, 1)
    starts = per_row.cumsum(0) - per_row
    column = torch.arange(row_of.shape[0], device=device) - starts[row_of]
    candidate_ids = torch.full((mine, width), num_items, dtype=torch.int64, device=device)
    candidate_values = torch.full((mine, width), bottom, dtype=score_dtype, device=device)
    candidate_ids[row_of, column] = got_ids[order]
    candidate_values[row_of, column] = got_values[order]
    return ranked_candidates(candidate_ids, candidate_values, relevance, ties, depth, num_items)


def _at_or_above(
    shard: EmbeddingScores,
    offset: int,
    top_ids: Tensor,
    top_values: Tensor,
    ranked: Tensor,
    cut: Tensor,
    walk: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """(row, global id, score) of the shard's ranked items scoring ``cut`` or more, by row.

    From the shard's best places, except for the ``walk`` rows, whose tie group at
    ``cut`` may go on past them (their last place scores ``cut``): those are read
    from a second walk of the shard, which scores every row as the first did, so
    that each item keeps the score it had there.
    """
    take = ranked & (top_values >= cut.unsqueeze(1))
    walk_rows = None
    if walk is not None:
        walk_rows = walk.nonzero().squeeze(1)
        take &= ~walk.unsqueeze(1)
    rows, places = take.nonzero(as_tuple=True)
    found = [(rows, top_ids[rows, places], top_values[rows, places])]
    if walk_rows is not None and walk_rows.numel():
        bound = cut[walk_rows].unsqueeze(1)
        for start in shard.chunks():
            block = shard.score_chunk(start)[walk_rows].to(top_values.dtype)
            chosen = block >= bound
            excluded = excluded_in_chunk(shard, start, block.shape[1])
            if excluded is not None:
                chosen &= ~excluded[walk_rows]
            r, c = chosen.nonzero(as_tuple=True)
            found.append((walk_rows[r], c + (offset + start), block[r, c]))
            del block
    rows = torch.cat([f[0] for f in found])
    rows, order = rows.sort(stable=True)
    ids = torch.cat([f[1] for f in found])[order]
    values = torch.cat([f[2] for f in found])[order]
    return rows, ids, values


def _all_to_all(
    tensor: Tensor, sent: list[int], received: list[int], group: ProcessGroup | None
) -> Tensor:
    """Part i of ``tensor`` (``sent[i]`` entries) goes to process i; this process gets
    ``received[i]`` entries from process i, in process order."""
    out = torch.empty(sum(received), dtype=tensor.dtype, device=tensor.device)
    dist.all_to_all_single(out, tensor.contiguous(), received, sent, group=group)
    traffic.add(out)
    return out


__all__ = ["ShardError", "ShardedEmbeddingScores", "Traffic", "sharded_stats", "traffic"]
