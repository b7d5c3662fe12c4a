"""N-gram language models: counts turned into conditional probabilities, KenLM-exact.

Every estimator follows scikit-learn conventions (``__init__`` stores settings, ``fit`` returns
self, learned attributes end in ``_``) and the :class:`~seqprob.protocols.LanguageModel`
contract. Models are stored as ARPA text (:func:`read_arpa`, :func:`write_arpa`,
:func:`fit_arpa` from text in bounded memory) or as the memory-mapped ``.sqlm`` binary
(``model.save``, :func:`load_ngram`, :func:`build_binary`).

The building blocks stay in their modules: counting (:mod:`seqprob.ngram.counts`), back-off
tables (:mod:`seqprob.ngram.tables`), KenLM's adjusted counts and discounts
(:mod:`seqprob.ngram.kneser_ney`), the file formats (:mod:`seqprob.ngram.arpa`,
:mod:`seqprob.ngram.binary`).

>>> from seqprob.ngram import WittenBell
>>> lm = WittenBell(order=2).fit(["a b c", "a c b", "b a c a"])
>>> lm.token_logprobs([1, 3, 4, 2]).shape
(3,)
"""
from ._interpolate import DiscountFallbackWarning, expected_discount_fallback
from ._stream_mkn import fit_arpa
from .arpa import read_arpa, write_arpa
from .base import BackoffLanguageModel, BackoffTablesModel, NGramModel
from .binary import build_binary, load_ngram
from .estimators import MLE, AbsoluteDiscount, AddK, Laplace, StupidBackoff, WittenBell
from .kneser_ney import KneserNey, ModifiedKneserNey
from .mixture import Mixture, MixtureWeightError, interpolate
from .prune import prune_entropy

__all__ = ["MLE", "AddK", "Laplace", "AbsoluteDiscount", "WittenBell", "KneserNey", "ModifiedKneserNey",
           "StupidBackoff", "ESTIMATORS", "DiscountFallbackWarning", "expected_discount_fallback",
           "Mixture", "MixtureWeightError", "interpolate", "prune_entropy",
           "read_arpa", "write_arpa", "fit_arpa", "load_ngram", "build_binary",
           "BackoffTablesModel", "NGramModel", "BackoffLanguageModel"]

#: CLI / config names of the estimators.
ESTIMATORS = {"mkn": ModifiedKneserNey, "kn": KneserNey, "wb": WittenBell, "abs": AbsoluteDiscount,
              "addk": AddK, "mle": MLE, "stupid": StupidBackoff}
