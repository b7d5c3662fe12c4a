"""Optimization: AdamW, the warmup + cosine learning-rate schedule, global-norm clipping.

Parameters and gradients are plain ``dict`` s of name -> ndarray. When every parameter is a
view into one contiguous flat buffer (as :class:`seqprob.gpt.GPT` keeps them) and the
gradients are laid out the same way, :class:`AdamW` updates the whole model with one
vectorized pass over the flat buffer, in cache-sized chunks; otherwise it loops over the
arrays. Both paths compute the same numbers.
"""
from __future__ import annotations

import math
import numbers
from typing import Callable, Iterable, Mapping

import numpy as np

from . import _parallel
from .checks import check_int, check_real
from .errors import CheckpointError, InputError
from .nn import is_column_major

__all__ = ["AdamW", "FlatArrays", "cosine_schedule", "clip_grad_norm", "default_decay"]

_CHUNK = 1 << 16  # elements per chunk of the flat update: keeps the temporaries in L2
_EMBEDDING_WORDS = ("wte", "wpe", "emb", "embed", "embedding", "w_e", "w_pos", "pos")
_NORM_WORDS = ("ln", "norm", "layernorm", "ln_f", "ln_1", "ln_2")


def default_decay(name: str, array: np.ndarray) -> bool:
    """Whether weight decay applies to parameter ``name`` by default.

    Decay applies to matrices (``ndim >= 2``) that are not embeddings. Biases and LayerNorm
    gains/biases are 1-D and never decayed; embeddings are recognised by a dotted name part
    such as ``wte``, ``wpe``, ``W_E``, ``W_pos``, ``tok_emb``, ``pos_emb`` or ``embedding``.
    A tied unembedding shares the embedding array, so it is not decayed either.

    Examples
    --------
    >>> import numpy as np
    >>> default_decay("h.0.attn.c_attn.w", np.zeros((4, 12))), default_decay("wte", np.zeros((9, 4)))
    (True, False)
    """
    if np.ndim(array) < 2:
        return False
    for part in name.lower().replace("/", ".").split("."):
        words = set(part.split("_")) | {part}
        if words & set(_EMBEDDING_WORDS) or words & set(_NORM_WORDS):
            return False
    return True


class FlatArrays(dict):
    """``name -> array`` whose arrays are views into one 1-D buffer ``flat`` at ``slices``.

    What :class:`seqprob.gpt.params.FlatParams` hands out (``GPT.params``, the gradients of
    ``GPT.loss_and_grads``): :class:`AdamW` then updates every parameter with one vectorized
    operation on ``flat``, taking the layout from here instead of guessing it from pointers.

    Examples
    --------
    >>> flat = np.zeros(6)
    >>> p = FlatArrays(flat, {"w": slice(0, 4), "b": slice(4, 6)},
    ...                {"w": flat[0:4].reshape(2, 2), "b": flat[4:6]})
    >>> p["b"][...] = 1; flat.tolist()
    [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    """

    def __init__(self, flat: np.ndarray, slices: dict, arrays: dict):
        super().__init__(arrays)
        self.flat, self.slices = flat, dict(slices)


def _flat_buffer(mapping, names) -> tuple:
    """``(flat, offsets)`` of a :class:`FlatArrays` holding exactly the views of ``names``
    (offsets in ``names`` order), else ``(None, None)``."""
    if not isinstance(mapping, FlatArrays) or any(n not in mapping.slices for n in names):
        return None, None
    flat = mapping.flat
    for name in names:
        s = mapping.slices[name]
        if mapping[name].size != s.stop - s.start or not np.shares_memory(mapping[name], flat[s]):
            return None, None  # an entry was replaced by an array outside the buffer
    return flat, [mapping.slices[n].start for n in names]


def _as_arrays(grads, names) -> list[np.ndarray]:
    if isinstance(grads, Mapping):
        missing = [n for n in names if n not in grads]
        if missing:
            raise InputError(f"gradients miss parameter {missing[0]!r} ({len(missing)} missing)",
                             name=missing[0])
        return [grads[n] for n in names]
    grads = list(grads)
    if len(grads) != len(names):
        raise InputError(f"got {len(grads)} gradients for {len(names)} parameters",
                         value=len(grads), limit=len(names))
    return grads


