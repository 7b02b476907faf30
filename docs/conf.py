"""Sphinx configuration: ``tox -e docs`` builds the site with warnings as errors.

By hand: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` and
``python -m sphinx -W --keep-going -b doctest docs docs/_build/doctest``.
"""

from __future__ import annotations

import doctest
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "_ext"))  # figures.py: the figures, drawn at build time

project = "ranking-plugins"
author = "ranking-plugins contributors"
copyright = "ranking-plugins contributors"
# the package's one version number (ranking_plugins/__init__.py; importing it loads no torch)
import ranking_plugins  # noqa: E402

release = version = ranking_plugins.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.doctest",
    "sphinx.ext.viewcode",
    # MathJax 3 copied into _static/mathjax and loaded from there, not from a CDN,
    # so the formulas render offline (the docs extra installs it)
    "sphinx-mathjax-offline",
    # draws docs/_figures/*.png from the package's own outputs before any page is read
    "figures",
]
# No intersphinx: the build machines reach only the package registries, and a
# failed inventory fetch would be a warning, i.e. an error under -W.
autodoc_typehints = "description"
autodoc_member_order = "bysource"
exclude_patterns = ["_build", "_figures", "_ext"]
html_theme = "furo"
html_title = "ranking-plugins"
html_static_path = ["_static"]
# wrapped code blocks and table cells: nothing cut off (docs/_static/custom.css)
html_css_files = ["custom.css"]

# The pages' examples run under the doctest builder: write them as
# ``.. testcode::`` + ``.. testoutput::`` or ``.. doctest::``. Plain ``>>>``
# blocks are not run by the builder, because autodoc pulls the modules'
# docstring examples in as such blocks without their module's globals; pytest
# runs those (``--doctest-modules``, also in ``tox -e docs``).
doctest_test_doctest_blocks = ""
doctest_default_flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
doctest_global_setup = f"""
from pathlib import Path
import torch
REPOSITORY = Path({str(ROOT)!r})
torch.manual_seed(0)
"""
