"""f_θ: a GPT-2-style decoder in numpy, with a hand-written backward and a KV cache.

Given ids x_0..x_{T-1} the model returns logits u_1..u_T and P(x_t | x_<t) = softmax(u_t).
One code path serves every batch shape: ids ``(B, T)`` flatten to ``B*T`` rows for the
weight GEMMs, attention runs per head on strided views, buffers are reused per ``(B, T)``.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from .. import nn
from ..base import BaseLanguageModel
from ..errors import ContextLengthError, InputError
from ..vocab import Vocab, check_ids
from .config import GPTConfig
from .params import BLOCK_KEYS, FlatParams, decay_names, init_params, param_shapes

__all__ = ["GPT", "GPTState", "ActivationCache"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActivationCache:
    """What :meth:`GPT.run_with_cache` records (leading ``B`` axis only for batched input).

    Attributes
    ----------
    logits : (T, V) or (B, T, V)
    attn : (n_layer, n_head, T, T) or (B, n_layer, n_head, T, T)
        Attention patterns P (rows sum to 1, zero above the diagonal).
    resid : (n_layer + 1, T, C) or (B, n_layer + 1, T, C)
        Residual stream: index 0 = embeddings (input of block 0), index l + 1 = after block l.
    """

    logits: np.ndarray
    attn: np.ndarray
    resid: np.ndarray


class _KVCache:
    """Preallocated keys/values shared by the states of one decoding branch."""

    def __init__(self, config: GPTConfig, dtype):
        shape = (config.n_layer, config.n_head, config.block_size, config.head_dim)
        self.k = np.zeros(shape, dtype=dtype)  # (L, H, block, hd)
        self.v = np.zeros(shape, dtype=dtype)  # (L, H, block, hd)
        self.ids = np.zeros(config.block_size, dtype=np.int64)
        self.length = 0  # slots written so far; a state may own a shorter prefix

    def fork(self, length: int) -> "_KVCache":
        new = object.__new__(_KVCache)
        new.k, new.v, new.ids = self.k.copy(), self.v.copy(), self.ids.copy()
        new.length = length
        return new


@dataclass(frozen=True, eq=False)
class GPTState:
    """Incremental state of :meth:`GPT.start` / :meth:`GPT.step` (a value: never mutated).

    ``logprobs`` (V,) is log P(next | everything read); ``ids`` the context held in the KV
    cache (the last ``<= block_size`` ids); ``n_seen`` how many ids were read in all.
    States share cache memory; a state only reads its own ``length`` slots, and a step from a
    state whose next slot is already taken copies the cache first.
    """

    logprobs: np.ndarray = field(repr=False)
    length: int
    n_seen: int
    _cache: _KVCache = field(repr=False)

    @property
    def ids(self) -> tuple:
        return tuple(self._cache.ids[:self.length].tolist())


class GPT(BaseLanguageModel):
    """GPT-2-style decoder-only transformer: the f_θ of the chain rule, in numpy.

    Parameters
    ----------
    config : GPTConfig
        Sizes and numerics.
    seed : int
        Seed of the GPT-2 initialization (same seed, same weights, in either dtype).
    vocab : Vocab, optional
        Vocabulary of ``config.vocab_size`` tokens. Default: the tokenizer's vocabulary, or a
        synthetic one with tokens ``"<0>" .. "<V-1>"``; its BOS/EOS are ``bos_id`` / ``eos_id``.
    tokenizer : Tokenizer, optional
        Stored as ``model.tokenizer`` (settable later); its vocabulary becomes ``vocab_``.
    bos_id, eos_id : int, optional
        Special ids of the synthetic vocabulary (None: no such token).

    Attributes
    ----------
    params : dict of str -> ndarray
        Named parameters (see :mod:`seqprob.gpt.params`), views into ``flat_params_``.
    flat_params_, flat_grads_ : ndarray
        One contiguous buffer each; ``grads`` of :meth:`loss_and_grads` are views into
        ``flat_grads_`` laid out exactly like ``params`` in ``flat_params_``.
    param_slices_ : dict of str -> slice
        Where each parameter lives in the flat buffers.

    Notes
    -----
    x = W_E[ids] + W_pos; per block x += attn(ln_1(x)); x += mlp(ln_2(x));
    logits = ln_f(x) W_Uᵀ with W_U = W_E when tied; mlp(h) = gelu_tanh(h W_in + b) W_out + b.

    Examples
    --------
    >>> cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)
    >>> model = GPT(cfg, seed=0)
    >>> model.logprobs([1, 2, 3]).shape
    (3, 11)
    """

    def __init__(self, config: GPTConfig, seed: int = 0, vocab: Vocab | None = None,
                 tokenizer=None, bos_id: int | None = None, eos_id: int | None = None):
        if not isinstance(config, GPTConfig):
            raise InputError(f"config must be a GPTConfig, got {type(config).__name__}")
        self.config = config
        self.seed = seed
        self.dtype = np.dtype(config.dtype)
        self._flat = FlatParams(param_shapes(config), self.dtype)
        self._gflat = FlatParams(param_shapes(config), self.dtype)
        init_params(self._flat.arrays, config, seed)
        self._tokenizer = None
        self.vocab_ = self._default_vocab(bos_id, eos_id) if vocab is None else self._check_vocab(vocab)
        if tokenizer is not None:
            self.tokenizer = tokenizer
        self._ws_key, self._ws = None, None

    # ----------------------------------------------------------------- parameters, vocab
    @property
    def params(self) -> dict:
        return self._flat.arrays

    @property
    def flat_params_(self) -> np.ndarray:
        return self._flat.flat

    @property
    def flat_grads_(self) -> np.ndarray:
        return self._gflat.flat

    @property
    def param_slices_(self) -> dict:
        return self._flat.slices

    def decay_names(self) -> list[str]:
        """Parameters that get weight decay by convention (the ``.w`` matrices)."""
        return decay_names(self.params)

    def n_params(self) -> int:
        """Number of parameters (tied W_U counted once)."""
        return sum(a.size for a in self.params.values())

    def load_params(self, arrays: dict, strict: bool = True) -> "GPT":
        """Copy named arrays into the parameters (shapes must match); returns self."""
        from ..errors import CheckpointError
        missing = sorted(set(self.params) - set(arrays))
        extra = sorted(set(arrays) - set(self.params))
        if strict and (missing or extra):
            raise CheckpointError(f"parameter names do not match the config: missing {missing[:5]}, "
                                  f"unexpected {extra[:5]}", missing=missing, unexpected=extra)
        for name, value in arrays.items():
            if name not in self.params:
                continue
            value = np.asarray(value)
            if value.shape != self.params[name].shape:
                raise CheckpointError(f"parameter {name!r} has shape {value.shape}, the config "
                                      f"needs {self.params[name].shape}", name=name)
            self.params[name][...] = value
        return self

    def _default_vocab(self, bos_id, eos_id) -> Vocab:
        V = self.config.vocab_size
        for role, idx in (("bos_id", bos_id), ("eos_id", eos_id)):
            if idx is not None and not 0 <= int(idx) < V:
                raise InputError(f"{role}={idx} out of range: must be in [0, {V})", value=idx, limit=V)
        name = (lambda i: None if i is None else f"<{int(i)}>")
        return Vocab([f"<{i}>" for i in range(V)], bos=name(bos_id), eos=name(eos_id), unk=None)

    def _check_vocab(self, vocab) -> Vocab:
        if len(vocab) != self.config.vocab_size:
            raise InputError(f"vocabulary has {len(vocab)} tokens but config.vocab_size is "
                             f"{self.config.vocab_size}", value=len(vocab), limit=self.config.vocab_size)
        return vocab

    @property
    def tokenizer(self):
        """The tokenizer that produced the ids (None if unknown); setting it sets ``vocab_``."""
        return self._tokenizer

    @tokenizer.setter
    def tokenizer(self, tok):
        if tok is not None:
            self.vocab_ = self._check_vocab(tok.vocab)
        self._tokenizer = tok

    def __repr__(self) -> str:
        c = self.config
        return (f"GPT(n_layer={c.n_layer}, n_head={c.n_head}, n_embd={c.n_embd}, "
                f"vocab_size={c.vocab_size}, block_size={c.block_size}, dtype={c.dtype}, "
                f"params={self.n_params():,})")

    def _block(self, layer: int) -> list:
        p = self.params
        return [p.get(f"h.{layer}.{k}") for k in BLOCK_KEYS]

    @property
    def _w_u(self) -> np.ndarray:
        return self.params["wte"] if self.config.tie_weights else self.params["lm_head.w"]

    # ----------------------------------------------------------------- checks
    def _check_T(self, T: int, what: str = "logits") -> None:
        if T > self.config.block_size:
            raise ContextLengthError(f"{what}: {T} positions exceed block_size={self.config.block_size} "
                                     f"(use logprobs/token_logprobs, which slide a window)",
                                     value=T, limit=self.config.block_size)

    def _raise_if_nan(self, arr: np.ndarray, what: str) -> None:
        if not np.isnan(arr.max()):
            return
        for name, value in self.params.items():
            bad = ~np.isfinite(value)
            if bad.any():
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                raise InputError(f"parameter {name!r} holds a non-finite value {value[idx]} at "
                                 f"index {idx}: the model weights are corrupt", name=name, index=idx)
        raise InputError(f"{what} contain NaN although every parameter is finite (overflow?)")

    def _workspace(self, B: int, T: int) -> dict:
        key = (B, T)
        if self._ws_key != key:
            C, H, dt = self.config.n_embd, self.config.n_head, self.dtype
            self._ws = {"x": np.empty((B, T, C), dt), "h": np.empty((B, T, C), dt),
                        "qkv": np.empty((B, T, 3 * C), dt), "S": np.empty((B, H, T, T), dt),
                        "y": np.empty((B, T, C), dt), "u": np.empty((B, T, 4 * C), dt)}
            self._ws_key = key
        return self._ws
