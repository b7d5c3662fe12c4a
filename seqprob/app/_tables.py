"""Tables and prose that fit the terminal: what the demo prints (the full tables go to its report).

A table wider than the terminal is narrowed in three steps, each tried only when the one
before is not enough: long column labels are cut to a shorter length (with "…"); labels that
would become ambiguous are replaced by keys ``[1]``, ``[2]`` ... explained in a legend under
the table; and what is still too wide is wrapped into blocks of columns (pandas'
``line_width``), each repeating the row labels.
"""
from __future__ import annotations

import shutil
import textwrap

__all__ = ["terminal_width", "fit_table", "fit_text", "MIN_WIDTH"]

#: Narrowest width tables are fitted to (a row label and one column still need some room).
MIN_WIDTH = 40
#: Label lengths tried, longest first, before labels are replaced by keys.
_LABEL_LENGTHS = (24, 20, 16, 12)


def terminal_width(width: int | None = None) -> int:
    """``width`` if given, else the terminal's (``COLUMNS`` first, 80 when there is no
    terminal), never below :data:`MIN_WIDTH`.

    Examples
    --------
    >>> terminal_width(100), terminal_width(10)
    (100, 40)
    """
    if width is None:
        width = shutil.get_terminal_size((80, 24)).columns
    return max(int(width), MIN_WIDTH)


def _render(df, float_format, line_width=None) -> str:
    return df.to_string(float_format=float_format, line_width=line_width)


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _clip(label, length: int) -> str:
    text = str(label)
    return text if len(text) <= length else text[:length - 1] + "…"


def _relabel(df, labels: list):
    import pandas as pd

    return df.set_axis(pd.Index(labels, name=df.columns.name), axis=1)


def _keyed(df):
    """``df`` with every long column label replaced by a key, and the legend of the keys."""
    keys = {c: f"[{i}]" for i, c in enumerate((c for c in df.columns
                                                if len(str(c)) > _LABEL_LENGTHS[-1]), 1)}
    legend = [f"{key} {label}" for label, key in keys.items()]
    return _relabel(df, [keys.get(c, str(c)) for c in df.columns]), legend


def fit_table(df, width: int | None = None, float_format=None) -> str:
    """``df.to_string`` narrowed to ``width`` characters (see the module docstring).

    Parameters
    ----------
    df : pandas.DataFrame
    width : int, optional
        Default: :func:`terminal_width`.
    float_format : callable, optional
        As in ``DataFrame.to_string``.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"the cat that the dogs chase sleeps": [-12.8],
    ...                    "the cat that the dogs chase sleep": [-19.3]}, index=["gpt"])
    >>> print(fit_table(df, width=40))
          [1]   [2]
    gpt -12.8 -19.3
    [1] the cat that the dogs chase sleeps
    [2] the cat that the dogs chase sleep
    """
    width = terminal_width(width)
    text = _render(df, float_format)
    if _widest(text) <= width:
        return text
    for length in _LABEL_LENGTHS:
        clipped = [_clip(c, length) for c in df.columns]
        if len(set(clipped)) < len(clipped):  # two labels would read the same: keys instead
            break
        text = _render(_relabel(df, clipped), float_format)
        if _widest(text) <= width:
            return text
    df, legend = _keyed(df)
    text = _render(df, float_format)
    if _widest(text) > width:
        text = _render(df, float_format, line_width=width)
    return "\n".join([text, *(fit_text(line, width) for line in legend)])


def fit_text(text: str, width: int | None = None) -> str:
    """Prose wrapped to ``width`` (words and paths are never broken).

    Examples
    --------
    >>> print(fit_text("one two three four", width=40))
    one two three four
    """
    width = terminal_width(width)
    return "\n".join(textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False)
                     if len(line) > width else line for line in text.split("\n"))
