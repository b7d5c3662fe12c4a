"""f_θ: a GPT-2-style decoder in numpy, with a hand-written backward and a KV cache.

Given ids x_0..x_{T-1} the model returns logits u_1..u_T and P(x_t | x_<t) = softmax(u_t).
One code path serves every batch shape: ids ``(B, T)`` flatten to ``B*T`` rows for the
weight GEMMs, attention runs per head on strided views, buffers are reused per ``(B, T)``.
"""
from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass, field

import numpy as np

from .. import nn
from ..base import BaseLanguageModel
from ..errors import ContextLengthError, InputError
from ..vocab import Vocab, check_ids, check_token_id
from .config import GPTConfig
from .params import BLOCK_KEYS, FlatParams, decay_names, init_params, param_shapes

__all__ = ["GPT", "GPTState", "ActivationCache"]

log = logging.getLogger(__name__)


def _quiet(method):
    """Run ``method`` without numpy floating-point warnings: non-finite results are checked
    (and named) by the model itself, or returned as a NaN loss for the training loop."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return method(*args, **kwargs)
    return wrapper


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
        """The context ids held in the KV cache (the last ``<= block_size`` ids read)."""
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
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(f"seed must be an integer >= 0, got {seed!r}", value=seed, limit=0)
        self.config = config
        self.seed = int(seed)
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
        """Named parameter arrays (``name -> ndarray``), views into ``flat_params_``."""
        return self._flat.arrays

    @property
    def flat_params_(self) -> np.ndarray:
        """The one contiguous buffer that holds every parameter (alignment gaps are zeros)."""
        return self._flat.flat

    @property
    def flat_grads_(self) -> np.ndarray:
        """The gradient buffer of :meth:`loss_and_grads`, laid out like ``flat_params_``."""
        return self._gflat.flat

    @property
    def param_slices_(self) -> dict:
        """``name -> slice`` of each parameter in ``flat_params_`` / ``flat_grads_``."""
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

    @classmethod
    def from_hf(cls, path, dtype: str = "float32", tokenizer=None) -> "GPT":
        """A GPT-2 from a Hugging Face checkpoint folder (``config.json`` + ``model.safetensors``).

        See :func:`seqprob.gpt.hf.from_hf` for the details and errors.

        Examples
        --------
        >>> from seqprob.tokenizers import TiktokenTokenizer                # doctest: +SKIP
        >>> gpt2 = GPT.from_hf("gpt2/", dtype="float64",
        ...                    tokenizer=TiktokenTokenizer("gpt2.tiktoken"))  # doctest: +SKIP
        >>> sp.score(gpt2, ["Hello world"])                                  # doctest: +SKIP
        """
        from .hf import from_hf
        return from_hf(path, dtype=dtype, tokenizer=tokenizer, cls=cls)

    def save(self, path, optimizer=None, extra: dict | None = None):
        """Write a checkpoint folder atomically (see :func:`seqprob.gpt.checkpoint.save_checkpoint`).

        Examples
        --------
        >>> import tempfile
        >>> model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
        >>> folder = model.save(tempfile.mkdtemp() + "/m")
        >>> bool((GPT.load(folder).flat_params_ == model.flat_params_).all())
        True
        """
        from .checkpoint import save_checkpoint
        return save_checkpoint(self, path, optimizer=optimizer, extra=extra)

    @classmethod
    def load(cls, path, dtype: str | None = None) -> "GPT":
        """Read a checkpoint folder written by :meth:`save` (model only; see ``load_checkpoint``)."""
        from .checkpoint import load_checkpoint
        return load_checkpoint(path, dtype=dtype).model

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

    def _check_finite(self, arr: np.ndarray, what: str) -> None:
        """Raise InputError if ``arr`` holds NaN or inf, naming a corrupt parameter if any."""
        if np.isfinite(arr.max()) and np.isfinite(arr.min()):
            return
        for name, value in self.params.items():
            bad = ~np.isfinite(value)
            if bad.any():
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                raise InputError(f"parameter {name!r} holds a non-finite value {value[idx]} at "
                                 f"index {idx}: the model weights are corrupt", name=name, index=idx)
        raise InputError(f"{what} contain NaN or inf although every parameter is finite (overflow?)")

    def _workspace(self, B: int, T: int) -> dict:
        key = (B, T)
        if self._ws_key != key:
            C, H, dt = self.config.n_embd, self.config.n_head, self.dtype
            self._ws = {"x": np.empty((B, T, C), dt), "h": np.empty((B, T, C), dt),
                        "qkv": np.empty((B, T, 3 * C), dt), "S": np.empty((B, H, T, T), dt),
                        "y": np.empty((B, T, C), dt), "u": np.empty((B, T, 4 * C), dt),
                        "t": np.empty((B, T, 4 * C), dt)}
            self._ws_key = key
        return self._ws

    # ----------------------------------------------------------------- inference forward
    def _hidden(self, ids: np.ndarray, kv: _KVCache | None = None, attn=None, resid=None) -> np.ndarray:
        """ln_f(x) of validated ids (B, T <= block) -> (B, T, C), a view of a reused buffer.

        ``kv`` receives the keys/values of row 0; ``attn`` (B, L, H, T, T) and ``resid``
        (B, L+1, T, C) receive the attention patterns and the residual stream.
        """
        cfg, p = self.config, self.params
        B, T = ids.shape
        ws, eps, H = self._workspace(B, T), cfg.layer_norm_epsilon, cfg.n_head
        x = np.take(p["wte"], ids, axis=0, out=ws["x"])  # (B, T, C)
        x += p["wpe"][:T]
        if resid is not None:
            resid[:, 0] = x
        for layer in range(cfg.n_layer):
            g1, b1, wa, ba, wp, bp, g2, b2, wf, bf, wm, bm = self._block(layer)
            h, _ = nn.layer_norm_forward(x, g1, b1, eps, out=ws["h"], xhat_out=ws["h"])  # (B, T, C)
            qkv, _ = nn.linear_forward(h, wa, ba, out=ws["qkv"])  # (B, T, 3C)
            y, (_, probs, _) = nn.attention_forward(qkv, H, out=ws["y"], probs_out=ws["S"])
            if kv is not None:
                _, k, v = nn.split_heads(qkv, H)  # (B, H, T, hd)
                kv.k[layer, :, :T], kv.v[layer, :, :T] = k[0], v[0]
            if attn is not None:
                attn[:, layer] = probs
            x += nn.linear_forward(y, wp, bp, out=ws["h"])[0]
            h, _ = nn.layer_norm_forward(x, g2, b2, eps, out=ws["h"], xhat_out=ws["h"])
            u, _ = nn.linear_forward(h, wf, bf, out=ws["u"])  # (B, T, 4C)
            nn.gelu_forward(u, out=u, tanh_out=ws["t"])
            x += nn.linear_forward(u, wm, bm, out=ws["h"])[0]
            if resid is not None:
                resid[:, layer + 1] = x
        gf, bf = p["ln_f.g"], p.get("ln_f.b")
        return nn.layer_norm_forward(x, gf, bf, eps, out=ws["h"], xhat_out=ws["h"])[0]

    def _unembed_logprobs(self, h2: np.ndarray, out: np.ndarray, chunk: int = 64) -> np.ndarray:
        """log-softmax(h2 W_Uᵀ) of rows h2 (N, C) into out (N, V), in cache-sized row chunks."""
        np.matmul(h2, self._w_u.T, out=out)  # (N, V)
        tmp = np.empty((min(chunk, len(out)), out.shape[1]), dtype=out.dtype)
        for i in range(0, len(out), chunk):
            nn.log_softmax_inplace(out[i:i + chunk], tmp=tmp[:len(out[i:i + chunk])])
        return out

    def _logprobs_window(self, batch: np.ndarray) -> np.ndarray:
        B, T = batch.shape
        out = np.empty((B, T, self.config.vocab_size), dtype=self.dtype)
        h = self._hidden(batch)
        self._unembed_logprobs(h.reshape(B * T, -1), out.reshape(B * T, -1))
        return out

    def _token_logprobs_window(self, batch: np.ndarray, chunk: int = 64) -> np.ndarray:
        inputs, targets = batch[:, :-1], batch[:, 1:].reshape(-1)
        B, T = inputs.shape
        h2 = self._hidden(inputs).reshape(B * T, -1)  # (N, C)
        out = np.empty(B * T, dtype=self.dtype)
        tmp = np.empty((min(chunk, B * T), self.config.vocab_size), dtype=self.dtype)
        w_u = self._w_u
        for i in range(0, B * T, chunk):
            rows = np.matmul(h2[i:i + chunk], w_u.T, out=tmp[:len(h2[i:i + chunk])])  # (n, V)
            nn.log_softmax_inplace(rows)
            out[i:i + chunk] = rows[np.arange(len(rows)), targets[i:i + chunk]]
        return out.reshape(B, T)

    # ----------------------------------------------------------------- public scoring API
    @_quiet
    def logprobs(self, ids, stride: int | None = None) -> np.ndarray:
        """log P(x_t = v | x_<t) for every position and every v.

        Parameters
        ----------
        ids : array_like of int, shape (T,) or (B, T)
            x_0 .. x_{T-1}. Longer than ``block_size``: a sliding window (see ``stride``).
        stride : int, optional
            Window step for T > block_size (default ``block_size // 2``), in [1, block_size].

        Returns
        -------
        ndarray (T, V) or (B, T, V)
            Row t-1 = log P(x_t = v | x_0 .. x_{t-1}); every row sums to 1 in probability.

        Raises
        ------
        TokenIdError
            An id is negative or >= ``vocab_size``.
        InputError
            Empty or non-integer ids, a bad ``stride``, or non-finite weights (named).

        Notes
        -----
        Sliding window: window k covers positions [k s, k s + block) (s = ``stride``); rows
        0 .. block-1 come from window 0, later rows from the last s rows of the window that
        ends after them. Every token is scored exactly once, with at least
        ``block_size - stride + 1`` ids of context; the windows depend only on the position,
        so a right-padded batch gives the same rows as each sequence alone. ``stride=1``
        gives every row the full ``block_size`` context (what :meth:`step` computes).

        Examples
        --------
        >>> model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
        >>> lp = model.logprobs([0, 1, 2, 3, 4, 0, 1], stride=2)
        >>> lp.shape, bool(np.allclose(np.exp(lp).sum(-1), 1.0))
        ((7, 5), True)
        """
        batch, squeeze = self._validate(ids)
        out = self._slide(batch, stride, self._logprobs_window, offset=0)
        self._check_finite(out, "log-probabilities")
        return out[0] if squeeze else out

    @_quiet
    def token_logprobs(self, ids, stride: int | None = None) -> np.ndarray:
        """log P(x_t | x_<t) of the ids actually there: (T+1,) -> (T,), (B, T+1) -> (B, T).

        Builds no (T, V) array (rows are unembedded in small chunks). ``stride`` as in
        :meth:`logprobs` for sequences longer than ``block_size + 1``.

        Notes
        -----
        Entry t-1 = log softmax(u_t)[x_t]; the sum over t is log P(x_1 .. x_T | x_0).

        Examples
        --------
        >>> model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
        >>> model.token_logprobs([0, 1, 2]).shape
        (2,)
        """
        batch, squeeze = self._validate(ids, min_len=2)
        out = self._slide(batch, stride, self._token_logprobs_window, offset=1)
        self._check_finite(out, "log-probabilities")
        return out[0] if squeeze else out

    def _logprobs(self, batch: np.ndarray) -> np.ndarray:
        return self._slide(batch, None, self._logprobs_window, offset=0)

    def _slide(self, batch, stride, fn, offset: int):
        """Apply ``fn`` (rows out = inputs) over windows of block_size (+offset) ids starting
        at multiples of ``stride`` (see :meth:`logprobs`)."""
        B, T = batch.shape
        n, block = T - offset, self.config.block_size
        stride = self._check_stride(stride)
        if n <= block:
            return fn(batch)
        first = fn(batch[:, :block + offset])
        out = np.empty((B, n) + first.shape[2:], dtype=first.dtype)
        out[:, :block] = first
        for start in range(stride, n - block + stride, stride):
            done, end = start + block - stride, min(start + block, n)  # new rows: done .. end-1
            out[:, done:end] = fn(batch[:, start:end + offset])[:, done - start:]
        return out

    def _check_stride(self, stride) -> int:
        block = self.config.block_size
        if stride is None:
            return max(1, block // 2)
        if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or not 1 <= stride <= block:
            raise InputError(f"stride must be an integer in [1, block_size={block}], got {stride!r}",
                             value=stride, limit=block)
        return int(stride)

    @_quiet
    def logits(self, ids) -> np.ndarray:
        """Unnormalized logits u (T, V) or (B, T, V); T must fit in block_size.

        Notes
        -----
        u_t = ln_f(x_t^{(L)}) W_Uᵀ; ``logprobs`` = u - logsumexp(u) row by row.

        Examples
        --------
        >>> model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
        >>> model.logits([[0, 1], [2, 3]]).shape
        (2, 2, 5)
        """
        batch, squeeze = self._validate(ids)
        B, T = batch.shape
        self._check_T(T)
        h2 = self._hidden(batch).reshape(B * T, -1)
        out = np.matmul(h2, self._w_u.T).reshape(B, T, -1)  # (B, T, V)
        self._check_finite(out, "logits")
        return out[0] if squeeze else out

    @_quiet
    def unembed(self, resid) -> np.ndarray:
        """Logits ln_f(resid) W_Uᵀ of residual-stream vectors (..., C): the logit lens.

        Examples
        --------
        >>> model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=2, n_head=1, n_embd=4))
        >>> cache = model.run_with_cache([0, 1, 2])
        >>> model.unembed(cache.resid[1]).shape  # what block 0's output would predict
        (3, 5)
        """
        try:
            resid = np.asarray(resid, dtype=self.dtype)
        except (TypeError, ValueError) as exc:
            raise InputError(f"resid must be an array of numbers ({exc})") from None
        if resid.ndim == 0 or resid.shape[-1] != self.config.n_embd:
            raise InputError(f"resid must end in n_embd={self.config.n_embd}, got shape {resid.shape}",
                             shape=resid.shape)
        if not np.isfinite(resid).all():
            raise InputError("resid holds NaN or inf", shape=resid.shape)
        p = self.params
        h, _ = nn.layer_norm_forward(resid, p["ln_f.g"], p.get("ln_f.b"), self.config.layer_norm_epsilon)
        out = h @ self._w_u.T
        self._check_finite(out, "logits")
        return out

    @_quiet
    def run_with_cache(self, ids) -> ActivationCache:
        """Logits plus attention patterns and the residual stream after every block.

        Returns
        -------
        ActivationCache
            ``logits`` (T, V), ``attn`` (n_layer, n_head, T, T), ``resid`` (n_layer+1, T, C);
            each with a leading B axis for (B, T) input.

        Notes
        -----
        attn[l, h] = softmax(q kᵀ / sqrt(head_dim) + causal mask) of block l, head h;
        resid[0] = W_E[ids] + W_pos, resid[l + 1] = resid[l] + attn-out + mlp-out of block l.

        Examples
        --------
        >>> model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=2, n_head=2, n_embd=4))
        >>> c = model.run_with_cache([0, 1, 2])
        >>> c.logits.shape, c.attn.shape, c.resid.shape
        ((3, 5), (2, 2, 3, 3), (3, 3, 4))
        """
        batch, squeeze = self._validate(ids)
        cfg = self.config
        B, T = batch.shape
        self._check_T(T, "run_with_cache")
        attn = np.empty((B, cfg.n_layer, cfg.n_head, T, T), dtype=self.dtype)
        resid = np.empty((B, cfg.n_layer + 1, T, cfg.n_embd), dtype=self.dtype)
        h2 = self._hidden(batch, attn=attn, resid=resid).reshape(B * T, -1)
        logits = np.matmul(h2, self._w_u.T).reshape(B, T, -1)  # (B, T, V)
        self._check_finite(logits, "logits")
        if squeeze:
            return ActivationCache(logits[0], attn[0], resid[0])
        return ActivationCache(logits, attn, resid)


    # ----------------------------------------------------------------- training
    @_quiet
    def loss_and_grads(self, batch, mask=None, rng=None):
        """Mean next-token NLL of a batch and its gradient for every parameter.

        Parameters
        ----------
        batch : array_like of int, shape (B, T+1) or (T+1,)
            Inputs ``batch[:, :-1]``, targets ``batch[:, 1:]``; T <= block_size.
        mask : array_like of bool, shape (B, T), optional
            Which targets count (False = padding); the mean is over the counted targets.
        rng : numpy.random.Generator, optional
            Source of the dropout masks; dropout is applied only when ``config.dropout > 0``
            and ``rng`` is given.

        Returns
        -------
        loss : float
            -(1/n) Σ log P(target | inputs so far), n = number of counted targets. Not
            checked: a NaN/inf loss is returned as is for the caller to handle.
        grads : dict of str -> ndarray
            Keyed like ``params``; views into ``flat_grads_``, overwritten by the next call.

        Notes
        -----
        Backpropagation by hand through :mod:`seqprob.nn`; a tied W_E gets the sum of its
        embedding and unembedding gradients.

        Examples
        --------
        >>> from seqprob.optim import AdamW
        >>> model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
        >>> loss, grads = model.loss_and_grads([[0, 1, 2, 3, 4]])  # inputs 0..3, targets 1..4
        >>> round(loss, 1), grads["wte"].shape
        (1.6, (5, 4))
        >>> AdamW(model.params, lr=1e-2).step(grads)
        """
        batch, mask = self._check_train_batch(batch, mask)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        B, T = inputs.shape
        cfg, p, g = self.config, self.params, self._gflat.arrays
        drop = rng if cfg.dropout > 0 else None
        x, emb_cache = nn.embedding_forward(inputs, p["wte"])  # (B, T, C)
        x = x + p["wpe"][:T]
        x, d0 = nn.dropout_forward(x, cfg.dropout, drop)
        caches = []
        for layer in range(cfg.n_layer):
            x, cache = self._block_forward(x, layer, drop)
            caches.append(cache)
        hf, ln_cache = nn.layer_norm_forward(x, p["ln_f.g"], p.get("ln_f.b"), cfg.layer_norm_epsilon)
        h2 = hf.reshape(B * T, -1)  # (N, C)
        logits = np.matmul(h2, self._w_u.T)  # (N, V)
        loss, dlogits = nn.cross_entropy_fused(logits, targets.reshape(-1), mask)  # (N, V) in place
        np.matmul(dlogits.T, h2, out=g["wte"] if cfg.tie_weights else g["lm_head.w"])
        dx, dg, db = nn.layer_norm_backward((dlogits @ self._w_u).reshape(B, T, -1), ln_cache)
        self._store(g, "ln_f", dg, db)
        for layer in reversed(range(cfg.n_layer)):
            dx = self._block_backward(dx, caches.pop(), layer, g)
        dx = nn.dropout_backward(dx, d0)
        np.sum(dx, axis=0, out=g["wpe"][:T])
        g["wpe"][T:] = 0.0
        if not cfg.tie_weights:
            g["wte"][...] = 0.0
        nn.embedding_backward(dx, emb_cache, out=g["wte"])
        return loss, g

    def _block_forward(self, x, layer: int, drop):
        cfg = self.config
        eps, H, pd = cfg.layer_norm_epsilon, cfg.n_head, cfg.dropout
        g1, b1, wa, ba, wp, bp, g2, b2, wf, bf, wm, bm = self._block(layer)
        h1, c_ln1 = nn.layer_norm_forward(x, g1, b1, eps)  # (B, T, C)
        qkv, c_qkv = nn.linear_forward(h1, wa, ba)  # (B, T, 3C)
        y, c_att = nn.attention_forward(qkv, H)  # (B, T, C)
        a, c_proj = nn.linear_forward(y, wp, bp)
        a, c_d1 = nn.dropout_forward(a, pd, drop)
        x = x + a
        h2, c_ln2 = nn.layer_norm_forward(x, g2, b2, eps)
        u, c_fc = nn.linear_forward(h2, wf, bf)  # (B, T, 4C)
        gu, c_gelu = nn.gelu_forward(u)
        m, c_mproj = nn.linear_forward(gu, wm, bm)  # (B, T, C)
        m, c_d2 = nn.dropout_forward(m, pd, drop)
        x += m
        return x, (c_ln1, c_qkv, c_att, c_proj, c_d1, c_ln2, c_fc, c_gelu, c_mproj, c_d2)

    def _block_backward(self, dx, cache, layer: int, g: dict):
        c_ln1, c_qkv, c_att, c_proj, c_d1, c_ln2, c_fc, c_gelu, c_mproj, c_d2 = cache
        G = [g.get(f"h.{layer}.{k}") for k in BLOCK_KEYS]
        dgu, _, _ = nn.linear_backward(nn.dropout_backward(dx, c_d2), c_mproj, G[10], G[11])
        du = nn.gelu_backward(dgu, c_gelu)
        dh2, _, _ = nn.linear_backward(du, c_fc, G[8], G[9])
        d_ln, dg, db = nn.layer_norm_backward(dh2, c_ln2)
        self._store(g, f"h.{layer}.ln_2", dg, db)
        dx = dx + d_ln
        dy, _, _ = nn.linear_backward(nn.dropout_backward(dx, c_d1), c_proj, G[4], G[5])
        dqkv = nn.attention_backward(dy, c_att)
        dh1, _, _ = nn.linear_backward(dqkv, c_qkv, G[2], G[3])
        d_ln, dg, db = nn.layer_norm_backward(dh1, c_ln1)
        self._store(g, f"h.{layer}.ln_1", dg, db)
        dx += d_ln
        return dx

    @staticmethod
    def _store(g: dict, prefix: str, dg, db) -> None:
        g[f"{prefix}.g"][...] = dg
        if f"{prefix}.b" in g:
            g[f"{prefix}.b"][...] = db

    def _check_train_batch(self, batch, mask):
        arr = check_ids(batch, self.config.vocab_size, name="batch")
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[1] < 2:
            raise InputError(f"batch must be (B, T+1) with T >= 1, got shape {arr.shape}", shape=arr.shape)
        self._check_T(arr.shape[1] - 1, "loss_and_grads")
        if mask is None:
            return arr, None
        mask = np.asarray(mask)
        if mask.shape != (arr.shape[0], arr.shape[1] - 1) or mask.dtype.kind not in "bui":
            raise InputError(f"mask must be a boolean (B, T) = {(arr.shape[0], arr.shape[1] - 1)} "
                             f"array, got shape {mask.shape} dtype {mask.dtype}", shape=mask.shape)
        return arr, mask.astype(bool).reshape(-1)

    # ----------------------------------------------------------------- KV-cached decoding
    @_quiet
    def start(self, prefix) -> GPTState:
        """State after reading ``prefix`` (T,): ``.logprobs`` equals ``logprobs(prefix)[-1]``.

        A prefix longer than ``block_size`` keeps its last ``block_size`` ids as context.

        Notes
        -----
        The keys and values of every block are cached, so each :meth:`step` costs one
        position's forward pass: attention of the new query over the cached keys.

        Examples
        --------
        >>> model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
        >>> s = model.step(model.start([0, 1]), 2)
        >>> bool(np.allclose(s.logprobs, model.logprobs([0, 1, 2])[-1], atol=1e-6)), s.ids
        (True, (0, 1, 2))
        """
        batch, _ = self._validate(prefix)
        if batch.shape[0] != 1:
            raise InputError(f"start() takes one prefix (T,), got shape {batch.shape}", shape=batch.shape)
        return self._start_ids(batch[0], n_seen=batch.shape[1])

    def _start_ids(self, ids: np.ndarray, n_seen: int) -> GPTState:
        ctx = ids[-self.config.block_size:]
        T = len(ctx)
        cache = _KVCache(self.config, self.dtype)
        h = self._hidden(ctx[None, :], kv=cache)  # (1, T, C)
        cache.ids[:T], cache.length = ctx, T
        row = self._unembed_logprobs(h[0, -1:], np.empty((1, self.config.vocab_size), self.dtype))[0]
        return self._state(row, T, n_seen, cache)

    def _state(self, row, length, n_seen, cache) -> GPTState:
        self._check_finite(row, "log-probabilities")
        row.flags.writeable = False
        return GPTState(row, length, n_seen, cache)

    @_quiet
    def step(self, state: GPTState, token_id: int) -> GPTState:
        """New state after appending ``token_id``; ``state`` stays valid and unchanged.

        Past ``block_size`` ids the window slides: the context is the last ``block_size``
        ids (recomputed in one forward pass per step).
        """
        if not isinstance(state, GPTState):
            raise InputError(f"step() needs a state from GPT.start(), got {type(state).__name__}")
        tok = check_token_id(token_id, self.config.vocab_size)
        cache, pos = state._cache, state.length
        if pos == self.config.block_size:
            ctx = np.append(cache.ids[1:pos], tok)
            return self._start_ids(ctx, state.n_seen + 1)
        if cache.length != pos:
            cache = cache.fork(pos)
        row = self._decode_one(cache, pos, tok)
        cache.ids[pos], cache.length = tok, pos + 1
        return self._state(row, pos + 1, state.n_seen + 1, cache)

    def _decode_one(self, cache: _KVCache, pos: int, tok: int) -> np.ndarray:
        """One position through every block, keys/values written at slot ``pos``; -> (V,).

        Batch-1 decoding is bound by reading the weights (GEMVs) and by Python overhead, so
        this path calls BLAS directly on 1-D vectors and skips the general layer wrappers.
        """
        cfg, p = self.config, self.params
        H, hd, C, eps = cfg.n_head, cfg.head_dim, cfg.n_embd, cfg.layer_norm_epsilon
        scale = 1.0 / math.sqrt(hd)
        x = p["wte"][tok] + p["wpe"][pos]  # (C,)
        for layer, (g1, b1, wa, ba, wp, bp, g2, b2, wf, bf, wm, bm) in enumerate(self._blocks()):
            qkv = _affine(_ln1d(x, g1, b1, eps), wa, ba)  # (3C,)
            qkv[:C] *= scale
            K, V = cache.k[layer], cache.v[layer]  # (H, block, hd)
            K[:, pos] = qkv[C:2 * C].reshape(H, hd)
            V[:, pos] = qkv[2 * C:].reshape(H, hd)
            s = np.matmul(K[:, :pos + 1], qkv[:C].reshape(H, hd, 1)).reshape(H, pos + 1)  # (H, P)
            nn.softmax_inplace(s)
            y = np.matmul(s.reshape(H, 1, pos + 1), V[:, :pos + 1]).reshape(C)  # (C,)
            x += _affine(y, wp, bp)
            u = _affine(_ln1d(x, g2, b2, eps), wf, bf)  # (4C,)
            x += _affine(nn.gelu_forward(u, out=u, tanh_out=np.empty_like(u))[0], wm, bm)
        h = _ln1d(x, p["ln_f.g"], p.get("ln_f.b"), eps)
        logits = np.dot(self._w_u, h)  # (V,)
        return nn.log_softmax_inplace(logits)

    def _blocks(self) -> list:
        """Per-layer parameter tuples (views into the flat buffer, so they never go stale)."""
        blocks = self.__dict__.get("_blocks_cache")
        if blocks is None:
            blocks = self._blocks_cache = [tuple(self._block(i)) for i in range(self.config.n_layer)]
        return blocks


def _affine(x, w, b):
    y = np.dot(x, w)
    if b is not None:
        y += b
    return y


def _ln1d(x, g, b, eps):
    """LayerNorm of one vector (C,) (the decoding fast path)."""
    xc = x - np.add.reduce(x) / len(x)
    y = xc * (g * (1.0 / math.sqrt(float(np.dot(xc, xc)) / len(x) + eps)))
    if b is not None:
        y += b
    return y
