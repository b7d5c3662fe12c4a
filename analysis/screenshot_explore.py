"""The screenshot of ``seqprob explore`` in docs/explore.md and the README.

Serves the shipped GPT, a modified Kneser-Ney trigram fitted on 20,000 sentences of the toy
language and the exact language P*, types "the cat sat on the mat" into the page in headless
Chromium (the system one), hovers "cat" and saves the whole page.

Usage (from the repository root)::

    PYTHONPATH=. python analysis/screenshot_explore.py [--out docs/images/explore.png]
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
from pathlib import Path

import seqprob as sp
from seqprob._io import atomic_write
from seqprob.app.explore import Explorer, load_served
from seqprob.app.explore.server import bind, create_app


def explorer(folder: Path) -> Explorer:
    truth = sp.toy_english()
    with sp.ngram.expected_discount_fallback():
        kn = sp.ngram.ModifiedKneserNey(order=3).fit(truth.sample(20_000, seed=1), tokenizer=truth.tokenizer)
    path = folder / "kn3.arpa"
    sp.write_arpa(kn, path)
    return Explorer(load_served(["default", str(path), "toy_english"]))


def shoot(url: str, out: Path, text: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1360, "height": 900}, device_scale_factor=1)
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]")
        page.fill("textarea", text)
        page.wait_for_function("n => document.querySelectorAll('#tokens [data-token-id]').length === n",
                               arg=len(text.split()))
        page.wait_for_function("() => document.querySelectorAll('#lens td').length > 0 && "
                               "document.querySelectorAll('#compare td[data-model]').length > 0")
        page.wait_for_timeout(500)
        page.hover("#tokens .tok:nth-child(2)")
        png = page.screenshot(full_page=True)
        browser.close()
    if errors:
        raise SystemExit(f"the page logged errors: {errors}")
    with atomic_write(out, "wb", encoding=None) as handle:
        handle.write(png)


def main(argv=None) -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/images/explore.png")
    ap.add_argument("--text", default="the cat sat on the mat")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        app = create_app(explorer(Path(folder)))
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.01)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        shoot(f"http://127.0.0.1:{sock.getsockname()[1]}/", out, args.text)
    finally:
        server.should_exit = True
        thread.join(5)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
