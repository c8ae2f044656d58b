"""Sphinx configuration for the dynaunique documentation (Markdown pages through MyST)."""

from __future__ import annotations

from importlib import metadata
from typing import Any

project = "dynaunique"
author = "dynaunique contributors"
copyright = "dynaunique contributors"

# The version lives in pyproject.toml only; read it from the installed distribution.
try:
    release = metadata.version("dynaunique")
except metadata.PackageNotFoundError:
    release = "unknown"
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]

# The API reference imports the package and documents each name where it is defined, with the
# types in the description so that long signatures stay readable. A few docstrings use Google
# style (Args:, Raises:); napoleon renders those.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

myst_enable_extensions = ["deflist"]
myst_heading_anchors = 3

html_theme = "alabaster"
html_title = "dynaunique"


def _public_bases(app: Any, name: str, obj: Any, options: Any, bases: list[type]) -> None:
    """Show what a class is, not how it is built: bases from dynaunique's internal modules
    (``dynaunique._model.binding`` …, the mixins ``dynaunique.Model`` is assembled from) are left out
    of "Bases:"; their members are private, and the class documents its public ones."""
    bases[:] = [b for b in bases if not b.__module__.startswith("dynaunique._")]


def setup(app: Any) -> None:
    """Register the documentation's autodoc hooks."""
    app.connect("autodoc-process-bases", _public_bases)
