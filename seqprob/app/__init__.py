"""The application layer: the command line (``cli``), the demo, the HTML report and the
default model's training recipe (``defaults``). It uses the library; no library module
imports it."""
