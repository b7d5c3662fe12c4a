"""Tables for the terminal: aligned, figures rounded, and narrow enough for the terminal.

:func:`fit_table` and :func:`fit_text` are shared by the command line and ``seqprob demo``. CSV and JSON output never
go through it: they keep every column and every digit.
"""
from __future__ import annotations

import math
import shutil
import textwrap

__all__ = ["fit_table", "fit_text", "format_figure", "terminal_width", "HEADER_UNITS"]

#: Units shown in the terminal table's headers (CSV and JSON keep the plain column names).
HEADER_UNITS = {"logprob": "logprob (nats)", "log10prob": "log10prob (log10)",
                "surprisal_bits": "surprisal (bits)", "entropy_bits": "entropy (bits)",
                "bits_per_token": "bits/token", "bits_per_char": "bits/char",
                "train_loss": "train_loss (nats/token)", "val_loss": "val_loss (nats/token)",
                "tokens": "tokens (count)", "n_tokens": "n_tokens (count)"}
#: Narrowest a text column is cut to (with "…") before the table is wrapped instead.
MIN_TEXT = 12
GAP = 2  # spaces between columns


def terminal_width() -> int:
    """Columns of the terminal: ``$COLUMNS`` when set, else the terminal's width, else 80."""
    return shutil.get_terminal_size().columns


def format_figure(value, decimals: int | None = None) -> str:
    """A number as a table shows it: integers whole; a float with ``decimals`` decimals, or
    by default about four significant digits (2 to 4 decimals, never an exponent)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not _is_number(value):
        return str(value)
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{_decimals(abs(value)) if decimals is None else decimals}f}"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) or (hasattr(value, "dtype") and value.dtype.kind in "iufb")


def _decimals(magnitude: float) -> int:
    """Decimals for about four significant digits, within 2..4."""
    if magnitude == 0 or not math.isfinite(magnitude):
        return 4
    return min(4, max(2, 3 - math.floor(math.log10(magnitude))))


class _Column:
    """One column as strings: its name, header, cells and alignment. ``limit`` cuts the header
    and (text columns only: a number is never cut) the cells."""

    def __init__(self, name, header: str, cells: list, right: bool, key: bool = False):
        self.name, self.header, self.cells, self.right, self.key = name, header, cells, right, key
        self.limit = None

    def shown(self) -> list:
        if self.limit is None or self.right:
            return self.cells
        return [_cut(c, self.limit) for c in self.cells]

    def heads(self, two_line: bool) -> list:
        parts = self.header.split(" (", 1) if two_line and " (" in self.header else [self.header]
        parts = parts if len(parts) == 1 else [parts[0], "(" + parts[1]]
        return parts if self.limit is None else [_cut(p, self.limit) for p in parts]

    def width(self, two_line: bool) -> int:
        return max([len(h) for h in self.heads(two_line)] + [len(c) for c in self.shown()])

    def cuttable(self, two_line: bool) -> bool:
        """Whether cutting would make it narrower (and not below :data:`MIN_TEXT`)."""
        floor = max([MIN_TEXT] + ([len(c) for c in self.cells] if self.right else []))
        return self.width(two_line) > floor


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


def _columns(df, index: bool, units: dict, decimals: int | None = None) -> list:
    frame = df.reset_index() if index else df
    keys = set(frame.columns[:df.index.nlevels]) if index else set()
    cols = []
    for name in frame.columns:
        series = frame[name]
        kind = series.dtype.kind
        if kind == "f":
            finite = [abs(v) for v in series if math.isfinite(v)]
            places = decimals if decimals is not None else 4 if not finite or max(finite) < 100 else 2
            cells = [format_figure(v, places) for v in series]
        else:
            cells = [format_figure(v) for v in series]
        numeric = kind in "iufb" or all(_is_number(v) or v is None for v in series)
        unnamed = index and name == "index" and df.index.name is None  # reset_index's name
        header = "" if unnamed else units.get(name, "" if name is None else str(name))
        cols.append(_Column(name, header, cells, right=numeric, key=name in keys))
    return cols


def _total(cols: list, two_line: bool) -> int:
    return sum(c.width(two_line) for c in cols) + GAP * max(len(cols) - 1, 0)


def fit_table(df, width: int | None = None, *, index: bool = False, drop=(), units=None,
              hint: str = "", decimals: int | None = None) -> str:
    """``df`` as an aligned table no wider than ``width`` (default: :func:`terminal_width`).

    Numbers are right-aligned and rounded for reading (see :func:`format_figure`), text is
    left-aligned, units are shown in the headers. When the table is too wide, in this order:
    the units go under the column names (two header lines); the columns named in ``drop`` are
    left out, first ones first (a last line names them); text cells and long headers are cut
    with "…" (long headers that would then read the same become keys ``[1]``, ``[2]`` ...
    explained under the table); what is still too wide is wrapped into blocks of columns, each
    repeating the index (``index=True``) or the first column.

    Parameters
    ----------
    df : pandas.DataFrame
    width : int, optional
    index : bool
        Show the index as the first column(s).
    drop : sequence of str
        Columns that may be left out to fit, least useful first.
    units : dict, optional
        Column name -> header (default :data:`HEADER_UNITS`).
    hint : str
        Appended to the line naming the columns left out (e.g. how to see them all).
    decimals : int, optional
        Decimals of every float (default: about four significant digits).

    Returns
    -------
    str

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"token": ["the", "cat"], "logprob": [-0.5306, -2.2777],
    ...                    "token_id": [3, 23]})
    >>> print(fit_table(df, 80))
    token  logprob (nats)  token_id
    the           -0.5306         3
    cat           -2.2777        23
    >>> print(fit_table(df, 20, drop=["token_id"]))  # doctest: +NORMALIZE_WHITESPACE
    token  logprob
            (nats)
    the    -0.5306
    cat    -2.2777
    (not shown at 20 columns: token_id)
    """
    width = terminal_width() if width is None else max(int(width), 20)
    cols = _columns(df, index, HEADER_UNITS if units is None else units, decimals)
    two_line = _total(cols, False) > width
    hidden = []
    for name in drop:
        if _total(cols, two_line) <= width:
            break
        if any(c.name == name and not c.key for c in cols):
            cols = [c for c in cols if c.name != name]
            hidden.append(str(name))
    legend = _cut_text(cols, two_line, width)
    text = "\n\n".join(_render(block, two_line) for block in _blocks(cols, two_line, width))
    if hidden:
        text += "\n" + textwrap.fill(f"(not shown at {width} columns: {', '.join(hidden)}{hint})", width)
    return "\n".join([text, *(fit_text(line, width) for line in legend)])


def fit_text(text: str, width: int | None = None) -> str:
    """Prose wrapped to ``width`` (default: :func:`terminal_width`); words and paths are never
    broken.

    Examples
    --------
    >>> print(fit_text("one two three four five six seven", width=20))
    one two three four
    five six seven
    """
    width = terminal_width() if width is None else max(int(width), 20)
    return "\n".join(textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False)
                     if len(line) > width else line for line in text.split("\n"))


def _cut_text(cols: list, two_line: bool, width: int) -> list:
    """Cut the widest text column or long header, a character at a time, until the table fits
    or nothing is wider than :data:`MIN_TEXT` (numbers are never cut). Long headers that the
    cuts made read the same are replaced by keys instead; returns the keys' legend lines."""
    _cut_widest(cols, two_line, width)
    if not _ambiguous(cols, two_line):
        return []
    legend = []
    for col in cols:
        col.limit = None
        if not col.key and len(col.header) > MIN_TEXT:
            legend.append(f"[{len(legend) + 1}] {col.header}")
            col.header = f"[{len(legend)}]"
    _cut_widest(cols, two_line, width)
    return legend


