"""``seqprob report``: write every figure (PNG + SVG) and one self-contained HTML report."""
from __future__ import annotations

import sys

from ...errors import InputError
from ._common import (MODEL_HELP, add_progress_option, check_input_file, did_you_mean, load_model, progress_wanted,
                      seed_int)
from ._loading import REVISION_HELP, check_model_path


def register(sub) -> None:
    p = sub.add_parser(
        "report", help="write all figures and an HTML report to a folder",
        description="Compare a model with the true source (on the toy language) and n-gram baselines: "
                    "sentence scores, sampling, sparsity, learning curves, attention, the logit lens, "
                    "embeddings and calibration. Writes NAME.png and NAME.svg per figure and report.html "
                    "(figures embedded, tables, settings) to --out.")
    p.add_argument("--out", required=True, help="output folder (created if needed)")
    p.add_argument("--model", metavar="PATH|ORG/NAME", help=MODEL_HELP)
    p.add_argument("--revision", metavar="REV", help=REVISION_HELP)
    p.add_argument("--corpus", help="text file, one sentence per line (default: samples of the toy language); "
                                    "without --model, a small GPT is then trained on it")
    p.add_argument("--quick", action="store_true", help="small sizes: a report in seconds")
    p.add_argument("--seed", type=seed_int, default=0, help="random seed (default 0)")
    p.add_argument("--only", nargs="+", metavar="SECTION",
                   help="run only these sections: sentences sampling lookup sparsity learning attention "
                        "lens embeddings arithmetic calibration")
    add_progress_option(p)
    p.set_defaults(func=run)


def _progress(message: str) -> None:
    print(f"seqprob report: {message}", file=sys.stderr, flush=True)


def _check_sections(only) -> None:
    """--only names real sections (before the output folder is created)."""
    from ..report import SECTIONS

    keys = [key for key, *_ in SECTIONS]
    for name in only or []:
        if name not in keys:
            raise InputError(f"--only: no section {name!r}{did_you_mean(name, keys)}; the sections "
                             f"are {', '.join(keys)}", value=name)


def run(args) -> int:
    from ..._io import ensure_writable_dir
    from ..report import build_report

    _check_sections(args.only)  # every check before the folder is created
    check_input_file(args.corpus, "--corpus")
    check_model_path(args.model, args.revision)
    ensure_writable_dir(args.out)  # fail before loading anything
    model = load_model(args.model, progress_wanted(args), "report", args.revision) if args.model else None
    path = build_report(args.out, model=model, corpus=args.corpus, quick=args.quick, seed=args.seed,
                        model_name=args.model, only=args.only,
                        progress=None if args.no_progress else _progress)
    print(f"report written: {path}", file=sys.stdout)
    return 0
