"""seqprob.training.train: history, determinism, exact resume, divergence, bad input."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from seqprob.errors import InputError, TokenIdError, TrainingDivergedError
from seqprob.gpt import GPT, GPTConfig
from seqprob.gpt.checkpoint import load_checkpoint
from seqprob.optim import AdamW, cosine_schedule
from seqprob.training import HISTORY_COLUMNS, _eval_windows, evaluate_loss, sample_windows, train

CFG = GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=2, n_embd=8)
STREAM = (np.arange(300) * 3 + np.arange(300) // 5) % 7
VAL = STREAM[::-1].copy()


def kw(**extra):
    return dict(dict(batch_size=4, lr=1e-2, seed=0, progress=False, warmup=2), **extra)


def test_history_and_learning():
    model = GPT(CFG, seed=0)
    hist = train(model, STREAM, steps=30, val_ids=VAL, eval_every=10, **kw())
    assert list(hist.columns) == HISTORY_COLUMNS
    assert hist.step.tolist() == list(range(1, 31))
    assert hist.tokens_seen.tolist() == [s * 4 * 8 for s in range(1, 31)]
    np.testing.assert_allclose(hist.lr, cosine_schedule(np.arange(30), 1e-2, 2, 30, 1e-3))
    assert hist.train_loss.iloc[-5:].mean() < hist.train_loss.iloc[:5].mean()
    assert hist.val_loss.notna().tolist() == [s % 10 == 0 for s in range(1, 31)]
    assert hist.seconds.is_monotonic_increasing
    windows = _eval_windows(VAL, 8, 64)
    assert hist.val_loss.iloc[-1] == pytest.approx(evaluate_loss(model, windows, 4), rel=1e-6)


def test_same_seed_same_run_other_seed_other_run():
    runs = []
    for seed in (0, 0, 1):
        model = GPT(CFG, seed=0)
        hist = train(model, STREAM, steps=5, **kw(seed=seed))
        runs.append((model.flat_params_.copy(), hist.train_loss.to_numpy()))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert not np.array_equal(runs[0][1], runs[2][1])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_resume_continues_exactly(tmp_path, dtype, dropout):
    cfg = CFG.replace(dtype=dtype, dropout=dropout)
    args = dict(steps=8, val_ids=VAL, eval_every=3, **kw(seed=5))
    full = GPT(cfg, seed=1)
    hist_full = train(full, STREAM, **args)

    first = GPT(cfg, seed=1)
    train(first, STREAM, checkpoint=tmp_path / "ck", stop_at=4, **args)
    ckpt = load_checkpoint(tmp_path / "ck")
    assert ckpt.extra["step"] == 4
    resumed = ckpt.model
    hist = train(resumed, STREAM, checkpoint=tmp_path / "ck", resume=True, **args)

    np.testing.assert_array_equal(resumed.flat_params_, full.flat_params_)  # bitwise
    cols = ["step", "lr", "train_loss", "val_loss", "tokens_seen"]
    np.testing.assert_array_equal(hist[cols].to_numpy(), hist_full[cols].to_numpy())
    assert load_checkpoint(tmp_path / "ck").extra["step"] == 8


def test_resume_true_without_checkpoint_starts_fresh(tmp_path):
    a, b = GPT(CFG), GPT(CFG)
    train(a, STREAM, steps=3, **kw())
    train(b, STREAM, steps=3, checkpoint=tmp_path / "new", resume=True, **kw())
    np.testing.assert_array_equal(a.flat_params_, b.flat_params_)
    with pytest.raises(InputError, match="checkpoint"):
        train(GPT(CFG), STREAM, steps=3, resume=True, **kw())


def test_resume_from_model_save_is_refused_and_changes_nothing(tmp_path):
    from seqprob.gpt.checkpoint import save_checkpoint
    save_checkpoint(GPT(CFG, seed=1), tmp_path / "m")
    model = GPT(CFG, seed=2)
    before = model.flat_params_.copy()
    with pytest.raises(InputError, match="no optimizer"):
        train(model, STREAM, steps=3, resume=tmp_path / "m", **kw())
    np.testing.assert_array_equal(model.flat_params_, before)  # refused before the weights go in


def test_a_refused_optimizer_state_leaves_model_and_optimizer_as_they_were(tmp_path):
    """A decay list naming an unknown parameter is found after the scalars and moments were
    checked: the user's optimizer and the model must both be untouched."""
    train(GPT(CFG), STREAM, steps=3, checkpoint=tmp_path / "ck", **kw())
    _tamper(tmp_path / "ck", "optimizer.json", lambda d: d.__setitem__("decay", ["no.such.param"]))
    model = GPT(CFG, seed=5)
    opt = AdamW(model.params, lr=1e-3)
    before, lr, t = model.flat_params_.copy(), opt.lr, opt.t
    with pytest.raises(InputError, match="no.such.param"):
        train(model, STREAM, steps=6, checkpoint=tmp_path / "ck", resume=True, optimizer=opt, **kw())
    np.testing.assert_array_equal(model.flat_params_, before)
    assert (opt.lr, opt.t) == (lr, t) and not opt.m_flat_.any()


