"""The GPT configuration: sizes, numerics and parameter accounting (nothing allocated)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..errors import InputError

__all__ = ["GPTConfig", "PRESETS"]

_DTYPES = ("float32", "float64")

#: Published model shapes; ``GPTConfig.preset(name)`` builds a config from one of these.
PRESETS = {
    "gpt2-small": dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768),
    "gpt2-medium": dict(vocab_size=50257, block_size=1024, n_layer=24, n_head=16, n_embd=1024),
    "gpt2-large": dict(vocab_size=50257, block_size=1024, n_layer=36, n_head=20, n_embd=1280),
    "gpt2-xl": dict(vocab_size=50257, block_size=1024, n_layer=48, n_head=25, n_embd=1600),
    "gpt3": dict(vocab_size=50257, block_size=2048, n_layer=96, n_head=96, n_embd=12288),
    "small": dict(vocab_size=4096, block_size=256, n_layer=4, n_head=4, n_embd=256),
    "tiny": dict(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=16),
    "llama-small": dict(vocab_size=4096, block_size=256, n_layer=4, n_head=4, n_embd=256,
                        n_kv_head=2, norm="rmsnorm", mlp="swiglu", mlp_hidden=688,
                        positions="rotary", bias=False, tie_weights=False,
                        layer_norm_epsilon=1e-6),
}


#: Upper limits of the integer sizes (a config past them is a typo or an attack, not a model).
LIMITS = {"vocab_size": 2 ** 24, "block_size": 2 ** 20, "n_layer": 1024, "n_head": 4096,
          "n_embd": 2 ** 17, "n_kv_head": 4096, "mlp_hidden": 2 ** 19, "head_size": 2 ** 14,
          "sliding_window": 2 ** 20}
_OPTIONAL_SIZES = ("n_kv_head", "mlp_hidden", "head_size", "sliding_window")
NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu_tanh", "gelu", "swiglu", "geglu_tanh")
QK_NORMS = ("head", "all")
BLOCK_NORMS = ("pre", "sandwich", "post")
LAYER_TYPES = ("full", "sliding")
POSITIONS = ("learned", "rotary")
ROPE_SCALINGS = {"linear": ("factor",),
                 "llama3": ("factor", "low_freq_factor", "high_freq_factor",
                            "original_max_position_embeddings")}


@dataclass(frozen=True)
class GPTConfig:
    """Shape, architecture and numerics of a decoder-only transformer (GPT-2 by default).

    Parameters
    ----------
    vocab_size : int
        V, the number of token ids (<= 2^24).
    block_size : int
        Context window: the most positions one forward pass sees.
    n_layer, n_head, n_embd : int
        Blocks, attention (query) heads per block and model width d (``n_embd % n_head == 0``).
    dropout : float
        Residual dropout rate used by ``loss_and_grads`` when a ``rng`` is passed (0 = none).
    bias : bool
        Biases of the attention output, of LayerNorm, and the default of ``qkv_bias`` and
        ``mlp_bias`` (GPT-2, GPT-NeoX: True; Llama, Qwen2: False).
    tie_weights : bool
        Unembedding W_U = W_E^T (GPT-2: True).
    dtype : {"float32", "float64"}
        Parameter and activation dtype; float64 is for verification (2-2.4x slower).
    layer_norm_epsilon : float
        Normalization epsilon, inside the square root (GPT-2: 1e-5); also ``norm_eps``.
    norm : {"layernorm", "rmsnorm"}
        LayerNorm (GPT-2, NeoX) or RMSNorm (Llama, Qwen2; never has a bias).
    mlp : {"gelu_tanh", "gelu", "swiglu"}
        MLP: up -> tanh GELU (GPT-2) / exact erf GELU (NeoX) -> down, or SwiGLU
        down(silu(gate x) * up x) (Llama, Qwen2).
    mlp_hidden : int, optional
        MLP width F (HF ``n_inner`` / ``intermediate_size``); None = 4 n_embd.
    positions : {"learned", "rotary"}
        A learned position table added to the embeddings (GPT-2), or rotary embeddings of
        queries and keys (RoPE, HF's rotate-half convention).
    rope_theta : float
        RoPE base θ: frequency i is θ^(-2i/r), r the rotary dims.
    rotary_fraction : float
        Fraction of each head's dims that rotate (GPT-NeoX ``rotary_pct``; 1.0 = all);
        ``head_dim * rotary_fraction`` must be an even integer.
    rope_scaling : dict, optional
        HF ``rope_scaling``: ``{"rope_type": "linear", "factor": f}`` or ``{"rope_type":
        "llama3", "factor", "low_freq_factor", "high_freq_factor",
        "original_max_position_embeddings"}``; stored as sorted ``(key, value)`` pairs.
    n_kv_head : int, optional
        Key/value heads (grouped-query attention; 1 = multi-query); None = n_head.
        ``n_head`` must be a multiple of it.
    qkv_bias, mlp_bias : bool, optional
        Biases of the Q/K/V projections (Qwen2: True) and of the MLP; None = ``bias``.
    parallel_residual : bool
        x + attn(ln_1(x)) + mlp(ln_2(x)) (GPT-NeoX) instead of two sequential residual adds.
    head_size : int, optional
        Width of one attention head when it is not ``n_embd / n_head`` (Qwen3, Gemma: HF
        ``head_dim``); the queries then have ``n_head * head_size`` dims and W_O maps them
        back to ``n_embd``. None = ``n_embd / n_head``.
    qk_norm : {None, "head", "all"}
        RMSNorm of the queries and keys before RoPE: over each head's dims (Qwen3, Gemma 3)
        or over all heads' dims at once (OLMo 2).
    block_norms : {"pre", "sandwich", "post"}
        Where the block's norms sit: before attention and MLP (GPT-2, Llama), before and
        after them (Gemma 2/3: x += post(attn(pre(x)))), or only after them (OLMo 2:
        x += post(attn(x))).
    embed_scale : float
        The embeddings are multiplied by this (Gemma: sqrt(n_embd), rounded to ``dtype``).
    attn_scale : float, optional
        Attention score scale; None = 1/sqrt(head_dim) (Gemma: query_pre_attn_scalar^-1/2).
    attn_softcap, final_softcap : float, optional
        Soft-capping c tanh(s / c) of the attention scores (before the mask) and of the
        final logits (Gemma 2).
    sliding_window : int, optional
        W: a query at position i of a sliding layer sees the keys j with i - W < j <= i
        (Mistral, Qwen2, Gemma); None = every earlier key.
    layer_types : tuple of {"full", "sliding"}, optional
        Per layer, whether it slides; None = every layer slides when ``sliding_window`` is
        set. Stored as a tuple of ``n_layer`` names.
    rope_local_theta : float, optional
        RoPE base of the sliding layers, which then rotate without ``rope_scaling`` (Gemma 3);
        None = the same RoPE in every layer.
    nope_layers : tuple of int, optional
        Layers that use no positions at all (SmolLM3's ``no_rope_layers`` set to 0).

    Notes
    -----
    Parameters per block (GPT-2 preset): 12 d^2 (Q, K, V, O: 4 d^2; MLP: 8 d^2) plus 13 d
    biases and norms. With n_kv_head = k, head size e (d / n_head unless ``head_size``):
    Q, O: d H e each; K, V: d k e each; MLP: 2 d F (GELU) or 3 d F (SwiGLU, GeGLU); q/k
    norms 2 e (per head) or (H + k) e (over all heads); 2 or 4 norms of d per block.

    Examples
    --------
    >>> cfg = GPTConfig(vocab_size=100, block_size=16, n_layer=2, n_head=2, n_embd=8)
    >>> cfg.head_dim
    4
    >>> llama = GPTConfig.preset("llama-small")
    >>> llama.norm, llama.mlp, llama.positions, llama.kv_heads
    ('rmsnorm', 'swiglu', 'rotary', 2)
    """

    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True
    dtype: str = "float32"
    layer_norm_epsilon: float = 1e-5
    norm: str = "layernorm"
    mlp: str = "gelu_tanh"
    mlp_hidden: int | None = None
    positions: str = "learned"
    rope_theta: float = 10000.0
    rotary_fraction: float = 1.0
    rope_scaling: tuple | None = None
    n_kv_head: int | None = None
    qkv_bias: bool | None = None
    mlp_bias: bool | None = None
    parallel_residual: bool = False
    head_size: int | None = None
    qk_norm: str | None = None
    block_norms: str = "pre"
    embed_scale: float = 1.0
    attn_scale: float | None = None
    attn_softcap: float | None = None
    final_softcap: float | None = None
    sliding_window: int | None = None
    layer_types: tuple | None = None
    rope_local_theta: float | None = None
    nope_layers: tuple | None = None

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", *_OPTIONAL_SIZES):
            _check_size(self, name)
        if self.n_embd % self.n_head and self.head_size is None:
            raise InputError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}",
                             value=self.n_embd, limit=self.n_head)
        if self.n_head % self.kv_heads:
            raise InputError(f"n_head={self.n_head} is not divisible by n_kv_head={self.n_kv_head} "
                             "(grouped-query attention shares each key/value head among a whole "
                             "group of query heads)", value=self.n_kv_head, limit=self.n_head)
        _check_choice("dtype", self.dtype, _DTYPES)
        _check_choice("norm", self.norm, NORMS)
        _check_choice("mlp", self.mlp, MLPS)
        _check_choice("positions", self.positions, POSITIONS)
        _check_choice("block_norms", self.block_norms, BLOCK_NORMS)
        if self.qk_norm is not None:
            _check_choice("qk_norm", self.qk_norm, QK_NORMS)
        self._check_modern()
        for name in ("bias", "tie_weights", "parallel_residual", "qkv_bias", "mlp_bias"):
            value = getattr(self, name)
            if not (isinstance(value, bool) or value is None and name in ("qkv_bias", "mlp_bias")):
                raise InputError(f"GPTConfig.{name} must be True or False, got {value!r}", value=value)
        if not (_is_number(self.dropout) and 0.0 <= self.dropout < 1.0):
            raise InputError(f"dropout must be in [0, 1), got {self.dropout!r}", value=self.dropout)
        for name in ("layer_norm_epsilon", "rope_theta"):
            value = getattr(self, name)
            if not (_is_number(value) and math.isfinite(value) and value > 0):
                raise InputError(f"{name} must be a finite number > 0, got {value!r}", value=value)
        self._check_rotary()
        self._check_memory()

    def _check_modern(self) -> None:
        """The options of the newer families (Gemma, OLMo 2, Qwen3, SmolLM3, Mistral)."""
        if not (_is_number(self.embed_scale) and math.isfinite(self.embed_scale) and self.embed_scale > 0):
            raise InputError(f"embed_scale must be a finite number > 0, got {self.embed_scale!r}",
                             value=self.embed_scale)
        for name in ("attn_scale", "attn_softcap", "final_softcap", "rope_local_theta"):
            value = getattr(self, name)
            if value is not None and not (_is_number(value) and math.isfinite(value) and value > 0):
                raise InputError(f"{name} must be None or a finite number > 0, got {value!r}", value=value)
        types = self.layer_types
        if types is not None:
            types = tuple(types) if isinstance(types, (list, tuple)) else types
            if not isinstance(types, tuple) or len(types) != self.n_layer or \
                    any(t not in LAYER_TYPES for t in types):
                raise InputError(f"layer_types must list one of {LAYER_TYPES} for each of the "
                                 f"n_layer={self.n_layer} layers, got {self.layer_types!r:.80}",
                                 value=self.layer_types, limit=self.n_layer)
            if "sliding" in types and self.sliding_window is None:
                raise InputError("layer_types has sliding layers but sliding_window is None",
                                 value=types)
            object.__setattr__(self, "layer_types", types)
        nope = self.nope_layers
        if nope is not None:
            ok = isinstance(nope, (list, tuple)) and all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.n_layer for i in nope)
            if not ok:
                raise InputError(f"nope_layers must list layer indices in [0, {self.n_layer}), got "
                                 f"{nope!r:.80}", value=nope, limit=self.n_layer)
            object.__setattr__(self, "nope_layers", tuple(sorted(set(nope))))

    def layer_slides(self, layer: int) -> bool:
        """Whether ``layer`` attends through the sliding window."""
        if self.sliding_window is None:
            return False
        return self.layer_types is None or self.layer_types[layer] == "sliding"

    def layer_window(self, layer: int) -> int | None:
        """The sliding window W of ``layer``, None when it sees every earlier key."""
        return self.sliding_window if self.layer_slides(layer) else None

    @property
    def scale(self) -> float:
        """The attention score scale: ``attn_scale``, else 1/sqrt(head_dim)."""
        return 1.0 / math.sqrt(self.head_dim) if self.attn_scale is None else float(self.attn_scale)

    def _check_rotary(self) -> None:
        frac = self.rotary_fraction
        if not (_is_number(frac) and 0.0 < frac <= 1.0):
            raise InputError(f"rotary_fraction must be in (0, 1], got {frac!r}", value=frac)
        dims = self.head_dim * frac
        if self.positions == "rotary" and (dims != int(dims) or int(dims) % 2):
            raise InputError(f"rotary dims head_dim * rotary_fraction = {self.head_dim} * {frac} = "
                             f"{dims:g} must be an even integer (pairs of dims rotate together)",
                             value=dims)
        object.__setattr__(self, "rope_scaling", _check_rope_scaling(self.rope_scaling))

    def _check_memory(self) -> None:
        itemsize = 8 if self.dtype == "float64" else 4
        gib = self.n_params() * itemsize / 2 ** 30
        if gib > 2 ** 12:
            raise InputError(f"this config has {self.n_params():,} parameters: {gib:,.0f} GiB in "
                             f"{self.dtype}, over the limit of 4096 GiB", value=self.n_params())

    @property
    def norm_eps(self) -> float:
        """The normalization epsilon (``layer_norm_epsilon``; HF ``rms_norm_eps``)."""
        return self.layer_norm_epsilon

    @property
    def kv_heads(self) -> int:
        """Key/value heads: ``n_kv_head``, or ``n_head`` when unset."""
        return self.n_head if self.n_kv_head is None else self.n_kv_head

    @property
    def mlp_width(self) -> int:
        """MLP hidden width F: ``mlp_hidden``, or 4 n_embd when unset."""
        return 4 * self.n_embd if self.mlp_hidden is None else self.mlp_hidden

    @property
    def has_qkv_bias(self) -> bool:
        """Whether the Q/K/V projections have biases (``qkv_bias``, default ``bias``)."""
        return self.bias if self.qkv_bias is None else self.qkv_bias

    @property
    def has_mlp_bias(self) -> bool:
        """Whether the MLP projections have biases (``mlp_bias``, default ``bias``)."""
        return self.bias if self.mlp_bias is None else self.mlp_bias

    @property
    def has_norm_bias(self) -> bool:
        """Whether the norms have a bias (LayerNorm with ``bias``; RMSNorm never)."""
        return self.bias and self.norm == "layernorm"

    @property
    def rotary_dims(self) -> int:
        """Dims of each head that rotate (0 with learned positions)."""
        return int(self.head_dim * self.rotary_fraction) if self.positions == "rotary" else 0

    @property
    def head_dim(self) -> int:
        """Width of one attention head: ``head_size``, else n_embd / n_head."""
        return self.n_embd // self.n_head if self.head_size is None else self.head_size

    def to_dict(self) -> dict:
        """Plain JSON-able dict of the fields (``rope_scaling`` as a dict)."""
        data = dataclasses.asdict(self)
        data["rope_scaling"] = None if self.rope_scaling is None else dict(self.rope_scaling)
        for name in ("layer_types", "nope_layers"):
            data[name] = None if data[name] is None else list(data[name])
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "GPTConfig":
        """Inverse of :meth:`to_dict`; unknown keys raise :class:`InputError`."""
        if not isinstance(data, dict):
            raise InputError(f"a GPTConfig needs a dict of fields, got {type(data).__name__}",
                             value=type(data).__name__)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise InputError(f"unknown GPTConfig field(s) {unknown}", value=unknown)
        try:
            return cls(**data)
        except TypeError as exc:
            raise InputError(f"incomplete GPTConfig data: {exc}") from None

    @property
    def rope_scaling_dict(self) -> dict | None:
        """``rope_scaling`` as a dict (None without scaling)."""
        return None if self.rope_scaling is None else dict(self.rope_scaling)

    def replace(self, **changes) -> "GPTConfig":
        """A copy with some fields changed (validated again)."""
        _check_fields(type(self), changes, "replace")
        return dataclasses.replace(self, **changes)

    @classmethod
    def preset(cls, name: str, **overrides) -> "GPTConfig":
        """A published shape: ``"gpt2-small"``, ``"gpt2-medium"``, ``"gpt2-large"``, ``"gpt2-xl"``,
        ``"gpt3"`` (175B), or the benchmark shapes ``"small"`` and ``"tiny"``.

        Examples
        --------
        >>> GPTConfig.preset("gpt3").n_embd
        12288
        """
        if not isinstance(name, str) or name not in PRESETS:
            raise InputError(f"unknown preset {name!r}: use one of {sorted(PRESETS)}", value=name)
        _check_fields(cls, overrides, "preset")
        return cls(**{**PRESETS[name], **overrides})

    def param_counts(self):
        """Parameters per matrix category, computed from the shapes (nothing is allocated).

        Returns
        -------
        pandas.DataFrame
            Columns ``category``, ``shape`` (one matrix, as text), ``matrices`` (how many),
            ``params``; biases are counted with their matrix; the last row is ``total``.
            A tied W_U adds 0 parameters (it is W_E).

        Notes
        -----
        total = V d + T_max d + L (12 d^2 + 13 d) + 2 d with biases and tied weights.

        Examples
        --------
        >>> df = GPTConfig.preset("gpt3").param_counts()
        >>> int(df.set_index("category").loc["embedding W_E", "params"])
        617558016
        """
        import pandas as pd

        rows = [(cat, shape, n, n * size) for cat, shape, n, size in self._param_table()]
        df = pd.DataFrame(rows, columns=["category", "shape", "matrices", "params"])
        total = pd.DataFrame([("total", "", int(df["matrices"].sum()), int(df["params"].sum()))],
                             columns=df.columns)
        return pd.concat([df, total], ignore_index=True)

    def n_params(self) -> int:
        """Total number of parameters (a tied W_U counted once)."""
        return sum(n * size for _, _, n, size in self._param_table())

    def _param_table(self) -> list[tuple]:
        d, L, V, F = self.n_embd, self.n_layer, self.vocab_size, self.mlp_width
        dq, dkv = self.n_head * self.head_dim, self.kv_heads * self.head_dim
        bq, bm, bo = int(self.has_qkv_bias), int(self.has_mlp_bias), int(self.bias)
        norm = (1 + int(self.has_norm_bias)) * d
        n_norms = {"pre": 2, "sandwich": 4, "post": 2}[self.block_norms] * L + 1
        rows = [("embedding W_E", f"{V} x {d}", 1, V * d)]
        if self.positions == "learned":
            rows.append(("positions W_pos", f"{self.block_size} x {d}", 1, self.block_size * d))
        rows += [
            ("query W_Q", f"{d} x {dq}", L, d * dq + bq * dq),
            ("key W_K", f"{d} x {dkv}", L, d * dkv + bq * dkv),
            ("value W_V", f"{d} x {dkv}", L, d * dkv + bq * dkv),
            ("attention output W_O", f"{dq} x {d}", L, dq * d + bo * d),
        ]
        if self.qk_norm is not None:
            qn, kn = (self.head_dim, self.head_dim) if self.qk_norm == "head" else (dq, dkv)
            rows.append(("query/key norms", f"{qn} + {kn}", L, qn + kn))
        if self.mlp in ("swiglu", "geglu_tanh"):
            rows.append(("MLP gate W_gate", f"{d} x {F}", L, d * F + bm * F))
        rows += [
            ("MLP up W_in", f"{d} x {F}", L, d * F + bm * F),
            ("MLP down W_out", f"{F} x {d}", L, F * d + bm * d),
            ("norms", f"{1 + int(self.has_norm_bias)} x {d}", n_norms, norm),
            ("unembedding W_U", f"{d} x {V}" + (" (tied to W_E)" if self.tie_weights else ""),
             0 if self.tie_weights else 1, d * V),
        ]
        return rows


def _check_fields(cls, changes: dict, where: str) -> None:
    """InputError naming any key that is not a field of ``cls`` (a GPTConfig or a subclass),
    not Python's TypeError."""
    fields = [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        raise InputError(f"{cls.__name__}.{where}: no such field {unknown[0]!r}; the fields are {fields}",
                         value=unknown[0])


def _check_size(config, name: str) -> None:
    """Validate an integer size field in [1, LIMITS[name]] (None allowed for optional ones)."""
    value = getattr(config, name)
    if value is None and name in _OPTIONAL_SIZES:
        return
    if isinstance(value, bool) or not isinstance(value, int) and not _is_int_like(value):
        raise InputError(f"GPTConfig.{name} must be an integer, got {value!r}", value=value)
    value = int(value)
    object.__setattr__(config, name, value)
    if value < 1:
        raise InputError(f"GPTConfig.{name} must be >= 1, got {value!r}", value=value, limit=1)
    limit = LIMITS[name]
    if value > limit:
        width = config.n_embd if name == "vocab_size" and isinstance(config.n_embd, int) else 1
        size = f" (the embedding alone would take {value * width * 4 / 2 ** 30:,.1f} GiB in float32)" \
            if name == "vocab_size" else ""
        raise InputError(f"GPTConfig.{name}={value} exceeds the limit {limit}{size}",
                         value=value, limit=limit)


def _check_choice(name: str, value, choices) -> None:
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"unknown {name} {value!r}: use one of {tuple(choices)}", value=value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_rope_scaling(scaling):
    """Normalize HF ``rope_scaling`` to sorted (key, value) pairs; None / "default" -> None."""
    if scaling is None:
        return None
    if isinstance(scaling, (tuple, list)):
        try:
            scaling = dict(scaling)
        except (TypeError, ValueError):
            raise InputError(f"rope_scaling must be a dict, got {scaling!r}", value=scaling) from None
    if not isinstance(scaling, dict):
        raise InputError(f"rope_scaling must be a dict or None, got {scaling!r}", value=scaling)
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "default":
        return None
    if kind not in ROPE_SCALINGS:
        raise InputError(f"unsupported rope_scaling type {kind!r}: seqprob implements "
                         f"{sorted(ROPE_SCALINGS)}", value=kind)
    out = {"rope_type": kind}
    for key in ROPE_SCALINGS[kind]:
        value = scaling.get(key)
        if not (_is_number(value) and math.isfinite(value) and value > 0):
            raise InputError(f"rope_scaling {kind!r} needs a number {key} > 0, got {value!r}",
                             value=value)
        out[key] = float(value)
    if kind == "llama3" and out["high_freq_factor"] <= out["low_freq_factor"]:
        raise InputError("rope_scaling llama3 needs high_freq_factor > low_freq_factor, got "
                         f"{out['high_freq_factor']} <= {out['low_freq_factor']}",
                         value=out["high_freq_factor"])
    return tuple(sorted(out.items()))


def _is_int_like(value) -> bool:
    try:
        return int(value) == value and not isinstance(value, (float, str))
    except (TypeError, ValueError):
        return False
