"""Shared machinery for models that follow :class:`~seqprob.protocols.LanguageModel`.

Subclasses implement ``_logprobs(ids)`` for a validated ``(B, T)`` int64 batch and get input
checks, 1-D/2-D handling, ``token_logprobs`` and a default ``start``/``step`` for free.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import InputError, fitted
from .vocab import Vocab, check_ids, check_token_id

__all__ = ["BaseLanguageModel", "PrefixState"]


@dataclass(frozen=True)
class PrefixState:
    """The incremental state of every model without a state of its own: the ids it conditions on
    (the whole prefix, or an n-gram model's last n-1 ids) and the next-token log-probs (V,)."""

    ids: tuple
    logprobs: np.ndarray = field(repr=False)


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, copy=True)
    arr.flags.writeable = False
    return arr


class BaseLanguageModel:
    """Mixin implementing the contract around one method, ``_logprobs((B, T)) -> (B, T, V)``."""

    #: False for scores that are not a normalized distribution (e.g. stupid back-off).
    normalized = True

    @property
    def vocab(self) -> Vocab:
        """The fitted vocabulary (:class:`NotFittedError` before ``fit``)."""
        return fitted(self, "vocab_")

    def _check_fitted(self) -> None:
        self.vocab  # noqa: B018 - raises NotFittedError

    def _validate(self, ids, min_len: int = 1) -> tuple[np.ndarray, bool]:
        self._check_fitted()
        arr = check_ids(ids, len(self.vocab))
        if arr.ndim not in (1, 2):
            raise InputError(f"ids must be (T,) or (B, T), got shape {arr.shape}", shape=arr.shape)
        if arr.shape[-1] < min_len:
            raise InputError(f"ids need at least {min_len} token(s) (x_0 = <s> included), "
                             f"got shape {arr.shape}", shape=arr.shape, limit=min_len)
        return (arr[None, :], True) if arr.ndim == 1 else (arr, False)

    def logprobs(self, ids) -> np.ndarray:
        """Log P(x_t = v | x_0 .. x_{t-1}) for every position and every v.

        Parameters
        ----------
        ids : array_like of int, shape (T,) or (B, T)
            x_0 .. x_{T-1}; x_0 is normally ``vocab.bos_id``.

        Returns
        -------
        ndarray, shape (T, V) or (B, T, V)
            Row t-1 is the distribution of x_t (natural log).
        """
        batch, squeeze = self._validate(ids)
        out = self._logprobs(batch)
        return out[0] if squeeze else out

    def token_logprobs(self, ids) -> np.ndarray:
        """Log P(x_t | x_0 .. x_{t-1}) of the tokens actually there.

        ``ids`` = x_0 .. x_T, shape (T+1,) or (B, T+1); returns shape (T,) or (B, T).
        Their sum is the joint log-probability log P(x_1 .. x_T | x_0).
        """
        batch, squeeze = self._validate(ids, min_len=2)
        out = self._token_logprobs(batch)
        return out[0] if squeeze else out

    def _token_logprobs(self, batch: np.ndarray) -> np.ndarray:
        rows = self._logprobs(batch[:, :-1])  # (B, T, V)
        return np.take_along_axis(rows, batch[:, 1:, None], axis=-1)[..., 0]  # (B, T)

    def start(self, prefix) -> PrefixState:
        """State after reading ``prefix`` (x_0 .. x_{t-1}); ``.logprobs`` is the (V,) next row."""
        batch, _ = self._validate(prefix)
        if batch.shape[0] != 1:
            raise InputError(f"start() takes one prefix (T,), got shape {batch.shape}", shape=batch.shape)
        return self._start(tuple(batch[0].tolist()))

    def _start(self, ids: tuple) -> PrefixState:
        row = self._logprobs(np.asarray(ids, dtype=np.int64)[None, :])[0, -1]  # (V,)
        return PrefixState(ids=ids, logprobs=_readonly(row))

    def step(self, state, token_id: int):
        """New state after appending ``token_id``; ``state`` is left unchanged."""
        if not isinstance(getattr(state, "ids", None), tuple):  # PrefixState, NGramState ...
            raise InputError(f"step() needs a state from {type(self).__name__}.start(), got "
                             f"{type(state).__name__}", value=type(state).__name__)
        token = check_token_id(token_id, len(self.vocab))
        return self._start(state.ids + (token,))

    def _logprobs(self, batch: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError
