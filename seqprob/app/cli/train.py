"""``seqprob train``: fit a tokenizer and train a GPT on a text corpus; write a checkpoint.

The corpus is read one sentence per line (default) or as one raw text (``--raw``). In line
mode each line becomes ``<s> tokens </s>``, so the model learns P(first token | <s>) and
P(</s> | sentence) exactly as the scoring functions ask for them; a BPE vocabulary's
``<|endoftext|>`` is both BOS and EOS, so lines are simply separated by it (and the stream
starts with it). In raw mode the text is encoded as it is (newlines included for ``char``).
The last ``--val-fraction`` of the token stream is held out for validation. The output folder
is a checkpoint (model, tokenizer, optimizer, sampler state): ``seqprob sample --model OUT``
uses it and ``--resume`` continues an interrupted run exactly.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np

from ...errors import InputError
from ._common import add_format_option, positive_float, positive_int, print_frame, seed_int

log = logging.getLogger(__name__)

__all__ = ["register", "run", "make_tokenizer", "token_stream"]


def register(sub) -> None:
    p = sub.add_parser(
        "train", help="train a GPT on a text corpus",
        description="Fit a tokenizer on CORPUS and train a numpy GPT on it (AdamW, warmup + cosine "
                    "learning rate, gradient clipping). Writes a checkpoint folder with the model "
                    "and its tokenizer. Same --seed, same model.")
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
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
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
    history = train(model, train_ids, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                    seed=args.seed, val_ids=val_ids, eval_every=args.eval_every, checkpoint=out,
                    warmup=args.warmup, min_lr=args.min_lr, weight_decay=args.weight_decay,
                    grad_clip=args.grad_clip, progress=not args.no_progress, resume=args.resume)
    if args.history:
        from ..._io import atomic_write

        with atomic_write(args.history) as handle:
            history.to_csv(handle, index=False)
    shown = history[history.val_loss.notna() | (history.step == history.step.max())].copy()
    shown["val_ppl"] = np.exp(shown.val_loss)
    print_frame(shown, args.format)
    print(f"seqprob train: wrote the model and its tokenizer to {out.resolve()}/ "
          f"(use it with --model {args.output})", file=sys.stderr)
    return 0


def _check_output(out: Path, resume: bool, force: bool) -> None:
    """Refuse to overwrite an existing, non-empty OUTPUT unless resuming it or forced."""
    if resume and force:
        raise InputError("--resume continues the model in OUTPUT and --force replaces it: choose one")
    if out.exists() and not out.is_dir():
        raise InputError(f"--output {str(out)!r} is a file, not a folder", path=str(out))
    if out.is_dir() and any(out.iterdir()) and not (resume or force):
        raise InputError(f"{str(out)!r} already holds files (a trained model?): pass --resume to "
                         "continue it or --force to replace it", path=str(out))
