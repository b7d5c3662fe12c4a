"""The numpy GPT (f_θ): config, model, GPT-2 import.

``GPT`` and ``GPTConfig`` are the public names; parameter naming is documented in
:mod:`seqprob.gpt.params`.
"""
from .config import GPTConfig
from .model import GPT, ActivationCache, GPTState

__all__ = ["GPT", "GPTConfig", "GPTState", "ActivationCache"]