def _tamper(folder, name, change):
    """Rewrite one JSON file of a checkpoint through ``change`` and re-hash it in the manifest
    (a file another version or a hand edit could have written: it passes the integrity check)."""
    import json

    from seqprob.gpt import checkpoint as ck
    path = folder / name
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][name] = ck._file_facts(path)
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("name, key, value, field", [
    ("training.json", "rng", "x", "'rng'"), ("training.json", "rng", {"bit_generator": "MT19937"}, "'rng'"),
    ("training.json", "step", "abc", "'step'"), ("training.json", "step", -1, "'step'"),
    ("training.json", "seconds", None, "'seconds'"), ("training.json", "history", 5, "'history'"),
    ("training.json", "history", [[1, 2]], "'history'"),
    ("optimizer.json", "lr", "x", "'lr'"), ("optimizer.json", "step", -1, "'step'"),
    ("optimizer.json", "betas", [0.9, 1.5], "'betas'"), ("optimizer.json", "eps", float("nan"), "'eps'"),
])
def test_a_tampered_training_checkpoint_is_refused_by_field(tmp_path, name, key, value, field):
    from seqprob.errors import CheckpointError
    train(GPT(CFG), STREAM, steps=3, checkpoint=tmp_path / "ck", **kw())
    _tamper(tmp_path / "ck", name, lambda d: d.__setitem__(key, value))
    model = GPT(CFG, seed=5)
    before = model.flat_params_.copy()
    with pytest.raises(CheckpointError, match=field):
        train(model, STREAM, steps=6, checkpoint=tmp_path / "ck", resume=True, **kw())
    np.testing.assert_array_equal(model.flat_params_, before)  # checked before the weights go in


def test_negative_or_nan_second_moments_are_refused(tmp_path):
    from seqprob.errors import CheckpointError
    opt = AdamW(GPT(CFG).params)
    state = opt.state_dict()
    name = next(iter(state["v"]))
    for bad in (-1.0, np.nan):
        state["v"][name] = np.full_like(state["v"][name], bad)
        with pytest.raises(CheckpointError, match=f"v.{name} must hold finite floats >= 0"):
            AdamW(GPT(CFG).params).load_state_dict(state)


def test_divergence_after_resuming_names_the_folder_resumed_from(tmp_path):
    train(GPT(CFG), STREAM, steps=3, checkpoint=tmp_path / "ck", **kw())
    with pytest.raises(TrainingDivergedError) as err:
        train(GPT(CFG), STREAM, steps=6, resume=tmp_path / "ck", **kw(lr=1e30))
    assert str(tmp_path / "ck") in str(err.value) and "None" not in str(err.value)


