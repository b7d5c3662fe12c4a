"""``seqprob demo``: P* vs n-grams vs the GPT on the toy language (the README's first command)."""
from __future__ import annotations

from ._common import seed_int


def register(sub) -> None:
    p = sub.add_parser(
        "demo", help="the whole story on the toy language: P* vs n-grams vs GPT",
        description="Sample a corpus from the toy language whose true distribution P* is known, "
                    "fit n-gram tables (orders 1-5: MLE, add-k, modified Kneser-Ney), load the "
                    "shipped GPT, score example sentences under every model, compare held-out "
                    "cross-entropy with the true entropy, and write figures and a report.")
    p.add_argument("--out", default="seqprob-demo", help="output folder (default: ./seqprob-demo)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the sampled corpora (default 0)")
    p.add_argument("--quick", action="store_true", help="smaller corpora: a few seconds")
    p.add_argument("--retrain", action="store_true",
                   help="train the GPT from scratch instead of loading the shipped one")
    p.set_defaults(func=run)


def run(args) -> int:
    import sys

    from ..demo import run_demo

    run_demo(out=args.out, seed=args.seed, quick=args.quick, retrain=args.retrain,
             progress=sys.stderr.isatty())
    return 0
