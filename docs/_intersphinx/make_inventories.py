"""Write the small intersphinx inventories the site uses, so that the build needs no network.

Each inventory lists the objects these docs name of one project, with that project's own
URL for it (the same entries its published ``objects.inv`` holds). Run after adding a name::

    python docs/_intersphinx/make_inventories.py
"""
from __future__ import annotations

import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (name, domain:role, relative URI); "$" stands for the name, as in Sphinx's own inventories
ENTRIES = {
    "python": ("Python", "3", [
        ("int", "py:class", "library/functions.html#$"), ("float", "py:class", "library/functions.html#$"),
        ("str", "py:class", "library/stdtypes.html#$"), ("bool", "py:class", "library/functions.html#$"),
        ("list", "py:class", "library/stdtypes.html#$"), ("dict", "py:class", "library/stdtypes.html#$"),
        ("tuple", "py:class", "library/stdtypes.html#$"), ("bytes", "py:class", "library/stdtypes.html#$"),
        ("pathlib.Path", "py:class", "library/pathlib.html#$"),
        ("ValueError", "py:exception", "library/exceptions.html#$"),
        ("TypeError", "py:exception", "library/exceptions.html#$"),
        ("OSError", "py:exception", "library/exceptions.html#$"),
        ("MemoryError", "py:exception", "library/exceptions.html#$"),
        ("logging", "py:module", "library/logging.html#module-logging"),
    ]),
    "numpy": ("NumPy", "2", [
        ("numpy.ndarray", "py:class", "reference/generated/numpy.ndarray.html#$"),
        ("numpy.dtype", "py:class", "reference/generated/numpy.dtype.html#$"),
        ("numpy.random.Generator", "py:class", "reference/random/generator.html#$"),
        ("numpy.random.default_rng", "py:function", "reference/random/generator.html#$"),
    ]),
    "pandas": ("pandas", "2", [
        ("pandas.DataFrame", "py:class", "reference/api/pandas.DataFrame.html#$"),
        ("pandas.Series", "py:class", "reference/api/pandas.Series.html#$"),
    ]),
    "matplotlib": ("Matplotlib", "3", [
        ("matplotlib.axes.Axes", "py:class", "api/_as_gen/matplotlib.axes.Axes.html#$"),
        ("matplotlib.figure.Figure", "py:class", "api/_as_gen/matplotlib.figure.Figure.html#$"),
    ]),
}


def write(name: str, project: str, version: str, entries: list) -> None:
    header = (f"# Sphinx inventory version 2\n# Project: {project}\n# Version: {version}\n"
              "# The remainder of this file is compressed using zlib.\n").encode()
    body = "".join(f"{obj} {role} 1 {uri} -\n" for obj, role, uri in entries).encode()
    tmp = HERE / f".{name}.inv.tmp"
    tmp.write_bytes(header + zlib.compress(body))
    tmp.replace(HERE / f"{name}.inv")


if __name__ == "__main__":
    for name, (project, version, entries) in ENTRIES.items():
        write(name, project, version, entries)
