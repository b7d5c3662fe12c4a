"""Helpers shared by the examples (not part of seqprob): the shipped model, if this install has it."""
import logging


def shipped_model():
    """``seqprob.default_model()`` (a GPT trained on the toy language), or None if unavailable."""
    try:
        from seqprob import default_model
    except ImportError:
        return None
    try:
        return default_model()
    except (OSError, ValueError) as exc:
        logging.getLogger(__name__).warning("the shipped model could not be loaded: %s", exc)
        return None
