"""``seqprob ngram fit`` (estimate an n-gram model from a text corpus and write an ARPA file) and
``seqprob ngram build-binary`` (ARPA -> memory-mapped binary)."""
from __future__ import annotations

import logging
import sys
import time

from ...errors import InputError
from ._common import refuse_overwriting_inputs

log = logging.getLogger(__name__)

SMOOTHINGS = ("mkn", "kn", "wb", "abs", "addk", "mle", "stupid")


def register(sub) -> None:
    p = sub.add_parser("ngram", help="n-gram models: fit one on a corpus and write an ARPA file",
                       description="Count-based n-gram language models (KenLM-exact modified "
                                   "Kneser-Ney and the other classic estimators).")
    actions = p.add_subparsers(dest="ngram_command", metavar="ACTION")
    f = actions.add_parser(
        "fit", help="fit an n-gram model on CORPUS and write it as ARPA",
        description="Fit an n-gram model on CORPUS (one sentence per line; '-' = stdin; .gz is "
                    "decompressed) and write it as an ARPA file. Every line is a sentence: <s> is "
                    "its context and </s> is predicted at its end (KenLM's convention). "
                    "mkn reproduces KenLM's lmplz. stupid back-off is not a probability "
                    "distribution and add-k of order > 1 is not a back-off model: neither has an "
                    "ARPA form, so they are refused before any file is written.")
    f.add_argument("corpus", metavar="CORPUS", help="training text ('-' for stdin)")
    f.add_argument("-o", "--output", required=True,
                   help="ARPA file to write (written atomically); a .sqlm name writes the binary format")
    f.add_argument("--order", type=int, default=3, help="n-gram order N, 1..10 (default 3)")
    f.add_argument("--smoothing", choices=SMOOTHINGS, default="mkn",
                   help="mkn (modified Kneser-Ney, default), kn, wb (Witten-Bell), abs (absolute "
                        "discounting), addk, mle, stupid")
    f.add_argument("--k", type=float, default=1.0, help="pseudo-count of addk (default 1: Laplace)")
    f.add_argument("--min-count", type=int, default=1,
                   help="words seen fewer times become <unk> (default 1)")
    f.add_argument("--kenlm-quirk", action="store_true",
                   help="mkn/kn: reproduce lmplz's count-of-counts quirk (kpu/kenlm #405, #427)")
    f.add_argument("--no-discount-fallback", action="store_true",
                   help="mkn/kn/abs: fail instead of using fallback discounts on tiny data")
    f.add_argument("--prune", type=int, nargs="+", metavar="T",
                   help="mkn: lmplz-style count thresholds per order, e.g. --prune 0 1 1 (an n-gram "
                        "of order m >= 2 seen <= T_m times is removed; the last value repeats)")
    f.add_argument("-S", "--memory", metavar="SIZE",
                   help="memory budget for counting (e.g. 1G, 512M; like lmplz -S): count in "
                        "chunks, spill sorted runs to -T, merge them, stream the ARPA out; same "
                        "file as without it (default: count in memory)")
    f.add_argument("-T", "--temp-dir", metavar="DIR",
                   help="folder for the spill files of -S (default: the system temp folder)")
    f.set_defaults(func=run_fit)
    b = actions.add_parser(
        "build-binary", help="convert an ARPA file to the memory-mapped binary format (.sqlm)",
        description="Read an ARPA file and write it in seqprob's binary n-gram format: sorted keys, "
                    "log-probabilities, back-off weights and a hash index per order, memory-mapped "
                    "on load (O(1); processes share the pages). Written atomically. Any command "
                    "that takes a model (score, ppl, sample) accepts the .sqlm file.")
    b.add_argument("arpa", metavar="ARPA", help="ARPA file to read (.gz is decompressed)")
    b.add_argument("output", metavar="OUT", help="binary file to write (.sqlm)")
    b.add_argument("--no-hash", action="store_true",
                   help="leave out the hash index (smaller file; queries build it in memory)")
    b.set_defaults(func=run_build_binary)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def build_model(args):
    """The estimator the arguments ask for (refusing the ones with no ARPA form)."""
    from ... import ngram

    if args.smoothing == "stupid":
        raise InputError("stupid back-off scores are not a probability distribution, so they have no "
                         "ARPA form; use the Python API (seqprob.ngram.StupidBackoff) to score with it")
    if args.smoothing == "addk" and args.order > 1:
        raise InputError(f"add-k of order {args.order} is not a back-off model (an unseen event gets "
                         "k / (c(h) + kV), not a multiple of a lower order), so it has no ARPA form; "
                         "use --order 1, another --smoothing, or the Python API (seqprob.ngram.AddK)")
    cls = ngram.ESTIMATORS[args.smoothing]
    kwargs = {"order": args.order, "min_count": args.min_count}
    if args.smoothing == "addk":
        kwargs["k"] = args.k
    if args.smoothing in ("mkn", "kn"):
        kwargs["kenlm_quirk"] = args.kenlm_quirk
    if args.smoothing in ("mkn", "kn", "abs") and args.no_discount_fallback:
        kwargs["discount_fallback"] = None
    if getattr(args, "prune", None):
        if args.smoothing != "mkn":
            raise InputError(f"--prune applies to --smoothing mkn (lmplz), not {args.smoothing}",
                             value=args.smoothing)
        kwargs["prune"] = tuple(args.prune)
    return cls(**kwargs)


def run_build_binary(args) -> int:
    """ARPA -> .sqlm, atomically."""
    from ...ngram.binary import build_binary

    refuse_overwriting_inputs(args.output, args.arpa)
    start = time.perf_counter()
    path = build_binary(args.arpa, args.output, hash=not args.no_hash)
    print(f"wrote {path}: {path.stat().st_size} bytes in {time.perf_counter() - start:.2f} s",
          file=sys.stderr)
    return 0


def run_fit(args) -> int:
    """Fit, then write the ARPA file atomically; warnings (discount fallback) go to stderr."""
    from ...ngram import fit_arpa

    refuse_overwriting_inputs(args.output, args.corpus)
    model = build_model(args)
    start = time.perf_counter()
    memory, temp_dir = getattr(args, "memory", None), getattr(args, "temp_dir", None)
    if temp_dir is not None and memory is None:
        raise InputError("-T/--temp-dir only applies with a memory budget -S (e.g. -S 1G)")
    # warnings (discount fallback) print as one line: see cli.main
    if str(args.output).endswith(".sqlm"):  # the memory-mapped binary instead of ARPA text
        model.fit(args.corpus, memory=memory, temp_dir=temp_dir)
        model.save(args.output)
        return _report(args, model, model.tables_.sizes(), model.counts_.n_sentences,
                       model.counts_.n_tokens, start)
    info = fit_arpa(args.corpus, args.output, model, memory=memory, temp_dir=temp_dir)
    return _report(args, model, info["sizes"], info["n_sentences"], info["n_tokens"], start)


def _report(args, model, sizes: list, n_sentences: int, n_tokens: int, start: float) -> int:
    shown = " ".join(f"{m}:{n}" for m, n in enumerate(sizes, start=1))
    print(f"wrote {args.output}: {type(model).__name__}(order={args.order}) from "
          f"{n_sentences} sentences, {n_tokens} tokens; n-grams {shown}; "
          f"fit + write {time.perf_counter() - start:.2f} s", file=sys.stderr)
    return 0
