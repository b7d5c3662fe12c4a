"""``--model``, ``--tokenizer`` and progress: one meaning of each in every command."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ...errors import InputError, SeqProbFileError, UnknownTokenizerError
from ...protocols import model_tokenizer

__all__ = ["MODEL_HELP", "REVISION_HELP", "TOKENIZER_HELP", "check_model_path", "load_model", "resolve_tokenizer", "progress_wanted",
           "stage"]

MODEL_HELP = ("a model file or folder on this machine: an ARPA file (.arpa, .arpa.gz), a binary n-gram "
              "file (.sqlm), a folder written by 'seqprob train', a Hugging Face transformers folder "
              "(config.json + model.safetensors) or a grammar spec (.json, .toml); or a Hugging Face "
              "model name ORG/NAME found in the local Hugging Face cache (a local path of that name "
              "wins), downloaded into it only when huggingface_hub is installed and HF_HUB_OFFLINE "
              "is unset; default: the shipped GPT trained on the toy language")
REVISION_HELP = ("with a Hugging Face model name: the branch, tag or commit hash of the cached "
                 "snapshot (default: main)")
TOKENIZER_HELP = ("PATH (a tokenizer file saved by seqprob, a .tiktoken file or a Hugging Face "
                  "tokenizer.json), FOLDER (a model folder: its tokenizer.json), 'word' or 'char' "
                  "(split into words / characters), or NAME (a tiktoken encoding such as gpt2 or "
                  "cl100k_base, read offline from TIKTOKEN_CACHE_DIR); default: the model's own")

#: ``--model`` names that ask for an estimator, which has to be fitted first.
_SMOOTHING_NAMES = {"kn", "mkn", "kneser", "kneser-ney", "kneserney", "modified-kneser-ney", "wb",
                    "witten-bell", "wittenbell", "abs", "absolute", "addk", "add-k", "laplace", "mle",
                    "stupid", "stupid-backoff", "ngram", "n-gram", "bigram", "trigram"}
#: Model files at least this large get a "loading" line on a terminal.
BIG_MODEL_BYTES = 16 << 20


def progress_wanted(args) -> bool:
    """Progress bars and stage lines: on when stderr is a terminal, off with ``--no-progress``."""
    from ..._progress import wanted

    return False if getattr(args, "no_progress", False) else wanted(None)


class stage:
    """Context manager printing ``message ...`` and ``... done in S s`` on stderr when ``on``."""

    def __init__(self, command: str, message: str, on: bool):
        self.command, self.message, self.on = command, message, on

    def __enter__(self):
        if self.on:
            print(f"seqprob {self.command}: {self.message} ...", file=sys.stderr, flush=True)
            self.start = time.perf_counter()
        return self

    def __exit__(self, kind, value, tb):
        if self.on and kind is None:
            print(f"seqprob {self.command}: {self.message}: done in "
                  f"{time.perf_counter() - self.start:.1f} s", file=sys.stderr, flush=True)


def _no_such_model(path: str) -> str:
    from ...registry import model_formats

    kinds = "; ".join(f.description or f.name for f in model_formats())
    message = (f"model {path!r} does not exist: --model takes a path to a model on this machine "
               f"({kinds}), a Hugging Face name ORG/NAME, or nothing "
               "for the default (the shipped GPT trained on the toy language); for a name without "
               "ORG/ nothing is downloaded")
    name = Path(path).name.lower()
    if name in _SMOOTHING_NAMES:
        message += (f". {path!r} looks like a kind of n-gram model: fit one first, e.g. 'seqprob ngram "
                    f"fit CORPUS -o model.arpa --smoothing mkn', then pass --model model.arpa")
    elif name.startswith(("gpt", "llama", "qwen", "pythia")) or "/" in path and not os.path.isabs(path):
        message += (". A Hugging Face model is given by its full name ORG/NAME (e.g. "
                    "openai-community/gpt2), not a short one, or as its downloaded folder (config.json "
                    "and model.safetensors)")
    return message


def check_model_path(path, revision: str | None = None) -> None:
    """SeqProbFileError saying what ``--model`` takes when ``path`` does not exist (None: the
    default model); a Hugging Face name must be in the local cache (at ``revision``)."""
    from ...hub import is_hub_name, resolve

    if path is not None and is_hub_name(str(path)) and not Path(path).exists():
        resolve(str(path), revision)
        return
    if path is not None and not Path(path).exists() and str(path) != "default":
        raise SeqProbFileError(_no_such_model(str(path)), path=str(path))


def load_model(path, progress: bool = False, command: str = "", revision: str | None = None):
    """``--model``: whatever ``path`` is (see :func:`seqprob.load_model`: a local path, or a
    Hugging Face name in the local cache at ``revision``), the default model without one; an
    ARPA file shows its reading progress when ``progress``."""
    from ...hub import is_hub_name
    from ...registry import load_model as load, model_formats

    if path is not None and is_hub_name(str(path)) and not Path(path).exists():
        with stage(command, f"loading model {str(path)!r} from the Hugging Face cache", progress):
            return load(path, revision=revision)
    if revision is not None:
        raise InputError(f"--revision {revision} applies to a Hugging Face model name (ORG/NAME) "
                         f"given to --model, not to {str(path or 'the default model')!r}", value=revision)
    check_model_path(path)
    if path is None or not Path(path).exists():
        return load(path)
    p = Path(path)
    size = p.stat().st_size if p.is_file() else 0
    fmt = next((f for f in model_formats() if f.recognise(p)), None)
    with stage(command, f"loading model {str(path)!r} ({size / 2**20:.0f} MB)",
               progress and size >= BIG_MODEL_BYTES):
        if fmt is not None and fmt.name == "arpa":
            from ...ngram.arpa import read_arpa

            return read_arpa(p, progress=progress)
        return load(path)


def resolve_tokenizer(spec, model=None, texts=None):
    """``--tokenizer``, the same in every command.

    ``None``: the model's own tokenizer (without a model: the toy language's word tokenizer);
    a file; a model folder (its ``tokenizer.json``); ``word`` / ``char``: split into words /
    characters, over the model's vocabulary (without a model: fitted on ``texts``); any other
    name: a tiktoken encoding, read offline.
    """
    if spec is None:
        if model is None:
            from ...truth import toy_english

            return toy_english().tokenizer
        tok = model_tokenizer(model)
        if tok is None:
            raise InputError("this model has no tokenizer of its own: pass --tokenizer (a file, "
                             "a model folder, word, char or a tiktoken name)")
        return tok
    if spec in ("word", "char"):
        return _unit_tokenizer(spec, model, texts)
    p = Path(spec)
    if p.is_dir():
        return _folder_tokenizer(p)
    if p.is_file():
        from ...tokenizers import load_tokenizer

        return load_tokenizer(p)
    if os.sep in spec or (os.altsep and os.altsep in spec) or p.suffix in (".json", ".tiktoken", ".model"):
        raise SeqProbFileError(f"tokenizer file {spec!r} does not exist (--tokenizer takes {TOKENIZER_HELP})",
                               path=spec)
    return _tiktoken(spec)


def _unit_tokenizer(spec: str, model, texts):
    from ...tokenizers import CharTokenizer, WhitespaceTokenizer

    cls = WhitespaceTokenizer if spec == "word" else CharTokenizer
    if model is not None:
        return cls(model.vocab)
    return cls.fit(texts or [])


def _folder_tokenizer(folder: Path):
    """The tokenizer saved in a model folder (``tokenizer.json``, as ``seqprob train`` writes)."""
    from ...tokenizers import load_tokenizer

    path = folder / "tokenizer.json"
    if not path.is_file():
        raise SeqProbFileError(f"folder {str(folder)!r} has no tokenizer.json: pass the tokenizer "
                               "file itself, or a model folder written by 'seqprob train'", path=str(folder))
    return load_tokenizer(path)


def _tiktoken(name: str):
    """A named tiktoken encoding; when its file is not on this machine, the error says where
    the file goes in the CLI's words (a file to pass, or the cache folder)."""
    from ...tokenizers import TiktokenTokenizer
    from ...tokenizers.tiktoken_io import KNOWN_ENCODINGS, expected_cache_path

    try:
        return TiktokenTokenizer(name)
    except UnknownTokenizerError as exc:
        if name not in KNOWN_ENCODINGS:
            raise
        import hashlib

        url = KNOWN_ENCODINGS[name]["files"][0][0]
        where = expected_cache_path(url)
        raise UnknownTokenizerError(
            f"tiktoken encoding {name!r} is not on this machine, and seqprob never downloads: save "
            f"{url} and pass --tokenizer path/to/{url.rsplit('/', 1)[-1]}, or put that file in "
            f"TIKTOKEN_CACHE_DIR under the name {hashlib.sha1(url.encode()).hexdigest()} (expected at "
            f"{str(where) if where else '<caching disabled>'!r})", name=name) from exc
