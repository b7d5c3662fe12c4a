"""Analyses of models through the model contract (layer 4): distances to the true source P*."""
from .truth import (AgreementResult, CrossEntropy, KLEstimate, agreement_test, cross_entropy, kl_per_token,
                    sentence_logprobs, true_entropy)

__all__ = ["cross_entropy", "true_entropy", "kl_per_token", "agreement_test", "sentence_logprobs",
           "CrossEntropy", "KLEstimate", "AgreementResult"]
