"""Analyses of models through the model contract (layer 4).

- distances to the true source P* (:mod:`.truth`): cross-entropy on samples of P*, the true
  entropy, KL(P* || P_θ) per token with a confidence interval, the agreement test;
- calibration, embeddings, the logit lens and attention patterns, n-gram sparsity.
"""
from .calibration import calibration, expected_calibration_error, reliability_table
from .embeddings import (GENDER_PAIRS, IRREGULAR_PLURALS, analogy, default_pairs, direction, embedding_directions,
                         embedding_matrix, embedding_pca, nearest_neighbors)
from .lens import attention_patterns, logit_lens
from .sparsity import ngram_windows, sparsity_curve, unseen_share
from .truth import (AgreementResult, CrossEntropy, KLEstimate, agreement_test, cross_entropy, kl_per_token,
                    sentence_logprobs, true_entropy)

__all__ = ["cross_entropy", "true_entropy", "kl_per_token", "agreement_test", "sentence_logprobs",
           "CrossEntropy", "KLEstimate", "AgreementResult",
           "reliability_table", "expected_calibration_error", "calibration",
           "embedding_matrix", "embedding_pca", "nearest_neighbors", "analogy", "direction", "default_pairs",
           "embedding_directions", "GENDER_PAIRS", "IRREGULAR_PLURALS",
           "attention_patterns", "logit_lens", "ngram_windows", "unseen_share", "sparsity_curve"]
