"""The next-token distribution at several temperatures, with samples.

Usage: python analysis/fig_sampling.py [--out DIR] [--quick] [--model PATH] [--corpus FILE]
Writes the figures (PNG + SVG) and sampling.html to DIR (default analysis_out/).
"""
import sys

from seqprob.app.report import script_main

if __name__ == "__main__":
    sys.exit(script_main(["sampling"], "sampling.html", __doc__.splitlines()[0]))
