"""Learning curves against n-gram baselines and the true entropy, with held-out cross-entropies.

Usage: python analysis/fig_learning.py [--out DIR] [--quick] [--model PATH] [--corpus FILE]
Writes the figures (PNG + SVG) and learning.html to DIR (default analysis_out/).
"""
import sys

from seqprob.app.report import script_main

if __name__ == "__main__":
    sys.exit(script_main(["learning"], "learning.html", __doc__.splitlines()[0]))
