"""``seqprob train``: fit a tokenizer and train a GPT on a text corpus; write a checkpoint.

The corpus is read one sentence per line (default) or as one raw text (``--raw``). In line
mode each line becomes ``<s> tokens </s>``, so the model learns P(first token | <s>) and
P(</s> | sentence) exactly as the scoring functions ask for them; a BPE vocabulary's
``<|endoftext|>`` is both BOS and EOS, so lines are simply separated by it (and the stream
starts with it). In raw mode the text is encoded as it is (newlines included for ``char``).
The last ``--val-fraction`` of the token stream is held out for validation. The output folder
is a checkpoint of the last step (model, tokenizer, optimizer, sampler state):
``seqprob sample --model OUT`` uses it and ``--resume`` continues an interrupted run exactly;
``OUT/best`` holds the model of the lowest validation loss. The step table is printed row by
row as the evaluations come (also with ``--no-progress``); Ctrl-C says what was kept and the
command that continues the run.
"""
from __future__ import annotations

import logging
import math
import shlex
import sys
from pathlib import Path

import numpy as np

from ...errors import InputError, TrainingInterrupted
from ..tables import HEADER_UNITS
from ._common import add_format_option, positive_float, positive_int, print_frame, seed_int

log = logging.getLogger(__name__)

__all__ = ["register", "run", "make_tokenizer", "token_stream", "resume_command", "StepTable"]


def register(sub) -> None:
    p = sub.add_parser(
        "train", help="train a GPT on a text corpus",
        description="Fit a tokenizer on CORPUS and train a numpy GPT on it (AdamW, warmup + cosine "
                    "learning rate, gradient clipping). Writes a checkpoint folder with the model "
                    "of the last step and its tokenizer, and OUTPUT/best with the model of the "
                    "lowest validation loss. Prints a row per evaluation as training goes; "
                    "Ctrl-C keeps the last checkpoint and prints the command that resumes it. "
                    "Same --seed, same model.")
    p.add_argument("corpus", help="text file, one sentence per line (.gz ok; '-' = stdin)")
    p.add_argument("-o", "--output", required=True, help="output checkpoint folder")
    p.add_argument("--tokenizer", default="word",
                   help="char | word | bpe[:VOCAB_SIZE] (default word; bpe default 512)")
    p.add_argument("--raw", action="store_true", help="read CORPUS as one text, not as sentences")
    p.add_argument("--n-layer", type=positive_int, default=2, help="transformer blocks (default 2)")
    p.add_argument("--n-head", type=positive_int, default=4, help="attention heads (default 4)")
    p.add_argument("--n-embd", type=positive_int, default=64, help="model width (default 64)")
    p.add_argument("--block-size", type=positive_int, default=64, help="context length (default 64)")
    p.add_argument("--dropout", type=float, default=0.0, help="dropout rate (default 0)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--steps", type=positive_int, default=500, help="optimizer steps (default 500)")
    p.add_argument("--batch-size", type=positive_int, default=16, help="windows per step (default 16)")
    p.add_argument("--lr", type=positive_float, default=3e-3, help="peak learning rate (default 3e-3)")
    p.add_argument("--min-lr", type=float, help="final learning rate (default lr/10)")
    p.add_argument("--warmup", type=int, help="warmup steps (default min(100, steps/10))")
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW decay on matrices (0.1)")
    p.add_argument("--grad-clip", type=float, default=1.0, help="global gradient-norm limit (1.0)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the weights and the batches (0)")
    p.add_argument("--val-fraction", type=float, default=0.1,
                   help="fraction of the token stream held out for validation (default 0.1)")
    p.add_argument("--eval-every", type=positive_int, help="steps between evaluations (default steps/10)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in OUTPUT")
    p.add_argument("--force", action="store_true",
                   help="replace an existing OUTPUT folder (without it, train refuses to overwrite)")
    p.add_argument("--history", help="also write the per-step history to this CSV file")
    p.add_argument("--no-progress", action="store_true",
                   help="hide the progress bar (the rows of the step table still appear)")
    add_format_option(p)
    p.set_defaults(func=run)


def make_tokenizer(spec: str, texts: list):
    """Fit the tokenizer named by ``spec`` (``char``, ``word``, ``bpe`` or ``bpe:N``) on ``texts``."""
    from ... import tokenizers as toks

    kind, _, size = spec.partition(":")
    if kind == "char" and not size:
        return toks.CharTokenizer.fit(texts)
    if kind in ("word", "whitespace") and not size:
        return toks.WhitespaceTokenizer.fit(texts)
    if kind == "bpe":
        if not hasattr(toks, "BPETokenizer"):
            raise InputError("the bpe tokenizer is not available in this version of seqprob")
        try:
            vocab_size = int(size) if size else 512
        except ValueError:
            raise InputError(f"--tokenizer bpe:N needs an integer N, got {size!r}", value=size) from None
        return toks.BPETokenizer.train(texts, vocab_size=vocab_size)
    raise InputError(f"unknown --tokenizer {spec!r}: use char, word or bpe[:N]", value=spec)


def token_stream(tok, texts: list, raw: bool) -> np.ndarray:
    """The training stream: ``<s> ids </s>`` per sentence (see the module docstring), or the
    raw text's ids."""
    if raw:
        return np.asarray(tok.encode(texts[0]), dtype=np.int64)
    vocab = tok.vocab
    bos, eos = vocab.bos_id, vocab.eos_id
    if eos is None:
        raise InputError(f"the {tok.kind} tokenizer has no end-of-sentence token: use --raw")
    shared = bos is None or bos == eos
    parts = [[eos]] if shared else []
    for text in texts:
        ids = tok.encode(text)
        parts.append(ids + [eos] if shared else [bos] + ids + [eos])
    return np.fromiter((i for part in parts for i in part), dtype=np.int64)


def _read_corpus(path: str, raw: bool) -> list:
    from ..._io import read_lines

    if raw:
        text = "\n".join(read_lines(path, strip=False))
        return [text] if text.strip() else []
    return [line for line in read_lines(path) if line]


def _split(stream: np.ndarray, fraction: float):
    if not 0.0 <= fraction < 1.0:
        raise InputError(f"--val-fraction must be in [0, 1), got {fraction}", value=fraction, limit=1)
    n_val = int(len(stream) * fraction)
    if n_val < 2:
        if fraction > 0:
            log.warning("corpus too small for a validation split: training without validation")
        return stream, None
    return stream[:-n_val], stream[-n_val:]


