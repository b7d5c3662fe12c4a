"""The research-score commands (score --context/--stride, ppl --ci, compress/decompress) and the
docstring examples of the research-scoring modules."""
import doctest
import importlib
import json

import pytest

import seqprob as sp
from seqprob.app.cli import main


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("scores") / "corpus.txt"
    path.write_text("\n".join(sp.toy_english().sample(40, seed=0)) + "\n", encoding="utf-8")
    return path


def test_score_with_context_and_stride(capsys):
    assert main(["score", "sat on the mat", "--context", "the cat", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["token"] for r in rows] == ["sat", "on", "the", "mat", "</s>"]
    assert all(r["spans_join"] is False for r in rows) and rows[0]["position"] == 3
    long = " ".join(["the cat sat on the mat"] * 8)  # 48 words > the default GPT's 32
    assert main(["score", long, "--stride", "8", "--format", "csv", "--no-distribution"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1 + 49
    assert main(["score", long, "--context", long]) == 2  # context beyond the window, no stride
    assert "pass --stride to score" in capsys.readouterr().err  # the CLI's option, not the keyword


def test_ppl_ci_and_stride(corpus, capsys):
    assert main(["ppl", str(corpus), "--ci", "--n-boot", "200", "--stride", "8", "--format", "json"]) == 0
    rows = {r["figure"]: r for r in json.loads(capsys.readouterr().out)}
    row = rows["perplexity including OOVs (KenLM)"]
    assert row["ci95_low"] <= row["value"] <= row["ci95_high"]
    assert main(["ppl", str(corpus), "--ci", "--n-boot", "50"]) == 2
    assert "--n-boot must be an integer in [100, 1000000]" in capsys.readouterr().err


def test_compress_decompress_round_trip(corpus, tmp_path, capsys):
    packed, unpacked = tmp_path / "c.spz", tmp_path / "out.txt"
    assert main(["compress", str(corpus), "-o", str(packed)]) == 0
    assert "bits per byte" in capsys.readouterr().err
    assert main(["decompress", str(packed), "-o", str(unpacked)]) == 0
    assert unpacked.read_text(encoding="utf-8") == corpus.read_text(encoding="utf-8")
    packed.write_bytes(packed.read_bytes()[:-2])
    assert main(["decompress", str(packed)]) == 2
    assert "truncated" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["seqprob.scoring.words", "seqprob.scoring.conditional", "seqprob.scoring.windows", "seqprob.scoring.comparison",
                                    "seqprob.scoring.compression", "seqprob.truth.tokenized", "seqprob.plots.windows"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
