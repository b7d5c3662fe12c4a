"""seqprob.plots: every function headless (Agg) on small data: return type, what is drawn,
units on the axes, "impossible" for -inf/NaN, clear errors, and no leaked figures."""
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.axes import Axes
from matplotlib.figure import Figure

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from budget import examples
from seqprob import plots  # noqa: E402
from seqprob.analysis.calibration import reliability_table  # noqa: E402
from seqprob.analysis.embeddings import analogy, embedding_directions, embedding_pca  # noqa: E402
from seqprob.analysis.lens import logit_lens  # noqa: E402
from seqprob.errors import InputError  # noqa: E402
from seqprob.scoring import score  # noqa: E402
from seqprob.table import JointTable, UniformModel  # noqa: E402

from small_models import LINES, gpt, tok  # noqa: E402,F401 - shared data and fixtures


@pytest.fixture(scope="module")
def scored(tok):
    models = {"uniform": UniformModel(tok.vocab), "joint": JointTable().fit(LINES, tokenizer=tok)}
    # "zx" is unknown -> <unk>, which the joint table never saw after "the cat sat": P = 0
    return score(models, ["the cat sat on the mat", "the cat sat zx the mat"], tokenizer=tok)


@pytest.fixture(autouse=True)
def no_leaks():
    before = plt.get_fignums()
    yield
    assert plt.get_fignums() == before, "a plot function registered a figure with pyplot"


def _labels_have_units(ax):
    for label in (ax.get_xlabel(), ax.get_ylabel()):
        assert label and "(" in label and ")" in label, f"axis label without a unit: {label!r}"
    assert ax.get_title()


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def _legend(ax):
    leg = ax.get_legend()
    return [t.get_text() for t in leg.get_texts()] if leg else []


# --------------------------------------------------------------------------- scores
def test_surprisal_bars_per_model_and_token(scored):
    ax = plots.surprisal(scored, seq=0)
    assert isinstance(ax, Axes)
    assert len(ax.patches) == 2 * 7  # 2 models x (6 words + </s>), all finite
    assert [t.get_text() for t in ax.get_xticklabels()] == "the cat sat on the mat </s>".split()
    assert _legend(ax) == ["uniform", "joint"]
    _labels_have_units(ax)
    assert "bits" in ax.get_ylabel()


def test_surprisal_marks_impossible_tokens(scored):
    sub = scored[scored["seq"] == 1]
    n_bad = int((~np.isfinite(sub["logprob"])).sum())
    assert n_bad >= 1
    ax = plots.surprisal(scored, seq=1)
    assert len(ax.patches) == len(sub) - n_bad  # no bar where P = 0 ...
    markers = [line for line in ax.lines if line.get_marker() == "X"]
    assert sum(len(m.get_xdata()) for m in markers) == n_bad  # ... but a marker
    assert any("impossible" in t for t in _texts(ax))
    assert any("impossible" in t for t in _legend(ax))


def test_cumulative_logprob_is_the_chain_rule(scored):
    ax = plots.cumulative_logprob(scored, seq=0)
    lines = [ln for ln in ax.lines if ln.get_marker() == "o"]
    assert len(lines) == 2
    for line, name in zip(lines, ["uniform", "joint"]):
        y = line.get_ydata()
        expected = scored[(scored["seq"] == 0) & (scored["model"] == name)]["logprob"].sum()
        assert y[0] == 0.0 and math.isclose(y[-1], expected, rel_tol=1e-9)
    _labels_have_units(ax)
    assert "nats" in ax.get_ylabel()


def test_cumulative_logprob_stops_at_impossible(scored):
    ax = plots.cumulative_logprob(scored, seq=1, unit="bits")
    joint = [ln for ln in ax.lines if ln.get_label().startswith("joint")][0]
    assert "-inf" in joint.get_label()
    assert np.isfinite(joint.get_ydata()).all()  # a gap, not -inf drawn
    assert any("impossible" in t for t in _texts(ax))
    assert "bits" in ax.get_ylabel()


def test_sentence_comparison_grid(scored):
    fig = plots.sentence_comparison(scored)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 4
    for ax in fig.axes:
        _labels_have_units(ax)