def run(args) -> int:
    from ...gpt import GPT, GPTConfig
    from ...training import train

    out = Path(args.output)
    _check_output(out, args.resume, args.force)
    texts = _read_corpus(args.corpus, args.raw)
    if not texts:
        raise InputError(f"corpus {args.corpus!r} holds no text")
    if args.resume and (out / "tokenizer.json").exists():
        from ...tokenizers import load_tokenizer

        tok = load_tokenizer(out / "tokenizer.json")
    else:
        tok = make_tokenizer(args.tokenizer, texts)
    train_ids, val_ids = _split(token_stream(tok, texts, args.raw), args.val_fraction)
    config = GPTConfig(vocab_size=len(tok.vocab), block_size=args.block_size, n_layer=args.n_layer,
                       n_head=args.n_head, n_embd=args.n_embd, dropout=args.dropout, dtype=args.dtype)
    model = GPT(config, seed=args.seed, tokenizer=tok)
    log.info("training %r on %d tokens (%d held out)", model, len(train_ids),
             0 if val_ids is None else len(val_ids))
    table = StepTable(args.format, args.steps, args.eval_every or max(1, args.steps // 10))
    try:
        history = train(model, train_ids, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                        seed=args.seed, val_ids=val_ids, eval_every=args.eval_every, checkpoint=out,
                        warmup=args.warmup, min_lr=args.min_lr, weight_decay=args.weight_decay,
                        grad_clip=args.grad_clip, progress=not args.no_progress, resume=args.resume,
                        callback=table.add)
    except TrainingInterrupted as stop:
        table.close(stop.history)
        _write_history(args.history, stop.history)
        _say_interrupted(stop, args)
        return 130
    table.close(history)
    _write_history(args.history, history)
    _say_written(out, args.output, history)
    return 0


#: Columns of the step table: the history's, and the validation perplexity.
TABLE_COLUMNS = ["step", "lr", "train_loss", "val_loss", "tokens_seen", "seconds", "val_ppl"]


class StepTable:
    """The step table, a row per evaluation (and the last step) printed on standard output as
    training reaches it: aligned columns or CSV; JSON, one document, is printed at the end.

    Rows go through ``tqdm.write``, which lifts the progress bar (on standard error) off the
    terminal line first."""

    def __init__(self, fmt: str, steps: int, every: int):
        self.fmt, self.steps, self.every = fmt, steps, every
        self.rows, self.started = [], False

    def add(self, row: dict) -> None:
        """train()'s callback: print ``row`` if it is an evaluation, a multiple of ``every``
        or the last step."""
        if not self._shown(row):
            return
        row = {**row, "val_ppl": _ppl(row["val_loss"])}
        self.rows.append(row)
        if self.fmt == "json":
            return
        if not self.started:
            self.started = True
            self._emit(self._header())
        self._emit(self._line(row))

    def close(self, history) -> None:
        """JSON: the rows of ``history`` the table shows, as one document; a table that
        printed nothing (a finished run resumed) shows them too."""
        if self.fmt != "json" and self.started:
            return
        rows = [row for row in history.to_dict(orient="records") if self._shown(row)]
        if self.fmt == "json":
            import pandas as pd

            shown = pd.DataFrame(rows, columns=TABLE_COLUMNS[:-1])
            shown["val_ppl"] = [_ppl(v) for v in shown.val_loss]
            print_frame(shown, "json")
            return
        for row in rows:
            self.add(row)

    def _shown(self, row: dict) -> bool:
        step = row["step"]
        return not math.isnan(row["val_loss"]) or step % self.every == 0 or step == self.steps

    def _header(self) -> str:
        if self.fmt == "csv":
            return ",".join(TABLE_COLUMNS)
        return "  ".join(f"{name:>{width}}" for name, width in zip(self._names(), self._widths()))

    def _line(self, row: dict) -> str:
        if self.fmt == "csv":
            import pandas as pd

            return pd.DataFrame([row], columns=TABLE_COLUMNS).to_csv(index=False, header=False).rstrip("\n")
        cells = (_cell(name, row[name]) for name in TABLE_COLUMNS)
        return "  ".join(f"{cell:>{width}}" for cell, width in zip(cells, self._widths()))

    @staticmethod
    def _names() -> list:
        return [HEADER_UNITS.get(name, name) for name in TABLE_COLUMNS]

    def _widths(self) -> list:
        return [max(len(name), 10) for name in self._names()]

    @staticmethod
    def _emit(line: str) -> None:
        from tqdm.auto import tqdm

        tqdm.write(line, file=sys.stdout)
        sys.stdout.flush()


def _ppl(val_loss: float) -> float:
    """exp(val_loss); NaN stays NaN, past float range inf."""
    return math.exp(val_loss) if not val_loss > 700 else math.inf


def _cell(name: str, value) -> str:
    if name in ("step", "tokens_seen"):
        return str(int(value))
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:.2e}" if name == "lr" else f"{value:.1f}" if name == "seconds" else f"{value:.4f}"


def _write_history(path, history) -> None:
    if path:
        from ..._io import atomic_write

        with atomic_write(path) as handle:
            history.to_csv(handle, index=False)


def _say(message: str) -> None:
    print(f"seqprob train: {message}", file=sys.stderr)


def _say_written(out: Path, given: str, history) -> None:
    """Where the last step's model and the lowest-validation-loss model are."""
    from ...training import BEST_FOLDER, kept_best

    last = int(history.step.iloc[-1])
    _say(f"wrote the model and its tokenizer to {out.resolve()}/ (the last step, {last}; use it "
         f"with --model {shlex.quote(given)})")
    best = kept_best(out)
    if best is not None:
        which = ", the last step too" if best[0] == last else ""
        _say(f"the model of the lowest validation loss ({best[1]:.4f} at step {best[0]}{which}) is "
             f"in {(out / BEST_FOLDER).resolve()}/ (use it with "
             f"--model {shlex.quote(str(Path(given) / BEST_FOLDER))})")


def _say_interrupted(stop: TrainingInterrupted, args) -> None:
    """What Ctrl-C left: the last checkpoint, the best model, and the command that goes on."""
    _say(f"interrupted after step {stop.step} of {stop.steps}")
    if stop.checkpoint_step is None:
        _say("no checkpoint was written yet: nothing was kept; run it again with: "
             f"{resume_command(args, resume=False)}")
        return
    kept = f"kept the checkpoint of step {stop.checkpoint_step} in {Path(stop.checkpoint).resolve()}/"
    if stop.best_step is not None:
        kept += (f" and the model of the lowest validation loss ({stop.best_val_loss:.4f} at step "
                 f"{stop.best_step}) in {Path(stop.best_checkpoint).resolve()}/")
    _say(kept)
    _say(f"continue with: {resume_command(args, resume=True)}")


def resume_command(args, resume: bool = True) -> str:
    """The ``seqprob train`` command line of ``args`` (options left at their defaults left
    out), with ``--resume`` instead of ``--force`` when ``resume``."""
    import argparse

    sub = argparse.ArgumentParser(prog="seqprob").add_subparsers()
    register(sub)
    words = ["seqprob", "train"]
    for action in sub.choices["train"]._actions:
        value = getattr(args, action.dest, None)
        if action.dest in ("help", "force", "resume", "func"):
            continue
        if not action.option_strings:
            words.append(str(value))
        elif value is not None and value != action.default:
            words += [action.option_strings[0]] + ([] if action.nargs == 0 else [str(value)])
    if resume:
        words.append("--resume")
    elif getattr(args, "force", False):
        words.append("--force")
    return shlex.join(words)


def _check_output(out: Path, resume: bool, force: bool) -> None:
    """Refuse to overwrite an existing, non-empty OUTPUT unless resuming it or forced."""
    if resume and force:
        raise InputError("--resume continues the model in OUTPUT and --force replaces it: choose one")
    if out.exists() and not out.is_dir():
        raise InputError(f"--output {str(out)!r} is a file, not a folder", path=str(out))
    if out.is_dir() and any(out.iterdir()) and not (resume or force):
        raise InputError(f"{str(out)!r} already holds files (a trained model?): pass --resume to "
                         "continue it or --force to replace it", path=str(out))