class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter), updating arrays in place.

    Parameters
    ----------
    params : dict of str -> ndarray
        The parameters (float32 or float64); ``step`` updates these arrays in place.
    lr : float
        Learning rate (change it between steps with ``opt.lr = ...`` or ``step(grads, lr=)``).
    betas : (float, float)
        Decay rates of the first and second moment estimates.
    eps : float
        Added to the bias-corrected RMS in the denominator.
    weight_decay : float
        Decoupled decay coefficient lambda.
    decay : None, callable ``(name, array) -> bool`` or iterable of names
        Which parameters are decayed. ``None`` uses :func:`default_decay` (matrices only: no
        decay on biases, norms and embeddings); pass ``lambda n, a: True`` to decay all.

    Notes
    -----
    At step t (1-based), with gradient g, for every parameter p (as ``torch.optim.AdamW``):

    .. math::
        p &\\leftarrow p (1 - \\eta \\lambda)  \\quad \\text{(decayed parameters only)} \\\\
        m &\\leftarrow \\beta_1 m + (1 - \\beta_1) g, \\qquad
        v \\leftarrow \\beta_2 v + (1 - \\beta_2) g^2 \\\\
        p &\\leftarrow p - \\frac{\\eta}{1 - \\beta_1^t} \\,
             \\frac{m}{\\sqrt{v} / \\sqrt{1 - \\beta_2^t} + \\epsilon}

    Examples
    --------
    >>> import numpy as np
    >>> params = {"w": np.ones((2, 2)), "b": np.zeros(2)}
    >>> opt = AdamW(params, lr=0.1, weight_decay=0.0)
    >>> opt.step({"w": np.ones((2, 2)), "b": -np.ones(2)})
    >>> round(float(params["w"][0, 0]), 6), round(float(params["b"][0]), 6)
    (0.9, 0.1)
    """

    def __init__(self, params: Mapping[str, np.ndarray], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, decay: Callable | Iterable[str] | None = None):
        if not isinstance(params, Mapping) or not params:
            raise InputError("AdamW needs a non-empty dict of name -> array parameters")
        self.params = params
        self.names = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, tuple(betas), eps, weight_decay
        self._check_hyper()
        arrays = [params[n] for n in self.names]
        for name, arr in zip(self.names, arrays):
            if not isinstance(arr, np.ndarray) or arr.dtype not in (np.float32, np.float64):
                raise InputError(f"parameter {name!r} must be a float32/float64 ndarray, "
                                 f"got {getattr(arr, 'dtype', type(arr).__name__)}", name=name)
        self.dtype = np.result_type(*arrays)
        self.decay_names = self._decay_names(decay)
        self.t = 0
        self._layout()

    # -- setup -------------------------------------------------------------------------------
    def _check_hyper(self) -> None:
        b1, b2 = self.betas
        checks = [("lr", self.lr, self.lr >= 0), ("eps", self.eps, self.eps >= 0),
                  ("weight_decay", self.weight_decay, self.weight_decay >= 0),
                  ("beta1", b1, 0 <= b1 < 1), ("beta2", b2, 0 <= b2 < 1)]
        for name, value, ok in checks:
            if not (ok and math.isfinite(value)):
                raise InputError(f"AdamW {name} must be finite and in range, got {value!r}",
                                 name=name, value=value)

    def _decay_names(self, decay) -> frozenset:
        if decay is None:
            decay = default_decay
        if callable(decay):
            return frozenset(n for n in self.names if decay(n, self.params[n]))
        chosen = frozenset(decay)
        unknown = sorted(chosen - set(self.names))
        if unknown:
            raise InputError(f"decay names unknown parameter {unknown[0]!r}", name=unknown[0])
        return chosen

    def _layout(self) -> None:
        arrays = [self.params[n] for n in self.names]
        self._root, offsets = _flat_buffer(self.params, self.names)
        sizes = [a.size for a in arrays]
        if self._root is None:
            offsets = list(np.cumsum([0] + sizes[:-1]))
        self._offsets = {n: (int(o), int(o) + s) for n, o, s in zip(self.names, offsets, sizes)}
        total = self._root.size if self._root is not None else sum(sizes)
        self.m_flat_ = np.zeros(total, dtype=self.dtype)
        self.v_flat_ = np.zeros(total, dtype=self.dtype)
        self.m = {n: self._view(self.m_flat_, n) for n in self.names}
        self.v = {n: self._view(self.v_flat_, n) for n in self.names}
        self._decay_spans = self._merged_spans(n for n in self.names if n in self.decay_names)
        self._chunk_spans = self._chunk_decay(self.m_flat_.size)

    def _view(self, flat: np.ndarray, name: str) -> np.ndarray:
        """The moments of ``name`` laid out like the parameter (row- or column-major), so
        that one flat update pairs each element with its own moments."""
        lo, hi = self._offsets[name]
        shape = self.params[name].shape
        if is_column_major(self.params[name]):
            return flat[lo:hi].reshape(shape[::-1]).T
        return flat[lo:hi].reshape(shape)

    def _merged_spans(self, names) -> list[tuple[int, int]]:
        spans = sorted(self._offsets[n] for n in names)
        merged: list[list[int]] = []
        for lo, hi in spans:
            if merged and merged[-1][1] == lo:
                merged[-1][1] = hi
            else:
                merged.append([lo, hi])
        return [tuple(s) for s in merged]

    # -- the update --------------------------------------------------------------------------
    def step(self, grads, lr: float | None = None) -> None:
        """Apply one AdamW update to the parameters in place.

        ``grads`` is a dict keyed like ``params`` (or a list in the same order); a
        non-finite gradient raises :class:`InputError` naming the parameter, before any change.
        """
        if lr is not None:
            self.lr = lr
        self._check_hyper()
        garrays = _as_arrays(grads, self.names)
        for name, g in zip(self.names, garrays):
            if np.shape(g) != self.params[name].shape:
                raise InputError(f"gradient of {name!r} has shape {np.shape(g)}, parameter has "
                                 f"{self.params[name].shape}", name=name)
        gflat = self._grad_flat(grads)
        self._check_finite(garrays)
        self.t += 1
        if self._root is not None and gflat is not None:
            self._update_flat(self._root, gflat, self.m_flat_, self.v_flat_, self._chunk_spans)
        else:
            for name, g in zip(self.names, garrays):
                param = self.params[name]
                order = "F" if is_column_major(param) else "C"  # p, g, m, v in one element order
                p = param.ravel(order)  # a view when contiguous, else a copy (written back)
                g = np.asarray(g, dtype=param.dtype).ravel(order)
                self._update_flat(p, g, self.m[name].ravel(order), self.v[name].ravel(order),
                                  True if name in self.decay_names else None)
                if not np.shares_memory(p, param):
                    param[...] = p.reshape(param.shape, order=order)

    def _grad_flat(self, garrays) -> np.ndarray | None:
        """The gradients' flat buffer when it has exactly the parameters' layout, else None."""
        if self._root is None:
            return None
        groot, goffsets = _flat_buffer(garrays, self.names)
        if groot is None or groot.dtype != self.dtype:
            return None
        if any(go != self._offsets[n][0] for n, go in zip(self.names, goffsets)):
            return None
        if any(garrays[n].strides != self.params[n].strides for n in self.names):
            return None  # same offsets, another layout (a row-major W_U): pair by index instead
        return groot

    def _check_finite(self, garrays) -> None:
        if math.isfinite(_sum_squares(garrays)):
            return
        for name, g in zip(self.names, garrays):
            if not np.isfinite(g).all():
                raise InputError(f"gradient of {name!r} contains NaN or inf; parameters left "
                                 f"unchanged (step {self.t + 1})", name=name, step=self.t + 1)

    def _chunk_decay(self, n: int) -> list[list[tuple[int, int]]]:
        """Per chunk of a flat update over ``n`` elements: the decayed ranges inside it."""
        out = [[] for _ in range(0, n, _CHUNK)]
        for lo, hi in self._decay_spans:
            for c in range(lo // _CHUNK, (hi - 1) // _CHUNK + 1):
                base = c * _CHUNK
                out[c].append((max(lo, base) - base, min(hi, base + _CHUNK) - base))
        return out

    def _update_flat(self, p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray,
                     decay=None) -> None:
        """One AdamW update of 1-D ``p`` from ``g`` with moments ``m``, ``v``, chunk by chunk.

        ``decay``: per chunk, the ranges to decay; ``True`` decays all of ``p``; None: none.
        The bias corrections are folded into two constants:
        ``p -= lr sqrt(bc2) / bc1 * m / (sqrt(v) + eps sqrt(bc2))``.
        """
        b1, b2 = self.betas
        sq_bc2 = math.sqrt(1.0 - b2 ** self.t)
        dt = p.dtype.type
        consts = (dt(1 - b1), dt(1 - b2), dt(b2), dt(-self.lr * sq_bc2 / (1.0 - b1 ** self.t)),
                  dt(self.eps * sq_bc2), dt(1.0 - self.lr * self.weight_decay))
        if not (self.weight_decay and self.lr):
            decay = None
        size = min(_CHUNK, p.size)
        starts = range(0, p.size, _CHUNK)

        def chunks(c0, c1):  # chunks c0..c1-1, with their own scratch
            t1, t2 = np.empty(size, p.dtype), np.empty(size, p.dtype)
            for i in range(c0, c1):
                lo = starts[i]
                hi = min(lo + _CHUNK, p.size)
                spans = decay if decay is None or decay is True else decay[i]
                _adamw_chunk(p[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], t1[:hi - lo], t2[:hi - lo],
                             consts, spans)

        _parallel.for_row_blocks(chunks, len(starts), 4 * p.size)

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything needed to resume exactly: hyperparameters, step count, moments (copies)."""
        return {"step": self.t, "lr": self.lr, "betas": list(self.betas), "eps": self.eps,
                "weight_decay": self.weight_decay, "decay": sorted(self.decay_names),
                "m": {n: self.m[n].copy() for n in self.names},
                "v": {n: self.v[n].copy() for n in self.names}}

    def load_state_dict(self, state: Mapping) -> "AdamW":
        """Restore a :meth:`state_dict`; a missing key or a shape mismatch raises
        :class:`~seqprob.errors.CheckpointError` naming it. Everything is checked before
        anything is set: a refused state leaves the optimizer as it was."""
        for key in ("step", "lr", "betas", "eps", "weight_decay", "m", "v"):
            if key not in state:
                raise CheckpointError(f"optimizer state has no {key!r}", key=key)
        t, hyper = self._checked_scalars(state)
        for moment in ("m", "v"):
            if not isinstance(state[moment], Mapping):
                raise CheckpointError(f"optimizer state {moment!r} must map parameter names to arrays, "
                                      f"got {type(state[moment]).__name__}", key=moment)
            for name in self.names:
                arr = state[moment].get(name)
                if arr is None:
                    raise CheckpointError(f"optimizer state {moment!r} has no entry for parameter "
                                          f"{name!r}", key=f"{moment}.{name}")
                if np.shape(arr) != self.params[name].shape:
                    raise CheckpointError(f"optimizer state {moment}.{name} has shape "
                                          f"{np.shape(arr)}, parameter has {self.params[name].shape}",
                                          key=f"{moment}.{name}")
                _check_moment(moment, name, arr)
        decay = self._decay_names(state["decay"]) if "decay" in state else None
        for name in self.names:
            np.copyto(self.m[name], state["m"][name])
            np.copyto(self.v[name], state["v"][name])
        self.t = t
        self.lr, self.betas, self.eps, self.weight_decay = hyper  # in range: _checked_scalars
        if decay is not None:
            self.decay_names = decay
            self._decay_spans = self._merged_spans(n for n in self.names if n in self.decay_names)
        self._chunk_spans = self._chunk_decay(self.m_flat_.size)
        return self

    @staticmethod
    def _checked_scalars(state: Mapping) -> tuple:
        """(step, (lr, betas, eps, weight_decay)) of a state dict, each checked: a tampered or
        foreign file is a CheckpointError naming the key, never a ZeroDivisionError later."""
        def number(key, value, low=0.0, high=math.inf, integer=False):
            ok = isinstance(value, numbers.Integral if integer else numbers.Real) and \
                not isinstance(value, bool) and low <= value < high
            if not ok:
                kind = "an integer" if integer else "a finite number"
                raise CheckpointError(f"optimizer state {key!r} must be {kind} in [{low}, {high}), "
                                      f"got {value!r:.60}", key=key)
            return value

        betas = state["betas"]
        if not isinstance(betas, (list, tuple)) or len(betas) != 2:
            raise CheckpointError(f"optimizer state 'betas' must be two numbers, got {betas!r:.60}",
                                  key="betas")
        return int(number("step", state["step"], integer=True)), (
            float(number("lr", state["lr"])), tuple(float(number("betas", b, high=1.0)) for b in betas),
            float(number("eps", state["eps"])), float(number("weight_decay", state["weight_decay"])))

    def __repr__(self) -> str:
        return (f"AdamW(lr={self.lr!r}, betas={self.betas!r}, eps={self.eps!r}, "
                f"weight_decay={self.weight_decay!r}, params={len(self.names)}, step={self.t})")


