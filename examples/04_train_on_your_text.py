"""Train an n-gram model and a small GPT on your own text file, then score and sample.
===================================================================================

Each line of the file is one sentence (or paragraph). 90 % of the lines train the models,
10 % are held out to measure perplexity: exp(average negative log-probability per token),
"how many tokens the model hesitates between", lower is better.

Run:  python examples/04_train_on_your_text.py my_text.txt [--steps N] [--out DIR]
      python examples/04_train_on_your_text.py --quick      (a small built-in text)
"""
import argparse
import warnings
from pathlib import Path

import numpy as np

import seqprob as sp
from seqprob.gpt import GPT, GPTConfig
from seqprob.ngram import ModifiedKneserNey
from seqprob.training import train

BUILT_IN = """the cat sat on the mat
the dog sat on the rug
a cat saw a dog
the dog saw the cat on the mat
a bird sat on the tree
the bird saw the cat
the cat ran after the bird
a dog ran after a cat
the mat was red
the rug was blue""".splitlines()


def stream(tok, lines):
    """Sentences as one stream of ids: <s> words </s> <s> words </s> ..."""
    v = tok.vocab
    return np.array([i for line in lines for i in (v.bos_id, *tok.encode(line), v.eos_id)])


def main():
    parser = argparse.ArgumentParser(description=__doc__ and __doc__.splitlines()[0])
    parser.add_argument("text", nargs="?", help="a UTF-8 text file, one sentence per line")
    parser.add_argument("--quick", action="store_true", help="use a small built-in text, few steps")
    parser.add_argument("--steps", type=int, default=None, help="GPT training steps (default 500)")
    parser.add_argument("--out", help="folder to save the model and the learning curves in")
    args = parser.parse_args()
    if args.text:
        lines = [l.strip() for l in Path(args.text).read_text(encoding="utf-8").splitlines() if l.strip()]
    elif args.quick:
        lines = BUILT_IN * 5
    else:
        parser.error("give a text file, or --quick for the built-in text")
    rng = np.random.default_rng(0)
    lines = [lines[i] for i in rng.permutation(len(lines))]
    cut = max(1, len(lines) // 10)
    held, train_lines = lines[:cut], lines[cut:]

    tok = sp.WhitespaceTokenizer.fit(train_lines)           # words seen in training; others -> <unk>
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                     # tiny texts: KN discount fallbacks
        kn = ModifiedKneserNey(order=3).fit(train_lines, tokenizer=tok)

    cfg = GPTConfig(vocab_size=len(tok.vocab), block_size=32, n_layer=2, n_head=2, n_embd=32)
    gpt = GPT(cfg, seed=0, tokenizer=tok)
    steps = args.steps or (30 if args.quick else 500)
    history = train(gpt, stream(tok, train_lines), steps=steps, batch_size=16, lr=1e-2, seed=0,
                    val_ids=stream(tok, held), progress=not args.quick)

    print(f"{len(train_lines)} training lines, {len(held)} held-out lines, vocabulary {len(tok.vocab)}")
    for name, model in (("kn3", kn), ("gpt", gpt)):
        print(f"held-out perplexity of {name}: {sp.perplexity(model, held, tokenizer=tok):.2f}")
    print("gpt sample:", sp.sample(gpt, "the", tokenizer=tok, max_new_tokens=12, seed=0))

    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        gpt.save(out / "gpt")                               # reload with GPT.load(out / "gpt")
        ax = sp.plots.learning_curves(history)
        ax.figure.savefig(out / "learning_curves.png", dpi=100)
        print(f"saved: {out / 'gpt'}, {out / 'learning_curves.png'}")


if __name__ == "__main__":
    main()
