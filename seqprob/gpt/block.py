"""One transformer block, written once: forward, backward and single-token decode.

Every architecture option of :class:`~seqprob.gpt.GPTConfig` is a choice inside these
functions (norm, MLP, rotary positions, key/value heads, biases, parallel residual), and
every path uses the same per-block parameter dict ``p`` (keys as in
:func:`seqprob.gpt.params.block_shapes`, e.g. ``"attn.c_attn.w"``) and the same
:mod:`seqprob.nn` pairs:

- training: :func:`block_forward` (``ws=None``, returns a cache) then :func:`block_backward`;
- inference: :func:`block_forward` with a workspace ``ws`` of reused buffers (no cache kept);
- KV-cached prefill: :func:`block_forward` on the prompt with ``kv`` (this layer's key and
  value arrays) and ``pos`` (where the positions sit): keys and values are written at ``pos``
  and the queries attend over slots ``0 .. pos``;
- KV-cached decoding of one token: :func:`block_step`, the same block on a single residual
  row with the parameters as named fields (:class:`RowParams`) and buffers reused from a
  :class:`RowWorkspace` (batch-1 decoding is bound by per-call overhead, not by FLOPs).

Notes
-----
Pre-norm block: x += attn(norm_1(x)); x += mlp(norm_2(x)); with ``parallel_residual``
x += attn(norm_1(x)) + mlp(norm_2(x)) (both read the same x); ``block_norms="sandwich"``
(Gemma) x += norm_a(attn(norm_1(x))), x += norm_m(mlp(norm_2(x))); ``"post"`` (OLMo 2)
x += norm_a(attn(x)), x += norm_m(mlp(x)). attn: fused [q | k | v] = h W_qkv (+ b), RMSNorm
of q and k (``qk_norm``), rotary on q and k (this layer's tables, or none), grouped-query
attention softmax(cap(scale q kᵀ) + causal/sliding mask) v, output y W_O (+ b).
mlp: down(act(up h)) with tanh/erf GELU, or down(silu(gate h) * up h) (SwiGLU), or
down(gelu_tanh(gate h) * up h) (GeGLU).

Every option is one branch in :func:`pre_attention` / :func:`_attend` /
:func:`post_attention` (the batched paths: training, inference, prefill, the stage split),
the same branch in :func:`block_backward`, and in :func:`block_step` (one row, decoding);
a layer's rotary tables and sliding window are chosen in one place
(:func:`seqprob.gpt.rope.layer_ropes`, :meth:`GPTConfig.layer_window`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import nn

Q_BLOCK = 128  # queries per block of the attention (the stage split aligns its row cuts to it)

__all__ = ["embed_forward", "embed_row", "unembed_forward", "block_forward", "blocks_forward", "pre_attention", "post_attention", "block_backward", "make_workspace", "split_qkv",
           "norm_forward",
           "norm_backward", "RowParams", "RowWorkspace", "block_step", "norm_row", "TrainBuffers"]


def _buf(ws, name):
    return None if ws is None else ws[name]


class TrainBuffers:
    """Arrays of a training step kept for the next step, by name: ``buffers(name, shape)``
    returns the array of that name, allocated on first use or when the shape changes.

    Arrays allocated afresh each step are partly returned to the system by glibc between
    steps, and the next step pays a page fault per 4 KiB page again; reusing them removes that
    cost. The caller keeps one
    instance per layer for the forward caches (they live until the backward) and one for the
    backward's scratch (reused layer after layer).

    Examples
    --------
    >>> buffers = TrainBuffers(np.float32)
    >>> buffers("u", (2, 3)) is buffers("u", (2, 3))
    True
    """

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.arrays = {}

    def __call__(self, name: str, shape: tuple) -> np.ndarray:
        arr = self.arrays.get(name)
        if arr is None or arr.shape != tuple(shape):
            arr = self.arrays[name] = np.empty(shape, self.dtype)
        return arr


def _take(ws, ws_name, buffers, name, shape):
    """The inference workspace's ``ws_name``, else the training buffer ``name``, else None."""
    if ws is not None:
        return ws[ws_name]
    return None if buffers is None else buffers(name, shape)


