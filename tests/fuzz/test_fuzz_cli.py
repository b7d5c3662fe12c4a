"""Each CLI command given hostile arguments and files, run in-process through
``seqprob.app.cli.main(argv)`` (a couple through a real subprocess): it succeeds (exit 0) or it
fails with exit status 2 and exactly one line on stderr, never a traceback."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqprob.app.cli import main

FUZZ = settings(max_examples=int(os.environ.get("SEQPROB_FUZZ_EXAMPLES", 25)), deadline=None,
                derandomize=os.environ.get("SEQPROB_FUZZ_RANDOM") is None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
ROOT = Path(__file__).resolve().parents[2]
ARPA = str(ROOT / "seqprob" / "data" / "toy_english.json")  # a grammar spec: a small, valid model


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Hostile files: missing, a folder, empty, binary, non-UTF-8, malformed JSON/ARPA, and valid ones."""
    d = tmp_path_factory.mktemp("cli")
    (d / "folder").mkdir()
    (d / "folder.arpa").mkdir()
    (d / "empty.txt").write_bytes(b"")
    (d / "binary.txt").write_bytes(bytes(range(256)) * 4)
    (d / "latin1.txt").write_bytes("the caf\xe9 sat\n".encode("latin-1"))
    (d / "nul.txt").write_bytes(b"the \x00 cat\nthe dog\n")
    (d / "corpus.txt").write_text("the cat sat on the mat\nthe dog sat on the mat\n" * 3)
    (d / "bad.json").write_text('{"type": []}')
    (d / "list.json").write_text("[1, 2]")
    (d / "bad.arpa").write_text("\\data\\\nngram 1=99999999999\n\n\\1-grams:\n-1 a\n")
    (d / "trunc.arpa").write_text("\\data\\\nngram 1=3\n")
    (d / "model.toml").write_text("states = 3")
    paths = {name: str(d / name) for name in os.listdir(d)}
    paths.update(missing=str(d / "missing.txt"), grammar=ARPA, out=str(d / "out" / "x"),
                 out_in_file=str(d / "corpus.txt" / "x.arpa"), dash="-")
    return paths


NUMBERS = st.sampled_from(["-1", "0", "1", "2", "nan", "inf", "-inf", "1e999", "abc", "", "3.5", "99999999999"])
SMALL_NUMBERS = st.sampled_from(["-1", "0", "1", "2", "nan", "inf", "1e999", "abc", "", "3.5"])  # no 10**11 samples
TEXTS = st.sampled_from(["the cat", "", " ", "\udcff\udcfe", "x\x7f", "<s>", "--", "-", "the \udce9 caf"])


@st.composite
def argv(draw, files):
    f = st.sampled_from(sorted(files))
    name = lambda: files[draw(f)]  # noqa: E731
    command = draw(st.sampled_from(["score", "ppl", "tokenize", "sample", "ngram", "train", "report", "demo", "junk"]))
    if command == "score":
        args = ["score", draw(TEXTS), "--model", name()] + draw(st.sampled_from(
            [[], ["--tokenizer", name()], ["--file", name()], ["--format", "xml"], ["--summary"]]))
    elif command == "ppl":
        args = ["ppl", "--model", name(), name()]
    elif command == "tokenize":
        args = ["tokenize", draw(TEXTS), "--tokenizer", draw(st.sampled_from([name(), "gpt2x", "char"]))]
    elif command == "sample":
        args = ["sample", "--model", name(), "--temperature", draw(NUMBERS), "-n", draw(SMALL_NUMBERS),
                "--max-new-tokens", draw(SMALL_NUMBERS)]
    elif command == "ngram":
        args = ["ngram", "fit", name(), "-o", name(), "--order", draw(NUMBERS)]
    elif command == "train":
        args = ["train", name(), "-o", name(), "--steps", draw(NUMBERS), "--eval-every", draw(NUMBERS),
                "--n-embd", draw(NUMBERS)]
    elif command == "report":
        args = ["report", "--out", name(), "--model", name(), "--only", draw(TEXTS)]
    elif command == "demo":
        args = ["demo", "--out", name(), "--seed", draw(NUMBERS), "--bogus"]
    else:
        args = [draw(TEXTS), draw(NUMBERS)]
    return args


def run_main(args, stdin: bytes = b""):
    """(exit status, stdout, stderr) of ``main(args)`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    fake_in = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    old_in, sys.stdin = sys.stdin, fake_in
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(args)
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin = old_in
    return rc, out.getvalue(), err.getvalue()


def assert_clean_failure(rc, err, args):
    assert rc in (0, 2), f"{args}: exit status {rc}, stderr {err!r}"
    assert "Traceback" not in err, f"{args}: traceback\n{err}"
    if rc == 2:
        lines = [line for line in err.splitlines() if "warning:" not in line]
        assert len(lines) == 1 and lines[0].startswith("seqprob"), f"{args}: stderr {err!r}"


def test_cli_commands_with_hostile_arguments(files):
    @FUZZ
    @given(argv(files), st.sampled_from([b"", b"the cat\n", b"\xff\xfe bad\n", b"a\x00b\n"]))
    def check(args, stdin):
        if "demo" in args or "report" in args or "train" in args:
            assume_fast(args)
        rc, _, err = run_main(args, stdin)
        assert_clean_failure(rc, err, args)

    check()


def assume_fast(args):
    """Keep the fuzz quick: the slow commands are only given arguments that make them fail early."""
    from hypothesis import assume

    assume("--bogus" in args or any(a in args for a in ("-1", "0", "nan", "abc", "", "1e999")))


@pytest.mark.parametrize("args, stdin, message", [
    (["tokenize", "-", "--tokenizer", "char"], b"ok\n\xff\xfe\n", "stdin line 2: not valid UTF-8"),
    (["tokenize", "the \udce9 caf", "--tokenizer", "char"], b"", "not valid UTF-8 (byte e9 at character 5)"),
    (["train", "C", "-o", "O", "--eval-every", "0"], b"", "--eval-every: must be an integer >= 1"),
    (["ngram", "fit", "C", "-o", "F"], b"", "is a folder: give a file name"),
    (["ppl", "--model", "F", "C"], b"", "F"),
    (["no-such-command"], b"", "invalid choice"),
])
def test_known_bad_invocations_are_one_line_errors(args, stdin, message, files, tmp_path):
    subst = {"C": files["corpus.txt"], "O": str(tmp_path / "m"), "F": files["folder.arpa"]}
    args = [subst.get(a, a) for a in args]
    message = subst.get(message, message)
    rc, _, err = run_main(args, stdin)
    assert rc == 2 and message in err, err
    assert_clean_failure(rc, err, args)


@pytest.mark.parametrize("args, stdin", [
    (["tokenize", "-", "--tokenizer", "char"], b"ok\n\xff\xfe\n"),
    (["ngram", "fit", "CORPUS", "-o", "FOLDER"], b""),
])
def test_subprocess_errors_are_one_line(args, stdin, files):
    args = [files["corpus.txt"] if a == "CORPUS" else files["folder.arpa"] if a == "FOLDER" else a for a in args]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "seqprob", *args], input=stdin, capture_output=True,
                          env=env, timeout=120)
    err = proc.stderr.decode("utf-8", "replace")
    assert_clean_failure(proc.returncode, err, args)
    assert proc.returncode == 2
