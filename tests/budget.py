"""Hypothesis example budgets relative to the active profile (see tests/conftest.py).

A slow property test asks for ``examples(n)``: n examples under the default ``ci`` profile,
proportionally more under a bigger one (``HYPOTHESIS_PROFILE=dev`` or ``thorough``), so every
test follows the profile instead of pinning a number that no profile can raise.
"""
from hypothesis import settings

#: max_examples of the default profile, the scale the budgets are written on.
DEFAULT_EXAMPLES = 40


def examples(n: int) -> int:
    """``n`` scaled by the active profile's max_examples / :data:`DEFAULT_EXAMPLES`."""
    return max(1, round(n * settings.default.max_examples / DEFAULT_EXAMPLES))
