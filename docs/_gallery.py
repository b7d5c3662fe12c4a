"""Sphinx-gallery settings that are functions (importable by name, so the config stays cacheable)."""
from __future__ import annotations

import shutil
from pathlib import Path

DOCS = Path(__file__).resolve().parent
OUTPUTS = DOCS / "_build" / "example_outputs"


def _out_dir(src_file) -> Path:
    return OUTPUTS / Path(src_file).stem


def quick_argv(gallery_conf, script_vars):
    """Arguments of each executed script: the examples' fast path, their figures saved into
    the build (a fresh folder per run, read back by :func:`saved_figures`)."""
    src = Path(script_vars["src_file"])
    if src.parent.name != "examples":
        return []
    if '"--out"' not in src.read_text(encoding="utf-8"):  # an example that draws nothing
        return ["--quick"]
    out = _out_dir(src)
    shutil.rmtree(out, ignore_errors=True)
    return ["--quick", "--out", str(out)]


def saved_figures(block, block_vars, gallery_conf):
    """Image scraper for the examples: they are command-line programs that save their figures
    as PNG files with ``--out`` (seqprob's figures are not pyplot's), so the PNGs that appeared
    in the example's output folder during the block are the block's figures."""
    from sphinx_gallery.scrapers import figure_rst

    out = _out_dir(block_vars["src_file"])
    shown = block_vars.setdefault("seqprob_shown", set())
    new = [p for p in sorted(out.rglob("*.png")) if p not in shown] if out.is_dir() else []
    names = []
    for png, dest in zip(new, block_vars["image_path_iterator"]):
        shutil.copyfile(png, dest)
        shown.add(png)
        names.append(dest)
    return figure_rst(names, gallery_conf["src_dir"])
