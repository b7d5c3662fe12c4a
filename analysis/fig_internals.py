"""Inside the transformer: attention patterns and the logit lens.

Usage: python analysis/fig_internals.py [--out DIR] [--quick] [--model PATH] [--corpus FILE]
Writes the figures (PNG + SVG) and internals.html to DIR (default analysis_out/).
"""
import sys

from seqprob.app.report import script_main

if __name__ == "__main__":
    sys.exit(script_main(["attention", "lens"], "internals.html", __doc__.splitlines()[0]))
