"""``seqprob sample``: draw text from a model with temperature, top-k and top-p."""
from __future__ import annotations

from ._common import (add_model_options, load_model, load_tokenizer_arg, positive_int, print_frame, progress_wanted,
                      seed_int)


def register(sub) -> None:
    p = sub.add_parser(
        "sample", help="generate text from a model",
        description="Continue PROMPT (or start from <s>) by sampling one token at a time from "
                    "softmax(logits / T), optionally restricted to the top-k tokens or the top-p "
                    "nucleus. Same --seed, same output.")
    p.add_argument("prompt", nargs="?", default="", help="text to continue (default: empty)")
    add_model_options(p)
    p.add_argument("-n", "--num-samples", type=positive_int, default=1, help="number of samples (default 1)")
    p.add_argument("--max-new-tokens", type=int, default=30, help="tokens to generate at most (default 30)")
    p.add_argument("--temperature", type=float, default=1.0, help="T > 0; small T ~ argmax (default 1)")
    p.add_argument("--top-k", type=int, help="sample only among the k most likely tokens")
    p.add_argument("--top-p", type=float, help="sample only within the nucleus of mass p")
    p.add_argument("--seed", type=seed_int, default=0, help="random seed (default 0)")
    p.add_argument("--no-stop", action="store_true", help="keep going after </s>")
    p.add_argument("--format", choices=("text", "table", "csv", "json"), default="text",
                   help="text: one sample per line (default); table / csv / json: one row per "
                        "sample with its seed and settings")
    p.set_defaults(func=run)


def run(args) -> int:
    from ...sampling import sample

    model = load_model(args.model, progress_wanted(args), "sample", args.revision)
    tok = load_tokenizer_arg(args.tokenizer, model)
    texts = sample(model, args.prompt, tokenizer=tok, max_new_tokens=args.max_new_tokens,
                   temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                   seed=args.seed, stop_at_eos=not args.no_stop, n=args.num_samples)
    if args.format == "text":
        for text in texts:
            print(text)
        return 0
    import pandas as pd

    rows = [{"sample": i, "prompt": args.prompt, "text": text, "seed": args.seed,
             "temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p}
            for i, text in enumerate(texts)]
    print_frame(pd.DataFrame(rows, columns=list(rows[0]) if rows else ["sample", "text"]), args.format,
                drop=("top_p", "top_k", "temperature", "seed", "prompt"))
    return 0
