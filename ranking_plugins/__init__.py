"""Exact, fast ranking metrics for PyTorch."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ranking_plugins._validation import ArgumentError
    from ranking_plugins.embeddings import EmbeddingScores, ShardedEmbeddingScores, ShardError
    from ranking_plugins.functional import rank_metrics
    from ranking_plugins.runs.python_api import RunResults, evaluate_run

#: each public name, by the module that defines it: imported on first use (PEP 562), so
#: that ``python -m ranking_plugins --help`` and the command's usage errors need no torch
_HOMES = {
    "ArgumentError": "ranking_plugins._validation",
    "EmbeddingScores": "ranking_plugins.embeddings",
    "ShardError": "ranking_plugins.embeddings",
    "ShardedEmbeddingScores": "ranking_plugins.embeddings",
    "rank_metrics": "ranking_plugins.functional",
    "RunResults": "ranking_plugins.runs.python_api",
    "evaluate_run": "ranking_plugins.runs.python_api",
}

__all__ = [
    "ArgumentError",
    "EmbeddingScores",
    "RunResults",
    "ShardError",
    "ShardedEmbeddingScores",
    "evaluate_run",
    "rank_metrics",
]
#: the one version number: pyproject.toml reads it (tool.setuptools.dynamic), so does docs/conf.py
__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    """A public name, or a submodule (``ranking_plugins.metrics``), imported when first asked."""
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # asked once
        return value
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
