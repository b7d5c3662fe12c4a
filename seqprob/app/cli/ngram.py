"""``seqprob ngram fit`` (estimate an n-gram model from a text corpus and write an ARPA file) and
``seqprob ngram build-binary`` (ARPA -> memory-mapped binary)."""
from __future__ import annotations

import logging
import sys
import time

from ...errors import InputError
from ._common import add_progress_option, check_input_file, check_output_file, progress_wanted
from ._files import looks_like_arpa, looks_like_sqlm, refuse_overwriting_inputs
from ._loading import stage

log = logging.getLogger(__name__)

SMOOTHINGS = ("mkn", "kn", "wb", "abs", "addk", "mle", "stupid")


def register(sub) -> None:
    p = sub.add_parser("ngram", help="n-gram models: fit one on a corpus (ARPA or .sqlm), convert ARPA to .sqlm",
                       description="Count-based n-gram language models (KenLM-exact modified "
                                   "Kneser-Ney and the other classic estimators).")
    actions = p.add_subparsers(dest="ngram_command", metavar="ACTION")
    f = actions.add_parser(
        "fit", help="fit an n-gram model on CORPUS and write it as ARPA",
        description="Fit an n-gram model on CORPUS (one sentence per line; '-' = stdin; .gz is "
                    "decompressed) and write it as an ARPA file. Every line is a sentence: <s> is "
                    "its context and </s> is predicted at its end (KenLM's convention). "
                    "mkn reproduces KenLM's lmplz. stupid back-off is not a probability "
                    "distribution, so it has no ARPA form: write it as .sqlm (scored as what it is, "
                    "a score, with a warning on perplexity). add-k of order > 1 is not a back-off "
                    "model, which both formats store, so it is refused. Every refusal comes before "
                    "any file is written.")
    f.add_argument("corpus", metavar="CORPUS", help="training text ('-' for stdin)")
    f.add_argument("-o", "--output", required=True,
                   help="file to write (atomically): ARPA text; a .gz name writes gzipped ARPA (as "
                        "KenLM reads it), a .sqlm name the binary format. An existing file that is "
                        "not a model of that format is only replaced with --force")
    f.add_argument("--order", type=int, default=3, help="n-gram order N, 1..10 (default 3)")
    f.add_argument("--smoothing", choices=SMOOTHINGS, default="mkn",
                   help="mkn (modified Kneser-Ney, default), kn, wb (Witten-Bell), abs (absolute "
                        "discounting), addk, mle, stupid (back-off scores, .sqlm output only)")
    f.add_argument("--k", type=float, default=1.0, help="pseudo-count of addk (default 1: Laplace)")
    f.add_argument("--alpha", type=float, default=0.4, help="back-off factor of stupid (default 0.4)")
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
    f.add_argument("--force", action="store_true",
                   help="replace OUTPUT even when it is not a model of that format")
    add_progress_option(f)
    f.set_defaults(func=run_fit)
    b = actions.add_parser(
        "build-binary", help="convert an ARPA file to the memory-mapped binary format (.sqlm)",
        description="Read an ARPA file and write it in seqprob's binary n-gram format: sorted keys, "
                    "log-probabilities, back-off weights and a hash index per order, memory-mapped "
                    "on load (O(1); processes share the pages). Written atomically. Any command "
                    "that takes a model (score, ppl, sample) accepts the .sqlm file.")
    b.add_argument("arpa", metavar="ARPA", help="ARPA file to read (.gz is decompressed)")
    b.add_argument("output", metavar="OUT", help="binary file to write (its name ends in .sqlm)")
    b.add_argument("--no-hash", action="store_true",
                   help="leave out the hash index (smaller file; queries build it in memory)")
    b.add_argument("--force", action="store_true", help="replace OUT even when it is not a .sqlm file")
    add_progress_option(b)
    b.set_defaults(func=run_build_binary)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def build_model(args):
    """The estimator the arguments ask for (refusing the ones no file of OUTPUT's kind holds)."""
    from ... import ngram

    binary = str(args.output).endswith(".sqlm")
    if args.smoothing == "stupid" and not binary:
        raise InputError("stupid back-off scores are not a probability distribution, so they have no "
                         "ARPA form (a reader of ARPA files would take them for probabilities); write "
                         "the model as .sqlm instead (-o NAME.sqlm), which records that they are scores")
    if args.smoothing == "addk" and args.order > 1:
        raise InputError(f"add-k of order {args.order} is not a back-off model (an unseen event gets "
                         "k / (c(h) + kV), not a multiple of a lower order), so neither an ARPA nor a "
                         ".sqlm file can hold it; use --order 1, another --smoothing, or the Python API "
                         "(seqprob.ngram.AddK)")
    cls = ngram.ESTIMATORS[args.smoothing]
    kwargs = {"order": args.order, "min_count": args.min_count}
    if args.smoothing == "addk":
        kwargs["k"] = args.k
    if args.smoothing == "stupid":
        kwargs["alpha"] = args.alpha
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


