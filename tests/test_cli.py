"""The command line: every command's --help, output formats, errors without tracebacks."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from seqprob.app.cli import build_parser, main

FIXTURES = Path(__file__).parent / "fixtures" / "kenlm"
ARPA = str(FIXTURES / "genesis.o3.arpa.gz")
COMMANDS = ["demo", "score", "tokenize", "sample", "ngram", "ppl", "train", "report", "compress", "decompress"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: seqprob {command}" in out and len(out.splitlines()) > 3


def test_all_commands_registered():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(COMMANDS) <= set(sub.choices)


def test_score_json_with_arpa_model(capsys):
    assert main(["score", "the cat sat on the mat", "and god said", "--model", ARPA, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["seq"] for r in rows} == {0, 1}
    first = rows[0]
    assert first["position"] == 1 and first["token"] == "the"
    assert set(first) >= {"model", "logprob", "log10prob", "surprisal_bits", "entropy_bits", "rank",
                          "is_oov", "is_eos"}


def test_score_summary_table_and_csv(capsys):
    assert main(["score", "the cat sat zx", "--model", ARPA, "--summary"]) == 0
    out = capsys.readouterr().out
    assert "perplexity" in out and "the cat sat zx" in out
    assert main(["score", "and god said", "--model", ARPA, "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("model,seq,position,token") and len(lines) == 1 + 4
    assert main(["score", "and god said", "--model", ARPA, "--format", "csv", "--no-distribution"]) == 0
    lean = capsys.readouterr().out.strip().splitlines()
    assert "entropy_bits" not in lean[0]
    assert [row.split(",")[5] for row in lean] == [row.split(",")[5] for row in lines]  # same logprob


def test_ppl_matches_kenlm(capsys):
    assert main(["ppl", "--model", ARPA, str(FIXTURES / "exodus.test.txt"), "--format", "json"]) == 0
    figures = {r["figure"]: r["value"] for r in json.loads(capsys.readouterr().out)}
    kenlm = dict(line.split(":\t") for line in (FIXTURES / "exodus.o3.summary.txt").read_text().splitlines()
                 if ":\t" in line)
    assert figures["perplexity including OOVs (KenLM)"] == pytest.approx(float(kenlm["Perplexity including OOVs"]),
                                                                        rel=1e-6)
    assert figures["OOVs"] == 384 and figures["sentences"] == 200


def test_ppl_per_sentence(capsys):
    assert main(["ppl", "--model", ARPA, str(FIXTURES / "probes.txt"), "--per-sentence"]) == 0
    out = capsys.readouterr().out
    assert out.count("the cat sat") >= 2 and "ppl1 (SRILM)" in out


def test_sample_is_reproducible(capsys):
    args = ["sample", "and god", "--model", ARPA, "--seed", "4", "-n", "2", "--max-new-tokens", "8"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first and first.startswith("and god")


@pytest.fixture(scope="module")
def bad_tokenizer_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "broken.json"
    path.write_text('{"type": "whitespace", "vocab": {"tokens": [1, 1]}}')
    return str(path)


@pytest.mark.parametrize("argv, message", [
    (["score", "x", "--model", "/no/such/model.arpa"], "'/no/such/model.arpa' does not exist"),
    (["score", "--model", ARPA], "no text"),
    (["score", "", "--model", ARPA], "empty text ''"),
    (["score", "x", "--model", ARPA, "--tokenizer", "/no/such/tok.json"], "'/no/such/tok.json'"),
    (["score", "x", "--model", ARPA, "--tokenizer", "BAD"], "field 'tokens[0]' must be a string"),
    (["sample", "--model", ARPA, "--temperature", "0"], "temperature must be > 0 (use a small value"),
    (["tokenize", "x", "--tokenizer", "nope_base"], "unknown tiktoken encoding 'nope_base'"),
    (["ppl", "--model", ARPA, "/no/such/file.txt"], "'/no/such/file.txt': no such file"),
])
def test_errors_are_one_line_no_traceback(argv, message, capsys, bad_tokenizer_file):
    assert main([bad_tokenizer_file if a == "BAD" else a for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["demo", "report", "ppl", "train", "sample"])
def test_negative_seeds_are_refused_by_every_command(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--seed", "-1"])
    assert exit_.value.code == 2
    assert "must be an integer >= 0, got -1" in capsys.readouterr().err


def test_no_command_overwrites_its_own_input(tmp_path, capsys):
    """An output path that is (a link to) an input file is refused before anything is read
    or written: the input is left as it was."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c\nb c a\nc a b\n")
    arpa = tmp_path / "m.arpa"
    assert main(["ngram", "fit", str(corpus), "-o", str(arpa), "--order", "2"]) == 0
    (tmp_path / "link.arpa").symlink_to(arpa)
    before = {p: p.read_bytes() for p in (corpus, arpa)}
    for argv in (["ngram", "fit", str(corpus), "-o", str(corpus)],
                 ["ngram", "build-binary", str(arpa), str(tmp_path / "link.arpa")],
                 ["compress", str(corpus), "-o", str(corpus), "--model", str(arpa)],
                 ["compress", str(corpus), "-o", str(tmp_path / "link.arpa"), "--model", str(arpa)]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        assert "refusing to overwrite it" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in (corpus, arpa)} == before


def test_ppl_ci_with_a_zero_probability_token_still_prints_the_figures(tmp_path, capsys):
    """compare() refuses a model with P = 0 on some token; ppl --ci says the interval does not
    exist (a warning, empty interval columns) and prints every figure (exit 0)."""
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    train.write_text("a b c\nb c a\n")
    test.write_text("a b\nc b\n")
    assert main(["ngram", "fit", str(train), "-o", str(tmp_path / "mle.arpa"), "--order", "2",
                 "--smoothing", "mle"]) == 0
    capsys.readouterr()
    assert main(["ppl", "--model", str(tmp_path / "mle.arpa"), str(test), "--ci", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert "no bootstrap intervals: a token has probability 0" in captured.err
    assert "ppl (SRILM)" in captured.out and "bits per token,inf,," in captured.out


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "seqprob", "score", "the cat", "--model", ARPA,
                           "--format", "csv"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("model,seq,position")
    bad = subprocess.run([sys.executable, "-m", "seqprob", "score", "x", "--model", "nope.arpa"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
