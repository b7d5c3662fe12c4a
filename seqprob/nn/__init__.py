"""Neural-network layers as pure ``*_forward`` / ``*_backward`` pairs (numpy, no autograd).

Each forward returns its output and a ``cache`` tuple holding what the backward needs; each
backward takes the upstream gradient and that cache and returns the input and parameter
gradients. No state lives here: the model owns parameters and buffers and passes them in.
Optional ``out=`` arguments let a caller reuse preallocated buffers (a speed detail only:
results are the same). Shapes: ``N`` rows (``B*T`` flattened), width ``C``, ``H`` heads.

One module per family; imports between them go one way (``_chunks`` and ``softmax`` at the
bottom):

=============== ==========================================================================
``linear``      ``linear`` (y = x W + b), ``embedding`` (rows of a table), ``is_column_major``
``norms``       ``layer_norm``, ``rms_norm``
``activations`` ``gelu`` (tanh approximation), ``gelu_erf``, ``swiglu``, ``geglu``, ``softcap``
``dropout``     inverted dropout
``softmax``     ``softmax_inplace``, ``log_softmax_inplace``, ``logsumexp_update``,
                ``softmax_stats_update`` (streamed over the vocabulary)
``attention``   grouped-query attention (training pair and inference forward), ``rotary``
``loss``        ``cross_entropy_fused`` (loss and gradient in one pass)
``rows``        one-vector kernels of the decoding path (``layer_norm_row``, ``rms_norm_row``,
                ``log_softmax_row``, ``gelu_row_inplace``)
``_chunks``     the row chunking that spreads elementwise passes over the thread pool
=============== ==========================================================================

This package re-exports the names the model code calls, so ``nn.linear_forward`` reads the
same wherever it is used.

Examples
--------
>>> import numpy as np
>>> x = np.ones((2, 3)); W = np.eye(3); b = np.zeros(3)
>>> y, cache = linear_forward(x, W, b)
>>> dx, dW, db = linear_backward(np.ones((2, 3)), cache)
>>> dx.shape, dW.shape, db.shape
((2, 3), (3, 3), (3,))
"""
from __future__ import annotations

from .activations import (geglu_backward, geglu_forward, gelu_backward, gelu_erf_backward, gelu_erf_forward,
                          gelu_forward, softcap_backward, softcap_forward, swiglu_backward, swiglu_forward)
from .attention import (causal_attention_inference, grouped_attention_backward, grouped_attention_forward,
                        rotary_backward, rotary_forward)
from .dropout import dropout_backward, dropout_forward
from .linear import embedding_backward, embedding_forward, is_column_major, linear_backward, linear_forward
from .loss import cross_entropy_fused
from .norms import layer_norm_backward, layer_norm_forward, rms_norm_backward, rms_norm_forward
from .rows import gelu_row_inplace, layer_norm_row, log_softmax_row, rms_norm_row
from .softmax import log_softmax_inplace, logsumexp_update, softmax_stats_update

__all__ = [
    "linear_forward", "linear_backward", "embedding_forward", "embedding_backward", "is_column_major",
    "layer_norm_forward", "layer_norm_backward", "rms_norm_forward", "rms_norm_backward",
    "gelu_forward", "gelu_backward", "gelu_erf_forward", "gelu_erf_backward", "swiglu_forward", "swiglu_backward",
    "geglu_forward", "geglu_backward", "softcap_forward", "softcap_backward",
    "dropout_forward", "dropout_backward", "log_softmax_inplace", "logsumexp_update",
    "softmax_stats_update",
    "rotary_forward", "rotary_backward", "grouped_attention_forward", "grouped_attention_backward",
    "causal_attention_inference", "cross_entropy_fused",
    "layer_norm_row", "rms_norm_row", "log_softmax_row", "gelu_row_inplace",
]
