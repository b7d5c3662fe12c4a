"""Calibration: reliability diagrams and expected calibration error.

Usage: python analysis/fig_calibration.py [--out DIR] [--quick] [--model PATH] [--corpus FILE]
Writes the figures (PNG + SVG) and calibration.html to DIR (default analysis_out/).
"""
import sys

from seqprob.app.report import script_main

if __name__ == "__main__":
    sys.exit(script_main(["calibration"], "calibration.html", __doc__.splitlines()[0]))