@settings(max_examples=examples(15))
@given(st.lists(st.one_of(st.floats(-30, 0), st.just(-math.inf), st.just(math.nan)), min_size=1, max_size=8))
def test_surprisal_never_drops_values_silently(values):
    n = len(values)
    df = pd.DataFrame({"model": "m", "seq": 0, "position": np.arange(1, n + 1),
                       "token": [f"w{i}" for i in range(n)], "logprob": values})
    ax = plots.surprisal(df)
    markers = sum(len(line.get_xdata()) for line in ax.lines if line.get_marker() == "X")
    assert len(ax.patches) + markers == n
    assert (markers > 0) == any("impossible" in t for t in _texts(ax))


def test_next_token_bars_per_temperature(gpt, tok):
    row = gpt.start([tok.vocab.bos_id]).logprobs
    ax = plots.next_token(row, tok.vocab, temperatures=(0.5, 1.0, 2.0, 1e-9), k=5)
    assert len(ax.patches) == 4 * 5
    legend = _legend(ax)
    assert len(legend) == 4 and all("bits" in t for t in legend)
    _labels_have_units(ax)
    # T -> 0 is the argmax: one bar of height 1 (entropy 0)
    assert "H = 0.00 bits" in legend[3]


def test_next_token_rejects_bad_rows(tok):
    with pytest.raises(InputError, match="NaN"):
        plots.next_token(np.array([0.0, np.nan]))
    with pytest.raises(InputError, match="labels"):
        plots.next_token(np.log([0.5, 0.5]), tokens=["a"])
    with pytest.raises(InputError, match="k must be"):
        plots.next_token(np.log([0.5, 0.5]), k=0)


def test_lookup_table_lines_and_atoms():
    ax = plots.lookup_table(vocab_sizes=(10, 50_257), max_length=100)
    assert len(ax.lines) == 3  # two V's + the atoms line
    assert any("atoms" in t for t in _legend(ax))
    assert max(ax.lines[1].get_ydata()) == pytest.approx(100 * math.log10(50_257))
    _labels_have_units(ax)


# --------------------------------------------------------------------------- training
def _history():
    return pd.DataFrame({"step": np.arange(1, 11), "tokens_seen": np.arange(1, 11) * 100,
                         "train_loss": np.linspace(3, 1, 10),
                         "val_loss": [np.nan if i % 3 else 3 - 0.2 * i for i in range(10)]})


def test_learning_curves_reference_lines():
    ax = plots.learning_curves(_history(), baselines={"kn3": 1.5, "kn5": 1.4}, true_entropy=0.9)
    assert len([ln for ln in ax.lines if ln.get_marker() != "X"]) == 2 + 2 + 1
    legend = _legend(ax)
    assert any("true entropy" in t for t in legend) and any("kn3" in t for t in legend)
    _labels_have_units(ax)


def test_learning_curves_infinite_baseline_is_marked():
    ax = plots.learning_curves(_history(), baselines={"mle": math.inf})
    assert any("impossible" in t for t in _legend(ax))


def _sparsity_df():
    return pd.DataFrame({"order": [1, 2, 3], "train_perplexity": [10.0, 4.0, 2.0],
                         "heldout_perplexity": [11.0, 6.0, math.inf], "unseen_share": [0.0, 0.3, 0.7]})


def test_sparsity_lines_bars_and_impossible():
    ax = plots.sparsity(_sparsity_df())
    lines = [ln for ln in ax.lines if ln.get_marker() == "o"]
    assert len(lines) == 2
    assert len(lines[1].get_xdata()) == 2  # the infinite perplexity is a gap ...
    assert any("impossible" in t for t in _texts(ax))  # ... with a label
    assert len(ax.unseen_ax.patches) == 3
    assert "%" in ax.unseen_ax.get_ylabel()
    _labels_have_units(ax)


# --------------------------------------------------------------------------- internals
def test_attention_grid_from_model(gpt):
    fig = plots.attention(gpt, text="the cat sat")
    assert isinstance(fig, Figure)
    images = [im for ax in fig.axes for im in ax.images]
    assert len(images) == 2 * 2
    assert images[0].get_array().shape == (4, 4)  # <s> the cat sat
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["<s>", "the", "cat", "sat"]
    colorbar = [ax for ax in fig.axes if not ax.images]
    assert len(colorbar) == 1 and "(probability)" in colorbar[0].get_ylabel()


