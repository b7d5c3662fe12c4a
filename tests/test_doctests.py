"""Every module's docstring examples run with the suite (issue 13, point 5).

The modules are imported as the tests import them (the installed package in CI, the source tree
with ``PYTHONPATH=.``), so the doctests check the code the rest of the suite checks: pytest's
``--doctest-modules`` would import ``seqprob/*.py`` from the source tree a second time and stop
on a path mismatch when the package is installed (``pip install ".[test]" && pytest``).
"""
import doctest
import importlib
import pkgutil

import pytest

import seqprob

#: every module of the package; ``__main__`` runs the CLI when imported
MODULES = sorted(m.name for m in pkgutil.walk_packages(seqprob.__path__, "seqprob.")
                 if not m.name.endswith("__main__"))


def test_every_module_is_listed():
    assert {"seqprob.arpa", "seqprob.gpt.block", "seqprob.app.cli", "seqprob.words"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, capsys):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}:\n" \
                               f"{capsys.readouterr().out[-4000:]}"
