"""The command line as a new user meets it: standard input, output files, terminal width,
progress, what --model and --tokenizer take, messages in the CLI's words, suggestions."""
import argparse
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from seqprob.app.cli import build_parser, main

FIXTURES = Path(__file__).parent / "fixtures" / "kenlm"
ARPA = str(FIXTURES / "genesis.o3.arpa.gz")
PROBES = str(FIXTURES / "probes.txt")
ROOT = Path(__file__).resolve().parents[1]
CORPUS = "the cat sat on the mat\nthe dog sat on the mat\na cat ran\nthe dog ran\n" * 3


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(CORPUS, encoding="utf-8")
    return path


def _stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8"))


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal (progress bars are drawn on it)."""

    def isatty(self):
        return True


# ------------------------------------------------------------------ standard input


def test_score_reads_stdin_when_no_text_is_given():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "seqprob", "score", "--format", "csv"], input="the cat sat\n",
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = pd.read_csv(io.StringIO(proc.stdout))
    assert rows["token"].tolist() == ["the", "cat", "sat", "</s>"]


@pytest.mark.parametrize("argv", [["score", "--summary"], ["score", "-", "--summary"]])
def test_score_stdin_lines_are_texts(argv, monkeypatch, capsys):
    _stdin(monkeypatch, "the cat sat\n\na dog ran\n")
    assert main([*argv, "--format", "json"]) == 0
    assert [r["text"] for r in json.loads(capsys.readouterr().out)] == ["the cat sat", "a dog ran"]


def test_tokenize_and_ppl_read_stdin_too(monkeypatch, capsys):
    _stdin(monkeypatch, "the cat\n")
    assert main(["tokenize", "--format", "json"]) == 0
    assert [r["token"] for r in json.loads(capsys.readouterr().out)] == ["the", "cat"]
    _stdin(monkeypatch, "and god said\n")
    assert main(["ppl", "--model", ARPA, "--format", "json"]) == 0
    assert {r["figure"]: r["value"] for r in json.loads(capsys.readouterr().out)}["sentences"] == 1


def test_no_text_on_a_terminal_says_how_to_give_it(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", _Terminal())
    assert main(["score"]) == 2
    assert "pass TEXT arguments, --file FILE, or text on standard input" in capsys.readouterr().err


# ------------------------------------------------------------------ output files


def test_ngram_fit_refuses_to_replace_a_file_that_is_not_a_model(corpus, tmp_path, capsys):
    other = tmp_path / "corpus_copy.txt"
    other.write_text(CORPUS)
    assert main(["ngram", "fit", str(corpus), "-o", str(other), "--order", "2"]) == 2
    assert "already exists and is not an ARPA file" in capsys.readouterr().err
    assert other.read_text() == CORPUS  # untouched
    model = tmp_path / "m.arpa"
    assert main(["ngram", "fit", str(corpus), "-o", str(model), "--order", "2"]) == 0
    assert main(["ngram", "fit", str(corpus), "-o", str(model), "--order", "3"]) == 0  # a model: replaced
    assert "ngram 3=" in model.read_text()
    assert main(["ngram", "fit", str(corpus), "-o", str(other), "--order", "2", "--force"]) == 0
    assert other.read_text().startswith("\\data\\")


def test_the_refusal_names_force(corpus, tmp_path, capsys):
    other = tmp_path / "notes.txt"
    other.write_text("keep me")
    assert main(["ngram", "fit", str(corpus), "-o", str(other)]) == 2
    err = capsys.readouterr().err
    assert f"-o {str(other)!r} already exists and is not an ARPA file" in err and "--force" in err


@pytest.mark.parametrize("argv", [
    ["ngram", "build-binary", "ARPA", "OTHER.sqlm"],
    ["compress", "TEXT", "-o", "OTHER.sqlm"],
    ["decompress", "PACKED", "-o", "OTHER.sqlm"],
])
def test_other_writers_refuse_too(argv, corpus, tmp_path, capsys):
    arpa = tmp_path / "m.arpa"
    assert main(["ngram", "fit", str(corpus), "-o", str(arpa), "--order", "2"]) == 0
    packed = tmp_path / "c.spz"
    text = tmp_path / "t.txt"
    text.write_text("the cat sat\n")
    assert main(["compress", str(text), "-o", str(packed), "--model", str(arpa)]) == 0
    other = tmp_path / "other.sqlm"
    other.write_text("keep me")
    subst = {"ARPA": str(arpa), "OTHER.sqlm": str(other), "TEXT": str(text), "PACKED": str(packed)}
    capsys.readouterr()
    assert main([subst.get(a, a) for a in argv] + ["--model", str(arpa)] * (argv[0] != "ngram")) == 2
    assert "--force" in capsys.readouterr().err and other.read_text() == "keep me"
    assert main([subst.get(a, a) for a in argv] + ["--model", str(arpa)] * (argv[0] != "ngram") + ["--force"]) == 0


def test_arpa_gz_output_is_gzipped_and_readable(corpus, tmp_path, capsys):
    out = tmp_path / "m.arpa.gz"
    assert main(["ngram", "fit", str(corpus), "-o", str(out), "--order", "2"]) == 0
    with gzip.open(out, "rt") as handle:
        assert handle.readline().startswith("\\data\\")
    assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / "s.arpa.gz"), "-S", "1M"]) == 0
    assert gzip.open(tmp_path / "s.arpa.gz").read(6) == b"\\data\\"
    capsys.readouterr()
    assert main(["ppl", "--model", str(out), str(corpus), "--format", "json"]) == 0
    assert {r["figure"]: r["value"] for r in json.loads(capsys.readouterr().out)}["sentences"] == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.arpa.gz", "s.arpa.gz", "train.txt"]
    assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / "m.sqlm.gz")]) == 2
    assert "cannot be gzipped" in capsys.readouterr().err


def test_compress_reads_gz_and_decompress_writes_gz(tmp_path, capsys):
    text = tmp_path / "t.txt.gz"
    text.write_bytes(gzip.compress(b"the cat sat\n"))
    assert main(["compress", str(text), "-o", str(tmp_path / "t.spz")]) == 0
    assert main(["decompress", str(tmp_path / "t.spz"), "-o", str(tmp_path / "back.txt.gz")]) == 0
    assert gzip.decompress((tmp_path / "back.txt.gz").read_bytes()) == b"the cat sat\n"
    assert main(["compress", str(text), "-o", str(tmp_path / "t.gz")]) == 2
    assert "not gzip" in capsys.readouterr().err and not (tmp_path / "t.gz").exists()


@pytest.mark.parametrize("target", ["nodir/m.arpa", "folder", "folder.sqlm"])
def test_ngram_fit_checks_the_output_before_counting(target, corpus, tmp_path, monkeypatch, capsys):
    from seqprob.ngram.base import NGramModel

    (tmp_path / "folder").mkdir()
    (tmp_path / "folder.sqlm").mkdir()
    fitted = []
    monkeypatch.setattr(NGramModel, "fit", lambda self, *a, **k: fitted.append(1))
    assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / target)]) == 2
    assert not fitted
    err = capsys.readouterr().err
    assert "does not exist" in err or "is a folder" in err


def test_build_binary_and_compress_check_the_output_first(corpus, tmp_path, monkeypatch, capsys):
    import seqprob.app.cli.compress as cli_compress
    import seqprob.ngram.arpa

    read = []
    monkeypatch.setattr(seqprob.ngram.arpa, "read_arpa", lambda *a, **k: read.append(1))
    monkeypatch.setattr(cli_compress, "load_model", lambda *a, **k: read.append(1))
    assert main(["ngram", "build-binary", ARPA, str(tmp_path / "no" / "m.sqlm")]) == 2
    assert main(["compress", str(corpus), "-o", str(tmp_path / "no" / "c.spz")]) == 2
    assert main(["decompress", str(corpus), "-o", str(tmp_path)]) == 2
    assert not read
    assert capsys.readouterr().err.count("error:") == 3


def test_build_binary_with_swapped_arguments_says_so(tmp_path, capsys):
    arpa = tmp_path / "kn3.arpa"
    shutil.copy(FIXTURES / "genesis.o3.arpa.gz", tmp_path / "kn3.arpa.gz")
    with gzip.open(tmp_path / "kn3.arpa.gz") as src:
        arpa.write_bytes(src.read())
    before = arpa.read_bytes()
    assert main(["ngram", "build-binary", str(tmp_path / "out.sqlm"), str(arpa)]) == 2
    err = capsys.readouterr().err
    assert "look swapped" in err and f"build-binary {arpa} {tmp_path / 'out.sqlm'}" in err
    assert arpa.read_bytes() == before
    assert main(["ngram", "build-binary", str(arpa), str(tmp_path / "out.sqlm")]) == 0
    assert main(["ngram", "build-binary", str(tmp_path / "out.sqlm"), str(tmp_path / "x.sqlm")]) == 2
    assert "is a .sqlm file, not an ARPA file" in capsys.readouterr().err
    assert main(["ngram", "build-binary", str(arpa), str(tmp_path / "other.arpa")]) == 2
    assert "OUT is the .sqlm file to write, e.g. 'other.sqlm'" in capsys.readouterr().err


# ------------------------------------------------------------------ terminal tables


@pytest.mark.parametrize("argv", [
    ["score", "the cat sat on the mat"],
    ["score", "the cat sat on the mat", "--summary"],
    ["score", "the cat sat on the mat and the dog ran to the mat while a cat sat on the mat", "--summary"],
    ["ppl", "--model", ARPA, str(FIXTURES / "exodus.test.txt"), "--per-sentence"],
    ["ppl", "--model", ARPA, PROBES, "--ci", "--n-boot", "100"],
    ["sample", "the cat", "-n", "2", "--format", "table"],
    ["tokenize", "the cat sat"],
])
def test_default_tables_fit_an_80_column_terminal(argv, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    assert shutil.get_terminal_size().columns == 80
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and max(map(len, lines)) <= 80, max(lines, key=len)


def test_csv_keeps_every_column_at_any_width(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "40")
    assert main(["score", "the cat sat", "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert {"log10prob", "token_id", "is_eos", "entropy_bits"} <= set(header)
    assert main(["score", "the cat sat"]) == 0
    assert "not shown at 40 columns: log10prob" in capsys.readouterr().out


def test_demo_can_fit_its_tables_with_the_shared_helper():
    from seqprob.app.tables import fit_table

    wide = pd.DataFrame({"the cat sat on the mat and the dog ran": [-12.25, -13.5],
                         "a dog saw the cat that sat on the mat": [-14.0, -15.75]},
                        index=pd.Index(["truth", "gpt"], name="model"))
    lines = fit_table(wide, 40, index=True).splitlines()
    assert max(map(len, lines)) <= 40 and lines[0].startswith("model")
    assert any(line.startswith("gpt") and "-12.25" not in line for line in lines)
    assert "-15.75" in fit_table(wide, 40, index=True)  # wrapped or cut, never dropped


# ------------------------------------------------------------------ ppl figures


def test_ppl_table_rounds_keeps_labels_whole_and_the_same_rows_with_ci(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["ppl", "--model", ARPA, PROBES]) == 0
    plain = capsys.readouterr().out
    assert main(["ppl", "--model", ARPA, PROBES, "--ci", "--n-boot", "100"]) == 0
    with_ci = capsys.readouterr().out
    assert "…" not in with_ci and "bits per byte" in plain
    first = lambda text: [line[:35].strip() for line in text.splitlines()[1:]]  # noqa: E731
    assert first(plain) == first(with_ci)
    assert main(["ppl", "--model", ARPA, PROBES, "--format", "csv"]) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("figure")["value"]
    full = float(csv["perplexity including OOVs (KenLM)"])
    assert repr(full) not in plain and f"{full:.2f}" in plain or f"{full:.3f}" in plain
    assert len(str(csv["log10 total"]).split(".")[1]) > 6  # csv keeps every digit


# ------------------------------------------------------------------ progress


def test_progress_shows_on_a_terminal_and_not_with_no_progress(corpus, tmp_path, monkeypatch):
    for extra, shown in (([], True), (["--no-progress"], False)):
        err = _Terminal()
        monkeypatch.setattr(sys, "stderr", err)
        assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / "m.arpa"), *extra]) == 0
        assert main(["ppl", "--model", str(tmp_path / "m.arpa"), str(corpus), *extra]) == 0
        text = err.getvalue()
        assert ("counting n-grams" in text and "writing ARPA" in text) is shown, text
        assert ("reading ARPA" in text) is shown, text


def test_big_files_get_stage_lines_on_a_terminal(corpus, tmp_path, monkeypatch):
    import seqprob.app.cli._loading as loading
    import seqprob.app.cli.ppl as ppl

    assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / "m.arpa"), "--no-progress"]) == 0
    monkeypatch.setattr(loading, "BIG_MODEL_BYTES", 0)  # every file counts as big
    monkeypatch.setattr(ppl, "BIG_TEST_BYTES", 0)
    err = _Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["ppl", "--model", str(tmp_path / "m.arpa"), str(corpus)]) == 0
    assert f"seqprob ppl: loading model {str(tmp_path / 'm.arpa')!r}" in err.getvalue()
    assert f"seqprob ppl: scoring {str(corpus)!r}: done in" in err.getvalue()


def test_no_progress_when_stderr_is_not_a_terminal(corpus, tmp_path, capsys):
    assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / "m.arpa")]) == 0
    assert "writing ARPA" not in capsys.readouterr().err


# ------------------------------------------------------------------ --model and --tokenizer


@pytest.mark.parametrize("name", ["kneser", "mkn", "gpt2"])
def test_model_names_that_are_not_files_say_what_model_takes(name, capsys):
    assert main(["score", "the cat", "--model", name]) == 2
    err = capsys.readouterr().err
    assert f"model {name!r} does not exist" in err and "nothing is downloaded" in err
    assert ".arpa" in err and ".sqlm" in err and "default" in err
    assert ("ngram fit" in err) is (name != "gpt2")


def test_tokenizer_means_the_same_in_score_and_tokenize(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    assert main(["tokenize", "the cat", "--tokenizer", "gpt2"]) == 2
    tokenize_err = capsys.readouterr().err.split("error: ", 1)[1]
    assert main(["score", "the cat", "--tokenizer", "gpt2"]) == 2
    score_err = capsys.readouterr().err.split("error: ", 1)[1]
    assert score_err == tokenize_err and "never downloads" in score_err and "--tokenizer path/to/" in score_err
    assert "TiktokenTokenizer(" not in score_err  # the CLI's words, not Python's
    assert main(["score", "the cat", "--tokenizer", "word", "--format", "json"]) == 0
    assert [r["token"] for r in json.loads(capsys.readouterr().out)] == ["the", "cat", "</s>"]
    from seqprob.truth import toy_english

    folder = tmp_path / "model"
    folder.mkdir()
    toy_english().tokenizer.save(folder / "tokenizer.json")
    assert main(["score", "the cat", "--tokenizer", str(folder), "--format", "json"]) == 0


# ------------------------------------------------------------------ messages in the CLI's words


def test_a_missing_test_corpus_is_explained_in_cli_terms(capsys):
    assert main(["ppl", "nosuch.txt"]) == 2
    err = capsys.readouterr().err
    assert "'nosuch.txt': no such file" in err and "seqprob score TEXT" in err
    assert "list of lines" not in err


def test_text_policy_errors_name_the_argument_and_no_docs_path(tmp_path, capsys):
    assert main(["score", "the \udcff cat"]) == 2
    err = capsys.readouterr().err
    assert "argument TEXT b'the \\xff cat' is not valid UTF-8 (byte ff at character 5)" in err
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"the \xff cat\n")
    for argv in (["ppl", str(bad)], ["score", "--file", str(bad)], ["compress", str(bad), "-o", str(tmp_path / "x")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "not valid UTF-8" in err and "docs/" not in err and len(err.strip().splitlines()) == 1


def test_library_keywords_become_options(capsys):
    assert main(["ppl", PROBES, "--ci", "--n-boot", "50", "--model", ARPA]) == 2
    assert "--n-boot must be an integer" in capsys.readouterr().err


# ------------------------------------------------------------------ options and suggestions


def test_misspelt_option_gets_a_suggestion(capsys):
    with pytest.raises(SystemExit) as info:
        main(["sample", "--topk", "5"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "did you mean '--top-k'?" in err


def test_options_are_never_abbreviated(capsys):
    with pytest.raises(SystemExit):
        main(["sample", "--temp", "0.5"])
    assert "unrecognized arguments: --temp" in capsys.readouterr().err
    parsers, todo = [], [build_parser()]
    while todo:
        parser = todo.pop()
        parsers.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    assert len(parsers) > 10 and all(p.allow_abbrev is False for p in parsers)


def test_misspelt_command_and_choice_get_suggestions(capsys):
    with pytest.raises(SystemExit):
        main(["scor", "x"])
    assert "did you mean 'score'?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["ngram", "fit", "c.txt", "-o", "m.arpa", "--smoothing", "mkm"])
    assert "did you mean 'mkn'?" in capsys.readouterr().err


def test_help_describes_only_commands_that_exist(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    description = out.split("positional arguments")[0]
    assert "compare" not in description
    assert all(name in description for name in sub.choices)


# ------------------------------------------------------------------ compress


def test_compress_names_the_unknown_word_whole(tmp_path, capsys):
    word = "supercalifragilisticexpialidocious"
    text = tmp_path / "t.txt"
    text.write_text(f"the cat sat on the mat with a very long word near the end {word}\n")
    assert main(["compress", str(text), "-o", str(tmp_path / "t.spz")]) == 2
    err = capsys.readouterr().err
    assert "the word 'with'" in err  # the first word the default model does not know, whole
    text.write_text(f"the cat {word} sat\n")
    assert main(["compress", str(text), "-o", str(tmp_path / "t.spz")]) == 2
    assert f"the word {word!r} at character 9 decodes as '<unk>'" in capsys.readouterr().err


def test_compress_refuses_an_empty_file(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert main(["compress", str(empty), "-o", str(tmp_path / "e.spz")]) == 2
    assert "is empty: nothing to compress" in capsys.readouterr().err
    assert not (tmp_path / "e.spz").exists()
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b"\n")
    assert main(["compress", str(blank), "-o", str(tmp_path / "b.spz")]) == 0
    err = capsys.readouterr().err
    assert "bits per byte" not in err and "no rate per byte" in err


# ------------------------------------------------------------------ report


def test_report_only_typo_is_refused_before_any_folder(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", "--out", str(out), "--only", "sentence"]) == 2
    assert "did you mean 'sentences'?" in capsys.readouterr().err
    assert not out.exists()
    assert main(["report", "--out", str(out), "--model", "nosuch.arpa"]) == 2
    assert not out.exists()


# ------------------------------------------------------------------ stupid back-off


def test_stupid_backoff_is_written_as_sqlm_and_scored_as_scores(corpus, tmp_path, capsys):
    from seqprob import load_ngram

    assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / "s.arpa"), "--smoothing", "stupid"]) == 2
    err = capsys.readouterr().err
    assert "not a probability distribution" in err and ".sqlm" in err
    assert main(["ngram", "fit", str(corpus), "-o", str(tmp_path / "s.sqlm"), "--smoothing", "stupid",
                 "--alpha", "0.5"]) == 0
    assert load_ngram(tmp_path / "s.sqlm").normalized is False
    capsys.readouterr()
    assert main(["ppl", "--model", str(tmp_path / "s.sqlm"), str(corpus)]) == 0
    assert "not a normalized distribution" in capsys.readouterr().err


def test_sample_names_its_option_for_a_bad_count(capsys):
    with pytest.raises(SystemExit) as info:
        main(["sample", "the", "-n", "-1"])
    assert info.value.code == 2
    assert "argument -n/--num-samples: must be an integer >= 1, got -1" in capsys.readouterr().err