def _check_moment(moment: str, name: str, arr) -> None:
    """A saved moment must be finite floats, and the second moment v >= 0 (it is a running
    mean of squares: a negative or NaN one would make every later update NaN)."""
    arr = np.asarray(arr)
    ok = arr.dtype.kind == "f" and (arr.size == 0 or
                                    (math.isfinite(arr.min()) and math.isfinite(arr.max())))
    if ok and moment == "v" and arr.size:
        ok = arr.min() >= 0
    if not ok:
        rule = "finite floats >= 0" if moment == "v" else "finite floats"
        raise CheckpointError(f"optimizer state {moment}.{name} must hold {rule} (dtype {arr.dtype})",
                              key=f"{moment}.{name}")


def _adamw_chunk(pc, gc, mc, vc, a, b, consts, decay) -> None:
    """One AdamW update of a chunk in place; ``a``, ``b`` are scratch of the chunk's size.

    ``decay``: True (decay the whole chunk), None, or the (start, stop) ranges to decay.
    """
    c1, c2, b2, cs, ce, factor = consts
    mul, add, sub, sqrt, div = np.multiply, np.add, np.subtract, np.sqrt, np.divide
    if decay is True:
        mul(pc, factor, out=pc)     # decoupled decay: p *= 1 - lr wd
    elif decay is not None:
        for d0, d1 in decay:
            mul(pc[d0:d1], factor, out=pc[d0:d1])
    sub(gc, mc, out=a)              # m += (1 - b1) (g - m)   (torch: lerp)
    mul(a, c1, out=a)
    add(mc, a, out=mc)
    mul(vc, b2, out=vc)             # v = b2 v + (1 - b2) g^2
    mul(gc, gc, out=b)
    mul(b, c2, out=b)
    add(vc, b, out=vc)
    sqrt(vc, out=b)                 # sqrt(v) + eps sqrt(bc2)
    add(b, ce, out=b)
    div(mc, b, out=a)               # p -= lr sqrt(bc2) / bc1 * m / (...)
    mul(a, cs, out=a)
    add(pc, a, out=pc)


