"""f_θ: a decoder-only transformer in numpy (GPT-2, Llama, Qwen2, GPT-NeoX), the facade.

Given ids x_0..x_{T-1} the model returns logits u_1..u_T and P(x_t | x_<t) = softmax(u_t):
embed -> blocks (:mod:`seqprob.gpt.block`) -> final norm -> unembed. Training lives in
:mod:`seqprob.gpt.backward`, KV-cached decoding in :mod:`seqprob.gpt.decode`. One code path
serves every batch shape: ids ``(B, T)`` flatten to ``B*T`` rows for the weight GEMMs,
attention runs per head on strided views, buffers are reused per ``(B, T)``.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import numpy as np

from .. import _parallel, nn
from ..base import BaseLanguageModel
from ..errors import ContextLengthError, InputError
from ..checks import check_int
from ..functional import TokenStats, check_stride, plan_windows, target_stats
from ..vocab import Vocab, check_ids
from . import backward, decode, stages
from .block import blocks_forward, embed_forward, make_workspace, norm_forward, unembed_forward
from .config import GPTConfig
from .decode import GPTState
from .params import (FlatParams, allocate, block_shapes, check_fits, column_major_names, copy_into, decay_names,
                     init_params, param_shapes)
from .rope import layer_ropes

__all__ = ["GPT", "GPTState", "ActivationCache"]

log = logging.getLogger(__name__)

MIN_SHARD_WORK = 1 << 16  # elements of the (rows, n_embd) stream per shard below which the
# per-op path runs (a shard hand-off and its own workspace do not pay for a small batch)
MIN_STAGE_ROWS = 128  # one sequence shorter than this keeps the per-op path
PICK_ROWS = 1024  # rows of token_logprobs' vocabulary-streamed unembedding (see _pick_logprobs)
LSM_BLOCK = 1 << 17  # logits per log-softmax block and thread (512 KiB in float32): with its
# scratch it fits a 1 MiB L2, so the five passes read the block from cache (see the performance
# page, "Design notes"). A call made outside the thread pool gets one block per thread, so that
# log_softmax_inplace still splits it over every thread.


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


class GPT(BaseLanguageModel):
    """Decoder-only transformer (GPT-2 by default; Llama, Qwen2, GPT-NeoX by config): the f_θ
    of the chain rule, in numpy.

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
    x = W_E[ids] (+ W_pos with learned positions); per block x += attn(ln_1(x));
    x += mlp(ln_2(x)) (see :mod:`seqprob.gpt.block` for the options); logits = ln_f(x) W_Uᵀ
    with W_U = W_E when tied. GPT-2: mlp(h) = gelu_tanh(h W_in + b) W_out + b.

    Examples
    --------
    >>> cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)
    >>> model = GPT(cfg, seed=0)
    >>> model.logprobs([1, 2, 3]).shape
    (3, 11)
    """

    def __init__(self, config: GPTConfig, seed: int = 0, vocab: Vocab | None = None,
                 tokenizer=None, bos_id: int | None = None, eos_id: int | None = None, *,
                 _init: bool = True):
        if not isinstance(config, GPTConfig):
            raise InputError(f"config must be a GPTConfig, got {type(config).__name__}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(f"seed must be an integer >= 0, got {seed!r}", value=seed, limit=0)
        self.config = config
        self.seed = int(seed)
        self.dtype = np.dtype(config.dtype)
        self._flat = FlatParams(param_shapes(config), self.dtype, column_major_names(config))
        self._gflat = FlatParams(param_shapes(config), self.dtype, column_major_names(config))
        if _init:  # loaders that overwrite every parameter (from_hf) skip the random weights
            init_params(self._flat.arrays, config, seed)
        keys = list(block_shapes(config))
        self._block_params = [{k: self._flat.arrays[f"h.{i}.{k}"] for k in keys} for i in range(config.n_layer)]
        self._block_grads = [{k: self._gflat.arrays[f"h.{i}.{k}"] for k in keys} for i in range(config.n_layer)]
        self._ropes = layer_ropes(config, self.dtype)  # per layer: (cos, sin) or None
        self._tokenizer = None
        self.vocab_ = self._default_vocab(bos_id, eos_id) if vocab is None else self._check_vocab(vocab)
        if tokenizer is not None:
            self.tokenizer = tokenizer
        self._workspaces = {}  # slot (0, or the shard index) -> ((B, T), buffers)

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
        pending = []  # every array is checked before any is copied: a refusal changes nothing
        for name, value in arrays.items():
            if name not in self.params or value is self.params[name]:  # already in place (from_hf)
                continue
            value = np.asarray(value)
            if value.shape != self.params[name].shape:
                raise CheckpointError(f"parameter {name!r} has shape {value.shape}, the config "
                                      f"needs {self.params[name].shape}", name=name)
            check_fits(self.params[name], value, name)
            pending.append((name, value))
        for name, value in pending:
            copy_into(self.params[name], value)
        return self

    @classmethod
    def from_hf(cls, path, dtype: str = "float32", tokenizer=None, revision: str | None = None) -> "GPT":
        """A GPT from a Hugging Face checkpoint folder (``config.json`` + ``*.safetensors``) or
        a model name (``"ORG/NAME"``) in the local Hugging Face cache, at ``revision``.

        See :func:`seqprob.gpt.hf.from_hf` for the details and errors.

        Examples
        --------
        With a downloaded checkpoint and encoding (not run here: it needs the files)::

            from seqprob.tokenizers import TiktokenTokenizer
            gpt2 = GPT.from_hf("gpt2/", dtype="float64", tokenizer=TiktokenTokenizer("gpt2.tiktoken"))
            sp.score(gpt2, ["Hello world"])
        """
        from .hf import from_hf
        return from_hf(path, dtype=dtype, tokenizer=tokenizer, cls=cls, revision=revision)

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
        return Vocab.ids_only(V, bos_id, eos_id)

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
        arch = "" if (c.norm, c.mlp, c.positions) == ("layernorm", "gelu_tanh", "learned") else \
            f"norm={c.norm}, mlp={c.mlp}, positions={c.positions}, n_kv_head={c.kv_heads}, "
        return (f"GPT({arch}n_layer={c.n_layer}, n_head={c.n_head}, n_embd={c.n_embd}, "
                f"vocab_size={c.vocab_size}, block_size={c.block_size}, dtype={c.dtype}, "
                f"params={self.n_params():,})")

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
        if arr.size == 0 or (np.isfinite(arr.max()) and np.isfinite(arr.min())):
            return
        for name, value in self.params.items():
            bad = ~np.isfinite(value)
            if bad.any():
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                raise InputError(f"parameter {name!r} holds a non-finite value {value[idx]} at "
                                 f"index {idx}: the model weights are corrupt", name=name, index=idx)
        raise InputError(f"{what} contain NaN or inf although every parameter is finite (overflow?)")

    def _workspace(self, B: int, T: int, slot: int = 0) -> dict:
        """Reused inference buffers for (B, T); each shard of a sharded pass has its slot."""
        key, ws = self._workspaces.get(slot, (None, None))
        if key != (B, T):
            ws = make_workspace(self.config, B, T, self.dtype)
            ws["x"] = np.empty((B, T, self.config.n_embd), self.dtype)
            self._workspaces[slot] = ((B, T), ws)
        return ws

    def _forward_rows(self, ids: np.ndarray, head) -> None:
        """The forward of ids (B, T); ``head(h2, lo, hi, free)`` gets the final-norm rows
        h2 (hi - lo, C) of flat rows [lo, hi) of the B*T (the caller unembeds them), and
        ``free``, a 1-D array of the model's dtype the head may overwrite (those rows' part
        of the workspace's arena, unused once the blocks are done).

        With several threads and enough work: one shard of sequences per thread (BLAS on one
        thread meanwhile, each shard with its own workspace), or for one sequence the stage
        split of :mod:`seqprob.gpt.stages`. Each row goes through the same operations either
        way: the results do not depend on the split.
        """
        B, T = ids.shape
        n = _parallel.shard_threads(B * T, B * T * self.config.n_embd, MIN_SHARD_WORK)
        if n > 1 and B == 1 and T >= MIN_STAGE_ROWS:
            return stages.hidden_by_stages(self, ids, n, head)
        n = min(n, B)
        if n == 1:
            head(self._hidden(ids).reshape(B * T, -1), 0, B * T, self._free(0))
            return None

        def shard(slot, b0, b1):
            h2 = self._hidden(ids[b0:b1], slot=slot).reshape((b1 - b0) * T, -1)
            head(h2, b0 * T, b1 * T, self._free(slot))

        tasks = [functools.partial(shard, slot, b0, b1)
                 for slot, (b0, b1) in enumerate(_parallel.shard_bounds(B, n))]
        with _parallel.one_blas_thread:
            _parallel.run_tasks(tasks)
        return None

    def _free(self, slot: int) -> np.ndarray:
        """The arena of workspace ``slot`` as one flat array (free after the blocks)."""
        return self._workspaces[slot][1]["arena"].reshape(-1)

    # ----------------------------------------------------------------- inference forward
    def _embed(self, ids: np.ndarray, pos: int = 0, out=None) -> np.ndarray:
        """x = W_E[ids] (+ W_pos[pos : pos + T] with learned positions): (B, T) -> (B, T, C)."""
        return embed_forward(ids, self.params, pos, out=out, scale=self.config.embed_scale)[0]

    def _hidden(self, ids: np.ndarray, kv=None, attn=None, resid=None, slot: int = 0) -> np.ndarray:
        """ln_f(x) of validated ids (B, T <= block) -> (B, T, C), a view of a reused buffer.

        ``kv`` (a decoding cache, B = 1) receives the keys/values; ``attn`` (B, L, H, T, T)
        and ``resid`` (B, L+1, T, C) receive the attention patterns and the residual stream;
        ``slot`` picks the workspace (one per shard of a sharded pass).
        """
        cfg = self.config
        B, T = ids.shape
        ws = self._workspace(B, T, slot)
        x = self._embed(ids, out=ws["x"])
        if resid is not None:
            resid[:, 0] = x

        def keep(layer, x):
            resid[:, layer + 1] = x

        blocks_forward(x, self._block_params, cfg, self._ropes,
                       lambda i: dict(ws=ws, kv=None if kv is None else kv.layer(i),
                                      probs_out=None if attn is None else attn[:, i]),
                       None if resid is None else keep, keep_caches=False)
        return norm_forward(x, self.params, "ln_f", cfg, out=ws["h"])[0]

    def _output(self, shape: tuple, what: str, dtype=None) -> np.ndarray:
        """A new array for a result the caller keeps, e.g. (B*T, V) log-probabilities: from 64
        MiB on in normal pages (``params.allocate``), whose faults cost the same every call,
        where numpy's huge-page advice can make each call compact memory first; a
        MemoryBudgetError naming ``what`` if it cannot be had."""
        return allocate(shape, dtype or self.dtype, what, small_pages=True)

    def _unembed_logprobs(self, h2: np.ndarray, out: np.ndarray, chunk: int | None = None) -> np.ndarray:
        """log-softmax(h2 W_Uᵀ) of rows h2 (N, C) into out (N, V), in cache-sized row chunks
        (default: at most 64 rows and ``LSM_BLOCK`` logits per thread)."""
        chunk = chunk or max(1, min(64, LSM_BLOCK // out.shape[1])) * _parallel.row_threads()
        unembed_forward(h2, self._w_u, self.config, out=out)  # (N, V)
        tmp = np.empty((min(chunk, len(out)), out.shape[1]), dtype=out.dtype)
        for i in range(0, len(out), chunk):
            nn.log_softmax_inplace(out[i:i + chunk], tmp=tmp[:len(out[i:i + chunk])])
        return out

    def _logprobs_window(self, batch: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        B, T = batch.shape
        if out is None:
            out = self._output((B * T, self.config.vocab_size), "log-probabilities")
        out = out.reshape(B * T, self.config.vocab_size)
        self._forward_rows(batch, lambda h2, lo, hi, free: self._unembed_logprobs(h2, out[lo:hi]))
        return out.reshape(B, T, -1)

    def _token_logprobs_window(self, batch: np.ndarray) -> np.ndarray:
        inputs, targets = batch[:, :-1], batch[:, 1:].reshape(-1)
        B, T = inputs.shape
        out = np.empty(B * T, dtype=self.dtype)
        self._forward_rows(inputs, lambda h2, lo, hi, free: self._pick_logprobs(h2, targets[lo:hi], out[lo:hi],
                                                                              free=free))
        return out.reshape(B, T)

    def _pick_logprobs(self, h2: np.ndarray, targets: np.ndarray, out: np.ndarray,
                       budget_bytes: int | None = None, free: np.ndarray | None = None) -> None:
        """out[i] = log-softmax(h2[i] W_Uᵀ)[targets[i]], streaming the vocabulary (see
        :meth:`_vocab_slices`, ``free`` as there): each slice of logits folded into running
        log-sum-exps."""
        def fold(u, m, s):
            step = max(1, LSM_BLOCK // u.shape[1])  # row blocks that stay in L2
            for r in range(0, len(u), step):
                nn.logsumexp_update(u[r:r + step], m[r:r + step], s[r:r + step])

        for i, n, slices in self._vocab_slices(h2, budget_bytes, free):
            t = targets[i:i + n]
            m, s, picked = np.full(n, -np.inf), np.zeros(n), np.empty(n)
            for v0, u in slices:
                hit = np.flatnonzero((t >= v0) & (t < v0 + u.shape[1]))
                picked[hit] = u[hit, t[hit] - v0]
                _parallel.for_row_blocks(lambda lo, hi: fold(u[lo:hi], m[lo:hi], s[lo:hi]), n, u.size)
            out[i:i + n] = picked - m - np.log(s)

    def _vocab_slices(self, h2: np.ndarray, budget_bytes: int | None, free: np.ndarray | None = None):
        """The logits of rows h2 (N, C) a block at a time: yields ``(i, n, slices)`` per block
        of n <= ``PICK_ROWS`` rows from row i, ``slices`` yielding ``(v0, u)``, u (n, Vs) the
        logits of words v0 .. v0 + Vs - 1, in one reused buffer of at most ``budget_bytes``
        (default :attr:`score_budget_bytes`) over the threads that may run this at once.

        Streaming the vocabulary keeps the GEMM hundreds of rows tall whatever V: streaming
        rows instead left 16 rows at V = 262,144, where OpenBLAS runs at a third of its speed.
        The buffer is ``free`` (a flat array of the model's dtype nobody else uses meanwhile,
        the forward's arena) when that is large enough, so scoring holds no logits of its own.
        """
        N, V = len(h2), self.config.vocab_size
        budget = self.score_budget_bytes if budget_bytes is None else budget_bytes
        floats = max(1, budget // (self.dtype.itemsize * _parallel.num_threads()))
        rows = min(N, PICK_ROWS, max(1, floats // 256))
        cols = min(V, max(1, floats // rows))
        use_free = free is not None and free.size >= rows * cols and free.dtype == self.dtype
        flat, w_u = free[:rows * cols] if use_free else np.empty(rows * cols, dtype=self.dtype), self._w_u

        def slices(h):
            for v0 in range(0, V, cols):
                w = w_u[v0:v0 + cols]
                yield v0, unembed_forward(h, w, self.config, out=flat[:len(h) * len(w)].reshape(len(h), len(w)))

        for i in range(0, N, rows):
            yield i, len(h2[i:i + rows]), slices(h2[i:i + rows])

    # ----------------------------------------------------------------- public scoring API
    @_quiet
    def logprobs(self, ids, stride: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """log P(x_t = v | x_<t) for every position and every v.

        Parameters
        ----------
        ids : array_like of int, shape (T,) or (B, T)
            x_0 .. x_{T-1}. Longer than ``block_size``: a sliding window (see ``stride``).
        stride : int, optional
            Window step for T > block_size (default ``block_size // 2``), in [1, block_size].
        out : ndarray, optional
            Receives the result: C-contiguous, writable, of the result's shape and the model's
            dtype. Reusing one array across calls saves allocating (and page-faulting) the
            result each time: for GPT-2-124M at 4 x 1024 that is 823 MB a call. Its contents
            are undefined if the call raises.

        Returns
        -------
        ndarray (T, V) or (B, T, V)
            Row t-1 = log P(x_t = v | x_0 .. x_{t-1}); every row sums to 1 in probability.
            ``out`` itself when given.

        Raises
        ------
        TokenIdError
            An id is negative or >= ``vocab_size``.
        InputError
            Empty or non-integer ids, a bad ``stride``, non-finite weights (named), or an
            ``out`` of the wrong shape, dtype or layout.

        Notes
        -----
        Sliding window (:func:`~seqprob.functional.plan_windows`, the plan every scoring
        function uses): rows 0 .. block-1 come from the first window; each later window ends
        ``stride`` rows after the previous one and holds the ``block_size`` ids before its end,
        the last one ending at the last row. Every token is scored exactly once, with at least
        ``block_size - stride + 1`` ids of context, so ``sp.score(model, ids, stride=s)`` gives
        these rows. ``stride=1`` gives every row the full ``block_size`` context (what
        :meth:`step` computes).

        Examples
        --------
        >>> model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
        >>> lp = model.logprobs([0, 1, 2, 3, 4, 0, 1], stride=2)
        >>> lp.shape, bool(np.allclose(np.exp(lp).sum(-1), 1.0))
        ((7, 5), True)
        """
        batch, squeeze = self._validate(ids)
        dest = None if out is None else self._checked_out(out, batch.shape + (self.config.vocab_size,), squeeze)
        result = self._slide(batch, stride, self._logprobs_window, offset=0, out=dest)
        self._check_finite(result, "log-probabilities")
        if out is not None:
            return out  # ``result`` is its (B, T, V) view
        return result[0] if squeeze else result

    def _checked_out(self, out, shape: tuple, squeeze: bool) -> np.ndarray:
        """``out`` as the (B, T, V) array to fill, or an InputError naming what is wrong."""
        want = shape[1:] if squeeze else shape
        if not isinstance(out, np.ndarray):
            raise InputError(f"out must be a numpy array, got {type(out).__name__}", value=type(out).__name__)
        if out.shape != want or out.dtype != self.dtype:
            raise InputError(f"out must have shape {want} and dtype {self.dtype} (the result's), got "
                             f"{out.shape} {out.dtype}", value=out.shape, limit=want)
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise InputError("out must be C-contiguous and writable", value=out.shape)
        return out.reshape(shape)

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

    #: Bytes of logits that :meth:`token_logprobs` and :meth:`token_stats` hold at once, all
    #: threads together; set it on a model, or pass ``budget_bytes``. 8 MiB: as fast as 32 MiB
    #: (GPT-2-124M, 1,024 tokens, 1 and 2 threads) and 24 MiB less at the peak. The logits go
    #: into the forward's workspace (free once the blocks are done) when they fit there, so
    #: at the default they usually cost no memory of their own.
    score_budget_bytes = 8 << 20

    @_quiet
    def token_stats(self, ids, stride: int | None = None, budget_bytes: int | None = None) -> TokenStats:
        """log P(x_t | x_<t), the entropy of P(. | x_<t) and the rank of x_t at every position,
        without building the (T, V) log-probabilities: (T+1,) -> (T,) each, (B, T+1) -> (B, T).

        Parameters
        ----------
        ids : array_like of int, shape (T+1,) or (B, T+1)
            x_0 .. x_T.
        stride : int, optional
            Window step as in :meth:`logprobs` for sequences longer than ``block_size + 1``.
        budget_bytes : int, optional
            Most bytes of logits held at once (default :attr:`score_budget_bytes`, 8 MiB).

        Returns
        -------
        TokenStats
            ``logprob`` (nats) and ``entropy`` (nats) float64, ``rank`` int64.

        Notes
        -----
        The vocabulary is streamed: the final-norm rows, up to 1,024 at a time, are unembedded
        one slice of words at a time into one reused buffer per thread of at most
        ``budget_bytes / threads``, and each slice is folded into running statistics
        (:func:`seqprob.nn.softmax_stats_update`): with m the running maximum logit,
        s = Σ_v exp(u_v - m) and a = Σ_v exp(u_v - m)(u_v - m), logprob = u_t - m - log s,
        entropy = log s - a / s, rank = 1 + #{v ≠ x_t : u_v > u_t}. Memory beyond the weights
        and the forward pass is O(budget), whatever V and T. The numbers are those of
        :meth:`logprobs` up to rounding (float64: 1e-12; float32: the sums are taken in
        another order); a rank can differ only where another logit is within rounding of the
        target's (a near tie).

        Examples
        --------
        >>> model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
        >>> s = model.token_stats([0, 1, 2], budget_bytes=1)
        >>> bool(np.allclose(s.logprob, model.token_logprobs([0, 1, 2]))), s.rank.shape
        (True, (2,))
        """
        batch, squeeze = self._validate(ids, min_len=2)
        budget = check_int("budget_bytes", self.score_budget_bytes if budget_bytes is None else budget_bytes, low=1)
        out = self._slide(batch, stride, functools.partial(self._token_stats_window, budget=budget), offset=1)
        self._check_finite(out, "log-probabilities")  # (B, T, 3): NaN where a row was
        stats = TokenStats(out[..., 0], out[..., 1], out[..., 2].astype(np.int64))
        return TokenStats(*(a[0] for a in stats)) if squeeze else stats

    def _token_stats_window(self, batch: np.ndarray, budget: int) -> np.ndarray:
        """(B, T, 3) float64 [logprob, entropy, rank] of one window x_0 .. x_T (B, T+1)."""
        inputs, targets = batch[:, :-1], batch[:, 1:].reshape(-1)
        B, T = inputs.shape
        out = np.empty((B * T, 3))
        self._forward_rows(inputs, lambda h2, lo, hi, free: self._stream_stats(h2, targets[lo:hi], out[lo:hi],
                                                                              budget, free))
        return out.reshape(B, T, 3)

    def _stream_stats(self, h2: np.ndarray, targets: np.ndarray, out: np.ndarray, budget: int,
                      free: np.ndarray | None = None) -> None:
        """out[i] = [log P, entropy, rank] of targets[i] under softmax(h2[i] W_Uᵀ), streaming
        the vocabulary (:meth:`_vocab_slices`) through :func:`nn.softmax_stats_update`. The
        rank counts the logits above the target's, taken first as the dot product
        h2[i] · W_U[targets[i]] (a logit within rounding of it may count differently than in
        the (T, V) rows: a near tie), the target's own column left out."""
        def fold(u, lo, acc):
            step = max(1, LSM_BLOCK // u.shape[1])  # row blocks that stay in L2
            scratch = np.empty((min(len(u), step), u.shape[1]), u.dtype)
            for r in range(0, len(u), step):
                part = (x[lo + r:lo + r + step] for x in acc)
                nn.softmax_stats_update(u[r:r + step], *part, tmp=scratch[:len(u[r:r + step])])

        for i, n, slices in self._vocab_slices(h2, budget, free):
            t, h = targets[i:i + n], h2[i:i + n]
            above = np.einsum("nc,nc->n", h, self._w_u[t])  # (n,): the target's logit
            if self.config.final_softcap is not None:
                nn.softcap_forward(above, self.config.final_softcap, out=above)
            m, s, a, picked = np.full(n, -np.inf), np.zeros(n), np.zeros(n), np.empty(n)
            count = np.zeros(n, np.int64)
            for v0, u in slices:
                hit = np.flatnonzero((t >= v0) & (t < v0 + u.shape[1]))
                picked[hit] = u[hit, t[hit] - v0]
                _parallel.for_row_blocks(lambda lo, hi: fold(u[lo:hi], lo, (above, m, s, a, count)), n, u.size)
            count -= picked > above  # the target's own column, if it counted itself
            # the log-prob in the model's dtype, as token_logprobs gives it: both paths, one number
            out[i:i + n, 0] = (picked - m - np.log(s)).astype(self.dtype)
            out[i:i + n, 1] = np.log(s) - a / s
            out[i:i + n, 2] = 1 + count

    def _logprobs(self, batch: np.ndarray) -> np.ndarray:
        return self._slide(batch, None, self._logprobs_window, offset=0)

    def _slide(self, batch, stride, fn, offset: int, out=None):
        """Apply ``fn`` (rows out = inputs) over the windows of :func:`~seqprob.functional.plan_windows`
        (block_size inputs, +offset), keeping each window's new rows; they go into ``out`` when
        given (then ``fn(batch, out)`` must fill it for a single window)."""
        B, T = batch.shape
        n, block = T - offset, self.config.block_size
        stride = max(1, block // 2) if stride is None else check_stride(stride, block)
        if n <= block:
            return fn(batch) if out is None else fn(batch, out)
        for start, end, new in plan_windows(n, block, stride):
            rows = fn(batch[:, start:end + offset])  # (B, end - start, ...)
            if out is None:
                out = self._output((B, n) + rows.shape[2:], "the windows' rows", rows.dtype)
            out[:, new:end] = rows[:, new - start:]
        return out

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
        out = self._output((B * T, self.config.vocab_size), "logits")
        self._forward_rows(batch, lambda h2, lo, hi, free: unembed_forward(h2, self._w_u, self.config, out=out[lo:hi]))
        out = out.reshape(B, T, -1)  # (B, T, V)
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
        h, _ = norm_forward(resid, self.params, "ln_f", self.config)
        out = unembed_forward(h, self._w_u, self.config)
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
        logits = unembed_forward(h2, self._w_u, self.config).reshape(B, T, -1)  # (B, T, V)
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
        return backward.loss_and_grads(self, batch, mask, rng)

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
        return decode.start_ids(self, batch[0], n_seen=batch.shape[1])

    @_quiet
    def step(self, state: GPTState, token_id: int) -> GPTState:
        """New state after appending ``token_id``; ``state`` stays valid and unchanged.

        ``state`` must come from this model's :meth:`start` or :meth:`step` (its cache holds
        this model's keys and values); a state of another model is an InputError.

        Past ``block_size`` ids the window slides: the context is the last ``block_size``
        ids (recomputed in one forward pass per step).
        """
        return decode.step(self, state, token_id)
