"""Sphinx configuration of seqprob's documentation site.

Build (offline: nothing is downloaded; the intersphinx inventories ship in docs/_intersphinx)::

    pip install ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html

The gallery of examples/ and the tutorial (docs/tutorial_src/) are executed during the build,
each script with ``--quick`` where it takes options, and their output and figures shown.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS)]  # the source tree is what the site documents
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("SEQPROB_NUM_THREADS", "2")

import seqprob  # noqa: E402  (after the path above)

project = "seqprob"
author = "the seqprob developers"
copyright = "2026, the seqprob developers"
release = seqprob.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "tutorial_src/*.md", "**/GALLERY_HEADER.rst", "auto_examples/*.ipynb",
                    "tutorial/*.ipynb"]
templates_path = ["_templates"]

# API pages: one per public name, numpydoc sections, members as listed in __all__
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False, "inherited-members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = True
numpydoc_class_members_toctree = False
numpydoc_show_inherited_class_members = False
numpydoc_xref_param_type = False
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header", "autosummary.import_cycle"]

# Cross-references to numpy, pandas, matplotlib and Python without the network: small
# inventories of the names these docs refer to ship in docs/_intersphinx (made by
# docs/_intersphinx/make_inventories.py); the URLs are the projects' own.
_INV = DOCS / "_intersphinx"
intersphinx_mapping = {
    name: (url, str(_INV / f"{name}.inv"))
    for name, url in [("python", "https://docs.python.org/3/"),
                      ("numpy", "https://numpy.org/doc/stable/"),
                      ("pandas", "https://pandas.pydata.org/docs/"),
                      ("matplotlib", "https://matplotlib.org/stable/")]
}
intersphinx_disabled_reftypes = ["*"]  # only explicit roles such as :class:`numpy.ndarray` resolve


sphinx_gallery_conf = {
    "examples_dirs": ["../examples", "tutorial_src"],
    "gallery_dirs": ["auto_examples", "tutorial"],
    # run every example and tutorial page, except the one that needs a downloaded GPT-2 (shown)
    "filename_pattern": r"/(plot_)?\d\d_(?!gpt2_checkpoint)[^/]*\.py$",
    "ignore_pattern": r"_shared\.py$",  # the examples' helper module
    "reset_argv": "_gallery.quick_argv",
    "image_scrapers": ("matplotlib", "_gallery.saved_figures"),
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "min_reported_time": 1,
    "capture_repr": ("_repr_html_", "__repr__"),
    "plot_gallery": "True",
}

html_theme = "pydata_sphinx_theme"
html_title = f"seqprob {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
}
html_static_path = []
