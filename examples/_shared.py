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
    except (OSError, ValueError) as exc:  # the weights are not in this installation
        logging.getLogger(__name__).warning("the shipped model is not available: %s", exc)
        return None
