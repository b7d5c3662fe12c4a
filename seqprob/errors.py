"""Exceptions raised by seqprob.

Every error seqprob raises on purpose is a :class:`SeqProbError`. Each subclass also derives
from the matching built-in (``ValueError``, ``KeyError``, ``OSError`` ...), so code that
already catches those keeps working. Errors carry the offending value and the limit as
attributes, and their message names both.
"""
from __future__ import annotations

__all__ = [
    "SeqProbError", "InputError", "TokenIdError", "UnknownTokenError", "TemperatureError",
    "ContextLengthError", "WordAlignmentError",
    "NotFittedError", "fitted", "has_attribute", "TokenizerError", "UnknownTokenizerError", "SeqProbFileError",
    "FileFormatError", "ArpaFormatError", "CheckpointError", "GrammarError",
    "TrainingDivergedError", "TrainingInterrupted", "MemoryBudgetError", "PartitionError",
]


class SeqProbError(Exception):
    """Base class of every error seqprob raises on purpose.

    Parameters
    ----------
    message : str
        Human-readable message naming the bad value and the limit.
    **data
        Structured facts about the error (the value, the limit, a line number ...),
        stored as attributes and in ``self.data``.
    """

    def __init__(self, message: str, **data):
        super().__init__(message)
        self.message = message
        self.data = data
        for key, value in data.items():
            setattr(self, key, value)

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return self.message


class InputError(SeqProbError, ValueError):
    """A value passed to seqprob is invalid (empty, wrong shape or dtype, NaN ...)."""


class TokenIdError(InputError, IndexError):
    """A token id is negative or not below the vocabulary size."""


class UnknownTokenError(InputError, KeyError):
    """A token string is not in the vocabulary (and there is no ``<unk>`` to stand for it)."""


class TemperatureError(InputError):
    """A sampling temperature is not a positive number."""


class ContextLengthError(InputError):
    """A sequence is longer than the model's context window (``block_size``)."""


class NotFittedError(SeqProbError, ValueError, AttributeError):
    """A model or tokenizer was used before ``fit`` / ``train``."""


def has_attribute(obj, attr: str) -> bool:
    """``hasattr``, except that a NotFittedError (an AttributeError, which hasattr would
    swallow) is raised: the object is a model, it has not been fitted yet."""
    try:
        getattr(obj, attr)
    except NotFittedError:
        raise
    except AttributeError:
        return False
    return True


def fitted(obj, attr: str, hint: str = "call fit() first"):
    """The learned attribute ``obj.<attr>`` (scikit-learn style, ends in ``_``), or a
    :class:`NotFittedError` naming the class when ``fit`` has not set it yet."""
    value = getattr(obj, attr, None)
    if value is None:
        raise NotFittedError(f"{type(obj).__name__} is not fitted yet: {hint}", attribute=attr)
    return value


class WordAlignmentError(InputError):
    """A text's tokens cannot be split into the requested words (a token spans two words, or
    lies outside every word)."""


class TokenizerError(SeqProbError, ValueError):
    """A tokenizer cannot be built, loaded or applied."""


class UnknownTokenizerError(TokenizerError, KeyError):
    """A tokenizer or tiktoken encoding name is unknown or cannot be loaded offline."""


class SeqProbFileError(SeqProbError, OSError):
    """A file cannot be read or written (missing, unreadable, unwritable)."""


class FileFormatError(SeqProbError, ValueError):
    """A file was read but its content is malformed."""


class ArpaFormatError(FileFormatError):
    """An ARPA file is malformed; ``line`` holds the 1-based line number."""


class CheckpointError(FileFormatError):
    """A checkpoint is truncated, corrupt or does not match the model's config."""


class GrammarError(InputError):
    """A probabilistic grammar spec is invalid; ``state`` names the offending state."""


class TrainingDivergedError(SeqProbError, FloatingPointError):
    """Training produced a NaN or infinite loss; ``step`` names the step."""


class TrainingInterrupted(KeyboardInterrupt):
    """Training was stopped by a ``KeyboardInterrupt`` (Ctrl-C, or a callback raising it).

    A ``KeyboardInterrupt`` (code that catches those still does), not a :class:`SeqProbError`:
    nothing was wrong. Its attributes say what was kept: ``step`` (the last step completed),
    ``checkpoint`` and ``checkpoint_step`` (the folder holding the last saved state and its
    step; None before the first save), ``best_checkpoint``, ``best_step`` and
    ``best_val_loss`` (the model of the lowest validation loss, when kept) and ``history``
    (the rows so far).
    """

    def __init__(self, message: str, **data):
        super().__init__(message)
        self.message = message
        self.data = data
        for key, value in data.items():
            setattr(self, key, value)

    def __str__(self) -> str:
        return self.message


class MemoryBudgetError(InputError):
    """A memory budget (``memory=``, ``-S``) is malformed or below what one chunk needs, or
    an array the request needs is larger than this machine can allocate (``bytes`` says how
    large)."""


class PartitionError(SeqProbError):
    """A partition of a distributed (Dask) corpus failed; ``partition`` is its index."""

    def __reduce__(self):  # keep message and data when a Dask worker sends it back
        return (_rebuild_error, (type(self), self.message, self.data))


def _rebuild_error(cls, message, data):
    return cls(message, **data)
