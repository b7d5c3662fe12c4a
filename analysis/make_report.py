"""Build the full seqprob report: every figure family in one self-contained HTML page.

Usage: python analysis/make_report.py [--out DIR] [--quick] [--model PATH] [--corpus FILE]
The same as `seqprob report --out DIR`; the logic lives in seqprob.app.report so that the installed
command works without this folder.
"""
import sys

from seqprob.app.report import SECTIONS, script_main

if __name__ == "__main__":
    sys.exit(script_main([key for key, *_ in SECTIONS], "report.html", __doc__.splitlines()[0]))
