"""Why counting fails: V^T rows vs atoms in the universe, perplexity and unseen n-grams vs order.

Usage: python analysis/fig_sparsity.py [--out DIR] [--quick] [--model PATH] [--corpus FILE]
Writes the figures (PNG + SVG) and sparsity.html to DIR (default analysis_out/).
"""
import sys

from seqprob.app.report import script_main

if __name__ == "__main__":
    sys.exit(script_main(["lookup", "sparsity"], "sparsity.html", __doc__.splitlines()[0]))
