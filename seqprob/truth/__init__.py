"""The ground truth P*: probabilistic grammars with exact probabilities, and the toy English default."""
from .grammar import GrammarEntropy, GrammarState, ProbabilisticGrammar
from .tokenized import TokenizedLanguage, tokenized
from .toy_english import AgreementPair, agreement_pairs, toy_english, toy_english_spec

__all__ = ["ProbabilisticGrammar", "GrammarState", "GrammarEntropy", "toy_english", "toy_english_spec",
           "agreement_pairs", "AgreementPair", "tokenized", "TokenizedLanguage"]
