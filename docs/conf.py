"""Sphinx configuration for the dynaunique documentation (Markdown pages through MyST)."""

from __future__ import annotations

from importlib import metadata

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
