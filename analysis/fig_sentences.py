"""Three sentences token by token: surprisal per model and the chain rule as a running sum.

Usage: python analysis/fig_sentences.py [--out DIR] [--quick] [--model PATH] [--corpus FILE]
Writes the figures (PNG + SVG) and sentences.html to DIR (default analysis_out/).
"""
import sys

from seqprob.app.report import script_main

if __name__ == "__main__":
    sys.exit(script_main(["sentences"], "sentences.html", __doc__.splitlines()[0]))
