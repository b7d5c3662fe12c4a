"""seqprob.plots: every function headless (Agg) on small data: return type, what is drawn,
units on the axes, "impossible" for -inf/NaN, clear errors, no leaked figures, and readable
layouts (no text cut off or drawn over another) on small data and on long sentences."""
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

from figure_checks import assert_readable, render  # noqa: E402
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
    ax = plots.surprisal(df, ax=Figure().add_subplot())  # a given Axes: no layout pass, a fast example
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
    assert_readable(ax, name="learning curves")  # the word at the right edge stays inside


class _CE:
    """A CrossEntropy-like estimate: per scored token and per sentence (nats)."""

    def __init__(self, per_token, tokens_per_sentence, n_sentences=100):
        self.per_token, self.n_sentences = per_token, n_sentences
        self.n_tokens = tokens_per_sentence * n_sentences
        self.per_sentence = per_token * tokens_per_sentence


def test_learning_curves_stream_legend_gives_both_units():
    """On a stream axis a reference is drawn per stream token and its legend entry also gives
    the per-scored-token value that tables print (the demo's 1.593 vs 1.811)."""
    ce = _CE(2.068, 7.3)

    class Entropy:
        per_token, expected_tokens = 1.811, 7.3
        per_sentence = 1.811 * 7.3

    ax = plots.learning_curves(_history(), baselines={"mkn-3": ce}, true_entropy=Entropy(), tokens="stream")
    stream = 2.068 * 7.3 / 8.3
    line = [ln for ln in ax.lines if ln.get_label().startswith("mkn-3")][0]
    assert np.allclose(line.get_ydata(), stream)
    assert line.get_label() == f"mkn-3: {stream:.3f} nats/stream token\n= 2.068 nats/scored token"
    truth = [t for t in _legend(ax) if t.startswith("true entropy")][0]
    assert f"{1.811 * 7.3 / 8.3:.3f} nats/stream token" in truth and "= 1.811 nats/scored token" in truth
    assert "stream token" in ax.get_ylabel()
    scored = plots.learning_curves(_history(), baselines={"mkn-3": ce}, tokens="scored")
    assert np.allclose([ln for ln in scored.lines if ln.get_label().startswith("mkn-3")][0].get_ydata(), 2.068)
    with pytest.raises(InputError, match="tokens"):
        plots.learning_curves(_history(), tokens="words")
    with pytest.raises(InputError, match="n_sentences = 0"):
        plots.learning_curves(_history(), baselines={"empty": _CE(2.0, 5.0, n_sentences=0)}, tokens="stream")

    class Evaluation:  # an Evaluation-like total without a sentence count
        logprob, n_tokens = -20.0, 10

    with pytest.raises(InputError, match="n_sentences"):
        plots.learning_curves(_history(), baselines={"ev": Evaluation()}, tokens="stream")
    assert np.allclose(plots.learning_curves(_history(), baselines={"ev": Evaluation()}).lines[-1].get_ydata(), 2.0)


def test_learning_curves_lines_apart_and_legend_off_the_data():
    """Equal baselines still differ in dash pattern and markers; the legend sits beside the
    Axes, so it covers no line; a long y label is wrapped, not cut off."""
    baselines = {f"m{i}": 1.5 for i in range(14)} | {"inf": math.inf}
    ax = plots.learning_curves(_history(), baselines=baselines, true_entropy=0.9,
                               ylabel="cross-entropy ({unit} per stream token: words, </s>, next <s>)")
    refs = [ln for ln in ax.lines if ln.get_label().startswith("m")]
    assert len(refs) == 14
    assert len({(ln.get_linestyle(), ln.get_marker(), ln.get_color()) for ln in refs}) == 14
    records = render(ax)
    legend, frame = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 > frame.x1  # beside the Axes: no overlap with any line's data
    for line in ax.lines:
        assert not legend.overlaps(line.get_window_extent())
    assert_readable(ax, records, name="learning curves")


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


def test_attention_takes_what_attention_patterns_returns(gpt):
    """The (attn, tokens) pair of analysis.attention_patterns draws as the model itself does."""
    from seqprob.analysis import attention_patterns

    attn, tokens = attention_patterns(gpt, "the cat sat")
    fig = plots.attention((attn, tokens))
    direct = plots.attention(gpt, text="the cat sat")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == tokens
    for mine, theirs in zip([im for ax in fig.axes for im in ax.images],
                            [im for ax in direct.axes for im in ax.images]):
        np.testing.assert_array_equal(mine.get_array(), theirs.get_array())


@pytest.mark.parametrize("bad", [[[1.0, 2.0], [3.0]], [["a", "b"], ["c", "d"]]])
def test_attention_of_a_ragged_or_text_array_is_a_named_error(bad):
    with pytest.raises(InputError, match="numeric array"):
        plots.attention(bad)


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


