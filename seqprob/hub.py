"""Models by their Hugging Face names: ``"ORG/NAME"`` found in the local Hugging Face cache.

A name resolves to a snapshot folder of the cache that ``huggingface_hub`` writes::

    $HF_HUB_CACHE (else $HF_HOME/hub, else ~/.cache/huggingface/hub)
        models--ORG--NAME/
            refs/main                   the commit hash the branch "main" points at
            snapshots/<commit>/         config.json, *.safetensors, tokenizer.json ... (symlinks
            blobs/<hash>                                                  into blobs/)

``revision`` is a branch or tag (looked up in ``refs/``) or a commit hash (a snapshot folder
of that name; an abbreviated hash matches one snapshot whose name starts with it). Resolution
only reads the cache. A name missing from it is downloaded (:func:`fetch`) when that is
allowed: ``huggingface_hub`` is installed (``pip install "seqprob[hub]"``) and
``HF_HUB_OFFLINE`` is not set; only the files a model needs are fetched (config, weights and
their index, tokenizer files), by ``huggingface_hub`` itself, into the same cache. A local
file or folder of the same name wins over the cache (:func:`seqprob.load_model` looks at the
path first).

Examples
--------
>>> is_hub_name("HuggingFaceTB/SmolLM2-135M"), is_hub_name("models/gpt2/"), is_hub_name("../x")
(True, False, False)
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from .errors import InputError, SeqProbFileError

__all__ = ["HubError", "ModelNotCachedError", "RevisionNotCachedError", "cache_dir", "is_hub_name",
           "check_name", "repo_folder", "resolve", "fetch", "download_allowed", "MODEL_FILES"]

#: The files of a repository that loading a model needs (``huggingface_hub`` patterns).
MODEL_FILES = ["config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json",
               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]

# huggingface_hub's rule for a repository id: ORG/NAME, each part of letters, digits, "-",
# "_" and "." (not starting or ending with "-" or ".", no ".." or "--"), at most 96 characters.
_PART = r"(?!.*(?:\.\.|--))[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_NAME = re.compile(rf"{_PART}/{_PART}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHORT_COMMIT = re.compile(r"[0-9a-f]{7,39}")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,255}")

log = logging.getLogger(__name__)


class HubError(SeqProbFileError):
    """A Hugging Face model name cannot be resolved through the local cache."""


class ModelNotCachedError(HubError):
    """The model is not in the local Hugging Face cache; ``name`` and ``cache`` say what was
    looked for and where."""


class RevisionNotCachedError(HubError):
    """The model is cached but not at the requested revision; ``available`` lists what is."""


def cache_dir() -> Path:
    """The Hugging Face hub cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``~/.cache/huggingface/hub`` (``$XDG_CACHE_HOME/huggingface/hub`` when that is set), as
    ``huggingface_hub`` decides it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    base = Path(os.environ["XDG_CACHE_HOME"]).expanduser() if os.environ.get("XDG_CACHE_HOME") \
        else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def is_hub_name(name) -> bool:
    """Whether ``name`` has the form of a Hugging Face model id, ``"ORG/NAME"``."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def check_name(name) -> str:
    """``name`` if it is a well-formed ``"ORG/NAME"``, else an :class:`InputError` saying why."""
    if not is_hub_name(name):
        raise InputError(f"{name!r} is not a Hugging Face model name: a name is ORG/NAME (letters, "
                         f"digits, '-', '_' and '.'; e.g. 'HuggingFaceTB/SmolLM2-135M')", value=name)
    return name


def repo_folder(name: str, cache: Path | None = None) -> Path:
    """The cache folder of model ``name``: ``models--ORG--NAME`` in :func:`cache_dir`."""
    return Path(cache or cache_dir()) / ("models--" + check_name(name).replace("/", "--"))


def download_allowed() -> bool:
    """Whether a missing model may be downloaded: ``huggingface_hub`` is importable and
    ``HF_HUB_OFFLINE`` is not set to a true value."""
    import importlib.util

    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
    return not offline and importlib.util.find_spec("huggingface_hub") is not None


def fetch(name: str, revision: str | None = None, cache=None) -> Path:
    """Download model ``name`` at ``revision`` into the Hugging Face cache with
    ``huggingface_hub.snapshot_download`` (its progress bar; only :data:`MODEL_FILES`; the
    endpoint ``$HF_ENDPOINT`` when set) and return its snapshot folder.

    Raises
    ------
    HubError
        ``huggingface_hub`` is missing, or the download failed (the message says why;
        ``huggingface_hub`` writes each file to a temporary name first, so an interrupted
        download leaves no half-written file where a model file belongs).
    """
    check_name(name)
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise HubError(f"downloading {name!r} needs huggingface_hub: pip install 'seqprob[hub]'",
                       name=name) from None
    try:
        folder = snapshot_download(name, revision=revision, cache_dir=str(cache or cache_dir()),
                                   allow_patterns=MODEL_FILES, endpoint=os.environ.get("HF_ENDPOINT") or None)
    except Exception as exc:  # noqa: BLE001 - network, HTTP and file errors all end here, named
        raise HubError(f"downloading {name!r} (revision {revision or 'main'!r}) into {cache or cache_dir()} "
                       f"failed: {type(exc).__name__}: {exc}", name=name, revision=revision) from exc
    return Path(folder)


def resolve(name: str, revision: str | None = None, cache=None, download: bool | None = None) -> Path:
    """The snapshot folder of model ``name`` at ``revision`` in the local Hugging Face cache.

    Parameters
    ----------
    name : str
        ``"ORG/NAME"``, e.g. ``"Qwen/Qwen3-0.6B"``.
    revision : str, optional
        A branch or tag (default ``"main"``) or a commit hash (full, or a prefix of at least 7
        hex digits that matches one cached snapshot).
    cache : str or Path, optional
        The hub cache folder (default :func:`cache_dir`).
    download : bool, optional
        Fetch a model or revision missing from the cache (:func:`fetch`); default: when
        :func:`download_allowed`.

    Returns
    -------
    Path
        ``models--ORG--NAME/snapshots/<commit>``.

    Raises
    ------
    InputError
        A malformed name or revision.
    ModelNotCachedError
        No folder of the model in the cache; the message says which folder was searched and
        the command that downloads the model.
    RevisionNotCachedError
        The model is cached, but not at ``revision``; the message lists what is.

    Notes
    -----
    Only reads: symlinks of the snapshot into ``blobs/`` are followed by whoever opens the
    files, and nothing is created in the cache.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> cache = pathlib.Path(tempfile.mkdtemp())
    >>> repo = cache / "models--org--tiny"
    >>> (repo / "snapshots" / ("a" * 40)).mkdir(parents=True)
    >>> (repo / "refs").mkdir(); _ = (repo / "refs" / "main").write_text("a" * 40)
    >>> resolve("org/tiny", cache=cache).name == "a" * 40
    True
    """
    try:
        return _cached(name, revision, cache)
    except HubError as exc:
        if not (download_allowed() if download is None else download):
            raise exc from None
        log.info("%s; downloading it", exc)
        return fetch(name, revision, cache)


def _cached(name: str, revision: str | None, cache) -> Path:
    """:func:`resolve` without downloading."""
    repo = repo_folder(name, cache)
    revision = "main" if revision is None else _check_revision(revision)
    if not (repo / "snapshots").is_dir():
        raise ModelNotCachedError(_not_cached(name, revision, repo), name=name, cache=str(repo.parent))
    commit = _commit_of(repo, revision)
    snapshot = repo / "snapshots" / commit if commit else None
    if snapshot is None or not snapshot.is_dir():
        available = _available(repo)
        raise RevisionNotCachedError(
            f"model {name!r} is in the Hugging Face cache ({repo}) but not at revision {revision!r}"
            + (f" (refs/{revision} names commit {commit}, whose snapshot is missing)" if commit else "")
            + f"; cached: {', '.join(available) or 'nothing'}. Fetch it with: "
            + _fetch_command(name, revision), name=name, revision=revision, available=available)
    return snapshot


def _check_revision(revision) -> str:
    if not isinstance(revision, str) or not _REVISION.fullmatch(revision) or ".." in revision:
        raise InputError(f"revision {revision!r} is not a branch, tag or commit hash", value=revision)
    return revision


def _commit_of(repo: Path, revision: str) -> str | None:
    """The commit hash a revision names: a ref's content, a full hash, or a unique prefix."""
    ref = repo / "refs" / revision
    if ref.is_file():
        commit = ref.read_text(encoding="utf-8", errors="replace").strip()
        return commit if _COMMIT.fullmatch(commit) else None
    if _COMMIT.fullmatch(revision):
        return revision
    if _SHORT_COMMIT.fullmatch(revision):
        matches = [p.name for p in (repo / "snapshots").iterdir() if p.name.startswith(revision)]
        return matches[0] if len(matches) == 1 else None
    return None


def _available(repo: Path) -> list:
    refs = repo / "refs"
    names = sorted(str(p.relative_to(refs)) for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []
    snaps = sorted(p.name for p in (repo / "snapshots").iterdir() if p.is_dir())
    return [f"{n} ({(refs / n).read_text().strip()[:12]})" for n in names] + [f"commit {s[:12]}" for s in snaps]


def _fetch_command(name: str, revision: str) -> str:
    rev = "" if revision == "main" else f" --revision {revision}"
    why = ("HF_HUB_OFFLINE is set" if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
           else "with pip install 'seqprob[hub]' seqprob fetches it itself")
    return f"'hf download {name}{rev}' ({why}), or load a local folder"


def _not_cached(name: str, revision: str, repo: Path) -> str:
    return (f"model {name!r} is not in the Hugging Face cache (searched {repo}; the cache is "
            f"$HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub). Fetch it with: "
            f"{_fetch_command(name, revision)}")