def cosine_schedule(step, lr: float, warmup: int, total: int, min_lr: float = 0.0):
    """Learning rate at (0-based) ``step``: linear warmup, then cosine decay to ``min_lr``.

    Parameters
    ----------
    step : int or array of int
        0-based step index (an array gives the whole schedule at once, e.g. for a plot).
    lr : float
        Peak learning rate, reached at the end of the warmup.
    warmup : int
        Number of warmup steps (0 for none).
    total : int
        Total number of steps; the cosine reaches ``min_lr`` at ``step = total`` and stays
        there after it.
    min_lr : float
        Final learning rate.

    Notes
    -----
    .. math::
        \\eta(s) = \\begin{cases} \\eta \\, (s + 1) / W & s < W \\\\
          \\eta_{min} + \\tfrac12 (\\eta - \\eta_{min})
          \\left(1 + \\cos\\left(\\pi \\, \\min(1, \\tfrac{s - W}{S - W})\\right)\\right) & s \\ge W
        \\end{cases}

    Examples
    --------
    >>> [round(float(cosine_schedule(s, 1.0, 2, 6)), 3) for s in range(7)]
    [0.5, 1.0, 1.0, 0.854, 0.5, 0.146, 0.0]
    """
    _check_schedule(lr, warmup, total, min_lr)
    s = np.asarray(step, dtype=np.float64)
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise InputError(f"step must be a non-negative integer, got {step!r}", value=step, limit=0)
    warm = lr * (s + 1.0) / max(warmup, 1)
    ratio = np.clip((s - warmup) / max(total - warmup, 1), 0.0, 1.0)
    decay = min_lr + 0.5 * (lr - min_lr) * (1.0 + np.cos(np.pi * ratio))
    out = np.where(s < warmup, warm, decay)
    return float(out) if out.ndim == 0 else out