def _check_fit_output(args) -> None:
    """OUTPUT is checked before counting starts: its folder, its name and what it would replace."""
    out = str(args.output)
    if out.endswith(".sqlm.gz"):
        raise InputError(f"-o {out!r}: a .sqlm file is memory-mapped and cannot be gzipped; name it "
                         "NAME.sqlm (binary) or NAME.arpa.gz (gzipped ARPA)", path=out)
    binary = out.endswith(".sqlm")
    check_output_file(out, "-o", force=args.force, inputs=[args.corpus],
                      same_kind=looks_like_sqlm if binary else looks_like_arpa,
                      kind="a .sqlm file" if binary else "an ARPA file")


def run_build_binary(args) -> int:
    """ARPA -> .sqlm, atomically."""
    from ...ngram.arpa import read_arpa
    from ...ngram.binary import save_ngram

    _check_build_binary(args.arpa, args.output, args.force)
    progress = progress_wanted(args)
    start = time.perf_counter()
    model = read_arpa(args.arpa, progress=progress)
    with stage("ngram build-binary", f"writing {args.output!r}", progress):
        path = save_ngram(model, args.output, hash=not args.no_hash)
    print(f"wrote {path}: {path.stat().st_size} bytes in {time.perf_counter() - start:.2f} s",
          file=sys.stderr)
    return 0


def _check_build_binary(arpa: str, out: str, force: bool) -> None:
    """ARPA in, .sqlm out: arguments given the other way round are named as swapped."""
    from pathlib import Path

    refuse_overwriting_inputs(out, arpa)
    in_sqlm = arpa.endswith(".sqlm") or looks_like_sqlm(Path(arpa))
    out_arpa = out.endswith((".arpa", ".arpa.gz")) or (Path(out).is_file() and looks_like_arpa(Path(out)))
    if in_sqlm and out_arpa:
        raise InputError(f"the arguments look swapped: build-binary reads the ARPA file first and "
                         f"writes the .sqlm second: seqprob ngram build-binary {out} {arpa}", path=arpa)
    if in_sqlm:
        raise InputError(f"ARPA {arpa!r} is a .sqlm file, not an ARPA file: build-binary converts an "
                         "ARPA file into a .sqlm file", path=arpa)
    if out_arpa:
        raise InputError(f"OUT {out!r} is an ARPA file: OUT is the .sqlm file to write, e.g. "
                         f"{str(Path(out).name).split('.')[0] + '.sqlm'!r}", path=out)
    check_input_file(arpa, "ARPA")
    if not out.endswith(".sqlm"):
        raise InputError(f"OUT {out!r} must end in .sqlm: that is how --model recognises a binary "
                         "n-gram file", path=out)
    check_output_file(out, "OUT", force=force, inputs=[arpa], same_kind=looks_like_sqlm,
                      kind="a .sqlm file")


def run_fit(args) -> int:
    """Fit, then write the model atomically (ARPA, gzipped ARPA or .sqlm); warnings (discount
    fallback) go to stderr. Every argument and OUTPUT are checked before counting starts."""
    from ...ngram import fit_arpa

    check_input_file(args.corpus, "CORPUS")
    _check_fit_output(args)
    model = build_model(args)
    memory, temp_dir = getattr(args, "memory", None), getattr(args, "temp_dir", None)
    if temp_dir is not None and memory is None:
        raise InputError("-T/--temp-dir only applies with a memory budget -S (e.g. -S 1G)")
    progress = progress_wanted(args)
    model.progress = progress
    start = time.perf_counter()
    # warnings (discount fallback) print as one line: see cli.main
    if str(args.output).endswith(".sqlm"):  # the memory-mapped binary instead of ARPA text
        model.fit(args.corpus, memory=memory, temp_dir=temp_dir)
        with stage("ngram fit", f"writing {args.output!r}", progress):
            model.save(args.output)
        return _report(args, model, model.tables_.sizes(), model.counts_.n_sentences,
                       model.counts_.n_tokens, start)
    info = fit_arpa(args.corpus, args.output, model, memory=memory, temp_dir=temp_dir)  # .gz: gzipped
    return _report(args, model, info["sizes"], info["n_sentences"], info["n_tokens"], start)


def _report(args, model, sizes: list, n_sentences: int, n_tokens: int, start: float) -> int:
    shown = " ".join(f"{m}:{n}" for m, n in enumerate(sizes, start=1))
    print(f"wrote {args.output}: {type(model).__name__}(order={args.order}) from "
          f"{n_sentences} sentences, {n_tokens} tokens; n-grams {shown}; "
          f"fit + write {time.perf_counter() - start:.2f} s", file=sys.stderr)
    return 0
