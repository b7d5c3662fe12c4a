"""The PyTorch reference GPT of the benchmarks: GPT-2 blocks written by hand (nanoGPT style)
on seqprob's parameter names and Conv1D layout ``[in, out]``, float32.

Imported only by the torch-side benchmark children (torch is never a seqprob dependency).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

EPS = 1e-5


def load_params(path, requires_grad: bool = False) -> dict:
    """The weights file written by the parent (``np.savez``) as row-major torch tensors.

    Row-major as torch's own modules keep them (``nn.Embedding``, ``nn.Linear``): seqprob
    stores W_U column-major, ``np.savez`` keeps that order and ``torch.tensor`` its strides,
    which would hand torch seqprob's faster decoding layout instead of its own."""
    with np.load(path) as z:
        return {k: torch.tensor(np.ascontiguousarray(z[k]), requires_grad=requires_grad)
                for k in z.files}


def _block(P, layer, x, cfg, sdpa: bool, mask):
    b, t, C = x.shape
    H = cfg["n_head"]
    hd = C // H

    def p(k):
        return P[f"h.{layer}.{k}"]

    h = F.layer_norm(x, (C,), p("ln_1.g"), p("ln_1.b"), EPS)
    qkv = torch.addmm(p("attn.c_attn.b"), h.view(-1, C), p("attn.c_attn.w")).view(b, t, 3, H, hd)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)  # (b, H, t, hd) each
    if sdpa:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(~mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = att @ v
    y = y.transpose(1, 2).reshape(-1, C)
    x = x + torch.addmm(p("attn.c_proj.b"), y, p("attn.c_proj.w")).view(b, t, C)
    h = F.layer_norm(x, (C,), p("ln_2.g"), p("ln_2.b"), EPS)
    u = F.gelu(torch.addmm(p("mlp.c_fc.b"), h.view(-1, C), p("mlp.c_fc.w")), approximate="tanh")
    return x + torch.addmm(p("mlp.c_proj.b"), u, p("mlp.c_proj.w")).view(b, t, C)


def logits(P, idx, cfg, sdpa: bool = False):
    """(b, t) ids -> (b*t, V) logits."""
    b, t = idx.shape
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    x = P["wte"][idx] + P["wpe"][:t]
    for layer in range(cfg["n_layer"]):
        x = _block(P, layer, x, cfg, sdpa, mask)
    x = F.layer_norm(x, (cfg["n_embd"],), P["ln_f.g"], P["ln_f.b"], EPS)
    return x.view(b * t, -1) @ P["wte"].T


def logprobs(P, idx, cfg, sdpa: bool = False):
    """(b, t) ids -> (b, t, V) log-probabilities (what seqprob's ``GPT.logprobs`` returns)."""
    b, t = idx.shape
    return torch.log_softmax(logits(P, idx, cfg, sdpa), dim=-1).view(b, t, -1)


def loss(P, batch, cfg):
    """Mean next-token cross-entropy of a (b, t+1) batch."""
    return F.cross_entropy(logits(P, batch[:, :-1], cfg), batch[:, 1:].reshape(-1))


def generate(P, prefix, new: int, cfg) -> list:
    """Greedy decoding, batch 1, with a preallocated hand-written KV cache; the new ids."""
    L, H, C = cfg["n_layer"], cfg["n_head"], cfg["n_embd"]
    hd = C // H
    K = torch.zeros(L, H, cfg["block_size"], hd)
    V = torch.zeros_like(K)
    out, tokens = [], list(prefix)
    for pos in range(len(prefix) + new - 1):
        x = (P["wte"][tokens[pos]] + P["wpe"][pos]).view(1, C)
        for layer in range(L):
            def p(k):
                return P[f"h.{layer}.{k}"]
            h = F.layer_norm(x, (C,), p("ln_1.g"), p("ln_1.b"), EPS)
            q, k, v = torch.addmm(p("attn.c_attn.b"), h, p("attn.c_attn.w")).view(3, H, 1, hd)
            K[layer, :, pos:pos + 1] = k
            V[layer, :, pos:pos + 1] = v
            att = (q @ K[layer, :, :pos + 1].transpose(-2, -1)) * (1.0 / math.sqrt(hd))  # (H, 1, P)
            y = (att.softmax(dim=-1) @ V[layer, :, :pos + 1]).view(1, C)
            x = x + torch.addmm(p("attn.c_proj.b"), y, p("attn.c_proj.w"))
            h = F.layer_norm(x, (C,), p("ln_2.g"), p("ln_2.b"), EPS)
            u = F.gelu(torch.addmm(p("mlp.c_fc.b"), h, p("mlp.c_fc.w")), approximate="tanh")
            x = x + torch.addmm(p("mlp.c_proj.b"), u, p("mlp.c_proj.w"))
        if pos >= len(prefix) - 1:
            h = F.layer_norm(x, (C,), P["ln_f.g"], P["ln_f.b"], EPS)
            nxt = int(torch.log_softmax(h @ P["wte"].T, dim=-1).argmax())
            out.append(nxt)
            tokens.append(nxt)
    return out
