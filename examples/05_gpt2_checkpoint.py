"""Score sentences with a real GPT-2 checkpoint you downloaded (no network is ever used).
======================================================================================

You need, on disk:
  * a Hugging Face GPT-2 folder with config.json and model.safetensors, e.g. from
    https://huggingface.co/openai-community/gpt2 (download the two files by hand);
  * the GPT-2 tokenizer as a tiktoken file (gpt2.tiktoken: one line per token,
    "base64(bytes) rank"), or tiktoken's cache holding the "gpt2" encoding.

Run:  python examples/05_gpt2_checkpoint.py --model path/to/gpt2 [--tokenizer gpt2.tiktoken]
Without the files it says what is missing and exits (code 2; 0 with --quick, a smoke run).
"""
import argparse
import sys
from pathlib import Path

import seqprob as sp
from seqprob.errors import SeqProbError

SENTENCES = ["The cat sat on the mat.", "The cat sat zx oj squid.", "Paris is the capital of France."]


def missing(message, quick):
    print(f"GPT-2 example skipped: {message}\n"
          "Download config.json and model.safetensors of GPT-2 into a folder and pass --model FOLDER "
          "(and --tokenizer gpt2.tiktoken); see the top of this file.", file=sys.stderr)
    return 0 if quick else 2


def main():
    parser = argparse.ArgumentParser(description=__doc__ and __doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2", help="checkpoint folder (default ./gpt2)")
    parser.add_argument("--tokenizer", default="gpt2", help="a .tiktoken file or a cached encoding name")
    parser.add_argument("--quick", action="store_true", help="exit 0 when the files are absent")
    args = parser.parse_args()

    folder = Path(args.model)
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
        return missing(f"no config.json + *.safetensors in {str(folder)!r}", args.quick)
    try:
        from seqprob.gpt import GPT
        from seqprob.tokenizers import TiktokenTokenizer

        tok = TiktokenTokenizer(args.tokenizer)             # reads a local file or the cache only
        model = GPT.from_hf(folder, tokenizer=tok)
    except SeqProbError as exc:
        return missing(str(exc), args.quick)

    # GPT-2 uses <|endoftext|> both as x_0 and as the end of text: the first token is scored too.
    df = sp.score({"gpt2": model}, SENTENCES, distribution=False)
    print(df[["seq", "token", "logprob", "surprisal_bits"]].to_string(index=False))
    print(sp.summarize(df)[["text", "n_tokens", "logprob", "perplexity", "bits_per_byte"]].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
