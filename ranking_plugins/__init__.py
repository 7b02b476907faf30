"""Exact, fast ranking metrics for PyTorch."""

from ranking_plugins.embeddings import EmbeddingScores, ShardedEmbeddingScores, ShardError
from ranking_plugins.functional import rank_metrics

__all__ = ["EmbeddingScores", "ShardError", "ShardedEmbeddingScores", "rank_metrics"]
__version__ = "0.1.0"