def make_workspace(config, B: int, T: int, dtype) -> dict:
    """Reusable inference buffers for a (B, T) forward pass of any block of ``config``.

    Returns a dict of arrays by the names the inference path writes: ``h`` (B, T, C) the
    norms' output and the MLP's; ``qkv``; ``y`` the attention values; ``a`` their
    projection; ``u`` the MLP's hidden rows (and ``t``, a gated MLP's activation); ``q``,
    ``k`` the rotated queries and keys (rotary configs); ``arena`` the array under the others.

    Notes
    -----
    Buffers whose lifetimes within a block do not overlap share memory: each row of ``arena``
    (B, T, width) holds that position's qkv, then its attention projection ``a``, then its
    MLP hidden row, side by side as column ranges, and ``y`` is ``h`` when it has C columns
    (h, the ln_1 output, is dead once the QKV product has read it; ``a`` is added to the
    residual before ln_2 writes h again; the parallel residual keeps ``a`` past the MLP, so
    there it gets columns of its own). Sharing by *columns* keeps each position's data in its
    own row: the stage split's threads, each on its rows, never touch another's. GPT-2-124M
    at 1,024 positions: 15 MiB of buffers instead of 33 (h 3, arena 12; a row of the arena is
    padded by a cache line when it is a whole number of 4 KiB pages). After the last
    block the arena is free: the unembedding streams its logits through it
    (:meth:`seqprob.GPT._vocab_slices`).
    """
    C, H, Hkv, hd, F = (config.n_embd, config.n_head, config.kv_heads, config.head_dim,
                        config.mlp_width)
    w_qkv, w_y = (H + 2 * Hkv) * hd, H * hd
    gated = config.mlp in ("swiglu", "geglu_tanh")
    w_mlp = 3 * F if gated else F  # [u | t]: u (2F gated) and the gated activation t (F)
    y_cols = None if w_y == C else (w_qkv, w_qkv + w_y)  # alongside qkv, which it is computed from
    y_end = w_qkv if y_cols is None else y_cols[1]
    if config.parallel_residual:
        a_at = max(w_mlp, y_end)  # lives through the MLP; never over y, the product's input
    else:
        a_at = 0 if C <= w_qkv or y_cols is None else y_end
    width = max(y_end, a_at + C, w_mlp)
    if width * np.dtype(dtype).itemsize % 4096 == 0:  # rows a page apart share cache sets: a
        width += 64 // np.dtype(dtype).itemsize  # cache line more (GEMMs writing them ran 3-5% slower)
    arena = np.empty((B, T, width), dtype)
    h = np.empty((B, T, C), dtype)
    ws = {"h": h, "arena": arena, "qkv": arena[..., :w_qkv], "a": arena[..., a_at:a_at + C],
          "y": h if y_cols is None else arena[..., y_cols[0]:y_cols[1]],
          "u": arena[..., :2 * F if gated else F]}
    if gated:
        ws["t"] = arena[..., 2 * F:3 * F]
    if config.positions == "rotary":
        ws["q"], ws["k"] = np.empty((B, H, T, hd), dtype), np.empty((B, Hkv, T, hd), dtype)
    return ws


def split_qkv(qkv, n_head: int, n_kv_head: int):
    """Views q (B, H, T, hd), k, v (B, Hkv, T, hd) of a fused (B, T, (H + 2 Hkv) hd) array."""
    B, T, W = qkv.shape
    hd = W // (n_head + 2 * n_kv_head)
    nq, nk = n_head * hd, n_kv_head * hd
    q = qkv[..., :nq].reshape(B, T, n_head, hd).transpose(0, 2, 1, 3)
    k = qkv[..., nq:nq + nk].reshape(B, T, n_kv_head, hd).transpose(0, 2, 1, 3)
    v = qkv[..., nq + nk:].reshape(B, T, n_kv_head, hd).transpose(0, 2, 1, 3)
    return q, k, v


# ----------------------------------------------------------------------------- embedding
def embed_forward(ids, params, pos: int = 0, out=None, scale: float = 1.0):
    """x = W_E[ids] (+ W_pos[pos : pos + T] with learned positions): ids (B, T) -> x (B, T, C),
    and the gather's cache for :func:`seqprob.nn.embedding_backward`.

    The one embedding of every path: inference and prefill (:meth:`GPT._embed`), the stage
    split (through it), training (:mod:`seqprob.gpt.backward`), and, one row at a time,
    :func:`embed_row` for decoding.
    """
    x, cache = nn.embedding_forward(ids, params["wte"], out=out)  # (B, T, C)
    if scale != 1.0:  # Gemma: sqrt(C), as a number of the model's dtype (HF rounds it so)
        x *= x.dtype.type(scale)
    if "wpe" in params:
        x += params["wpe"][pos:pos + ids.shape[1]]
    return x, cache


def embed_row(x, wte, wpe, tok: int, pos: int, scale: float = 1.0):
    """:func:`embed_forward` of one token at position ``pos`` into the row x (C,)."""
    if scale != 1.0:
        np.multiply(wte[tok], x.dtype.type(scale), out=x)
        if wpe is not None:
            x += wpe[pos]
    elif wpe is None:
        x[...] = wte[tok]
    else:
        np.add(wte[tok], wpe[pos], out=x)
    return x


def unembed_forward(h, w_u, config, out=None):
    """Logits u = h W_Uᵀ of final-normed rows h (N, C) (W_U (V, C)), soft-capped
    c tanh(u / c) when ``config.final_softcap`` is set (Gemma 2): every path's unembedding."""
    u = np.matmul(h, w_u.T, out=out)  # (N, V)
    if config.final_softcap is not None:
        nn.softcap_forward(u, config.final_softcap, out=u)
    return u


