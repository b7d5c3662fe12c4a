"""The numpy GPT (f_θ): config, one block, model facade, training, decoding, HF import
(GPT-2, Llama, Qwen2, GPT-NeoX; see the transformer architectures page of the documentation).

``GPT`` and ``GPTConfig`` are the public names; parameter naming is documented in
:mod:`seqprob.gpt.params`.
"""
from .config import GPTConfig
from .model import GPT, ActivationCache, GPTState
from ..registry import register_model_class

register_model_class(GPT)  # checkpoint readers build the class named in the file

__all__ = ["GPT", "GPTConfig", "GPTState", "ActivationCache"]
