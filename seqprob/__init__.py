"""seqprob: a language model is a learned probability distribution over sequences.

P(x_1 .. x_T) = prod_t P(x_t | x_0 .. x_{t-1}), x_0 = <s>. Every model (numpy GPT, n-gram
tables, ARPA files, the exact toy language) plugs into one contract and one set of scoring,
sampling and plotting tools.
"""
from . import analysis, errors, functional, ngram, registry, scoring
from ._parallel import set_num_threads
from .ngram.arpa import ArpaModel, read_arpa, write_arpa
from .ngram.binary import build_binary, load_ngram
from .errors import SeqProbError
from .gpt import GPT, GPTConfig
from .ngram import Mixture
from .optim import AdamW
from .protocols import LanguageModel
from .registry import default_model, load_model
from .sampling import generate, sample
from .scoring import (Comparison, Evaluation, compare, compress, conditional_logprob, decompress, evaluate,
                      evaluate_dask, joint_logprob, perplexity, score, summarize, word_scores)
from .table import JointTable, UniformModel, lookup_table_size
from .tokenizers import (BPETokenizer, CharTokenizer, TiktokenTokenizer, Tokenizer, WhitespaceTokenizer,
                         load_tokenizer)
from .tokenizers import HFTokenizer
from .training import train
from .truth import ProbabilisticGrammar, toy_english
from .vocab import Vocab

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


def __getattr__(name):  # lazy: matplotlib is imported only when plots are used
    if name == "plots":
        import importlib

        return importlib.import_module(".plots", __name__)
    raise AttributeError(f"module 'seqprob' has no attribute {name!r}")
