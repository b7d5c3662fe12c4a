"""Parameter layout of the GPT: names, shapes, initialization, one flat buffer.

Names follow Hugging Face GPT-2 without the ``transformer.`` prefix, with ``.w`` for weights
(stored ``[in, out]`` like GPT-2's Conv1D, so ``y = x @ w + b``), ``.g`` / ``.b`` for
LayerNorm gain and bias:

==========================  ==============  ======================================
name                        shape           role
==========================  ==============  ======================================
``wte``                     (V, C)          token embedding W_E (also W_U if tied)
``wpe``                     (block, C)      learned position embedding
``h.{l}.ln_1.g`` / ``.b``   (C,)            LayerNorm before attention
``h.{l}.attn.c_attn.w``     (C, Q+2K)       fused [W_Q | W_K | W_V]; Q = C, K = n_kv_head·hd
``h.{l}.attn.c_attn.b``     (Q+2K,)         only with ``qkv_bias``
``h.{l}.attn.q_norm.g``     (hd,) or (Q,)   RMSNorm of the queries (``qk_norm``; and ``k_norm``)
``h.{l}.attn.c_proj.w``     (Q, C)          attention output W_O; Q = n_head·hd
``h.{l}.attn.c_proj.b``     (C,)
``h.{l}.ln_attn.g``         (C,)            norm after attention (``block_norms``)
``h.{l}.ln_2.g`` / ``.b``   (C,)            LayerNorm before the MLP
``h.{l}.mlp.c_fc.w``        (C, F)          MLP up (SwiGLU: (C, 2F), fused [W_gate | W_up])
``h.{l}.mlp.c_fc.b``        (F,)            only with ``mlp_bias`` (SwiGLU: (2F,))
``h.{l}.mlp.c_proj.w``      (F, C)          MLP down; F = ``mlp_width`` (default 4C)
``h.{l}.mlp.c_proj.b``      (C,)
``h.{l}.ln_mlp.g``          (C,)            norm after the MLP (``block_norms``)
``ln_f.g`` / ``ln_f.b``     (C,)            final LayerNorm
``lm_head.w``               (V, C)          W_U, only when ``tie_weights=False``
==========================  ==============  ======================================

W_U (``lm_head.w``, or ``wte`` when tied) is stored column-major: its (C, V) transpose is
the C-contiguous block of the buffer (see :func:`column_major_names`). Shapes and values are
the same either way; the layout makes a decoding step's GEMV ``W_U h`` stream the matrix in
OpenBLAS's fast form (see the performance page, "Design notes").

``wpe`` exists only with ``positions="learned"``; with RMSNorm the norms have no ``.b``.
With ``bias=False`` every ``.b`` is absent unless ``qkv_bias`` / ``mlp_bias`` say otherwise.
Every architecture uses these names, so HF import maps each checkpoint's tensors onto them.
Weight decay conventionally applies to the names ending in ``.w`` only (see :func:`decay_names`).
"""
from __future__ import annotations

import math
import mmap

import numpy as np

from ..errors import CheckpointError, MemoryBudgetError
from ..optim import FlatArrays

__all__ = ["param_shapes", "block_shapes", "column_major_names", "FlatParams", "copy_into", "check_fits", "allocate",
           "decay_names", "BLOCK_KEYS"]

_ALIGN = 16  # elements: every array starts on a 64-byte boundary (float32) for BLAS

BLOCK_KEYS = ("ln_1.g", "ln_1.b", "attn.c_attn.w", "attn.c_attn.b", "attn.q_norm.g", "attn.k_norm.g",
              "attn.c_proj.w", "attn.c_proj.b", "ln_attn.g", "ln_attn.b", "ln_2.g", "ln_2.b",
              "mlp.c_fc.w", "mlp.c_fc.b", "mlp.c_proj.w", "mlp.c_proj.b", "ln_mlp.g", "ln_mlp.b")


def block_shapes(config) -> dict:
    """Ordered ``key -> shape`` of one block's parameters (keys without the ``h.{l}.`` prefix)."""
    C, F, hd = config.n_embd, config.mlp_width, config.head_dim
    nq, nk = config.n_head * hd, config.kv_heads * hd
    qkv = nq + 2 * nk  # [q | k | v] columns
    up = 2 * F if config.mlp in ("swiglu", "geglu_tanh") else F  # gated: [gate | up] columns
    nb, qb, mb, ob = config.has_norm_bias, config.has_qkv_bias, config.has_mlp_bias, config.bias
    pre, post = config.block_norms in ("pre", "sandwich"), config.block_norms in ("sandwich", "post")
    qn = {None: None, "head": (hd, hd), "all": (nq, nk)}[config.qk_norm]
    shapes = {"ln_1.g": (C,) if pre else None, "ln_1.b": (C,) if nb and pre else None,
              "attn.c_attn.w": (C, qkv), "attn.c_attn.b": (qkv,) if qb else None,
              "attn.q_norm.g": qn and (qn[0],), "attn.k_norm.g": qn and (qn[1],),
              "attn.c_proj.w": (nq, C), "attn.c_proj.b": (C,) if ob else None,
              "ln_attn.g": (C,) if post else None, "ln_attn.b": (C,) if nb and post else None,
              "ln_2.g": (C,) if pre else None, "ln_2.b": (C,) if nb and pre else None,
              "mlp.c_fc.w": (C, up), "mlp.c_fc.b": (up,) if mb else None,
              "mlp.c_proj.w": (F, C), "mlp.c_proj.b": (C,) if mb else None,
              "ln_mlp.g": (C,) if post else None, "ln_mlp.b": (C,) if nb and post else None}
    return {key: shape for key, shape in shapes.items() if shape is not None}


