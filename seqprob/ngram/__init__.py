"""N-gram language models: counts turned into conditional probabilities, KenLM-exact.

Every estimator follows scikit-learn conventions (``__init__`` stores settings, ``fit`` returns
self, learned attributes end in ``_``) and the :class:`~seqprob.protocols.LanguageModel`
contract.

>>> from seqprob.ngram import WittenBell
>>> lm = WittenBell(order=2).fit(["a b c", "a c b", "b a c a"])
>>> lm.token_logprobs([1, 3, 4, 2]).shape
(3,)
"""
from ._interpolate import DiscountFallbackWarning, expected_discount_fallback
from .base import BackoffLanguageModel, NGramModel
from .estimators import MLE, AbsoluteDiscount, AddK, Laplace, StupidBackoff, WittenBell
from .kneser_ney import KneserNey, ModifiedKneserNey, adjusted_counts, mkn_discounts
from .mixture import Mixture, MixtureWeightError, interpolate
from .prune import TablesModel, prune_entropy
from .tables import BackoffTables, NGramState

__all__ = ["NGramModel", "BackoffLanguageModel", "BackoffTables", "NGramState", "MLE", "AddK",
           "Laplace", "AbsoluteDiscount", "WittenBell", "KneserNey", "ModifiedKneserNey",
           "StupidBackoff", "DiscountFallbackWarning", "expected_discount_fallback", "adjusted_counts", "mkn_discounts",
           "Mixture", "MixtureWeightError", "interpolate", "prune_entropy", "TablesModel", "ESTIMATORS"]

#: CLI / config names of the estimators.
ESTIMATORS = {"mkn": ModifiedKneserNey, "kn": KneserNey, "wb": WittenBell, "abs": AbsoluteDiscount,
              "addk": AddK, "mle": MLE, "stupid": StupidBackoff}
