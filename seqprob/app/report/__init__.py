"""``seqprob report``: every figure of :mod:`seqprob.plots` on one model, in one HTML page.

The report scores the three example sentences under the true source, n-gram baselines and the
model, then looks at sampling, sparsity, learning curves, attention, the logit lens, the
embeddings and calibration. Each figure is written as PNG and SVG, and ``report.html`` embeds
them (data URIs), with the tables and the settings used, so the page works offline and alone.

Usage (not run as a doctest: it writes a folder of figures)::

    from seqprob.app.report import build_report
    build_report("out/", quick=True)                   # PosixPath('out/report.html')
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from ..._io import ensure_writable_dir
from ...errors import InputError
from .context import EXAMPLE_SENTENCES, ReportContext, build_context
from .html import render_html, write_files
from .sections import SECTIONS, Section, run_sections

__all__ = ["build_report", "build_context", "run_sections", "ReportContext", "Section", "SECTIONS",
           "EXAMPLE_SENTENCES", "render_html", "script_main"]

log = logging.getLogger(__name__)


def build_report(out_dir, model=None, corpus=None, quick: bool = False, seed: int = 0,
                 model_name: str | None = None, baselines=None, history=None, only=None,
                 formats=("png", "svg"), html_name: str = "report.html", progress=None) -> Path:
    """Build the report into ``out_dir`` and return the path of ``report.html``.

    Parameters
    ----------
    out_dir : str or Path
        Created if needed; must be writable (checked first, before any work).
    model : LanguageModel, optional
        Default: :func:`seqprob.default_model` (or a small GPT trained here if unavailable).
    corpus : path, optional
        Sentences, one per line. Default: samples of the toy language (exact P* known).
    quick : bool
        Small sizes: a report in well under 30 s.
    seed : int
    model_name : str, optional
        Label of ``model`` in figures and tables.
    baselines : dict of name -> fitted model, optional
        Default: n-gram models fit on the training text.
    history : pandas.DataFrame, optional
        The model's training history for the learning curves.
    only : list of str, optional
        Section keys to run (see :data:`SECTIONS`); default all.
    formats : tuple of str
        Image files to write per figure.
    html_name : str
        File name of the HTML page.
    progress : callable, optional
        ``progress(message)`` is called with a line per step (setup, each section, writing).

    Returns
    -------
    pathlib.Path
        ``out_dir / html_name``.
    """
    import matplotlib

    keys = [key for key, *_ in SECTIONS]
    if only is not None and (not list(only) or set(only) - set(keys)):
        raise InputError(f"unknown or no section(s) {sorted(set(only) - set(keys)) or list(only)}; "
                         f"choose from {keys}", value=only)
    out = ensure_writable_dir(out_dir)
    t0 = time.perf_counter()
    was_interactive = matplotlib.is_interactive()
    matplotlib.interactive(False)  # bare Figures: nothing registered with pyplot, nothing leaks
    try:
        keys = set(keys if only is None else only)
        _say(progress, "preparing the text, the model and the baselines")
        ctx = build_context(model=model, corpus=corpus, quick=quick, seed=seed, model_name=model_name,
                            baselines=baselines, history=history,
                            need_model=bool(keys - {"lookup", "sparsity"}), need_history="learning" in keys)
        sections = run_sections(ctx, only=only, progress=_section_progress(progress))
        _say(progress, "writing the figures and the HTML page")
        settings = dict(ctx.settings)
        settings["sections seconds"] = {s.key: round(s.seconds, 2) for s in sections}
        settings["total seconds (before writing)"] = round(time.perf_counter() - t0, 2)
        path = write_files(out, sections, settings, formats=formats, name=html_name)
    finally:
        matplotlib.interactive(was_interactive)
    log.info("report written to %s in %.1f s", path, time.perf_counter() - t0)
    return path


def _say(progress, message: str) -> None:
    if progress is not None:
        progress(message)


def _section_progress(progress):
    """run_sections' callback: one line as each section starts and as it ends."""
    if progress is None:
        return None

    def report(i, n, section):
        done = f" done in {section.seconds:.1f} s" if section.seconds else " ..."
        progress(f"[{i}/{n}] {section.title}{done}")

    return report


def script_main(sections, html_name: str, description: str, argv=None) -> int:
    """Command line of the ``analysis/`` scripts: build only ``sections`` into ``--out``."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default="analysis_out", help="output folder (default analysis_out/)")
    parser.add_argument("--model", help="ARPA file, GPT checkpoint folder or grammar spec")
    parser.add_argument("--corpus", help="text file, one sentence per line (default: the toy language)")
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from ...registry import load_model

    model = load_model(args.model) if args.model else None
    path = build_report(args.out, model=model, corpus=args.corpus, quick=args.quick, seed=args.seed,
                        model_name=args.model, only=list(sections), html_name=html_name)
    print(f"written: {path} (and the figures beside it)")
    return 0
