"""KV-cached decoding of the GPT: the states of ``start`` / ``step``.

``start`` runs the prompt through the batched forward (:meth:`GPT._hidden` with the cache),
which writes every layer's keys and values. A ``step`` runs one position through
:func:`seqprob.gpt.block.block_step`, the same block on a single residual row: the new key
and value are written at slot ``pos`` and the query attends over slots ``0 .. pos``.

Batch-1 decoding is bound by reading the weights and by per-call overhead (a token of config
"small" is 4 x 4 GEMVs of at most 1024 x 256 and a 256 x 4096 unembedding, ~175 numpy calls
in all), so what a step reuses is looked up once
per decoding branch, in :class:`_Plan`: each layer's parameters as named fields
(:class:`~seqprob.gpt.block.RowParams`, views of the model's arrays, so later in-place
updates of the weights are seen), the embedding, final norm and unembedding; and every
cache owns a :class:`~seqprob.gpt.block.RowWorkspace` of reused buffers.

Threads: a step of a small model (every block matrix under :data:`SMALL_GEMV` elements, as in
config "small") runs BLAS on one thread (:data:`seqprob._parallel.one_blas_thread`, the setting restored after
the step; so does the one-row unembedding that ends ``start``): its GEMVs are too small for
OpenBLAS to split, except the unembedding, and waking BLAS's worker for that one call costs
more than it saves (see the performance page, "Design notes"). Larger models (GPT-2 124M)
keep BLAS's threads, which split their large GEMVs.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

import numpy as np

from .. import _parallel, nn
from ..errors import InputError
from ..vocab import check_token_id
from .block import RowParams, RowWorkspace, block_step, embed_row, norm_row
from .params import allocate

__all__ = ["GPTState", "start_ids", "step"]

SMALL_GEMV = 1 << 20  # elements of the largest block matrix below which a step runs BLAS on one thread


class _Plan:
    """The arrays every step of a decoding branch reads, looked up once (at ``start``)."""

    __slots__ = ("config", "dtype", "layers", "wte", "wpe", "ln_f_g", "ln_f_b", "w_u",
                 "small", "owner", "embed_scale", "softcap")

    def __init__(self, model):
        params = model.params
        self.owner = weakref.ref(model)  # a state steps only with the model that started it
        cfg = self.config = model.config
        self.dtype = model.dtype
        self.layers = tuple(RowParams.of(p, model._ropes[i], cfg.layer_window(i))
                            for i, p in enumerate(model._block_params))
        self.embed_scale, self.softcap = cfg.embed_scale, cfg.final_softcap
        self.wte, self.wpe = params["wte"], params.get("wpe")  # (V, C), (block, C) or None
        self.ln_f_g, self.ln_f_b = params["ln_f.g"], params.get("ln_f.b")
        self.w_u = model._w_u  # (V, C)
        self.small = max(a.size for layer in self.layers
                         for a in (layer.w_qkv, layer.w_up, layer.w_down)) < SMALL_GEMV


class _KVCache:
    """Preallocated keys/values shared by the states of one decoding branch, with the
    branch's :class:`_Plan` and this cache's own step buffers. A sliding layer's keys and
    values are a ring of W slots (position p in slot p mod W): the cache keeps only what the
    window can still see; a state whose ring slots a later step overwrote (another branch)
    is read again from its ids."""

    def __init__(self, plan: _Plan):
        config = plan.config
        self.k, self.v = [], []
        for layer in plan.layers:  # a sliding layer keeps its window only: a ring of W slots
            slots = config.block_size if layer.window is None else min(layer.window, config.block_size)
            shape = (config.kv_heads, slots, config.head_dim)
            self.k.append(allocate(shape, plan.dtype, "the key cache (kv heads, slots, head dim) of a layer"))
            self.v.append(allocate(shape, plan.dtype, "the value cache (kv heads, slots, head dim) of a layer"))
        self.rings = any(k.shape[1] < config.block_size for k in self.k)
        self.ids = np.zeros(config.block_size, dtype=np.int64)
        self.length = 0  # slots written so far; a state may own a shorter prefix
        self._bind(plan)

    def _bind(self, plan: _Plan) -> None:
        self.plan = plan
        self.ws = RowWorkspace(plan.config, plan.dtype)
        self.kv = tuple(zip(self.k, self.v))  # per layer (K, V), each (Hkv, block or window, hd)

    def layer(self, index: int) -> tuple:
        """(K, V) of one layer, each (Hkv, block, hd)."""
        return self.kv[index]

    def fork(self, length: int) -> "_KVCache":
        new = object.__new__(_KVCache)
        new.k, new.v = [k.copy() for k in self.k], [v.copy() for v in self.v]
        new.ids, new.rings = self.ids.copy(), self.rings
        new.length = length
        new._bind(self.plan)
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
    cache = _KVCache(_Plan(model))
    h = model._hidden(ctx[None, :], kv=cache)  # (1, T, C)
    cache.ids[:T], cache.length = ctx, T
    if cache.plan.small:  # one row: no BLAS worker woken (it would spin through the steps)
        with _parallel.one_blas_thread:
            row = unembed_row(cache.plan, h[0, -1], cache.ws.e)
    else:
        row = unembed_row(cache.plan, h[0, -1], cache.ws.e)
    return _state(model, row, T, n_seen, cache)


def _state(model, row, length, n_seen, cache) -> GPTState:
    # log-softmax output is <= 0 or NaN, and np.min propagates NaN: one pass finds any NaN/inf
    if not math.isfinite(np.minimum.reduce(row)):
        model._check_finite(row, "log-probabilities")  # names a corrupt parameter
    row.flags.writeable = False
    return GPTState(row, length, n_seen, cache)


def step(model, state: GPTState, token_id) -> GPTState:
    """New state after appending ``token_id`` (see :meth:`GPT.step`)."""
    if type(state) is not GPTState:
        raise InputError(f"step() needs a state from GPT.start(), got {type(state).__name__}")
    if state._cache.plan.owner() is not model:  # its cache holds that model's weights and keys
        raise InputError("step() was given a state started by another GPT: a state steps only "
                         "with the model whose start() made it")
    V = model.config.vocab_size
    tok = token_id if type(token_id) is int and 0 <= token_id < V else check_token_id(token_id, V)
    cache, pos = state._cache, state.length
    if pos == model.config.block_size:
        ctx = np.append(cache.ids[1:pos], tok)
        return start_ids(model, ctx, state.n_seen + 1)
    if cache.length != pos:
        if cache.rings:  # another branch's steps overwrote ring slots this state still reads
            return start_ids(model, np.append(cache.ids[:pos], tok), state.n_seen + 1)
        cache = cache.fork(pos)
    if cache.plan.small:
        with _parallel.one_blas_thread:
            row = decode_one(cache, pos, tok)
    else:
        row = decode_one(cache, pos, tok)
    cache.ids[pos], cache.length = tok, pos + 1
    return _state(model, row, pos + 1, state.n_seen + 1, cache)


def decode_one(cache: _KVCache, pos: int, tok: int) -> np.ndarray:
    """Token ``tok`` at position ``pos`` through every block (keys/values written at slot
    ``pos``), then log-softmax(ln_f(x) W_Uᵀ): a new (V,) row of log-probabilities."""
    plan, ws = cache.plan, cache.ws
    x = embed_row(ws.x, plan.wte, plan.wpe, tok, pos, plan.embed_scale)  # (C,)
    for layer, (K, V) in zip(plan.layers, cache.kv):
        block_step(x, layer, K, V, pos, ws)
    return unembed_row(plan, norm_row(x, plan.ln_f_g, plan.ln_f_b, ws), ws.e)


def unembed_row(plan: _Plan, h: np.ndarray, tmp: np.ndarray | None = None) -> np.ndarray:
    """log-softmax(W_U h) of one final-normed row h (C,): a new (V,) array (``tmp`` (V,): an
    optional scratch buffer)."""
    u = np.dot(plan.w_u, h)  # (V,)
    if plan.softcap is not None:
        nn.softcap_forward(u, plan.softcap, out=u)
    return nn.log_softmax_row(u, tmp)


