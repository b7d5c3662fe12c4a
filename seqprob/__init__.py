"""seqprob: a language model is a learned probability distribution over sequences.

P(x_1 .. x_T) = prod_t P(x_t | x_0 .. x_{t-1}), x_0 = <s>. Every model (numpy GPT, n-gram
tables, ARPA files, the exact toy language) plugs into one contract and one set of scoring,
sampling and plotting tools.
"""
from . import analysis, errors, functional, ngram, registry
from .ngram.arpa import ArpaModel, read_arpa, write_arpa
from .ngram.binary import build_binary, load_ngram
from .errors import SeqProbError
from .gpt import GPT, GPTConfig
from .ngram import Mixture
from .optim import AdamW
from .protocols import LanguageModel
from .registry import default_model, load_model
from .sampling import generate, sample
from .scoring import evaluate, joint_logprob, perplexity, score, summarize
from .words import word_scores
from .conditional import conditional_logprob
from .compare import compare
from .compress import compress, decompress
from .table import JointTable, UniformModel, lookup_table_size
from .tokenizers import (BPETokenizer, CharTokenizer, TiktokenTokenizer, Tokenizer, WhitespaceTokenizer,
                         load_tokenizer)
from .tokenizers import HFTokenizer
from .training import train
from .truth import ProbabilisticGrammar, toy_english
from .vocab import Vocab

__version__ = "0.1.0"

# Everything else lives in its submodule: sp.errors.InputError, sp.optim.cosine_schedule,
# sp.gpt.checkpoint.save_checkpoint, sp.scoring.Evaluation, sp.sampling.next_token_probs ...
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
    "score", "summarize", "joint_logprob", "perplexity", "evaluate", "sample", "generate",
    "word_scores", "conditional_logprob", "compare", "compress", "decompress",
    # submodules (sp.plots too, left out here so that `import *` does not load matplotlib)
    "functional", "errors", "analysis",
]


def __getattr__(name):  # lazy: matplotlib is imported only when plots are used
    if name == "plots":
        import importlib

        return importlib.import_module(".plots", __name__)
    raise AttributeError(f"module 'seqprob' has no attribute {name!r}")