class FlakyGPT(GPT):
    """Returns a NaN loss on call number ``nan_at`` (1-based)."""

    nan_at = 5

    def loss_and_grads(self, batch, mask=None, rng=None):
        self.calls = getattr(self, "calls", 0) + 1
        loss, grads = super().loss_and_grads(batch, mask=mask, rng=rng)
        return (math.nan if self.calls == self.nan_at else loss), grads


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    model = FlakyGPT(CFG, seed=0)
    with pytest.raises(TrainingDivergedError, match="step 5") as info:
        train(model, STREAM, steps=10, checkpoint=tmp_path / "ck", checkpoint_every=3, **kw())
    err = info.value
    assert err.step == 5 and math.isnan(err.loss)
    assert "step 3" in str(err) and len(err.history) == 4
    good = GPT(CFG, seed=0)
    train(good, STREAM, steps=10, stop_at=4, **kw())
    np.testing.assert_array_equal(model.flat_params_, good.flat_params_)  # step 5 not applied
    assert load_checkpoint(tmp_path / "ck").extra["step"] == 3


def test_nan_gradient_stops():
    class NanGrad(GPT):
        def loss_and_grads(self, batch, mask=None, rng=None):
            loss, grads = super().loss_and_grads(batch, mask=mask, rng=rng)
            grads["wpe"][0, 0] = np.inf
            return loss, grads

    with pytest.raises(TrainingDivergedError, match="step 1: the gradient norm is"):
        train(NanGrad(CFG), STREAM, steps=3, **kw())


def test_update_that_breaks_the_weights_stops_and_keeps_checkpoint(tmp_path):
    class BadAdamW(AdamW):
        def step(self, grads, lr=None):
            super().step(grads, lr=lr)
            if self.t == 3:
                self.params["h.0.mlp.c_fc.w"][0, 0] = np.inf

    model = GPT(CFG, seed=0)
    with pytest.raises(TrainingDivergedError, match=r"step 3: the update made parameter "
                       r"'h.0.mlp.c_fc.w' non-finite.*step 2\) is kept") as info:
        train(model, STREAM, steps=6, optimizer=BadAdamW(model.params), checkpoint=tmp_path / "ck",
              checkpoint_every=2, **kw())
    assert info.value.step == 3 and len(info.value.history) == 2
    assert load_checkpoint(tmp_path / "ck").extra["step"] == 2


def test_overflow_in_validation_is_a_divergence():
    with pytest.raises(TrainingDivergedError, match="step 1: the validation forward pass failed"):
        train(GPT(CFG), STREAM, steps=4, val_ids=VAL, eval_every=1, **kw(lr=1e20, warmup=0))


def test_progress_bar_shows_the_loss(capsys):
    train(GPT(CFG), STREAM, steps=3, **kw(progress=True))
    err = capsys.readouterr().err
    assert "train" in err and "3/3" in err and "loss=" in err


def test_custom_optimizer_and_no_clip():
    model = GPT(CFG)
    opt = AdamW(model.params, lr=123.0, weight_decay=0.0)
    train(model, STREAM, steps=3, optimizer=opt, grad_clip=None, **kw())
    assert opt.t == 3 and opt.lr == pytest.approx(cosine_schedule(2, 1e-2, 2, 3, 1e-3))


def test_bad_input():
    model = GPT(CFG)
    with pytest.raises(InputError, match="8 tokens.*at least 9"):
        train(model, STREAM[:8], steps=2, **kw())
    assert train(model, STREAM[:8], steps=2, block_size=4, **kw()).shape[0] == 2
    with pytest.raises(TokenIdError, match="7"):
        train(model, np.append(STREAM, 7), steps=2, **kw())
    with pytest.raises(InputError, match="block_size=9 exceeds"):
        train(model, STREAM, steps=2, block_size=9, **kw())
    with pytest.raises(InputError, match="steps"):
        train(model, STREAM, steps=0, **kw())
    with pytest.raises(InputError, match="stop_at"):
        train(model, STREAM, steps=2, stop_at=3, **kw())
    with pytest.raises(InputError, match="1-D"):
        train(model, STREAM.reshape(2, -1), steps=2, **kw())
    with pytest.raises(InputError, match="grad_clip"):
        train(model, STREAM, steps=2, grad_clip=0.0, **kw())
    with pytest.raises(InputError, match="warmup"):
        train(model, STREAM, steps=2, **kw(warmup=5))
    with pytest.raises(InputError, match="seed must be an integer >= 0, got -1"):
        train(model, STREAM, steps=2, **kw(seed=-1))


