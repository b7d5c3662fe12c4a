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
}


@dataclass(frozen=True)
class GPTConfig:
    """Shape and numerics of a GPT-2-style decoder.

    Parameters
    ----------
    vocab_size : int
        V, the number of token ids.
    block_size : int
        Context window: the most positions one forward pass sees (learned position table size).
    n_layer, n_head, n_embd : int
        Blocks, attention heads per block and model width d (``n_embd % n_head == 0``).
    dropout : float
        Residual dropout rate used by ``loss_and_grads`` when a ``rng`` is passed (0 = none).
    bias : bool
        Biases in the linear layers and LayerNorms (GPT-2: True).
    tie_weights : bool
        Unembedding W_U = W_E^T (GPT-2: True).
    dtype : {"float32", "float64"}
        Parameter and activation dtype; float64 is for verification (2-2.4x slower).
    layer_norm_epsilon : float
        LayerNorm epsilon, inside the square root (GPT-2: 1e-5).

    Notes
    -----
    Parameters per block: 12 d^2 (Q, K, V, O: 4 d^2; MLP: 8 d^2) plus 13 d biases and norms.

    Examples
    --------
    >>> cfg = GPTConfig(vocab_size=100, block_size=16, n_layer=2, n_head=2, n_embd=8)
    >>> cfg.head_dim
    4
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

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) and not _is_int_like(value):
                raise InputError(f"GPTConfig.{name} must be an integer, got {value!r}", value=value)
            object.__setattr__(self, name, int(value))
            if int(value) < 1:
                raise InputError(f"GPTConfig.{name} must be >= 1, got {value!r}", value=value, limit=1)
        if self.n_embd % self.n_head:
            raise InputError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}",
                             value=self.n_embd, limit=self.n_head)
        if self.dtype not in _DTYPES:
            raise InputError(f"unknown dtype {self.dtype!r}: use one of {_DTYPES}", value=self.dtype)
        if not (isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0):
            raise InputError(f"dropout must be in [0, 1), got {self.dropout!r}", value=self.dropout)
        eps = self.layer_norm_epsilon
        if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
            raise InputError(f"layer_norm_epsilon must be a number > 0, got {eps!r}", value=eps)

    @property
    def head_dim(self) -> int:
        """Width of one attention head, n_embd / n_head."""
        return self.n_embd // self.n_head

    def to_dict(self) -> dict:
        """Plain JSON-able dict of the fields."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "GPTConfig":
        """Inverse of :meth:`to_dict`; unknown keys raise :class:`InputError`."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise InputError(f"unknown GPTConfig field(s) {unknown}", value=unknown)
        try:
            return cls(**data)
        except TypeError as exc:
            raise InputError(f"incomplete GPTConfig data: {exc}") from None

    def replace(self, **changes) -> "GPTConfig":
        """A copy with some fields changed (validated again)."""
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
        if name not in PRESETS:
            raise InputError(f"unknown preset {name!r}: use one of {sorted(PRESETS)}", value=name)
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
        d, L, V, b = self.n_embd, self.n_layer, self.vocab_size, int(self.bias)
        norm = (1 + b) * d
        return [
            ("embedding W_E", f"{V} x {d}", 1, V * d),
            ("positions W_pos", f"{self.block_size} x {d}", 1, self.block_size * d),
            ("query W_Q", f"{d} x {d}", L, d * d + b * d),
            ("key W_K", f"{d} x {d}", L, d * d + b * d),
            ("value W_V", f"{d} x {d}", L, d * d + b * d),
            ("attention output W_O", f"{d} x {d}", L, d * d + b * d),
            ("MLP up W_in", f"{d} x {4 * d}", L, 4 * d * d + b * 4 * d),
            ("MLP down W_out", f"{4 * d} x {d}", L, 4 * d * d + b * d),
            ("norms", f"{1 + b} x {d}", 2 * L + 1, norm),
            ("unembedding W_U", f"{d} x {V}" + (" (tied to W_E)" if self.tie_weights else ""),
             0 if self.tie_weights else 1, d * V),
        ]


def _is_int_like(value) -> bool:
    try:
        return int(value) == value and not isinstance(value, (float, str))
    except (TypeError, ValueError):
        return False
