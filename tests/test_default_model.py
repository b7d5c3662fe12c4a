"""The shipped GPT against P* and the n-gram baselines, and the demo."""
import math
import warnings
from dataclasses import replace

import numpy as np
import pytest

import seqprob as sp
from seqprob.app.cli import main
from seqprob.analysis import agreement_test, analogy, kl_per_token
from seqprob.app.defaults import QUICK_RECIPE, train_default_model
from seqprob.app.demo import run_demo


@pytest.fixture(scope="module")
def truth():
    return sp.toy_english()


@pytest.fixture(scope="module")
def gpt():
    return sp.default_model()


@pytest.fixture(scope="module")
def ngrams(truth):
    lines = truth.sample(20_000, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sp.ngram.DiscountFallbackWarning)
        return {n: sp.ngram.ModifiedKneserNey(order=n).fit(lines, tokenizer=truth.tokenizer)
                for n in (1, 2, 3, 4, 5)}


def test_default_model_shares_the_grammar_tokens(gpt, truth):
    assert isinstance(gpt, sp.GPT)
    assert gpt.tokenizer.vocab == truth.vocab
    df = sp.score({"truth": truth, "gpt": gpt}, ["the cat sat on the mat"], tokenizer=truth.tokenizer)
    assert (df.groupby("model").size() == 7).all()


def test_gpt_is_closer_to_the_truth_than_every_ngram(gpt, truth, ngrams):
    samples = truth.sample(1_000, seed=123)
    kl_gpt = kl_per_token(truth, gpt, samples=samples)
    kl_ngram = {n: kl_per_token(truth, m, samples=samples) for n, m in ngrams.items()}
    best = min(kl_ngram.values(), key=lambda k: k.per_token)
    assert kl_gpt.ci_high < best.ci_low  # measured: gpt 0.010 vs best n-gram (4-gram) 0.24 nats/token
    assert kl_gpt.per_token >= -3 * kl_gpt.stderr  # KL is never clearly negative


def test_gpt_agrees_across_long_range_but_trigram_does_not(gpt, ngrams):
    res_gpt = agreement_test(gpt, n=300, seed=7)
    res_tri = agreement_test(ngrams[3], n=300, seed=7)
    assert res_gpt.accuracy >= 0.95  # measured 1.00
    assert 0.35 <= res_tri.accuracy <= 0.65  # near chance (measured 0.46)


def test_learned_embeddings_show_gender_and_number(gpt):
    assert analogy(gpt, "king", "man", "woman").token.iloc[0] == "queen"
    assert analogy(gpt, "cats", "cat", "dog").token.iloc[0] == "dogs"


def test_example_sentences_under_the_truth(truth):
    assert math.exp(sp.joint_logprob(truth, "the cat sat on the mat")) > 1e-4
    assert sp.joint_logprob(truth, "the cat sat zx oj squid") == -math.inf
    assert sp.joint_logprob(truth, "paris is the capital of france") > math.log(1e-3)
    assert sp.joint_logprob(truth, "paris is the capital of spain") == -math.inf


def test_recipe_is_reproducible_for_a_seed():
    recipe = replace(QUICK_RECIPE, steps=20, n_train_sentences=500, n_val_sentences=50)
    a, hist_a = train_default_model(recipe=recipe, progress=False)
    b, hist_b = train_default_model(recipe=recipe, progress=False)
    np.testing.assert_array_equal(a.flat_params_, b.flat_params_)
    np.testing.assert_array_equal(hist_a.train_loss, hist_b.train_loss)


