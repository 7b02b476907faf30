"""0.2.0's import path of :mod:`ranking_plugins.runs.pytrec_eval`, kept for imports."""

from ranking_plugins.runs.pytrec_eval import *  # noqa: F403
from ranking_plugins.runs.pytrec_eval import __all__ as __all__
