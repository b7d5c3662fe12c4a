"""The command line without rough edges."""
import io
import json
from pathlib import Path

import pandas as pd
import pytest

import seqprob
from seqprob.app.cli import main
from seqprob.app.cli._common import table_text

FIXTURES = Path(__file__).parent / "fixtures" / "kenlm"
ARPA = str(FIXTURES / "genesis.o3.arpa.gz")
PROBES = str(FIXTURES / "probes.txt")
TINY = ["--steps", "2", "--block-size", "8", "--n-embd", "8", "--n-layer", "1", "--n-head", "1",
        "--batch-size", "2", "--no-progress", "--eval-every", "1"]


def test_ppl_per_sentence_is_one_json_document_and_one_csv_table(capsys):
    assert main(["ppl", "--model", ARPA, PROBES, "--per-sentence", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # one document: parses as a whole
    assert set(doc) == {"sentences", "corpus"} and len(doc["sentences"]) == 4
    assert any(r["figure"] == "ppl1 (SRILM)" for r in doc["corpus"])
    assert main(["ppl", "--model", ARPA, PROBES, "--per-sentence", "--format", "csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(table.columns) == ["sentence", "tokens", "oovs", "log10prob", "perplexity", "text"]
    assert len(table) == 4


@pytest.mark.parametrize("fmt", ["json", "csv", "table"])
def test_sample_has_format(fmt, capsys):
    assert main(["sample", "and god", "--model", ARPA, "-n", "2", "--max-new-tokens", "4",
                 "--format", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        rows = json.loads(out)
        assert [r["sample"] for r in rows] == [0, 1] and rows[0]["text"].startswith("and god")
    elif fmt == "csv":
        assert pd.read_csv(io.StringIO(out))["seed"].tolist() == [0, 0]
    else:
        assert out.splitlines()[0].split()[:3] == ["sample", "prompt", "text"]


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"seqprob {seqprob.__version__}"


@pytest.mark.parametrize("argv, usage, bad", [
    (["score", "x", "--sumary"], "usage: seqprob score", "--sumary"),
    (["ngram", "fit", "c.txt", "-o", "m.arpa", "--ordr", "3"], "usage: seqprob ngram fit", "--ordr 3")])
def test_a_misspelled_option_shows_the_sub_commands_usage(argv, usage, bad, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and usage in err and f"unrecognized arguments: {bad}" in err


def test_summary_computes_no_distributions(monkeypatch, capsys):
    import seqprob.scoring as scoring

    seen, real = [], scoring.score

    def spy(*args, **kwargs):
        seen.append(kwargs.get("distribution"))
        return real(*args, **kwargs)

    monkeypatch.setattr(scoring, "score", spy)
    assert main(["score", "and god said", "--model", ARPA, "--summary"]) == 0
    assert main(["score", "and god said", "--model", ARPA]) == 0
    assert seen == [False, True]


def test_terminal_tables_cut_long_text_left_align_it_and_show_units():
    text = "word " * 30
    df = pd.DataFrame({"text": [text, "short"], "logprob": [-1.5, -2.0], "surprisal_bits": [1.0, 2.0]})
    wide = table_text(df, width=200).splitlines()
    assert wide[0].split()[:4] == ["text", "logprob", "(nats)", "surprisal"] and "(bits)" in wide[0]
    assert wide[1].startswith(text.strip())  # whole when the terminal is wide enough
    lines = table_text(df, width=80).splitlines()  # units under the names, text cut
    assert lines[0].split() == ["text", "logprob", "surprisal"] and lines[1].split() == ["(nats)", "(bits)"]
    assert max(len(line) for line in lines) <= 80
    assert lines[2].startswith("word word") and "…" in lines[2]
    assert lines[3].startswith("short ")  # text left-aligned


def test_mostly_unknown_text_warns_and_says_what_the_default_model_knows(capsys):
    assert main(["score", "I like pizza very much", "--summary"]) == 0
    err = capsys.readouterr().err
    assert "4 of 6 tokens (67%) are not in the vocabulary" in err
    assert "default model knows the toy language" in err and "case-sensitive" in err
    assert main(["score", "the cat sat on the mat", "--summary"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_train_says_where_and_refuses_to_overwrite(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat\nthe dog sat\na cat ran\n" * 5)
    out = tmp_path / "model"
    assert main(["train", str(corpus), "-o", str(out), *TINY]) == 0
    assert f"wrote the model and its tokenizer to {out.resolve()}" in capsys.readouterr().err
    before = (out / "model.safetensors").read_bytes() if (out / "model.safetensors").exists() else None
    assert main(["train", str(corpus), "-o", str(out), *TINY, "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert "already holds files" in err and "--force" in err and "--resume" in err
    if before is not None:
        assert (out / "model.safetensors").read_bytes() == before  # untouched
    assert main(["train", str(corpus), "-o", str(out), *TINY, "--seed", "1", "--force"]) == 0
    capsys.readouterr()
    assert main(["tokenize", "the cat", "--tokenizer", str(out), "--format", "json"]) == 0
    assert [r["token"] for r in json.loads(capsys.readouterr().out)] == ["the", "cat"]


def test_tokenize_folder_without_tokenizer_is_named(tmp_path, capsys):
    assert main(["tokenize", "x", "--tokenizer", str(tmp_path)]) == 2
    assert "has no tokenizer.json" in capsys.readouterr().err


def test_report_shows_progress(tmp_path, capsys):
    assert main(["report", "--out", str(tmp_path), "--quick", "--only", "lookup"]) == 0
    err = capsys.readouterr().err
    assert "seqprob report: [1/1] Why not a lookup table? ..." in err
    assert "seqprob report: [1/1] Why not a lookup table? done in" in err
