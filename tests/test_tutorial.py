"""The tutorial's pages (docs/tutorial_src/plot_*.py) run as scripts: a broken page fails the
suite, not only the documentation build. Their asserts (the chain rule's sum, GPT-3's
27,938 matrices and 175,181,291,520 weights) run with them."""
import runpy
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pytest

PAGES = sorted((Path(__file__).resolve().parents[1] / "docs" / "tutorial_src").glob("plot_*.py"))


def test_the_tutorial_has_its_pages():
    assert len(PAGES) >= 6


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_a_tutorial_page_runs(page, monkeypatch, capsys):
    matplotlib.use("Agg")
    monkeypatch.chdir(page.parent)
    try:
        runpy.run_path(str(page), run_name="__main__")
    finally:
        plt.ioff()
        plt.close("all")
    assert capsys.readouterr().out.strip()  # every page prints what it computes
