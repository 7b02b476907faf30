"""A drop-in for sentence-transformers' ``InformationRetrievalEvaluator``.

Placeholder docstring.
"""

from ranking_plugins.sentence_transformers.evaluator import (
    SENTENCE_TRANSFORMERS_DEFAULTS,
    InformationRetrievalEvaluator,
)

__all__ = ["SENTENCE_TRANSFORMERS_DEFAULTS", "InformationRetrievalEvaluator"]
