"""seqprob: a language model is a learned probability distribution over sequences.

P(x_1 .. x_T) = prod_t P(x_t | x_0 .. x_{t-1}), x_0 = <s>. Every model (numpy GPT, n-gram
tables, ARPA files, the exact toy language) plugs into one contract and one set of scoring,
sampling and plotting tools.
"""
import importlib
from typing import TYPE_CHECKING

# Every public name is imported on first use (PEP 562): ``import seqprob`` costs numpy and
# nothing else, so a command that only fits an n-gram model does not load scipy, the GPT or
# the analysis tools. ``sp.score`` etc. behave exactly as if imported here.
_LAZY = {
    **dict.fromkeys(["analysis", "errors", "functional", "ngram", "registry", "scoring", "plots", "gpt",
                     "tokenizers", "truth", "sampling", "training", "optim", "hub", "protocols", "vocab",
                     "checks", "table"], None),
    "set_num_threads": "._parallel",
    "ArpaModel": ".ngram.arpa", "read_arpa": ".ngram.arpa", "write_arpa": ".ngram.arpa",
    "build_binary": ".ngram.binary", "load_ngram": ".ngram.binary",
    "SeqProbError": ".errors",
    "GPT": ".gpt", "GPTConfig": ".gpt",
    "Mixture": ".ngram",
    "AdamW": ".optim",
    "LanguageModel": ".protocols",
    "default_model": ".registry", "load_model": ".registry",
    "generate": ".sampling", "sample": ".sampling",
    **dict.fromkeys(["Comparison", "Evaluation", "compare", "compress", "conditional_logprob", "decompress",
                     "evaluate", "evaluate_dask", "joint_logprob", "perplexity", "score", "summarize",
                     "word_scores"], ".scoring"),
    "JointTable": ".table", "UniformModel": ".table", "lookup_table_size": ".table",
    **dict.fromkeys(["BPETokenizer", "CharTokenizer", "TiktokenTokenizer", "Tokenizer", "WhitespaceTokenizer",
                     "load_tokenizer", "HFTokenizer"], ".tokenizers"),
    "train": ".training",
    "ProbabilisticGrammar": ".truth", "toy_english": ".truth",
    "Vocab": ".vocab",
}

if TYPE_CHECKING:  # what type checkers and IDEs see: the names, imported eagerly
    from . import analysis, errors, functional, ngram, registry, scoring  # noqa: F401
    from ._parallel import set_num_threads  # noqa: F401
    from .errors import SeqProbError  # noqa: F401
    from .gpt import GPT, GPTConfig  # noqa: F401
    from .ngram import Mixture  # noqa: F401
    from .ngram.arpa import ArpaModel, read_arpa, write_arpa  # noqa: F401
    from .ngram.binary import build_binary, load_ngram  # noqa: F401
    from .optim import AdamW  # noqa: F401
    from .protocols import LanguageModel  # noqa: F401
    from .registry import default_model, load_model  # noqa: F401
    from .sampling import generate, sample  # noqa: F401
    from .scoring import (Comparison, Evaluation, compare, compress, conditional_logprob,  # noqa: F401
                          decompress, evaluate, evaluate_dask, joint_logprob, perplexity, score,
                          summarize, word_scores)
    from .table import JointTable, UniformModel, lookup_table_size  # noqa: F401
    from .tokenizers import (BPETokenizer, CharTokenizer, HFTokenizer, TiktokenTokenizer,  # noqa: F401
                             Tokenizer, WhitespaceTokenizer, load_tokenizer)
    from .training import train  # noqa: F401
    from .truth import ProbabilisticGrammar, toy_english  # noqa: F401
    from .vocab import Vocab  # noqa: F401


def _installed_version() -> str:
    """The installed distribution's version (one source: pyproject.toml), or "0+unknown" for a
    source tree that is imported without being installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("seqprob")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _installed_version()

# Everything else lives in its submodule: sp.errors.InputError, sp.optim.cosine_schedule,
# sp.gpt.checkpoint.save_checkpoint, sp.scoring.stride_sweep, sp.sampling.next_token_probs ...
__all__ = [
    # the contract and the vocabulary
    "LanguageModel", "Vocab", "SeqProbError",
    # tokenizers
    "Tokenizer", "WhitespaceTokenizer", "CharTokenizer", "BPETokenizer", "TiktokenTokenizer",
    "HFTokenizer", "load_tokenizer",
    # models
    "UniformModel", "JointTable", "Mixture", "lookup_table_size", "ngram", "ArpaModel", "read_arpa", "write_arpa",
    "load_ngram", "build_binary",
    "GPT", "GPTConfig", "AdamW", "train", "default_model", "ProbabilisticGrammar", "toy_english",
    "load_model",
    # using any model
    "score", "summarize", "joint_logprob", "perplexity", "evaluate", "Evaluation", "evaluate_dask",
    "sample", "generate", "word_scores", "conditional_logprob", "compare", "Comparison", "compress",
    "decompress",
    # threads
    "set_num_threads",
    # submodules (sp.plots too, left out here so that `import *` does not load matplotlib)
    "functional", "errors", "analysis", "scoring",
]

#: Public submodules shown by dir(seqprob) besides __all__ (the private ones stay hidden).
_SUBMODULES = ["plots", "gpt", "tokenizers", "truth", "sampling", "training", "optim", "registry", "hub",
               "protocols", "vocab", "checks", "table"]


def __dir__():
    return sorted(set(__all__) | set(_SUBMODULES) | {"__version__"})


def __getattr__(name):
    """Import a public name (or submodule) on first use and keep it (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'seqprob' has no attribute {name!r}")
    source = _LAZY[name]
    if source is None:  # a submodule
        value = importlib.import_module(f".{name}", __name__)
    else:
        value = getattr(importlib.import_module(source, __name__), name)
    globals()[name] = value
    return value