def _long_scores(n_tokens=60, n_models=8, seed=0):
    """A score table of two long sentences (one with a run of impossible tokens) under many
    models, as a real corpus gives."""
    rng = np.random.default_rng(seed)
    words = [f"word{i % 23}" for i in range(n_tokens - 1)] + ["</s>"]
    rows = []
    for m in range(n_models):
        for seq in (0, 1):
            lp = -rng.exponential(3.0, n_tokens)
            if seq == 1 and m % 2 == 0:
                lp[10:16] = -math.inf
            rows += [{"model": f"model-{m}-with-a-long-name", "seq": seq, "position": t + 1, "token": w,
                      "logprob": v} for t, (w, v) in enumerate(zip(words, lp))]
    df = pd.DataFrame(rows)
    df.attrs["texts"] = [" ".join(words[:-1])] * 2
    return df


@pytest.mark.parametrize("draw", [plots.surprisal, plots.cumulative_logprob])
def test_long_sentences_and_many_models_stay_readable(draw):
    """A 60-token sentence under 8 models: the title wrapped and cut with an ellipsis, token
    labels thinned, "impossible" words not piled up, nothing outside the figure (the grid of
    sentences is checked on a long-sentence report in test_report.py)."""
    ax = draw(_long_scores(), seq=1)
    assert_readable(ax, name=draw.__name__)
    shown = [t.get_text() for t in ax.get_xticklabels()]
    assert 1 < len(shown) < 60 and shown[0] in ("word0", "<s>")
    assert ax.get_title().endswith('\u2026"') and ax.get_title().count("\n") <= 3


def test_short_sentences_keep_every_token_label(scored):
    fig = plots.sentence_comparison(scored)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == "the cat sat on the mat </s>".split()
    assert fig.axes[0].get_title() == "Surprisal per token"
    assert_readable(fig, name="sentence comparison")


def _dense_pca(n=300, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(4, 2))
    xy = centres[rng.integers(0, 4, n)] + 0.08 * rng.normal(size=(n, 2))
    df = pd.DataFrame({"token": [f"tok{i}" for i in range(n)], "pc1": xy[:, 0], "pc2": xy[:, 1]})
    df.attrs["explained_variance_ratio"] = [0.3, 0.2]
    return df


@pytest.mark.parametrize("label", ["auto", True])
def test_embedding_labels_never_overlap(label):
    """300 points in four tight clusters: the labels that are drawn do not touch each other
    (pairwise boxes), highlighted tokens are labelled first, and none leaves the figure."""
    df = _dense_pca()
    group = list(df["token"][:5])
    ax = plots.embeddings(df, label=label, highlight={"group": group})
    records = render(ax)
    boxes = [(t.get_text(), box) for t, box, _ in records[id(ax.figure)].values() if t in ax.texts]
    assert 5 <= len(boxes) <= (50 if label == "auto" else 300)
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            assert not ba.overlaps(bb), f"labels {a!r} and {b!r} overlap"
    assert set(group) & {t for t, _ in boxes}
    assert_readable(ax, records, name="embeddings")
    assert not plots.embeddings(df, label=False).texts


def test_embedding_directions_draws_each_token_once():
    """man/woman are in a gender pair and in number pairs: one half-and-half point each (not
    a number-pair point over a gender-pair one), one label each."""
    rows, pos = [], {"man": (-0.4, -0.6), "woman": (0.3, -0.5), "men": (0.25, 0.5), "women": (0.3, 0.45),
                     "king": (-0.3, -0.5), "queen": (0.2, -0.5), "cat": (0.0, -0.5), "cats": (0.05, 0.5)}
    for kind, pairs in (("gender", [("man", "woman"), ("king", "queen")]),
                        ("number", [("man", "men"), ("woman", "women"), ("cat", "cats")])):
        for a, b in pairs:
            rows += [{"token": t, "kind": kind, "partner": p, "gender": pos[t][0], "number": pos[t][1]}
                     for t, p in ((a, b), (b, a))]
    df = pd.DataFrame(rows)
    df.attrs["pairs"] = {"gender": [("man", "woman"), ("king", "queen")],
                         "number": [("man", "men"), ("woman", "women"), ("cat", "cats")]}
    ax = plots.embedding_directions(df)
    scattered = [tuple(xy) for c in ax.collections for xy in c.get_offsets()]
    assert pos["man"] not in scattered and pos["woman"] not in scattered
    shared = [ln for ln in ax.lines if ln.get_fillstyle() == "left"]
    assert len(shared) == 1 and sorted(zip(shared[0].get_xdata(), shared[0].get_ydata())) == \
        sorted([pos["man"], pos["woman"]])
    assert shared[0].get_color() != shared[0].get_markerfacecoloralt()
    labels = [t.get_text() for t in ax.texts if t.get_text()]
    assert sorted(labels) == sorted(set(labels)) and {"man", "woman"} <= set(labels)
    assert_readable(ax, name="directions")


@pytest.mark.parametrize("low, span", [(0.2, "0..1"), (-0.3, "-0.5..1"), (-0.8, "-1..1")])
def test_analogy_axis_label_states_its_limits(low, span):
    df = pd.DataFrame({"rank": [1, 2, 3], "token": ["queen", "king", "cat"], "cosine": [0.9, 0.5, low]})
    ax = plots.analogy(df)
    lo, hi = ax.get_xlim()
    assert f"({span})" in ax.get_xlabel()
    assert f"{lo:g}..{hi:g}" == span
    assert [t.get_text() for t in ax.get_yticklabels()] == ["queen (1)", "king (2)", "cat (3)"]
    assert_readable(ax, name="analogy")


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
