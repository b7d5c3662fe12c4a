"""seqprob: a language model is a learned probability distribution over sequences.

P(x_1 .. x_T) = prod_t P(x_t | x_0 .. x_{t-1}), x_0 = <s>. Every model (numpy GPT, n-gram
tables, ARPA files, the exact toy language) plugs into one contract and one set of scoring,
sampling and plotting tools.
"""
from . import analysis, functional, ngram
from .arpa import ArpaModel, read_arpa, write_arpa
from .gpt import GPT, GPTConfig
from .gpt.checkpoint import load_checkpoint, save_checkpoint
from .optim import AdamW, clip_grad_norm, cosine_schedule
from .training import train
from .defaults import default_model
from .errors import (ArpaFormatError, CheckpointError, ContextLengthError, GrammarError, InputError,
                     NotFittedError, SeqProbError, TokenIdError, TokenizerError, UnknownTokenizerError)
from .protocols import LanguageModel
from .sampling import generate, sample
from .scoring import Evaluation, evaluate, joint_logprob, perplexity, score, summarize
from .truth import ProbabilisticGrammar, toy_english
from .table import JointTable, UniformModel, lookup_table_size
from .tokenizers import (BPETokenizer, CharTokenizer, TiktokenTokenizer, Tokenizer, WhitespaceTokenizer,
                         load_tokenizer)
from .vocab import Vocab

__version__ = "0.1.0"

__all__ = [
    "functional", "ngram", "LanguageModel", "Vocab", "ArpaModel", "read_arpa", "write_arpa",
    "GPT", "GPTConfig", "AdamW", "cosine_schedule", "clip_grad_norm", "train", "save_checkpoint",
    "load_checkpoint", "default_model",
    "Tokenizer", "WhitespaceTokenizer", "CharTokenizer", "BPETokenizer", "TiktokenTokenizer",
    "load_tokenizer",
    "UniformModel", "JointTable", "lookup_table_size", "ProbabilisticGrammar", "toy_english", "analysis",
    "score", "summarize", "joint_logprob", "perplexity", "evaluate", "Evaluation",
    "sample", "generate",
    "SeqProbError", "InputError", "TokenIdError", "NotFittedError", "TokenizerError",
    "UnknownTokenizerError", "ContextLengthError", "ArpaFormatError", "CheckpointError", "GrammarError",
]


def __getattr__(name):  # lazy: matplotlib is imported only when plots are used
    if name == "plots":
        import importlib

        return importlib.import_module(".plots", __name__)
    raise AttributeError(f"module 'seqprob' has no attribute {name!r}")
