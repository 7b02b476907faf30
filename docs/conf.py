"""Sphinx configuration (skeleton: the full documentation site comes later).

Build with ``python -m sphinx -b html docs docs/_build/html`` after
``pip install sphinx``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

project = "ranking-plugins"
author = "ranking-plugins contributors"
copyright = "ranking-plugins contributors"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
]
intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "torch": ("https://pytorch.org/docs/stable", None),
}
autodoc_typehints = "description"
exclude_patterns = ["_build"]
html_theme = "alabaster"
