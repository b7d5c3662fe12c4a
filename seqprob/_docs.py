"""Where the documentation lives, for messages that point the user at a page of it.

A message names the site's page, never a file of the repository: a ``pip install`` has no
``docs/`` folder. The same URL is ``Documentation`` in the package's project URLs.
"""
from __future__ import annotations

__all__ = ["DOCS_URL", "docs_url"]

DOCS_URL = "https://seqprob.readthedocs.io/en/latest/"


def docs_url(page: str = "", anchor: str = "") -> str:
    """The URL of one page of the documentation site.

    Parameters
    ----------
    page : str
        The page's name without suffix, as in the site's table of contents (``"models"``,
        ``"api/index"``); empty for the front page.
    anchor : str
        A section of the page (its heading's anchor), optional.

    Returns
    -------
    str
        ``DOCS_URL + page + ".html"`` (+ ``"#" + anchor``).

    Examples
    --------
    >>> docs_url("models", "limits")
    'https://seqprob.readthedocs.io/en/latest/models.html#limits'
    """
    url = DOCS_URL + (f"{page}.html" if page else "")
    return f"{url}#{anchor}" if anchor else url