def param_shapes(config) -> dict:
    """Ordered ``name -> shape`` of every parameter of ``config``."""
    C, V = config.n_embd, config.vocab_size
    shapes = {"wte": (V, C)}
    if config.positions == "learned":
        shapes["wpe"] = (config.block_size, C)
    block = block_shapes(config)
    for layer in range(config.n_layer):
        for key, shape in block.items():
            shapes[f"h.{layer}.{key}"] = shape
    shapes["ln_f.g"] = (C,)
    if config.has_norm_bias:
        shapes["ln_f.b"] = (C,)
    if not config.tie_weights:
        shapes["lm_head.w"] = (V, C)
    return shapes


def column_major_names(config) -> frozenset:
    """Names stored column-major: the unembedding W_U (``wte`` when tied, else ``lm_head.w``)
    and every block's MLP down projection ``h.{l}.mlp.c_proj.w``.

    A decoding step computes GEMVs. OpenBLAS streams a column-major (V, C) W_U about 3x faster
    than a row-major one, and the scoring GEMM ``h W_Uᵀ`` becomes a plain (N, C) @ (C, V). The
    down projection (F, C) maps a long input to a short output; stored column-major (as
    Hugging Face stores it, (C, F) row-major) its GEMV is 4-8% faster on one thread and 15%
    on two, where OpenBLAS's kernel for the row-major form hardly uses the second thread
    (AMD EPYC VM: a SmolLM2-135M step's GEMVs 26.7 -> 22.5 ms at 2 threads, GPT-2-124M's
    22.7 -> 19.2 ms). The batched GEMMs and their gradients run at the same speed in either
    order. An untied ``wte`` stays row-major: its rows are gathered by every forward.
    """
    names = {"wte"} if config.tie_weights else {"lm_head.w"}
    return frozenset(names | {f"h.{layer}.mlp.c_proj.w" for layer in range(config.n_layer)})