# ----------------------------------------------------------------------------- forward
def block_forward(x, p, config, rope=None, ws=None, drop=None, kv=None, pos=0, probs_out=None,
                  buffers=None, window=None):
    """One block on x (B, T, C), updated in place; returns ``(x, cache)``.

    Parameters
    ----------
    x : (B, T, C)
        Residual stream of positions ``pos .. pos + T - 1``.
    p : dict
        This block's parameters.
    rope : (cos, sin), optional
        Tables of :func:`seqprob.gpt.rope.rope_tables` (rotary configs).
    ws : dict, optional
        Workspace of :func:`make_workspace`: inference, the cache is not usable.
    drop : numpy.random.Generator, optional
        Residual dropout (training).
    kv : (K, V), optional
        This layer's key/value cache, each (Hkv, block_size, hd): slots ``pos .. pos + T - 1``
        are written and the queries attend over slots ``0 .. pos + T - 1`` (B must be 1).
    probs_out : (B, H, T, pos + T), optional
        Receives the attention probabilities.
    buffers : TrainBuffers, optional
        Training (no ``ws``): this layer's outputs and caches are written into these reused
        arrays (their names are this layer's own: keep one instance per layer).
    window : int, optional
        This layer's sliding window (``config.layer_window(layer)``); None = full causal.

    Returns
    -------
    x : (B, T, C)
        The same array, now x + block(x).
    cache : tuple
        What :func:`block_backward` needs (only meaningful without ``ws``).

    Examples
    --------
    >>> import numpy as np
    >>> from seqprob.gpt import GPT, GPTConfig
    >>> m = GPT(GPTConfig.preset("tiny", dtype="float64"), seed=0)
    >>> x = m.params["wte"][[[1, 2, 3]]] + m.params["wpe"][:3]  # (1, 3, C)
    >>> y, cache = block_forward(x.copy(), m._block_params[0], m.config)
    >>> dx = block_backward(np.ones_like(y), cache, m._block_grads[0], m.config)
    >>> y.shape == dx.shape == (1, 3, 16)
    True
    """
    q, k, v, c_pre = pre_attention(x, p, config, rope, ws, pos, buffers)
    y, c_a = _attend(q, k, v, config, ws, kv, pos, probs_out, buffers, window)
    x, c_post = post_attention(x, y, p, config, ws, drop, buffers)
    return x, (c_pre, c_a, c_post)


def blocks_forward(x, blocks, config, ropes, per_layer=None, after=None, keep_caches=True):
    """x (B, T, C) through every block in place, then the final norm's input: layer i with
    its own rotary tables ``ropes[i]`` and window; ``per_layer(i)`` gives that layer's other
    :func:`block_forward` arguments (workspace, cache, buffers, ...), ``after(i, x)`` sees x
    after block i. Returns x and the blocks' caches (training, :mod:`seqprob.gpt.backward`),
    or Nones with ``keep_caches=False`` (the inference forward, :meth:`GPT._hidden`: a cache
    holds its layer's temporaries, so keeping all of them would hold every layer's at once,
    +160 MB for the SmolLM2-135M shape at 1,024 tokens)."""
    caches = []
    for layer, p in enumerate(blocks):
        x, cache = block_forward(x, p, config, ropes[layer], window=config.layer_window(layer),
                                 **(per_layer(layer) if per_layer else {}))
        caches.append(cache if keep_caches else None)
        del cache  # not held while the next block allocates its own
        if after is not None:
            after(layer, x)
    return x, caches


def pre_attention(x, p, config, rope=None, ws=None, pos=0, buffers=None):
    """The rows' part of a block before attention: norm_1, the fused QKV product and rotary
    positions of x (B, T, C) at positions ``pos .. pos + T - 1``.

    Every path runs this: :func:`block_forward` (training, inference, prefill) and the
    stage split of one long sequence (:mod:`seqprob.gpt.stages`), which passes a workspace of
    views of its rows. Returns q (B, H, T, hd), k, v (B, Hkv, T, hd) and the cache
    (norm_1's, the product's) for :func:`block_backward`.
    """
    h, c_n1 = _pre_norm(x, p, "ln_1", config, ws, buffers)
    B, T = h.shape[:2]
    w_qkv = p["attn.c_attn.w"]
    qkv, c_qkv = nn.linear_forward(h, w_qkv, p.get("attn.c_attn.b"),
                                   out=_take(ws, "qkv", buffers, "qkv", (B, T, w_qkv.shape[1])))
    c_qk = _qk_norm_forward(qkv, p, config, ws is not None, buffers)
    q, k, v = split_qkv(qkv, config.n_head, config.kv_heads)  # (B, H|Hkv, T, hd) views
    if rope is not None:
        cos, sin = rope[0][pos:pos + T], rope[1][pos:pos + T]  # (T, r)
        q = nn.rotary_forward(q, cos, sin, out=_take(ws, "q", buffers, "q", q.shape))  # (B, H, T, hd)
        k = nn.rotary_forward(k, cos, sin, out=_take(ws, "k", buffers, "k", k.shape))
    return q, k, v, (c_n1, c_qkv, c_qk)


def _pre_norm(x, p, name, config, ws, buffers):
    """The norm before attention or the MLP; without one (``block_norms="post"``) the input
    itself (a copy in training, where x changes before the backward reads it)."""
    if f"{name}.g" in p:
        return norm_forward(x, p, name, config, _buf(ws, "h"), buffers=buffers)
    if ws is not None:
        return x, None
    h = np.empty_like(x) if buffers is None else buffers(f"{name}.in", x.shape)
    np.copyto(h, x)
    return h, None


