"""How live does ``seqprob explore`` feel? Time its JSON API on the default model.

Each row is the median [min-max] of ``--runs`` (>= 7) timed calls after ``--warmups`` (>= 2),
in one fresh child process with ``--threads`` BLAS and seqprob threads set by environment and
by API (``_harness.child_env``: without ``OPENBLAS_CORETYPE`` unless ``--keep-openblas-env``).
Two ways in:

* **in process**: ``Explorer.handle(endpoint, body)``, i.e. parsing, the library's computation and
  the JSON answer, with no HTTP;
* **over HTTP**: a POST to a uvicorn server of the same app in a thread of this process, on one
  kept-alive connection (what the page's ``fetch`` costs, minus the browser).

The target (the issue): ``/api/score`` of a 200-token text well under 100 ms on 2 cores. The
temperature slider needs no request: the page re-applies softmax(u / T), top-k and top-p to the
row ``/api/next`` sent once; ``--browser`` also times that redraw in headless Chromium.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_explore.py [--runs 9] [--warmups 3] [--threads 2] [--cpus 0,1] [--browser]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import shutil
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import ROOT, child_env, describe_blas, timeit  # noqa: E402


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def text_of(n_tokens: int) -> str:
    import seqprob as sp

    words = " ".join(sp.toy_english().sample(200, seed=0)).split()
    return " ".join(words[:n_tokens])


def jobs(text200: str, text24: str) -> list:
    return [
        ("score", {"text": text200}, "score, 200 tokens"),
        ("score", {"text": text24}, "score, 24 tokens"),
        ("words", {"text": text200}, "words, 200 tokens"),
        ("next", {"text": text200, "logprobs": True}, "next (+ full row), 200-token context"),
        ("sample", {"text": text200, "temperature": 0.8, "seed": 1}, "sample, 200-token context"),
        ("inside", {"text": text24, "layer": 1, "head": 0}, "inside, 24 tokens"),
        ("compare", {"text": text200}, "compare gpt + n-gram + P*, 200 tokens"),
    ]


def start_server(explorer):
    import uvicorn

    from seqprob.app.explore.server import bind, create_app

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(explorer), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.01)
    return server, sock.getsockname()[1]


def http_call(conn, endpoint: str, body: bytes) -> None:
    conn.request("POST", f"/api/{endpoint}", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = response.read()
    if response.status != 200:
        raise SystemExit(f"/api/{endpoint} answered {response.status}: {payload[:200]!r}")


def browser_redraw(port: int, runs: int, warmups: int) -> dict:
    """Seconds from a temperature 'input' event to the redrawn bars, in headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("body[data-ready=true]")
        page.wait_for_function("() => document.querySelector('[data-entropy-bits]').dataset.entropyBits !== ''")
        times = page.evaluate("""([runs, warmups]) => {
            const el = document.querySelector('input[name=temperature]'), out = [];
            for (let i = 0; i < runs + warmups; i++) {
                el.value = String(0.5 + (i % 9) * 0.5);
                const t0 = performance.now();
                el.dispatchEvent(new Event('input', {bubbles: true}));
                if (i >= warmups) out.push((performance.now() - t0) / 1000);
            }
            return out;
        }""", [runs, warmups])
        browser.close()
    times.sort()
    return {"median": times[len(times) // 2], "min": times[0], "max": times[-1]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9, help="timed calls per row (>= 7 for figures)")
    ap.add_argument("--warmups", type=int, default=3, help="untimed calls first (>= 2)")
    ap.add_argument("--threads", type=int, default=2, help="BLAS and seqprob threads (default 2)")
    ap.add_argument("--cpus", default=None, help="pin the child with taskset -c CPUS (e.g. 0,1)")
    ap.add_argument("--keep-openblas-env", action="store_true",
                    help="keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in the child")
    ap.add_argument("--browser", action="store_true", help="also time the slider's redraw in Chromium")
    ap.add_argument("--child", action="store_true", help="internal: the measuring process")
    args = ap.parse_args(argv)
    if args.child:
        return measure(args)
    print(f"command: {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs visible; load average {os.getloadavg()[0]:.2f}")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", *(argv if argv is not None else sys.argv[1:])]
    if args.cpus:
        cmd = ["taskset", "-c", args.cpus, *cmd]
    sys.stdout.flush()
    subprocess.run(cmd, env=child_env(args.threads, args.keep_openblas_env), cwd=ROOT, check=True)


def measure(args) -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(args.threads)
    from seqprob import _parallel

    _parallel.set_num_threads(args.threads)
    explorer = build_explorer()
    print(f"child: {args.threads} threads; BLAS {describe_blas()}; python {platform.python_version()}")
    print(f"{args.runs} runs after {args.warmups} warmups each; median [min-max]\n")
    if args.runs < 7 or args.warmups < 2:
        print("(smoke test: fewer than 7 runs or 2 warmups, not a figure to publish)\n")
    server, port = start_server(explorer)
    print(f"{'request':42s} {'in process':>26s} {'over HTTP':>26s}")
    for endpoint, body, label in jobs(text_of(200), text_of(24)):
        raw = json.dumps(body).encode()
        inproc = timeit(lambda: explorer.handle(endpoint, raw), args.runs, args.warmups)
        conn = http.client.HTTPConnection("127.0.0.1", port)  # kept alive over this row's calls
        over = timeit(lambda: http_call(conn, endpoint, raw), args.runs, args.warmups)
        conn.close()
        print(f"{label:42s} {ms(inproc):>26s} {ms(over):>26s}", flush=True)
    if args.browser:
        redraw = browser_redraw(port, args.runs, args.warmups)
        print(f"\n{'temperature slider redraw (Chromium, no request)':42s} {ms(redraw):>26s}")
    server.should_exit = True


def ms(r: dict) -> str:
    return f"{r['median'] * 1e3:.1f} ms [{r['min'] * 1e3:.1f}-{r['max'] * 1e3:.1f}]"


def build_explorer():
    import tempfile

    import seqprob as sp
    from seqprob.app.explore import Explorer, load_served

    truth = sp.toy_english()
    with sp.ngram.expected_discount_fallback():
        kn = sp.ngram.ModifiedKneserNey(order=3).fit(truth.sample(20_000, seed=1), tokenizer=truth.tokenizer)
    folder = tempfile.mkdtemp(prefix="bench-explore-")
    path = os.path.join(folder, "kn3.arpa")
    sp.write_arpa(kn, path)
    try:
        return Explorer(load_served(["default", path, "toy_english"]))
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
