"""Rotary position tables (RoPE): the frequencies of HF's default, "linear" and "llama3" kinds.

Frequencies and angles are computed in float64 and the cos/sin tables cast to the model's
dtype. (HF computes them in float32, so a float32 seqprob model agrees with a float32 HF model
to about 1 ulp of the angles; a float64 seqprob model is float64 throughout.)
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["inv_frequencies", "rope_tables", "layer_ropes"]


def inv_frequencies(dims: int, theta: float, scaling: dict | None = None) -> np.ndarray:
    """Inverse frequencies θ_i = theta^(-2i/dims), i = 0 .. dims/2 - 1, after ``scaling``.

    Notes
    -----
    "linear": θ_i / factor. "llama3" (Llama 3.1): with wavelength λ_i = 2π / θ_i,
    L = original_max_position_embeddings, λ_lo = L / low_freq_factor, λ_hi = L / high_freq_factor:
    λ_i > λ_lo -> θ_i / factor; λ_i < λ_hi -> θ_i; between: (1 - s) θ_i / factor + s θ_i with
    s = (L / λ_i - low_freq_factor) / (high_freq_factor - low_freq_factor).

    Examples
    --------
    >>> inv_frequencies(4, 10000.0).tolist()
    [1.0, 0.01]
    """
    inv = 1.0 / theta ** (np.arange(0, dims, 2, dtype=np.float64) / dims)  # (dims/2,)
    kind = (scaling or {}).get("rope_type")
    if kind == "linear":
        return inv / scaling["factor"]
    if kind == "llama3":
        return _llama3(inv, scaling)
    return inv


def _llama3(inv: np.ndarray, s: dict) -> np.ndarray:
    factor, lo, hi = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > old / lo, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
    return np.where(medium, smoothed, scaled)


def rope_tables(config, dtype, theta: float | None = None, scaling="config") -> tuple[np.ndarray, np.ndarray] | None:
    """(cos, sin) of shape (block_size, rotary_dims / 2) for ``config``; None without RoPE.
    ``theta`` and ``scaling`` override the config's base and scaling (a local RoPE)."""
    if config.positions != "rotary":
        return None
    theta = float(config.rope_theta if theta is None else theta)
    inv = inv_frequencies(config.rotary_dims, theta, config.rope_scaling_dict if scaling == "config" else scaling)
    angles = np.arange(config.block_size, dtype=np.float64)[:, None] * inv  # (block, r)
    cos, sin = np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)
    cos.flags.writeable = sin.flags.writeable = False
    return cos, sin


def layer_ropes(config, dtype) -> list:
    """Each layer's (cos, sin) tables, or None for a layer without rotary positions: the
    config's RoPE, the local one (``rope_local_theta``, no scaling) on sliding layers, none
    on ``nope_layers`` (tables shared between the layers that use them)."""
    full = rope_tables(config, dtype)
    local = full if config.rope_local_theta is None else \
        rope_tables(config, dtype, theta=config.rope_local_theta, scaling=None)
    nope = set(config.nope_layers or ())
    return [None if i in nope else local if config.layer_slides(i) else full for i in range(config.n_layer)]