def copy_into(dest: np.ndarray, value: np.ndarray, tile: int = 256, release=None) -> None:
    """``dest[...] = value``; a 2-D copy between different memory orders (a row-major file
    array into a column-major W_U, a transposed HF matrix into a row-major parameter) goes
    ``tile`` x ``tile`` blocks at a time so that both sides of the transposing copy stay in
    cache (about 4-5x faster than one whole-array copy).

    ``release(part)``, if given, is called on each contiguous stripe of ``value`` (rows of a
    C-contiguous array, columns of a transposed one; else on all of it) once it is copied: a
    loader passes the function that drops a mapped file's pages, so that a large tensor
    (GPT-2's 147 MiB ``wte``) never sits in memory twice, as file pages and as the model's array.
    """
    same_order = (dest.flags.c_contiguous and value.flags.c_contiguous) or \
        (dest.flags.f_contiguous and value.flags.f_contiguous)
    striped = release is not None and value.ndim >= 1 and value.flags.c_contiguous and len(value) > 1
    if dest.ndim != 2 or value.ndim != 2 or same_order:
        if not striped or dest.shape != value.shape:
            dest[...] = value
            if release is not None:
                release(value)
            return
        rows = max(1, STRIPE_BYTES // max(1, value[:1].nbytes))
        for lo in range(0, len(dest), rows):
            dest[lo:lo + rows] = value[lo:lo + rows]
            release(value[lo:lo + rows])
        return
    if release is not None and value.flags.f_contiguous:  # a transposed file array: by its rows
        for left in range(0, dest.shape[1], tile):
            for lo in range(0, dest.shape[0], tile):
                dest[lo:lo + tile, left:left + tile] = value[lo:lo + tile, left:left + tile]
            release(value[:, left:left + tile])
        return
    for lo in range(0, dest.shape[0], tile):
        for left in range(0, dest.shape[1], tile):
            dest[lo:lo + tile, left:left + tile] = value[lo:lo + tile, left:left + tile]
        if striped:
            release(value[lo:lo + tile])
    if release is not None and not striped:
        release(value)


STRIPE_BYTES = 4 << 20  # rows of a same-order copy handed to ``release`` at a time


def check_fits(dest: np.ndarray, value, name: str) -> None:
    """CheckpointError unless ``value`` fits ``dest``'s dtype once cast (a float64 1e300 would
    become inf in float32); called on every tensor before any is copied, so a refused load
    leaves the model as it was."""
    narrowed = np.dtype(getattr(value, "dtype", dest.dtype)).itemsize > dest.dtype.itemsize
    limit = float(np.finfo(dest.dtype).max)
    if narrowed and np.size(value) and not (-limit <= np.min(value) and np.max(value) <= limit):  # NaN: refused
        raise CheckpointError(f"parameter {name!r} holds values beyond the range of {dest.dtype} "
                              f"(|x| <= {limit:.4g}): {np.asarray(value).dtype} values do not fit",
                              name=name, limit=limit)


# Parameter buffers from this size (bytes) on are kept in normal pages (see allocate). Below it
# numpy's huge pages stay: a small model's weights are read from cache at every decoding step,
# where 4 KiB pages cost TLB misses, and compacting a few huge pages costs little.
SMALL_PAGES_MIN = 1 << 26


def allocate(shape, dtype, what: str, small_pages: bool = False) -> np.ndarray:
    """``np.zeros(shape, dtype)``, or a MemoryBudgetError naming ``what`` and its size where
    the machine cannot allocate it (not numpy's bare MemoryError).

    ``small_pages``: a large array (``SMALL_PAGES_MIN`` bytes, 64 MiB, or more) is an anonymous
    memory map of the system's normal pages, where numpy would ask Linux for huge pages
    (``madvise(MADV_HUGEPAGE)``). For the parameters, written once and then read: on a host
    whose free memory is fragmented, each huge-page fault compacts memory first (``defrag``
    = ``madvise``, the usual default), which made loading take about three times as long.
    """
    size = math.prod(np.atleast_1d(shape).tolist()) * np.dtype(dtype).itemsize
    try:
        if small_pages and size >= SMALL_PAGES_MIN:
            return np.frombuffer(_anonymous_map(size), dtype=dtype).reshape(shape)
        return np.zeros(shape, dtype=dtype)
    except (MemoryError, OSError, OverflowError):  # OverflowError: a size mmap cannot even ask for
        raise MemoryBudgetError(f"{what} need {size / 2 ** 30:,.1f} GiB ({np.dtype(dtype)}), more than "
                                "this machine could allocate", bytes=size) from None


def _anonymous_map(size: int) -> mmap.mmap:
    """``size`` zeroed bytes of anonymous memory, private to this process (a forked child
    gets its own copy on write, as with any numpy array; a shared map would let it write
    into the parent's parameters)."""
    if hasattr(mmap, "MAP_PRIVATE"):
        return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    return mmap.mmap(-1, size)  # Windows: anonymous maps are private to the process


def decay_names(names) -> list[str]:
    """Names that get weight decay by convention: matrices (``.w``), not embeddings/norms/biases."""
    return [n for n in names if n.endswith(".w")]


class FlatParams:
    """Named arrays that are views into one contiguous, 64-byte-aligned buffer.

    ``flat`` is the buffer (gaps between arrays are zeros); ``arrays`` maps name -> view (a
    :class:`~seqprob.optim.FlatArrays`, so AdamW takes the buffer from it);
    ``slices`` maps name -> ``slice`` into ``flat``. An optimizer can update every parameter
    with one vectorized operation on ``flat``. The names in ``column_major`` are stored
    column-major (their ``.T`` is C-contiguous).
    """

    def __init__(self, shapes: dict, dtype, column_major=frozenset()):
        self.slices, offset = {}, 0
        for name, shape in shapes.items():
            size = math.prod(shape)
            self.slices[name] = slice(offset, offset + size)
            offset += -(-size // _ALIGN) * _ALIGN
        raw = allocate(offset + _ALIGN, dtype, "the model's parameters", small_pages=True)
        shift = (-(raw.ctypes.data // raw.itemsize)) % _ALIGN
        self.flat = raw[shift:shift + offset]
        self.arrays = FlatArrays(self.flat, self.slices,
                                 {name: _view(self.flat[s], shapes[name], name in column_major)
                                  for name, s in self.slices.items()})


def _view(part: np.ndarray, shape: tuple, column_major: bool) -> np.ndarray:
    """``part`` (1-D) as an array of ``shape``, row-major or column-major."""
    return part.reshape(shape[::-1]).T if column_major else part.reshape(shape)


def init_params(arrays: dict, config, seed) -> None:
    """GPT-2 initialization in place: N(0, 0.02) weights and embeddings, residual projections
    N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm gains 1. Drawn in float64 then cast,
    so a float32 and a float64 model with the same seed hold the same values (rounded)."""
    rng = np.random.default_rng(seed)
    resid_std = 0.02 / math.sqrt(2 * config.n_layer)
    for name, arr in arrays.items():
        if name.endswith(".g"):
            arr[...] = 1.0
        elif name.endswith(".b"):
            arr[...] = 0.0
        else:
            std = resid_std if name.endswith("c_proj.w") else 0.02
            arr[...] = rng.standard_normal(arr.shape) * std
