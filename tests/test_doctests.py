"""Every module's docstring examples run with the suite.

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
    assert {"seqprob.ngram.arpa", "seqprob.gpt.block", "seqprob.app.cli", "seqprob.scoring.words"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, capsys):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}:\n" \
                               f"{capsys.readouterr().out[-4000:]}"


#: modules whose public functions carry examples: an empty Examples run would pass unnoticed
WITH_EXAMPLES = ["seqprob.ngram.counts", "seqprob.ngram.arpa", "seqprob.ngram", "seqprob.ngram.base",
                 "seqprob.ngram.estimators", "seqprob.ngram.kneser_ney", "seqprob.ngram.tables",
                 "seqprob.functional", "seqprob.vocab", "seqprob.table", "seqprob.scoring.tokens", "seqprob.scoring.corpus",
                 "seqprob.sampling", "seqprob.tokenizers.simple", "seqprob.tokenizers.bpe",
                 "seqprob.truth.grammar", "seqprob.truth.toy_english", "seqprob.analysis.truth",
                 "seqprob.analysis.calibration", "seqprob.analysis.embeddings", "seqprob.analysis.lens",
                 "seqprob.analysis.sparsity", "seqprob.registry", "seqprob.plots.scores",
                 "seqprob.nn", "seqprob.nn.norms", "seqprob.nn.linear", "seqprob.nn.activations",
                 "seqprob.nn.dropout", "seqprob.nn.softmax", "seqprob.nn.attention", "seqprob.nn.loss",
                 "seqprob.nn.rows"]


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_module_has_examples(name):
    finder = doctest.DocTestFinder()
    module = importlib.import_module(name)
    assert name in MODULES
    assert sum(len(t.examples) for t in finder.find(module)) > 0, f"{name} lost its Examples"
