"""How far is each model from the true distribution? Cross-entropy, KL and agreement.
==================================================================================

Real text comes from an unknown distribution P*. seqprob's toy language is a grammar whose P*
is known exactly, so we can measure what is normally unmeasurable:

  * the true entropy H(P*) per token: the floor of any model's cross-entropy;
  * KL(P* || model) per token = cross-entropy - entropy, with a confidence interval;
  * subject-verb agreement across a relative clause ("the cat that the dogs chase sleeps"):
    a trigram cannot see the subject, attention can.

Run:  python examples/06_distance_to_truth.py [--quick]
"""
import argparse
import warnings

import pandas as pd

from seqprob.analysis.truth import agreement_test, kl_per_token
from seqprob.ngram import ModifiedKneserNey
from seqprob.truth import toy_english

from _shared import shipped_model


def main():
    parser = argparse.ArgumentParser(description=__doc__ and __doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small samples (seconds)")
    args = parser.parse_args()

    truth = toy_english()
    tok = truth.tokenizer
    train = truth.sample(3000 if args.quick else 50000, seed=0)
    test = truth.sample(300 if args.quick else 5000, seed=1)     # held-out samples of P*
    models = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (1, 2, 3, 4):
            models[f"kn{n}"] = ModifiedKneserNey(order=n).fit(train, tokenizer=tok)
    gpt = None if args.quick else shipped_model()
    if gpt is not None:
        models["gpt"] = gpt

    h = truth.entropy()                                     # exact for this grammar
    print(f"true entropy: {h.per_token:.4f} nats/token ({h.per_sentence:.3f} nats/sentence)\n")
    rows = []
    for name, model in models.items():
        kl = kl_per_token(truth, model, samples=test, tokenizer=tok)
        agree = agreement_test(model, tokenizer=tok, n=50 if args.quick else 400, seed=0)
        rows.append({"model": name, "cross-entropy": kl.cross_entropy_per_token,
                     "KL per token": kl.per_token, "KL 95% CI": f"[{kl.ci_low:.3f}, {kl.ci_high:.3f}]",
                     "agreement accuracy": agree.accuracy})
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.4f}"))


if __name__ == "__main__":
    main()