def _ambiguous(cols: list, two_line: bool) -> bool:
    """Whether a cut header could be read as another column's (its shown part begins both)."""
    cut = [(c.heads(two_line)[0].removesuffix("…"), c) for c in cols if c.limit is not None]
    return any(a is not b and b.header.startswith(part) for part, a in cut for b in cols)


def _cut_widest(cols: list, two_line: bool, width: int) -> None:
    while _total(cols, two_line) > width:
        cuttable = [c for c in cols if c.cuttable(two_line)]
        if not cuttable:
            return
        widest = max(cuttable, key=lambda c: c.width(two_line))
        widest.limit = widest.width(two_line) - 1


def _blocks(cols: list, two_line: bool, width: int) -> list:
    """Groups of columns that each fit ``width``, every group led by the key columns."""
    keys = [c for c in cols if c.key] or cols[:1]
    rest = [c for c in cols if c not in keys]
    if _total(cols, two_line) <= width or not rest:
        return [cols]
    blocks, current = [], list(keys)
    for col in rest:
        if len(current) > len(keys) and _total(current + [col], two_line) > width:
            blocks.append(current)
            current = list(keys)
        current.append(col)
    return blocks + [current]


def _render(cols: list, two_line: bool) -> str:
    widths = [c.width(two_line) for c in cols]
    heads = [c.heads(two_line) for c in cols]
    rows = [[h[i] if i < len(h) else "" for h in heads] for i in range(max(len(h) for h in heads))]
    rows += [list(r) for r in zip(*[c.shown() for c in cols])]
    return "\n".join((" " * GAP).join(f"{s:>{w}}" if c.right else f"{s:<{w}}"
                                      for s, w, c in zip(row, widths, cols)).rstrip() for row in rows)
