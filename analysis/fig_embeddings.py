"""Token embeddings: PCA, nearest neighbours, king - man + woman, gender and number directions.

Usage: python analysis/fig_embeddings.py [--out DIR] [--quick] [--model PATH] [--corpus FILE]
Writes the figures (PNG + SVG) and embeddings.html to DIR (default analysis_out/).
"""
import sys

from seqprob.app.report import script_main

if __name__ == "__main__":
    sys.exit(script_main(["embeddings", "arithmetic"], "embeddings.html", __doc__.splitlines()[0]))
