"""Reference layers the library does not run, written from their definitions: multi-head
causal attention on a fused ``[q | k | v]`` array (GPT-2's layout) and the two-pass
cross-entropy. The tests check each against float64 central differences, then the library's
kernels (grouped-query attention, the fused cross-entropy) against them."""
import math

import numpy as np


def split_heads(qkv, n_head):
    """Views q, k, v (B, H, T, hd) into a fused (B, T, 3C) ``[q | k | v]`` array."""
    B, T, C3 = qkv.shape
    hd = C3 // (3 * n_head)
    q, k, v = qkv.reshape(B, T, 3, n_head, hd).transpose(2, 0, 3, 1, 4)
    return q, k, v


def causal_mask(T, dtype=np.float64):
    """(T, T) additive mask: 0 where key j <= query i, -inf above."""
    return np.triu(np.full((T, T), -np.inf, dtype=dtype), k=1)


def attention_forward(qkv, n_head):
    """Causal multi-head self-attention: (B, T, 3C) -> y (B, T, C), cache (qkv, P, n_head).

    P = softmax(q kᵀ / sqrt(hd) + mask) per head, y = P v, heads concatenated.
    """
    q, k, v = split_heads(qkv, n_head)
    B, H, T, hd = q.shape
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + causal_mask(T, qkv.dtype)  # (B, H, T, T)
    P = np.exp(s - s.max(axis=-1, keepdims=True))
    P /= P.sum(axis=-1, keepdims=True)
    y = (P @ v).transpose(0, 2, 1, 3).reshape(B, T, H * hd)
    return y, (qkv, P, n_head)


def attention_backward(dy, cache):
    """Gradient of :func:`attention_forward` with respect to the fused qkv: (B, T, 3C).

    dP = dy vᵀ, dv = Pᵀ dy, dS = P ∘ (dP - Σ_j dP∘P), dq = dS k / sqrt(hd), dk = dSᵀ q / sqrt(hd).
    """
    qkv, P, n_head = cache
    q, k, v = split_heads(qkv, n_head)
    B, H, T, hd = q.shape
    dyh = dy.reshape(B, T, H, hd).transpose(0, 2, 1, 3)  # (B, H, T, hd)
    dP = dyh @ v.transpose(0, 1, 3, 2)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) / math.sqrt(hd)
    dqkv = np.empty_like(qkv)
    dq, dk, dv = split_heads(dqkv, n_head)
    dq[...], dk[...], dv[...] = dS @ k, dS.transpose(0, 1, 3, 2) @ q, P.transpose(0, 1, 3, 2) @ dyh
    return dqkv


def cross_entropy_forward(logits, targets, mask=None):
    """Mean negative log-likelihood of ``targets`` (N,) under softmax(logits (N, V)), over the
    rows where ``mask`` is True; the cache is (log-probs, targets, row weights).

    loss = -(1/n) Σ_i log softmax(u_i)[y_i], n = number of counted rows.
    """
    m = logits.max(axis=-1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(axis=-1, keepdims=True))
    w = np.ones(len(targets)) if mask is None else mask.astype(float)
    w = w / max(w.sum(), 1.0)
    loss = -float((logp[np.arange(len(targets)), targets] * w).sum())
    return loss, (logp, targets, w)


def cross_entropy_backward(cache):
    """dloss/dlogits = w_i (softmax(u_i) - onehot(y_i))."""
    logp, targets, w = cache
    grad = np.exp(logp)
    grad[np.arange(len(targets)), targets] -= 1.0
    return grad * w[:, None]
