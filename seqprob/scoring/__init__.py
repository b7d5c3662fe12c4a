"""Scoring any model: from text to log-probabilities, figures and comparisons.

The modules build on one another, each importing :mod:`.core` (encoding, the model and
tokenizer, batched calls, row statistics, the join of a context and a text) and none another's
private helpers:

- :mod:`.windows`: sliding windows for texts longer than a model's context;
- :mod:`.tokens`: one row per scored token (:func:`score`), :func:`summarize`,
  :func:`joint_logprob`;
- :mod:`.corpus`: corpus figures (:func:`evaluate`, :func:`perplexity`, :func:`evaluate_dask`);
- :mod:`.words`: word probabilities (:func:`word_scores`);
- :mod:`.conditional`: a continuation after a context (:func:`conditional_logprob`);
- :mod:`.comparison`: bootstrap error bars and model differences (:func:`compare`);
- :mod:`.compression`: arithmetic coding with a model (:func:`compress`, :func:`decompress`).
"""
from .comparison import Comparison, bootstrap_ratio, compare
from .compression import compress, decompress
from .conditional import conditional_logprob
from .corpus import Evaluation, evaluate, evaluate_dask, perplexity, stride_sweep
from .core import encode_for_model
from .tokens import joint_logprob, score, summarize
from .words import word_scores

__all__ = ["score", "summarize", "joint_logprob", "evaluate", "perplexity", "Evaluation", "evaluate_dask",
           "stride_sweep", "word_scores", "conditional_logprob", "compare", "Comparison", "bootstrap_ratio",
           "compress", "decompress", "encode_for_model"]
