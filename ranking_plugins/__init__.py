"""Exact, fast ranking metrics for PyTorch."""

from ranking_plugins._validation import ArgumentError
from ranking_plugins.embeddings import EmbeddingScores, ShardedEmbeddingScores, ShardError
from ranking_plugins.functional import rank_metrics

__all__ = [
    "ArgumentError",
    "EmbeddingScores",
    "ShardError",
    "ShardedEmbeddingScores",
    "rank_metrics",
]
__version__ = "0.1.0"
