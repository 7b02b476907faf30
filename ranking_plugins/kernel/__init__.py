"""The rank kernel: the one place that ranks items.

It reads top to bottom like SPEC.md, one sub-package per stage, each importing
only from the stages before it (``tests/test_tree.py`` holds that):

1. :mod:`~ranking_plugins.kernel.inputs`: :func:`normalize_input` turns any
   tensor layout (dense, item indices, grouped) into one shape, a
   :class:`Batch` of parts: scores ``(Q, N)``, an optional ``ranked`` mask and
   a :class:`Relevance` that answers questions about the targets.
2. :mod:`~ranking_plugins.kernel.ranking`: :func:`rank` orders the items of
   every query under a ``ties`` policy and describes the ranked list as *tie
   groups*.
3. :mod:`~ranking_plugins.kernel.statistics`: :class:`RankStats` (from a ranked
   list) and :class:`CountStats` (from counts: :func:`count_ranks` counts, for
   item-index targets, the items above and tied with each relevant item
   instead of ranking) give hits@k, DCG@k, AP@k, RR@k, ... at any cutoff,
   exactly, from SPEC section 3's closed forms; :class:`Cutoff` reads them at
   one cutoff per query and k.
4. :mod:`~ranking_plugins.kernel.catalogue`: scores given as embeddings, never
   a matrix: :class:`EmbeddingScores` is walked chunk by chunk and counted,
   :class:`ShardedEmbeddingScores` the same over an item table sharded across
   processes.

:func:`rank_inputs` is the one entry from a batch's inputs and a
:class:`RankingPlan` to its statistics (:class:`RankedBatch`);
:mod:`~ranking_plugins.kernel.ranked_batch` ranks a batch part by part. Metric
formulas on top of these statistics live in :mod:`ranking_plugins.metrics`.

The package's other modules import the kernel's names from here (this
module's ``__all__``), not from its submodules: among them the item inputs of
the exposure metrics (:class:`ItemInputs`) and the statistics those metrics
read (:class:`Exposure`, :class:`TopItems`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from ranking_plugins.kernel.catalogue import (
    EmbeddingScores,
    ScoreFn,
    ShardedEmbeddingScores,
    ShardError,
    check_embedding_ids,
    check_embedding_inputs,
    dot_scores,
    embedding_stats,
    embedding_top_list,
    sharded_stats,
)
from ranking_plugins.kernel.flags import broadcast_shape, count_true
from ranking_plugins.kernel.host_reads import host_reads_are_free
from ranking_plugins.kernel.inputs import (
    Batch,
    DenseGrades,
    GainRule,
    ItemIds,
    Part,
    RankingInput,
    Relevance,
    check_grades,
    check_grouped,
    check_inputs,
    normalize_input,
)
from ranking_plugins.kernel.inputs.checks import check_judged
from ranking_plugins.kernel.inputs.items import (
    ITEM_FIELDS,
    ITEM_INPUTS,
    ITEM_KEYWORDS,
    NO_ITEM_INPUTS,
    AdapterItemKeywords,
    ItemInputs,
    ItemKeywords,
)
from ranking_plugins.kernel.ranked_batch import (
    RankedBatch,
    Unranked,
    rank_batch,
    rank_stats,
    ranking_method,
)
from ranking_plugins.kernel.ranking import TIES, RankedList, rank
from ranking_plugins.kernel.statistics import (
    CountStats,
    Cutoff,
    ListStats,
    RankCounter,
    RankStats,
    count_ranks,
)
from ranking_plugins.kernel.statistics.closed_forms import recall_level_cut
from ranking_plugins.kernel.statistics.exposure import (
    COUNTS,
    LOG_ABSENT,
    Exposure,
    TopItems,
    personalisation,
)
from ranking_plugins.kernel.statistics.intents import (
    IntentStats,
    intent_stats,
    nrbp_scale,
    subtopic_relevance,
)


@dataclass(frozen=True)
class RankingPlan:
    """How a batch is ranked, the same for every batch of a request.

    ``target_format``: the layout of the targets (None: told by their shape);
    ``rule``: which grades are relevant and what they earn; ``ties``: the tie
    policy; ``depth``: how deep lists are ranked (None: whole lists);
    ``validate_args``: whether checks may read values. ``identities``,
    ``judgments`` and ``check_catalogue``: see :func:`rank_inputs`. ``first_hits``:
    the metrics read where the first relevant item lies, nothing else (hit_rate,
    mrr): the lists may then be described by their first relevant group alone.
    """

    target_format: str | None
    rule: GainRule
    ties: str
    depth: int | None
    validate_args: bool
    identities: bool = False
    judgments: bool = False
    check_catalogue: Callable[[int], None] | None = None
    first_hits: bool = False


def rank_inputs(
    preds: Tensor | EmbeddingScores | ShardedEmbeddingScores,
    target: Tensor,
    plan: RankingPlan,
    *,
    indexes: Tensor | None,
    mask: Tensor | None,
    judged: Tensor | None = None,
    scores_checked: bool = False,
) -> RankedBatch:
    """The rank statistics of one batch, from its inputs, for every layout, as ``plan`` says.

    Checks the inputs, brings them to a :class:`Batch` and ranks it down to
    ``depth`` (None: whole lists), or, for :class:`EmbeddingScores`, walks the
    catalogue and counts. Both call through this module's names
    (:func:`rank_batch`, :func:`embedding_stats`), where tests observe them.

    ``identities``: the statistics must say which catalogue item holds each
    place (the metrics of item exposure): dense and item-index inputs (a
    column of the scores is an item) and ``EmbeddingScores`` (whose top
    ``depth`` is kept chunk by chunk, :func:`embedding_top_list`) have them,
    and ``ShardedEmbeddingScores`` (whose shards send each query's owner their
    candidates, :func:`sharded_stats`). ``check_catalogue(catalogue_size)``
    (sharded only) raises when the item inputs describe another catalogue: on
    every process of the group alike.

    ``judged``: which items carry a judgment (None: every item);
    ``judgments``: a metric reads them (bpref, infAP, unj, ...): the caller asks
    whole lists (``depth=None``); counting (item ids, ``EmbeddingScores``)
    counts the judged items too, in the same pass or walk.

    ``scores_checked``: grouped scores already checked for NaN (kept by an
    adapter's ``update``, which checked them); the grades are still checked.
    """
    target_format, rule, ties, depth = plan.target_format, plan.rule, plan.ties, plan.depth
    validate_args, identities, judgments = plan.validate_args, plan.identities, plan.judgments
    check_catalogue = plan.check_catalogue
    # the layouts a request's metrics cannot read are refused by the request, which
    # names them from the metric table (``RankingRequest.check_layout``)
    if judged is not None and isinstance(preds, ShardedEmbeddingScores):
        raise ValueError(
            "`judged` does not take ShardedEmbeddingScores yet; pass EmbeddingScores or "
            "the (Q, N) score matrix"
        )
    if isinstance(preds, EmbeddingScores):
        check_embedding_inputs(indexes=indexes, mask=mask, target_format=target_format)
        # every id checked, or made padding when outside the catalogue, before any is read
        preds, ids, judged = check_embedding_ids(preds, target, judged, validate_args)
        stats = embedding_stats(
            preds,
            ids,
            ties=ties,
            rule=rule,
            validate_args=validate_args,
            judged=judged,
            judgments=judgments,
        )
        if identities and depth is not None and preds.num_items:
            # the exposure metrics: each query's top, its best candidates kept chunk by chunk
            relevance = ItemIds(ids, preds.num_items, rule)
            stats.top_list = embedding_top_list(preds, relevance, ties, depth)
            stats.num_items = preds.num_items
        return RankedBatch(
            preds.num_queries, preds.device, ((slice(None), stats),), True, identities
        )
    if isinstance(preds, ShardedEmbeddingScores):
        # collective: every process of the group evaluates its batch together
        check_embedding_inputs(indexes=indexes, mask=mask, target_format=target_format)
        stats = sharded_stats(
            preds,
            target,
            ties=ties,
            rule=rule,
            validate_args=validate_args,
            top_depth=depth if identities else None,
            check_catalogue=check_catalogue,
        )
        return RankedBatch(
            preds.num_queries, preds.device, ((slice(None), stats),), True, identities
        )
    batch = normalize_input(
        preds,
        target,
        indexes=indexes,
        mask=mask,
        target_format=target_format,
        rule=rule,
        validate_args=validate_args,
        judged=judged,
        depth=depth,
        scores_checked=scores_checked,
        first_hits=plan.first_hits,
    )
    return rank_batch(
        batch, ties, depth, identities=identities, judgments=judgments, first_hits=plan.first_hits
    )


__all__ = [
    "COUNTS",
    "ITEM_FIELDS",
    "ITEM_INPUTS",
    "ITEM_KEYWORDS",
    "LOG_ABSENT",
    "NO_ITEM_INPUTS",
    "TIES",
    "AdapterItemKeywords",
    "Batch",
    "CountStats",
    "Cutoff",
    "DenseGrades",
    "EmbeddingScores",
    "Exposure",
    "GainRule",
    "IntentStats",
    "ItemIds",
    "ItemInputs",
    "ItemKeywords",
    "ListStats",
    "Part",
    "RankCounter",
    "RankStats",
    "RankedBatch",
    "RankedList",
    "RankingInput",
    "RankingPlan",
    "Relevance",
    "ScoreFn",
    "ShardError",
    "ShardedEmbeddingScores",
    "TopItems",
    "Unranked",
    "broadcast_shape",
    "check_embedding_inputs",
    "check_grades",
    "check_grouped",
    "check_inputs",
    "check_judged",
    "count_ranks",
    "count_true",
    "dot_scores",
    "embedding_stats",
    "host_reads_are_free",
    "intent_stats",
    "normalize_input",
    "nrbp_scale",
    "personalisation",
    "rank",
    "rank_batch",
    "rank_inputs",
    "rank_stats",
    "ranking_method",
    "recall_level_cut",
    "sharded_stats",
    "subtopic_relevance",
]