def test_attention_from_array_subset():
    attn = np.tril(np.ones((3, 2, 5, 5)))
    attn /= attn.sum(-1, keepdims=True)
    fig = plots.attention(attn, tokens=list("abcde"), layers=[0, 2], heads=[1])
    assert sum(len(ax.images) for ax in fig.axes) == 2


def test_attention_errors(tok):
    with pytest.raises(InputError, match="no attention"):
        plots.attention(UniformModel(tok.vocab), text="the cat")
    with pytest.raises(InputError, match="shape"):
        plots.attention(np.ones((2, 3, 4)))
    with pytest.raises(InputError, match="out of range"):
        plots.attention(np.ones((1, 1, 2, 2)) / 2, layers=[3])


def test_logit_lens_heatmap(gpt):
    df = logit_lens(gpt, "the cat sat")
    ax = plots.logit_lens(df)
    assert len(ax.images) == 1
    assert ax.images[0].get_array().shape == (3, 4)  # embeddings + 2 blocks, 4 predictions
    assert len(ax.texts) == 3 * 4  # a rank in every cell
    _labels_have_units(ax)


def test_embeddings_scatter(gpt):
    df = embedding_pca(gpt)
    ax = plots.embeddings(df, highlight={"animals": ["cat", "dog"]})
    assert len(ax.collections) == 2
    assert {"cat", "dog"} <= set(_texts(ax))
    assert "%" in ax.get_xlabel()
    _labels_have_units(ax)


def test_embedding_directions_arrows(gpt):
    df = embedding_directions(gpt)
    ax = plots.embedding_directions(df)
    assert len(ax.collections) == 2  # gender pairs, number pairs
    arrows = [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    assert len(arrows) == len(df) // 2
    _labels_have_units(ax)


def test_analogy_bars(gpt):
    df = analogy(gpt, "king", "man", "woman", k=4)
    ax = plots.analogy(df)
    assert len(ax.patches) == 4
    _labels_have_units(ax)


def test_reliability_bars_and_ece():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.2, 0.9, 500)
    df = reliability_table(p, rng.uniform(size=500) < p, n_bins=10)
    ax = plots.reliability(df)
    assert len(ax.patches) == int((df["count"] > 0).sum())
    assert any("ECE" in t for t in _legend(ax))
    _labels_have_units(ax)


def test_reliability_with_only_empty_bins_is_an_error():
    df = reliability_table([0.95], [1], n_bins=4)
    with pytest.raises(InputError, match="empty"):
        plots.reliability(df[df["count"] == 0])


def test_draw_into_given_axes(scored):
    fig = Figure()
    ax = fig.add_subplot()
    assert plots.surprisal(scored, ax=ax) is ax
    with pytest.raises(InputError, match="Axes"):
        plots.surprisal(scored, ax="not an axes")


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("fn", [plots.surprisal, plots.cumulative_logprob, plots.sentence_comparison,
                                plots.learning_curves, plots.sparsity, plots.logit_lens, plots.embeddings,
                                plots.embedding_directions, plots.analogy, plots.reliability])
def test_empty_and_wrong_inputs(fn):
    with pytest.raises(InputError, match="empty"):
        fn(pd.DataFrame())
    with pytest.raises(InputError, match="DataFrame"):
        fn([1, 2, 3])
    with pytest.raises(InputError, match="missing"):
        fn(pd.DataFrame({"unrelated": [1]}))


def test_unknown_sequence_and_model(scored):
    with pytest.raises(InputError, match="seq=7"):
        plots.surprisal(scored, seq=7)
    with pytest.raises(InputError, match="nope"):
        plots.surprisal(scored, models=["nope"])


def test_lazy_import():
    import subprocess
    import sys

    code = ("import seqprob, sys; assert 'matplotlib' not in sys.modules; seqprob.plots; "
            "assert 'matplotlib' not in sys.modules; seqprob.plots.lookup_table(10); "
            "assert 'matplotlib' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
