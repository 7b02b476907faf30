"""The catalogue walks: scores given as embeddings, never a (Q, N) matrix.

The last stage of the kernel, on top of the three before it: a catalogue
given as embeddings is scored chunk by chunk and each chunk's ranks are
counted straight into statistics (:mod:`~ranking_plugins.kernel.catalogue.chunked`),
or its top lists kept where a metric reads the items themselves
(:mod:`~ranking_plugins.kernel.catalogue.top_lists`); a catalogue sharded over
processes is walked the same way on each shard and the counts summed
(:mod:`~ranking_plugins.kernel.catalogue.sharded`). Each checks itself where
it is defined, through the rules both share
(:mod:`~ranking_plugins.kernel.catalogue.checks`).
"""

from __future__ import annotations

from ranking_plugins.kernel.catalogue.checks import ShardError, check_embedding_inputs
from ranking_plugins.kernel.catalogue.chunked import (
    EmbeddingScores,
    ScoreFn,
    check_embedding_ids,
    dot_scores,
    embedding_stats,
)
from ranking_plugins.kernel.catalogue.sharded import ShardedEmbeddingScores, sharded_stats
from ranking_plugins.kernel.catalogue.top_lists import embedding_top_list

__all__ = [
    "EmbeddingScores",
    "ScoreFn",
    "ShardError",
    "ShardedEmbeddingScores",
    "check_embedding_ids",
    "check_embedding_inputs",
    "dot_scores",
    "embedding_stats",
    "embedding_top_list",
    "sharded_stats",
]