def _qk_norm_forward(qkv, p, config, inference: bool, buffers=None):
    """RMSNorm of the query and key columns of qkv (B, T, Q + 2K), in place: per head
    (``qk_norm="head"``, over hd) or over all heads at once (``"all"``); the caches
    (None in ``inference``)."""
    if config.qk_norm is None:
        return None
    B, T = qkv.shape[:2]
    hd, eps = config.head_dim, config.layer_norm_epsilon
    nq, nk = config.n_head * hd, config.kv_heads * hd
    caches = []
    for name, lo, width in (("q_norm", 0, nq), ("k_norm", nq, nk)):
        part = qkv[..., lo:lo + width]  # (B, T, width) view
        if config.qk_norm == "head":
            part = part.reshape(B, T, width // hd, hd)
        xhat = None if inference else np.empty(part.shape, qkv.dtype) if buffers is None else \
            buffers(f"{name}.xhat", part.shape)
        caches.append(nn.rms_norm_forward(part, p[f"attn.{name}.g"], eps, out=part, xhat_out=xhat)[1])
    return caches


def post_attention(x, y, p, config, ws=None, drop=None, buffers=None):
    """The rows' part of a block after attention: the output projection of the attention
    values y (B, T, H hd), the residuals, norm_2 and the MLP, on x (B, T, C) in place.

    Every path runs this after :func:`pre_attention` and the attention (see there). Returns x
    and the cache (projection, dropout, norm_2, MLP, dropout) for :func:`block_backward`.
    """
    B, T = y.shape[:2]
    w_o = p["attn.c_proj.w"]
    a, c_o = nn.linear_forward(y, w_o, p.get("attn.c_proj.b"),
                               out=_take(ws, "a", buffers, "a", (B, T, w_o.shape[1])))
    a, c_pa = _post_norm(a, p, "ln_attn", config, ws, buffers)
    a, c_d1 = nn.dropout_forward(a, config.dropout, drop)
    if not config.parallel_residual:
        x += a
    h, c_n2 = _pre_norm(x, p, "ln_2", config, ws, buffers)
    m, c_mlp = _mlp_forward(h, p, config, ws, buffers)
    m, c_pm = _post_norm(m, p, "ln_mlp", config, ws, buffers)
    m, c_d2 = nn.dropout_forward(m, config.dropout, drop)
    if config.parallel_residual:
        x += a
    x += m
    return x, (c_o, c_pa, c_d1, c_n2, c_mlp, c_pm, c_d2)


def _post_norm(a, p, name, config, ws, buffers):
    """The norm of a sublayer's output before the residual add (Gemma, OLMo 2), in place
    in inference (``ws``); ``a`` itself where the block has none."""
    if f"{name}.g" not in p:
        return a, None
    return norm_forward(a, p, name, config, out=None if ws is None else a, buffers=buffers)


def norm_forward(x, p, name: str, config, out=None, buffers=None):
    """Norm ``name`` (``"ln_1"``, ``"ln_2"``, ``"ln_f"``) of x (..., C): LayerNorm or RMSNorm.
    With ``out`` (inference) the result is written there and the cache is not usable; with
    ``buffers`` (:class:`TrainBuffers`, training) the result and the cache reuse its arrays."""
    eps = config.layer_norm_epsilon
    if out is None and buffers is not None:
        y, xhat = buffers(f"{name}.y", x.shape), buffers(f"{name}.xhat", x.shape)
        if config.norm == "rmsnorm":
            return nn.rms_norm_forward(x, p[f"{name}.g"], eps, out=y, xhat_out=xhat)
        return nn.layer_norm_forward(x, p[f"{name}.g"], p.get(f"{name}.b"), eps, out=y, xhat_out=xhat)
    if out is not None and x.size == x.shape[-1]:  # one row (decoding): the overhead-bound case
        row = x.reshape(-1)
        if config.norm == "rmsnorm":
            out.reshape(-1)[...] = nn.rms_norm_row(row, p[f"{name}.g"], eps)
        else:
            out.reshape(-1)[...] = nn.layer_norm_row(row, p[f"{name}.g"], p.get(f"{name}.b"), eps)
        return out, None
    if config.norm == "rmsnorm":
        return nn.rms_norm_forward(x, p[f"{name}.g"], config.layer_norm_epsilon, out=out)
    return nn.layer_norm_forward(x, p[f"{name}.g"], p.get(f"{name}.b"), config.layer_norm_epsilon,
                                 out=out, xhat_out=out)


def _attend(q, k, v, config, ws, kv, pos, probs_out, buffers=None, window=None):
    """Causal attention of q over k, v (through the key/value cache ``kv`` when given):
    the values y (B, T, H hd) and the cache of :func:`~seqprob.nn.grouped_attention_forward`."""
    B, H, T = q.shape[:3]
    if kv is not None and _is_ring(kv, window, pos + T):
        _fill_ring(kv, k, v, pos)  # the queries attend over their own keys (a prefill from 0)
    elif kv is not None:
        K, V = kv  # (Hkv, block, hd)
        K[:, pos:pos + T], V[:, pos:pos + T] = k[0], v[0]
        k, v = K[None, :, :pos + T], V[None, :, :pos + T]  # (1, Hkv, P, hd)
    options = dict(scale=config.scale, window=window, softcap=config.attn_softcap)
    if ws is not None and probs_out is None:  # inference: no probabilities, no (B, H, T, T) array
        return nn.causal_attention_inference(q, k, v, out=ws["y"], q_block=Q_BLOCK, **options), None
    if probs_out is None and buffers is not None and kv is None:
        probs_out = buffers("probs", (B, H, T, T))
    return nn.grouped_attention_forward(q, k, v, out=_take(ws, "y", buffers, "y", (B, T, q.shape[-1] * H)),
                                        probs_out=probs_out, q_block=Q_BLOCK, **options)


def _is_ring(kv, window, n: int) -> bool:
    """Whether this layer's cache is a ring of ``window`` slots (a sliding layer keeps only
    the keys it can still see: position p in slot p mod W) that ``n`` positions overflow."""
    return window is not None and kv[0].shape[1] == window and n > window


def _fill_ring(kv, k, v, pos: int) -> None:
    """Write the last W of the prompt's keys and values k, v (1, Hkv, T, hd) into the ring."""
    if pos:
        raise ValueError("a ring cache is filled by a prefill from position 0")  # internal
    K, V = kv
    W, T = K.shape[1], k.shape[2]
    for p in range(max(0, T - W), T):
        K[:, p % W], V[:, p % W] = k[0, :, p], v[0, :, p]


def _mlp_forward(h, p, config, ws, buffers=None):
    B, T = h.shape[:2]
    w_up, w_down = p["mlp.c_fc.w"], p["mlp.c_proj.w"]
    F = w_down.shape[0]
    u, c_fc = nn.linear_forward(h, w_up, p.get("mlp.c_fc.b"),
                                out=_take(ws, "u", buffers, "u", (B, T, w_up.shape[1])))  # (B, T, F|2F)
    inplace = u if ws is not None else None
    if ws is None and buffers is not None:
        inplace = buffers("act", (B, T, F))
    if config.mlp == "gelu_tanh":
        tanh_out = None if ws is not None else _take(ws, "t", buffers, "t", (B, T, F))  # inference: per chunk
        act, c_act = nn.gelu_forward(u, out=inplace, tanh_out=tanh_out)
    elif config.mlp == "gelu":
        act, c_act = nn.gelu_erf_forward(u, out=inplace)
    elif config.mlp == "geglu_tanh":
        act, c_act = nn.geglu_forward(u, out=_take(ws, "t", buffers, "act", (B, T, F)))
    else:
        act, c_act = nn.swiglu_forward(u, out=_take(ws, "t", buffers, "act", (B, T, F)),
                                       sig_out=None if buffers is None else buffers("sig", (B, T, F)))
    m, c_proj = nn.linear_forward(act, w_down, p.get("mlp.c_proj.b"),
                                  out=_take(ws, "h", buffers, "m", (B, T, w_down.shape[1])))
    return m, (c_fc, c_act, c_proj)


# ----------------------------------------------------------------------------- backward
def block_backward(dx, cache, g, config, rope=None, scratch=None):
    """Gradient of :func:`block_forward` (training cache): writes this block's parameter
    gradients into the dict ``g`` (keys like ``p``) and returns d loss / d x (B, T, C).

    With ``scratch`` (:class:`TrainBuffers` shared by the layers of a backward pass) the
    temporaries reuse its arrays and ``dx`` itself is updated and returned (the caller's
    running residual gradient); without it ``dx`` is left unchanged.
    """
    (c_n1, c_qkv, c_qk), c_a, (c_o, c_pa, c_d1, c_n2, c_mlp, c_pm, c_d2) = cache
    dm = _post_norm_backward(nn.dropout_backward(dx, c_d2), c_pm, g, "ln_mlp", config, scratch)
    dh = _mlp_backward(dm, c_mlp, g, config, scratch)
    d_norm = _pre_norm_backward(dh, c_n2, g, "ln_2", config, scratch)
    if config.parallel_residual:
        da, dx = dx, dx + d_norm
    elif scratch is None:
        dx = dx + d_norm
        da = dx
    else:
        dx += d_norm
        da = dx
    da = _post_norm_backward(da, c_pa, g, "ln_attn", config, scratch)
    dh = _attention_backward(nn.dropout_backward(da, c_d1), (c_qkv, c_qk, c_a, c_o), g, config, rope, scratch)
    dx += _pre_norm_backward(dh, c_n1, g, "ln_1", config, scratch)
    return dx


def _pre_norm_backward(dh, cache, g, name, config, scratch):
    """Gradient through :func:`_pre_norm` (the identity where the block has no such norm)."""
    if f"{name}.g" not in g:
        return dh
    return norm_backward(dh, cache, g, name, config, out=None if scratch is None else dh)


def _post_norm_backward(da, cache, g, name, config, scratch):
    """Gradient through :func:`_post_norm`, into a new array (``da`` is the residual's)."""
    if f"{name}.g" not in g:
        return da
    return norm_backward(da, cache, g, name, config,
                         out=None if scratch is None else scratch(f"d.{name}", da.shape))


def norm_backward(dy, cache, g, name: str, config, out=None):
    """Gradient of :func:`norm_forward`: writes ``g[name.g]`` (and ``.b``), returns dx
    (written into ``out`` if given, which may be ``dy``)."""
    if config.norm == "rmsnorm":
        dx, g[f"{name}.g"][...] = nn.rms_norm_backward(dy, cache, out=out)
        return dx
    dx, dgain, dbias = nn.layer_norm_backward(dy, cache, out=out)
    g[f"{name}.g"][...] = dgain
    if f"{name}.b" in g:
        g[f"{name}.b"][...] = dbias
    return dx


def _scratch(scratch, name, shape, dtype):
    return np.empty(shape, dtype) if scratch is None else scratch(name, shape)


def _attention_backward(da, cache, g, config, rope, scratch=None):
    c_qkv, c_qk, c_a, c_o = cache
    B, T, C = da.shape
    w_qkv, w_o = g["attn.c_attn.w"], g["attn.c_proj.w"]
    dy, _, _ = nn.linear_backward(da, c_o, w_o, g.get("attn.c_proj.b"),
                                  dx_out=None if scratch is None else scratch("d.y", (B, T, w_o.shape[0])))
    dqkv = _scratch(scratch, "d.qkv", (B, T, w_qkv.shape[1]), dy.dtype)
    vq, vk, vv = split_qkv(dqkv, config.n_head, config.kv_heads)  # (B, H|Hkv, T, hd) views into dqkv
    if rope is None:  # the gradients land in dqkv directly
        nn.grouped_attention_backward(dy, c_a, out=(vq, vk, vv))
    else:
        dq, dk = _scratch(scratch, "d.q", vq.shape, dy.dtype), _scratch(scratch, "d.k", vk.shape, dy.dtype)
        nn.grouped_attention_backward(dy, c_a, out=(dq, dk, vv))
        cos, sin = rope[0][:T], rope[1][:T]
        nn.rotary_backward(dq, cos, sin, out=vq)
        nn.rotary_backward(dk, cos, sin, out=vk)
    _qk_norm_backward(dqkv, c_qk, g, config)
    dh, _, _ = nn.linear_backward(dqkv, c_qkv, w_qkv, g.get("attn.c_attn.b"),
                                  dx_out=None if scratch is None else scratch("d.h", (B, T, C)))
    return dh


def _qk_norm_backward(dqkv, caches, g, config) -> None:
    """Gradient through :func:`_qk_norm_forward`, in place on the q and k columns of dqkv."""
    if config.qk_norm is None:
        return
    B, T = dqkv.shape[:2]
    hd = config.head_dim
    nq, nk = config.n_head * hd, config.kv_heads * hd
    for name, lo, width, cache in (("q_norm", 0, nq, caches[0]), ("k_norm", nq, nk, caches[1])):
        part = dqkv[..., lo:lo + width]
        if config.qk_norm == "head":
            part = part.reshape(B, T, width // hd, hd)
        _, g[f"attn.{name}.g"][...] = nn.rms_norm_backward(part, cache, out=part)


def _mlp_backward(dm, cache, g, config, scratch=None):
    c_fc, c_act, c_proj = cache
    B, T, C = dm.shape
    w_up, w_down = g["mlp.c_fc.w"], g["mlp.c_proj.w"]
    dact, _, _ = nn.linear_backward(dm, c_proj, w_down, g.get("mlp.c_proj.b"),
                                    dx_out=None if scratch is None else scratch("d.act", (B, T, w_down.shape[0])))
    if config.mlp == "gelu_tanh":
        du = nn.gelu_backward(dact, c_act, out=None if scratch is None else dact)
    elif config.mlp == "gelu":
        du = nn.gelu_erf_backward(dact, c_act)
    elif config.mlp == "geglu_tanh":
        du = nn.geglu_backward(dact, c_act, out=None if scratch is None else scratch("d.u", (B, T, w_up.shape[1])))
    else:
        du = nn.swiglu_backward(dact, c_act, out=None if scratch is None else scratch("d.u", (B, T, w_up.shape[1])))
    dh, _, _ = nn.linear_backward(du, c_fc, w_up, g.get("mlp.c_fc.b"),
                                  dx_out=None if scratch is None else scratch("d.h", (B, T, C)))
    return dh


# ----------------------------------------------------------------------------- one-row decode step
class RowParams(NamedTuple):
    """One block's parameters as named fields (views of the model's arrays, never copies):
    what :func:`block_step` reads, looked up once per decoding branch instead of per token.
    Optional biases are None."""

    ln_1_g: np.ndarray
    ln_1_b: np.ndarray | None
    w_qkv: np.ndarray
    b_qkv: np.ndarray | None
    w_o: np.ndarray
    b_o: np.ndarray | None
    ln_2_g: np.ndarray
    ln_2_b: np.ndarray | None
    w_up: np.ndarray
    b_up: np.ndarray | None
    w_down: np.ndarray
    b_down: np.ndarray | None
    rope: tuple | None = None
    window: int | None = None
    p: dict | None = None  # the dict itself: q/k norms and post-norms run the batched helpers on it

    @classmethod
    def of(cls, p: dict, rope=None, window=None) -> "RowParams":
        """The fields of a per-block parameter dict (keys of :func:`~seqprob.gpt.params.block_shapes`),
        with this layer's rotary tables ``rope`` (None: no rotary positions) and sliding ``window``."""
        return cls(ln_1_g=p.get("ln_1.g"), ln_1_b=p.get("ln_1.b"),
                   w_qkv=p["attn.c_attn.w"], b_qkv=p.get("attn.c_attn.b"),
                   w_o=p["attn.c_proj.w"], b_o=p.get("attn.c_proj.b"),
                   ln_2_g=p.get("ln_2.g"), ln_2_b=p.get("ln_2.b"),
                   w_up=p["mlp.c_fc.w"], b_up=p.get("mlp.c_fc.b"),
                   w_down=p["mlp.c_proj.w"], b_down=p.get("mlp.c_proj.b"), rope=rope, window=window, p=p)


class RowWorkspace:
    """Buffers and options of :func:`block_step` for one config: one residual row at a time.

    Parameters
    ----------
    config : GPTConfig
    dtype : numpy dtype
        The model's float type.

    Notes
    -----
    Each layer's rotary tables and window come with its :class:`RowParams`.
    ``q``, ``k``, ``v`` are views into ``qkv`` (the fused projection); ``qk`` is its
    ``[q | k]`` part as ``(H + Hkv, hd)`` rows, rotated into ``qk_rot`` with rotary positions;
    ``x`` is the caller's residual row, ``s`` the scores over up to ``block_size`` slots (flat:
    the scores over n slots are its first ``H n`` entries as one contiguous (Hkv, G, n) array,
    on which numpy's elementwise loops run several times faster than on a strided view).
    """

    __slots__ = ("x", "h", "tmp", "ones", "qkv", "q", "k", "v", "qk", "qk_rot", "q_rot", "k_rot",
                 "s", "s_max", "e", "y", "y3", "a", "u", "t", "m", "rms", "eps", "mlp", "parallel",
                 "scale", "softcap", "config", "qk_norm", "post_norms")

    def __init__(self, config, dtype):
        C, H, Hkv, hd, F = (config.n_embd, config.n_head, config.kv_heads, config.head_dim,
                            config.mlp_width)
        nq, nk = H * hd, Hkv * hd
        self.x, self.h, self.tmp, self.a, self.m = (np.empty(C, dtype) for _ in range(5))
        self.y = np.empty(nq, dtype)  # the heads' values, concatenated
        self.qkv = np.empty(nq + 2 * nk, dtype)  # [q | k | v]
        self.q = self.qkv[:nq].reshape(Hkv, H // Hkv, hd)  # query heads grouped by kv head
        self.k = self.qkv[nq:nq + nk].reshape(Hkv, hd)
        self.v = self.qkv[nq + nk:].reshape(Hkv, hd)
        self.qk = self.qkv[:nq + nk].reshape(H + Hkv, hd)
        self.qk_rot = np.empty((H + Hkv, hd), dtype)
        self.q_rot = self.qk_rot[:H].reshape(Hkv, H // Hkv, hd)
        self.k_rot = self.qk_rot[H:]  # (Hkv, hd)
        self.ones = np.ones(C, dtype)  # the mean of a row as one dot product
        self.s = np.empty(H * config.block_size, dtype)  # scores over the cache, (Hkv, G, n) at the front
        self.s_max = np.empty((Hkv, H // Hkv, 1), dtype)  # per-head max, then per-head sum
        self.e = np.empty(config.vocab_size, dtype)  # exponentials of the log-softmax over V
        self.y3 = self.y.reshape(Hkv, H // Hkv, hd)
        self.u = np.empty(2 * F if config.mlp in ("swiglu", "geglu_tanh") else F, dtype)
        self.t = np.empty(F, dtype)
        self.rms, self.eps = config.norm == "rmsnorm", config.layer_norm_epsilon
        self.mlp, self.parallel = config.mlp, config.parallel_residual
        self.scale, self.softcap, self.config = config.scale, config.attn_softcap, config
        self.qk_norm, self.post_norms = config.qk_norm is not None, config.block_norms != "pre"


def block_step(x, L: RowParams, K, V, pos: int, ws: RowWorkspace):
    """One block on the residual row x (C,) of position ``pos``, updated in place.

    The same block as :func:`block_forward` with ``kv`` for a single position (B = T = 1),
    written for the fewest numpy calls: the key and value go to slot ``pos`` of ``K``, ``V``
    (this layer's cache, each (Hkv, block_size, hd)) and the query attends over slots
    ``0 .. pos``.

    Notes
    -----
    x += attn(norm_1(x)); x += mlp(norm_2(x)) (parallel residual: both read the same x), the
    attention of the one query being two batched GEMVs over the cache,
    softmax(q K[:pos+1]ᵀ / sqrt(hd)) V[:pos+1] per head.

    Examples
    --------
    >>> import numpy as np
    >>> from seqprob.gpt import GPT, GPTConfig
    >>> m = GPT(GPTConfig.preset("tiny", dtype="float64"), seed=0)
    >>> K = np.zeros((m.config.kv_heads, m.config.block_size, m.config.head_dim)); V = K.copy()
    >>> ws = RowWorkspace(m.config, m.dtype)
    >>> x = m.params["wte"][3] + m.params["wpe"][0]  # (C,)
    >>> row = block_step(x.copy(), RowParams.of(m._block_params[0]), K, V, 0, ws)
    >>> full, _ = block_forward(x[None, None].copy(), m._block_params[0], m.config)
    >>> bool(np.allclose(row, full[0, 0], atol=1e-12))
    True
    """
    h = x if L.ln_1_g is None else norm_row(x, L.ln_1_g, L.ln_1_b, ws)
    a = _post_norm_row(_attention_row(h, L, K, V, pos, ws), L, "ln_attn", ws)
    if ws.parallel:  # the MLP reads x before the attention is added
        m = _mlp_row(x if L.ln_2_g is None else norm_row(x, L.ln_2_g, L.ln_2_b, ws), L, ws)
        x += a
    else:
        x += a
        m = _mlp_row(x if L.ln_2_g is None else norm_row(x, L.ln_2_g, L.ln_2_b, ws), L, ws)
    x += _post_norm_row(m, L, "ln_mlp", ws)
    return x


def norm_row(x, g, b, ws: RowWorkspace):
    """LayerNorm or RMSNorm (as configured) of one row x (C,) into ``ws.h``."""
    if ws.rms:
        return nn.rms_norm_row(x, g, ws.eps, out=ws.h, tmp=ws.tmp)
    return nn.layer_norm_row(x, g, b, ws.eps, out=ws.h, tmp=ws.tmp, ones=ws.ones)


def _post_norm_row(a, L, name, ws):
    """:func:`_post_norm` of one sublayer output row a (C,), in place (Gemma, OLMo 2)."""
    if not ws.post_norms:
        return a
    return _post_norm(a[None, None], L.p, name, ws.config, True, None)[0][0, 0]


def _attention_row(h, L, K, V, pos, ws):
    qkv = np.dot(h, L.w_qkv, out=ws.qkv)  # (3C,) for multi-head attention
    if L.b_qkv is not None:
        qkv += L.b_qkv
    if ws.qk_norm:
        _qk_norm_forward(qkv[None, None], L.p, ws.config, inference=True)  # (1, 1, Q + 2K) view
    q, k = ws.q, ws.k
    if L.rope is not None:
        cos, sin = L.rope
        q, k = ws.q_rot, ws.k_rot
        nn.rotary_forward(ws.qk, cos[pos], sin[pos], out=ws.qk_rot)  # (H + Hkv, hd)
    if L.window is not None and K.shape[1] == L.window:  # a ring: every filled slot is seen
        K[:, pos % L.window], V[:, pos % L.window] = k, ws.v
        lo, hi = 0, min(pos + 1, L.window)
    else:
        K[:, pos], V[:, pos] = k, ws.v
        lo, hi = (0 if L.window is None else max(0, pos + 1 - L.window)), pos + 1  # the slots it sees
    n = hi - lo
    Hkv, G = ws.s_max.shape[:2]
    s = ws.s[:Hkv * G * n].reshape(Hkv, G, n)  # contiguous
    np.matmul(q, K[:, lo:hi].transpose(0, 2, 1), out=s)
    s *= ws.scale
    if ws.softcap is not None:
        nn.softcap_forward(s, ws.softcap, out=s)
    m = np.maximum.reduce(s, axis=2, keepdims=True, out=ws.s_max)  # (Hkv, G, 1)
    s -= m
    np.exp(s, out=s)
    s /= np.add.reduce(s, axis=2, keepdims=True, out=m)
    np.matmul(s, V[:, lo:hi], out=ws.y3)  # (Hkv, G, hd)
    a = np.dot(ws.y, L.w_o, out=ws.a)  # (C,)
    if L.b_o is not None:
        a += L.b_o
    return a


def _mlp_row(h, L, ws):
    u = np.dot(h, L.w_up, out=ws.u)  # (F,) or (2F,) [gate | up]
    if L.b_up is not None:
        u += L.b_up
    if ws.mlp == "gelu_tanh":
        act = nn.gelu_row_inplace(u, ws.t)
    elif ws.mlp == "gelu":
        act, _ = nn.gelu_erf_forward(u, out=u)
    elif ws.mlp == "geglu_tanh":
        act, _ = nn.geglu_forward(u, out=ws.t)  # (F,)
    else:
        act, _ = nn.swiglu_forward(u, out=ws.t)  # (F,)
    m = np.dot(act, L.w_down, out=ws.m)  # (C,)
    if L.b_down is not None:
        m += L.b_down
    return m
