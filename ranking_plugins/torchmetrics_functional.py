"""0.2.0's import path of :mod:`ranking_plugins.torchmetrics.functional`, kept for imports."""

from ranking_plugins.torchmetrics.functional import *  # noqa: F403
from ranking_plugins.torchmetrics.functional import __all__ as __all__
