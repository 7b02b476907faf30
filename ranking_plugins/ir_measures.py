"""0.2.0's import path of :mod:`ranking_plugins.runs.ir_measures`, kept for imports."""

from ranking_plugins.runs.ir_measures import *  # noqa: F403
from ranking_plugins.runs.ir_measures import __all__ as __all__
