"""KV-cached decoding of the GPT: the states of ``start`` / ``step``.

A step runs one position through :func:`seqprob.gpt.block.block_forward` (the same block as
every other path) with this layer's key/value arrays: the new key and value are written at
slot ``pos`` and the query attends over slots ``0 .. pos``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import nn
from ..errors import InputError
from ..vocab import check_ids, check_token_id
from .block import block_forward, make_workspace, norm_forward

__all__ = ["GPTState", "start_ids", "step"]


class _KVCache:
    """Preallocated keys/values shared by the states of one decoding branch."""

    def __init__(self, config, dtype):
        shape = (config.n_layer, config.kv_heads, config.block_size, config.head_dim)
        self.k = np.zeros(shape, dtype=dtype)  # (L, Hkv, block, hd)
        self.v = np.zeros(shape, dtype=dtype)  # (L, Hkv, block, hd)
        self.ids = np.zeros(config.block_size, dtype=np.int64)
        self.length = 0  # slots written so far; a state may own a shorter prefix

    def layer(self, index: int) -> tuple:
        """(K, V) of one layer, each (Hkv, block, hd)."""
        return self.k[index], self.v[index]

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
        """The context ids held in the KV cache (the last ``<= block_size`` ids read)."""
        return tuple(self._cache.ids[:self.length].tolist())


def start_ids(model, ids: np.ndarray, n_seen: int) -> GPTState:
    """State after reading validated ``ids`` (T,): one forward pass that fills the cache."""
    ctx = ids[-model.config.block_size:]
    T = len(ctx)
    cache = _KVCache(model.config, model.dtype)
    h = model._hidden(ctx[None, :], kv=cache)  # (1, T, C)
    cache.ids[:T], cache.length = ctx, T
    row = model._unembed_logprobs(h[0, -1:], np.empty((1, model.config.vocab_size), model.dtype))[0]
    return _state(model, row, T, n_seen, cache)


def _state(model, row, length, n_seen, cache) -> GPTState:
    model._check_finite(row, "log-probabilities")
    row.flags.writeable = False
    return GPTState(row, length, n_seen, cache)


def step(model, state: GPTState, token_id) -> GPTState:
    """New state after appending ``token_id`` (see :meth:`GPT.step`)."""
    if not isinstance(state, GPTState):
        raise InputError(f"step() needs a state from GPT.start(), got {type(state).__name__}")
    tok = check_token_id(token_id, model.config.vocab_size)
    cache, pos = state._cache, state.length
    if pos == model.config.block_size:
        ctx = np.append(cache.ids[1:pos], tok)
        return start_ids(model, ctx, state.n_seen + 1)
    if cache.length != pos:
        cache = cache.fork(pos)
    row = decode_one(model, cache, pos, tok)
    cache.ids[pos], cache.length = tok, pos + 1
    return _state(model, row, pos + 1, state.n_seen + 1, cache)


def decode_one(model, cache: _KVCache, pos: int, tok: int) -> np.ndarray:
    """One position through every block, keys/values written at slot ``pos``; -> (V,)."""
    cfg = model.config
    ws = model.__dict__.get("_decode_ws")
    if ws is None:
        ws = model._decode_ws = make_workspace(cfg, 1, 1, model.dtype)
    x = model._embed(np.array([[tok]]), pos)  # (1, 1, C)
    for layer, p in enumerate(model._block_params):
        block_forward(x, p, cfg, model._rope, ws=ws, kv=cache.layer(layer), pos=pos)
    h = norm_forward(x, model.params, "ln_f", cfg, out=ws["h"])[0]  # (1, 1, C)
    logits = np.dot(model._w_u, h.reshape(-1))  # (V,)
    return nn.log_softmax_inplace(logits)
