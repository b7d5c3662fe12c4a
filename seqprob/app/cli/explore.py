"""``seqprob explore``: a local web page that shows the chain rule live (Starlette + uvicorn)."""
from __future__ import annotations

import sys

import argparse

from ._common import positive_int


def _port(text: str) -> int:
    """argparse type: a TCP port, 0 (any free port) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port in [0, 65535], got {value}")
    return value


def register(sub) -> None:
    p = sub.add_parser(
        "explore", help="open a local web page that shows every model number live",
        description="Serve a local web page: type a text and see every token's probability, "
                    "surprisal, rank and entropy, the chain-rule total log P(text), the next-token "
                    "distribution under temperature / top-k / top-p with a sample button, several "
                    "models side by side (with the exact toy language: P* and the KL per position), "
                    "and a GPT's attention and logit lens. Needs pip install \"seqprob[explore]\". "
                    "Stop it with Ctrl-C. Example: seqprob explore default kn3.arpa toy_english")
    p.add_argument("models", nargs="*", metavar="MODEL",
                   help="NAME=SPEC or SPEC: a model file or folder (as --model of the other commands), "
                        "'default' (the shipped GPT) or 'toy_english' (the exact toy language P*); "
                        "named by NAME or the file's stem (default: the shipped GPT)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to serve on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=_port, default=8000, metavar="N", help="port (default 8000; 0: any free port)")
    p.add_argument("--no-browser", action="store_true", help="do not open the page in a browser")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="also answer to requests for this host name (repeatable); others get 400")
    p.add_argument("--max-bytes", type=positive_int, default=100_000, metavar="N",
                   help="largest request body and text, in bytes (default 100000)")
    p.add_argument("--max-tokens", type=positive_int, default=4096, metavar="N",
                   help="largest text, in tokens (default 4096)")
    p.set_defaults(func=run)


def run(args) -> int:
    import logging
    import warnings

    from ..explore.models import load_served
    from ..explore.server import require_extra

    require_extra()  # before loading any model
    from ..explore.api import Explorer
    from ..explore.server import allowed_hosts, bind, create_app, is_loopback, serve, url_of

    explorer = Explorer(load_served(args.models), max_bytes=args.max_bytes, max_tokens=args.max_tokens)
    if not is_loopback(args.host):
        warnings.warn(f"serving on {args.host}: anyone who can reach this machine on port {args.port} "
                      "can use the page and its models (there is no password); requests must name it "
                      f"{args.host}, localhost or an --allow-host NAME", UserWarning, stacklevel=1)
    sock = bind(args.host, args.port)
    url = url_of(sock)
    app = create_app(explorer, allowed_hosts(args.host, args.allow_host))
    names = ", ".join(f"{m.name} ({m.kind})" for m in explorer.served.values())
    print(f"seqprob explore: serving {names} at {url} (Ctrl-C to stop)", flush=True)
    opener = None if args.no_browser else (lambda server: _open_browser(url))
    verbose = logging.getLogger().getEffectiveLevel() <= logging.INFO
    serve(app, sock, log_level="info" if verbose else "warning", on_started=opener)
    print("seqprob explore: stopped", file=sys.stderr, flush=True)
    return 0


def _open_browser(url: str) -> None:
    import webbrowser

    if not webbrowser.open(url):
        print(f"seqprob explore: could not open a browser: open {url} yourself", file=sys.stderr, flush=True)