def test_demo_quick_writes_tables_figures_and_report(tmp_path):
    lines = []
    result = run_demo(out=tmp_path / "demo", seed=1, quick=True, progress=False, echo=lines.append)
    text = "\n".join(lines)
    assert "-inf" in text and "H(P*) exact" in text and "report.md" in text
    assert result.unknown == {"the cat sat zx oj squid": ["zx", "oj", "squid"]}  # named, no crash
    assert "unknown words in 'the cat sat zx oj squid': zx, oj, squid" in text
    assert np.isposinf(result.surprisal.loc[(1, 4, "zx"), "P*"])  # shown as inf, not dropped
    ce = result.heldout.set_index("model")["nats_per_token"]  # held-out CE beside the true entropy
    assert ce["H(P*) exact"] == pytest.approx(sp.toy_english().entropy().per_token)
    assert abs(ce["P*"] - ce["H(P*) exact"]) < 0.1 and (ce.drop("H(P*) exact") >= ce["P*"] - 0.1).all()
    assert result.sentences.loc["P*", "the cat sat zx oj squid"] == -math.inf
    assert np.isfinite(result.sentences.loc["gpt", "the cat sat zx oj squid"])
    assert set(result.sentences.index) >= {"P*", "mle-1", "addk-3", "mkn-5", "gpt"}
    names = {p.name for p in result.files}
    assert {"report.md", "sentences_surprisal.png", "ngram_sparsity.png"} <= names
    assert all((tmp_path / "demo" / n).stat().st_size > 0 for n in names)
    assert not [p for p in (tmp_path / "demo").iterdir() if p.name.startswith(".")]  # no temp files


@pytest.fixture(scope="module")
def tiny_demo(tmp_path_factory):
    """One demo run on tiny corpora with a few-step retrained GPT, on an 80-column terminal,
    with progress: (result, what it echoed, what it wrote on standard error)."""
    import io
    import sys

    from seqprob.app import defaults, demo

    lines, err = [], io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(demo, "SIZES", {True: (300, 40, 6, 8)})
        mp.setattr(defaults, "QUICK_RECIPE", replace(QUICK_RECIPE, steps=3, warmup=1,
                                                     n_train_sentences=100, n_val_sentences=10))
        mp.setattr(demo, "_figures", lambda out, **kw: [out / "figures.png"])  # drawn elsewhere
        mp.setenv("COLUMNS", "80")
        mp.setattr(sys, "stderr", err)
        result = run_demo(out=tmp_path_factory.mktemp("demo"), quick=True, retrain=True,
                          progress=True, echo=lines.append)
    return result, "\n".join(lines), err.getvalue()


def test_demo_tables_fit_the_terminal_and_the_report_keeps_them_whole(tiny_demo):
    result, shown, _ = tiny_demo
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert "[5] the cat that the dogs chase sleep" in shown  # long headers: keys and a legend
    report = (result.out / "report.md").read_text()
    assert max(len(line) for line in report.splitlines()) > 80
    assert result.sentences.to_string(float_format=lambda v: f"{v:.3f}") in report


def test_demo_report_holds_every_table_shown_and_the_summary_comes_last(tiny_demo):
    from seqprob.app.demo import _sections

    result, shown, _ = tiny_demo
    report = (result.out / "report.md").read_text()
    for title, table, _ in _sections(result):
        assert title.split(":")[0] in shown and f"## {title}" in report
        assert table.to_string(float_format=lambda v: f"{v:.3f}") in report
    assert "## arithmetic coding of 8 held-out sentences" in report
    last = shown[shown.rindex("\nwrote 2 files to "):]  # figures.png and report.md
    assert last.rstrip().endswith(" s") and "report.md" in last and len(last.splitlines()) <= 4
    assert shown.index("arithmetic coding") < shown.index("wrote 2 files")


def test_demo_shows_its_stages_and_the_training_bar(tiny_demo):
    from seqprob.app.demo import STAGES

    _, _, err = tiny_demo
    for stage in STAGES[2:]:
        assert f"demo: {stage}" in err
    assert "demo: training the GPT" in err and "3/3" in err


def test_cli_demo_shows_progress_only_on_a_terminal(monkeypatch, tmp_path):
    import sys

    from seqprob.app import demo

    calls = []
    monkeypatch.setattr(demo, "run_demo", lambda **kwargs: calls.append(kwargs["progress"]))
    for tty in (False, True):
        monkeypatch.setattr(sys.stderr, "isatty", lambda: tty, raising=False)
        assert main(["demo", "--quick", "--out", str(tmp_path)]) == 0
    assert calls == [False, True]


def test_demo_out_that_is_a_file_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["demo", "--quick", "--out", str(blocker / "demo")]) == 2
    assert "not writable" in capsys.readouterr().err
    assert blocker.read_text() == "not a folder"
