"""0.2.0's import path of :mod:`ranking_plugins.compare.significance`, kept for imports."""

from ranking_plugins.compare.significance import *  # noqa: F403
from ranking_plugins.compare.significance import __all__ as __all__
