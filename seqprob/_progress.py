"""The one progress bar of the library: tqdm on standard error, with one meaning of ``progress``.

``progress=True`` shows the bar, ``False`` hides it, ``None`` shows it only when standard error
is a terminal (and, with ``min_total``, only for at least that much work: a bar that flashes
for a small file is noise). Reading an ARPA file, counting n-grams, writing ARPA, training and
the demo's stages all draw through :func:`progress_bar`.
"""
from __future__ import annotations

import sys

__all__ = ["progress_bar", "wanted", "counted"]


def wanted(progress: bool | None, total: int | None = None, min_total: int = 0) -> bool:
    """Whether a bar is shown: ``progress`` itself when given; for None, whether standard
    error is a terminal and ``total`` (when known) is at least ``min_total``.

    Examples
    --------
    >>> wanted(True), wanted(False), wanted(None, total=10, min_total=100)
    (True, False, False)
    """
    if progress is not None:
        return bool(progress)
    if total is not None and total < min_total:
        return False
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # closed or replaced standard error
        return False


def progress_bar(total: int | None, desc: str, progress: bool | None = None, unit: str = "it",
                 initial: int = 0, leave: bool = True, min_total: int = 0, unit_scale: bool = False):
    """A tqdm bar on standard error, shown as :func:`wanted` decides.

    Examples
    --------
    >>> bar = progress_bar(3, "demo", progress=False)
    >>> bar.update(1); bar.close()
    """
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit=unit, unit_scale=unit_scale,
                leave=leave, disable=not wanted(progress, total, min_total), dynamic_ncols=True)


def counted(items, bar, size=len):
    """Yield ``items``, advancing ``bar`` by ``size(item)`` after each; the bar is closed at the
    end (also when the consumer stops early or fails).

    Examples
    --------
    >>> list(counted([[1, 2], [3]], progress_bar(3, "x", progress=False)))
    [[1, 2], [3]]
    """
    try:
        for item in items:
            yield item
            bar.update(size(item))
    finally:
        bar.close()