def _check_schedule(lr, warmup, total, min_lr) -> None:
    check_real("lr", lr, low=0)
    check_real("min_lr", min_lr, low=0, high=lr)
    check_int("total steps", total, low=1, whole_floats=True)
    check_int("warmup", warmup, low=0, high=total, whole_floats=True)


def clip_grad_norm(grads, max_norm: float) -> float:
    """Scale the gradients in place so that their global L2 norm is at most ``max_norm``.

    Parameters
    ----------
    grads : dict of str -> ndarray, or iterable of ndarray
        Modified in place (one vectorized pass when they are views into one flat buffer).
    max_norm : float
        Largest allowed global norm (``inf`` only measures).

    Returns
    -------
    float
        The global norm *before* clipping. A non-finite norm is returned as is and the
        gradients are left unchanged (the caller decides; :func:`seqprob.train` stops).

    Notes
    -----
    :math:`\\|g\\| = \\sqrt{\\sum_i \\sum_j g_{ij}^2}`; if :math:`\\|g\\| > c`, every gradient
    is multiplied by :math:`c / (\\|g\\| + 10^{-6})` (as ``torch.nn.utils.clip_grad_norm_``).

    Examples
    --------
    >>> import numpy as np
    >>> g = {"a": np.array([3.0]), "b": np.array([4.0])}
    >>> clip_grad_norm(g, 1.0), round(float(g["a"][0]), 4)
    (5.0, 0.6)
    """
    if not (max_norm > 0):
        raise InputError(f"max_norm must be > 0, got {max_norm!r}", value=max_norm, limit=0)
    arrays = list(grads.values()) if isinstance(grads, Mapping) else list(grads)
    root, _ = _flat_buffer(grads, list(grads)) if isinstance(grads, Mapping) else (None, None)
    total = _sum_squares(arrays)
    if not math.isfinite(total):  # overflow of a float32 sum, or a real NaN/inf
        total = _sum_squares([a.astype(np.float64) for a in arrays])
    norm = math.sqrt(total)
    if math.isfinite(norm) and norm > max_norm:
        coef = max_norm / (norm + 1e-6)
        targets = [root] if root is not None else arrays
        for a in targets:
            _scale_in_place(a, a.dtype.type(coef))
    return norm


def _scale_in_place(a: np.ndarray, coef) -> None:
    """a *= coef; a 1-D array is scaled in blocks over the thread pool (same values)."""
    if a.ndim != 1:
        a *= coef
        return

    def scale(lo, hi):
        a[lo:hi] *= coef

    _parallel.for_row_blocks(scale, a.size, a.size)


def _sum_squares(arrays) -> float:
    """Sum of squares of all elements, one BLAS dot per array (in the arrays' dtype)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return sum(float(np.dot(r, r)) for r in (np.ravel(a, order="K") for a in arrays))