def test_unusable_checkpoint_folder_is_refused_before_training(tmp_path):
    from seqprob.errors import SeqProbFileError

    (tmp_path / "notes.txt").write_text("precious")
    model = GPT(CFG, seed=0)
    before = model.flat_params_.copy()
    with pytest.raises(SeqProbFileError, match="refusing"):
        train(model, STREAM, steps=2, checkpoint=tmp_path, **kw())
    np.testing.assert_array_equal(model.flat_params_, before)  # no step was taken


@given(n=st.integers(2, 60), block=st.integers(1, 10), batch=st.integers(1, 6), seed=st.integers(0, 99))
def test_sample_windows_are_contiguous_slices(n, block, batch, seed):
    if n < block + 1:
        return
    ids = np.arange(n) * 10
    windows = sample_windows(ids, batch, block, np.random.default_rng(seed))
    assert windows.shape == (batch, block + 1)
    assert np.all(np.diff(windows, axis=1) == 10)  # consecutive positions of the stream
    assert windows.min() >= 0 and windows.max() <= ids[-1]


@given(n=st.integers(2, 80), block=st.integers(1, 10), cap=st.integers(1, 20))
def test_eval_windows_score_each_target_at_most_once(n, block, cap):
    ids = np.arange(n)
    windows = _eval_windows(ids, block, cap)
    targets = windows[:, 1:].ravel()
    assert len(np.unique(targets)) == len(targets)
    assert len(windows) <= max(cap, 1)
    if n > block:
        assert windows.shape[1] == block + 1
        assert len(windows) == min(cap, (n - 1) // block)


# -- the best checkpoint, the overfitting warning, Ctrl-C -----------------------------------------
def scripted_val(monkeypatch, losses):
    """Make the validation losses of the next run ``losses``, in order (the training itself,
    hence the weights of every step, stay real)."""
    import seqprob.training as training

    values = iter(losses)
    monkeypatch.setattr(training, "evaluate_loss", lambda *a, **k: next(values))


def test_keep_best_keeps_the_lowest_validation_loss_beside_the_last(tmp_path, monkeypatch):
    from seqprob.training import kept_best

    scripted_val(monkeypatch, [3.0, 2.0, 2.5, 2.6, 2.4])  # evaluations at steps 2, 4 .. 10
    ck = tmp_path / "ck"
    train(GPT(CFG, seed=0), STREAM, steps=10, val_ids=VAL, eval_every=2, checkpoint=ck,
          warn_patience=None, **kw())
    assert kept_best(ck) == (4, 2.0)
    assert load_checkpoint(ck).extra["step"] == 10  # the folder itself: the last step
    at_4 = GPT(CFG, seed=0)
    train(at_4, STREAM, steps=10, stop_at=4, **kw())
    best = load_checkpoint(ck / "best")
    np.testing.assert_array_equal(best.model.flat_params_, at_4.flat_params_)  # survived 3 saves
    assert best.optimizer_state is None and best.extra == {"step": 4, "val_loss": 2.0}
    assert not [p.name for p in tmp_path.iterdir() if p.name != "ck"]  # nothing left beside it


def test_keep_best_options(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="keep_best=True needs checkpoint=FOLDER"):
        train(GPT(CFG), STREAM, steps=2, val_ids=VAL, keep_best=True, **kw())
    with pytest.raises(InputError, match="keep_best=True needs val_ids"):
        train(GPT(CFG), STREAM, steps=2, checkpoint=tmp_path / "a", keep_best=True, **kw())
    train(GPT(CFG), STREAM, steps=2, val_ids=VAL, checkpoint=tmp_path / "b", keep_best=False, **kw())
    train(GPT(CFG), STREAM, steps=2, checkpoint=tmp_path / "c", **kw())  # no validation: no best
    assert not (tmp_path / "b" / "best").exists() and not (tmp_path / "c" / "best").exists()
    with pytest.raises(InputError, match="warn_patience"):
        train(GPT(CFG), STREAM, steps=2, val_ids=VAL, warn_patience=0, **kw())


def test_a_fresh_run_does_not_keep_an_older_runs_best(tmp_path, monkeypatch):
    from seqprob.training import kept_best

    ck = tmp_path / "ck"
    scripted_val(monkeypatch, [1.0, 5.0])
    train(GPT(CFG), STREAM, steps=4, val_ids=VAL, eval_every=2, checkpoint=ck, **kw())
    assert kept_best(ck) == (2, 1.0)
    scripted_val(monkeypatch, [3.0, 2.0])
    train(GPT(CFG), STREAM, steps=4, val_ids=VAL, eval_every=2, checkpoint=ck, checkpoint_every=4,
          **kw())
    assert kept_best(ck) == (4, 2.0)


def test_rising_validation_loss_warns_once(monkeypatch):
    from seqprob.training import OverfittingWarning

    scripted_val(monkeypatch, [3.0, 2.0, 2.5, 2.6, 2.7, 2.8])
    with pytest.warns(OverfittingWarning) as caught:
        train(GPT(CFG), STREAM, steps=12, val_ids=VAL, eval_every=2, **kw())
    assert len(caught) == 1
    assert str(caught[0].message).startswith("validation loss 2.7000 at step 10 is above its lowest, "
                                             "2.0000 at step 4, after 3 evaluations")
    import warnings
    for losses, patience in (([2.0, 2.01, 2.005, 2.015], 3), ([3.0, 2.0, 2.5, 2.6, 2.7, 2.8], None)):
        scripted_val(monkeypatch, losses)  # within 1% of the lowest: noise; None: never
        with warnings.catch_warnings():
            warnings.simplefilter("error", OverfittingWarning)
            train(GPT(CFG), STREAM, steps=2 * len(losses), val_ids=VAL, eval_every=2,
                  warn_patience=patience, **kw())


class Stop:
    """A callback that raises KeyboardInterrupt (what Ctrl-C does) after step ``at``."""

    def __init__(self, at):
        self.at, self.rows = at, []

    def __call__(self, row):
        self.rows.append(row)
        if row["step"] == self.at:
            raise KeyboardInterrupt


def test_interrupt_says_what_was_kept_and_resume_finishes_the_run(tmp_path):
    from seqprob.errors import TrainingInterrupted
    from seqprob.training import kept_best

    args = dict(steps=9, val_ids=VAL, eval_every=3, **kw(seed=3))
    full = GPT(CFG, seed=1)
    train(full, STREAM, checkpoint=tmp_path / "full", **args)

    stop = Stop(at=7)
    with pytest.raises(TrainingInterrupted) as info:
        train(GPT(CFG, seed=1), STREAM, checkpoint=tmp_path / "ck", callback=stop, **args)
    err = info.value
    assert isinstance(err, KeyboardInterrupt)
    assert (err.step, err.steps, err.checkpoint_step, err.checkpoint) == (7, 9, 6, str(tmp_path / "ck"))
    lowest = err.history.loc[err.history.val_loss.idxmin()]
    assert err.best_checkpoint == str(tmp_path / "ck" / "best")
    assert (err.best_step, err.best_val_loss) == (lowest.step, lowest.val_loss)
    assert f"the checkpoint of step 6 is kept in {str(tmp_path / 'ck')!r}" in str(err)
    assert len(err.history) == 7 and [r["step"] for r in stop.rows] == list(range(1, 8))
    assert set(stop.rows[0]) == set(HISTORY_COLUMNS)

    resumed = load_checkpoint(tmp_path / "ck").model
    train(resumed, STREAM, checkpoint=tmp_path / "ck", resume=True, **args)
    np.testing.assert_array_equal(resumed.flat_params_, full.flat_params_)
    assert kept_best(tmp_path / "ck") == kept_best(tmp_path / "full")


def test_ctrl_c_during_a_save_waits_for_the_save(tmp_path, monkeypatch):
    """SIGINT inside a checkpoint write: the write finishes and is reported as kept."""
    import os
    import signal

    from seqprob.errors import TrainingInterrupted
    from seqprob.gpt import checkpoint as ck

    real = ck.save_checkpoint

    def save_then_ctrl_c(model, path, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # arrives mid-save
        return real(model, path, *args, **kwargs)

    monkeypatch.setattr(ck, "save_checkpoint", save_then_ctrl_c)
    with pytest.raises(TrainingInterrupted) as info:
        train(GPT(CFG), STREAM, steps=6, checkpoint=tmp_path / "ck", checkpoint_every=2, **kw())
    assert info.value.checkpoint_step == 2 == load_checkpoint(tmp_path / "ck").extra["step"]


def test_a_best_folder_left_aside_by_an_interrupted_save_is_put_back(tmp_path):
    import os

    from seqprob.training import kept_best

    ck = tmp_path / "ck"
    args = dict(steps=6, val_ids=VAL, eval_every=3, **kw())
    train(GPT(CFG), STREAM, checkpoint=ck, stop_at=3, **args)
    before = kept_best(ck)
    os.replace(ck / "best", tmp_path / ".ck.best-aside")  # as if killed inside the swap
    train(load_checkpoint(ck).model, STREAM, checkpoint=ck, resume=True, **args)
    assert not (tmp_path / ".ck.best-aside").exists()
    assert kept_best(ck) is not None and kept_best(ck)[0] >= before[0]


# -- the ``seqprob train`` command --------------------------------------------------------------
@pytest.fixture
def corpus(tmp_path):
    rng = np.random.default_rng(0)
    words = "the cat dog sat ran on a mat".split()
    lines = [" ".join(rng.choice(words, size=rng.integers(2, 6))) for _ in range(60)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


SMALL = ["--steps", "6", "--block-size", "16", "--n-embd", "16", "--n-layer", "1", "--n-head", "2",
         "--batch-size", "4", "--no-progress", "--eval-every", "3"]


@pytest.mark.parametrize("tokenizer", ["word", "char", "bpe:270"])
def test_cli_train_writes_a_loadable_model(tmp_path, corpus, capsys, tokenizer):
    from seqprob.app.cli import main

    out = tmp_path / "model"
    assert main(["train", str(corpus), "-o", str(out), "--tokenizer", tokenizer, *SMALL,
                 "--format", "csv", "--history", str(tmp_path / "h.csv")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("step,lr,train_loss,val_loss") and len(printed) == 3
    model = GPT.load(out)
    assert model.tokenizer is not None and model.config.block_size == 16
    assert model.config.vocab_size == len(model.tokenizer.vocab)
    import pandas as pd
    assert len(pd.read_csv(tmp_path / "h.csv")) == 6


@pytest.mark.parametrize("tokenizer", ["char", "word", "bpe:270"])
def test_cli_train_then_score_and_sample(tmp_path, corpus, capsys, tokenizer):
    """``seqprob train CORPUS -o model/`` then ``score --model model/`` and ``sample --model model/``."""
    import pandas as pd
    from io import StringIO

    from seqprob.app.cli import main
    from seqprob.scoring import score

    out = tmp_path / "model"
    assert main(["train", str(corpus), "-o", str(out), "--tokenizer", tokenizer, *SMALL]) == 0
    capsys.readouterr()
    assert main(["score", "--model", str(out), "--format", "csv", "the cat sat"]) == 0
    df = pd.read_csv(StringIO(capsys.readouterr().out), keep_default_na=False)
    model = GPT.load(out)
    expected = score(model, ["the cat sat"], tokenizer=model.tokenizer)
    assert df["token_id"].tolist() == expected["token_id"].tolist()
    np.testing.assert_allclose(df["logprob"], expected["logprob"], atol=1e-4)
    assert df["is_eos"].astype(str).tolist()[-1] == "True" and (df["logprob"] < 0).all()
    assert main(["sample", "--model", str(out), "--seed", "0", "--max-new-tokens", "5", "-n", "2"]) == 0
    first = capsys.readouterr().out
    assert main(["sample", "--model", str(out), "--seed", "0", "--max-new-tokens", "5", "-n", "2"]) == 0
    assert capsys.readouterr().out == first and first.strip()  # seeded: same samples


def test_cli_train_resume_continues(tmp_path, corpus, capsys):
    from seqprob.app.cli import main

    out = tmp_path / "a"
    assert main(["train", str(corpus), "-o", str(out), *SMALL]) == 0
    before = load_checkpoint(out)
    assert before.extra["step"] == 6
    table = capsys.readouterr().out
    assert main(["train", str(corpus), "-o", str(out), *SMALL, "--resume"]) == 0  # finished
    assert capsys.readouterr().out == table  # nothing trained: the saved rows, as they were
    np.testing.assert_array_equal(load_checkpoint(out).model.flat_params_, before.model.flat_params_)
    longer = ["--steps", "9", *SMALL[2:]]
    assert main(["train", str(corpus), "-o", str(out), *longer, "--resume"]) == 0
    after = load_checkpoint(out)
    assert after.extra["step"] == 9 and len(after.extra["history"]) == 9
    assert after.optimizer_state["step"] == 9


def test_cli_train_errors(tmp_path, corpus, capsys):
    from seqprob.app.cli import main

    assert main(["train", str(corpus), "-o", str(tmp_path / "m"), "--tokenizer", "sentencepiece",
                 *SMALL]) == 2
    assert "unknown --tokenizer 'sentencepiece'" in capsys.readouterr().err
    assert main(["train", str(corpus), "-o", str(tmp_path / "m"), *SMALL[:2], "--block-size",
                 "100000", "--no-progress"]) == 2
    assert "--block-size 100000" in capsys.readouterr().err  # the option, in the CLI's words
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert main(["train", str(empty), "-o", str(tmp_path / "m"), *SMALL]) == 2
    assert "no text" in capsys.readouterr().err


@given(lines=st.lists(st.text("ab c", min_size=1, max_size=6), min_size=1, max_size=5))
def test_token_stream_marks_every_sentence(lines):
    from seqprob.app.cli.train import token_stream
    from seqprob.tokenizers import CharTokenizer

    lines = [ln for ln in lines if ln]
    tok = CharTokenizer.fit(lines)
    stream = token_stream(tok, lines, raw=False)
    bos, eos = tok.vocab.bos_id, tok.vocab.eos_id
    assert (stream == bos).sum() == len(lines) == (stream == eos).sum()
    pieces = np.split(stream, np.flatnonzero(stream == eos) + 1)[:-1]
    assert [tok.decode(p[1:-1]) for p in pieces] == lines
    assert all(p[0] == bos for p in pieces)


def interrupt_at_evaluation(monkeypatch, n):
    """Raise KeyboardInterrupt (as Ctrl-C would) in the ``n``-th validation pass."""
    import seqprob.training as training

    real, calls = training.evaluate_loss, []

    def evaluate(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "evaluate_loss", evaluate)


def test_cli_ctrl_c_prints_the_rows_so_far_what_was_kept_and_the_resume_command(
        tmp_path, corpus, capsys, monkeypatch):
    import shlex

    from seqprob.app.cli import main

    out = tmp_path / "run"
    args = ["train", str(corpus), "-o", str(out), *SMALL[:1], "9", *SMALL[2:]]  # 9 steps, eval every 3
    interrupt_at_evaluation(monkeypatch, 3)
    assert main(args) == 130
    captured = capsys.readouterr()
    rows = captured.out.splitlines()
    assert rows[0].split()[:2] == ["step", "lr"] and [r.split()[0] for r in rows[1:]] == ["3", "6"]
    assert "--no-progress" in args and "step/s" not in captured.err  # rows without the bar
    err = captured.err.splitlines()
    assert err[0] == "seqprob train: interrupted after step 9 of 9"
    assert err[1].startswith(f"seqprob train: kept the checkpoint of step 6 in {out.resolve()}/ and "
                             f"the model of the lowest validation loss (")
    assert f"in {(out / 'best').resolve()}/" in err[1]
    command = err[2].removeprefix("seqprob train: continue with: ")
    from seqprob.app.cli import build_parser
    parse = build_parser().parse_args
    assert shlex.split(command)[0] == "seqprob" and \
        vars(parse(shlex.split(command)[1:])) == vars(parse([*args, "--resume"]))

    monkeypatch.undo()
    assert main(shlex.split(command)[1:]) == 0
    capsys.readouterr()
    whole = tmp_path / "whole"
    assert main(["train", str(corpus), "-o", str(whole), *args[4:]]) == 0
    np.testing.assert_array_equal(GPT.load(out).flat_params_, GPT.load(whole).flat_params_)


def test_cli_sigint_keeps_the_checkpoint_and_says_how_to_resume(tmp_path, corpus):
    """The real thing: SIGINT to a running ``seqprob train`` once its first checkpoint exists."""
    import signal
    import subprocess
    import sys
    import time

    def saved_step():  # the step of the checkpoint in ``out`` (0 while there is none or mid-swap)
        try:
            return json.loads((out / "training.json").read_text())["step"]
        except (OSError, ValueError, KeyError):
            return 0

    import json
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "seqprob", "train", str(corpus), "-o", str(out),
                             "--steps", "1000000", *SMALL[2:]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while saved_step() < 6 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # step 6 saved: the row of step 3 was printed before step 4 began
        assert saved_step() >= 6, proc.stderr.read() if proc.poll() is not None else "slow"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    step = load_checkpoint(out).extra["step"]
    assert f"kept the checkpoint of step {step} in {out.resolve()}/" in stderr
    assert "--steps 1000000" in stderr and stderr.rstrip().endswith("--resume")
    assert stdout.splitlines()[1].split()[0] == "3"  # the table's first row came as it was computed


def test_cli_train_says_which_model_is_the_best_and_warns_of_overfitting(tmp_path, corpus, capsys,
                                                                      monkeypatch):
    from seqprob.app.cli import main

    scripted_val(monkeypatch, [3.0, 2.0, 2.5, 2.6, 2.7])
    out = tmp_path / "m"
    assert main(["train", str(corpus), "-o", str(out), "--steps", "10", "--eval-every", "2",
                 *SMALL[2:-2], "--format", "json"]) == 0
    captured = capsys.readouterr()
    import json
    assert [r["step"] for r in json.loads(captured.out)] == [2, 4, 6, 8, 10]
    assert "seqprob train: warning: validation loss 2.7000 at step 10 is above its lowest" in captured.err
    assert f"wrote the model and its tokenizer to {out.resolve()}/ (the last step, 10;" in captured.err
    assert (f"the model of the lowest validation loss (2.0000 at step 4) is in "
            f"{(out / 'best').resolve()}/ (use it with --model {out / 'best'})") in captured.err
    assert GPT.load(out / "best").config == GPT.load(out).config


def test_resume_command_repeats_the_options_given():
    from seqprob.app.cli import build_parser
    from seqprob.app.cli.train import resume_command

    args = build_parser().parse_args(["train", "my corpus.txt", "-o", "out dir", "--steps", "50",
                                      "--no-progress", "--force", "--lr", "0.001"])
    assert resume_command(args) == ("seqprob train 'my corpus.txt' -o 'out dir' --steps 50 --lr 0.001 "
                                    "--no-progress --resume")
    assert resume_command(args, resume=False).endswith("--no-progress --force")
