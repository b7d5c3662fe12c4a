"""The numpy GPT (f_θ): config, model, GPT-2 import.

``GPT`` and ``GPTConfig`` are the public names; parameter naming is documented in
:mod:`seqprob.gpt.params`.
"""
from .config import GPTConfig
from .model import GPT, ActivationCache, GPTState
from ..registry import register_model_class

register_model_class(GPT)  # checkpoint readers build the class named in the file

__all__ = ["GPT", "GPTConfig", "GPTState", "ActivationCache"]
