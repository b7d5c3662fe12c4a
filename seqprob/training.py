"""Training a GPT on a token stream: random windows, AdamW, warmup + cosine, clipping.

:func:`train` is deterministic given its ``seed``: the windows (and dropout masks) come from
one ``numpy.random.Generator`` whose state is saved in every checkpoint, together with the
optimizer's moments, so a run resumed from a checkpoint continues bit for bit as if it had
never stopped. Beside that last state, ``checkpoint/best`` holds the model of the lowest
validation loss so far (``keep_best``), and a validation loss that keeps rising above its lowest
is an :class:`OverfittingWarning`.
"""
from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ._progress import progress_bar
from .checks import check_int
from .errors import CheckpointError, InputError, TrainingDivergedError, TrainingInterrupted
from .optim import AdamW, clip_grad_norm, cosine_schedule
from .protocols import Trainable
from .vocab import check_ids

__all__ = ["train", "sample_windows", "evaluate_loss", "kept_best", "HISTORY_COLUMNS",
           "BEST_FOLDER", "OverfittingWarning"]

log = logging.getLogger(__name__)

HISTORY_COLUMNS = ["step", "lr", "train_loss", "val_loss", "tokens_seen", "seconds"]
#: Sub-folder of a training checkpoint that holds the model of the lowest validation loss.
BEST_FOLDER = "best"
#: Relative rise of the validation loss above its lowest that counts as overfitting (noise below).
RISE = 0.01


class OverfittingWarning(UserWarning):
    """The validation loss has not improved for several evaluations and is now above its lowest."""


def sample_windows(ids: np.ndarray, batch_size: int, block: int, rng: np.random.Generator) -> np.ndarray:
    """``batch_size`` random windows of ``block + 1`` consecutive ids: ``(B, block + 1)``.

    Every start in ``0 .. len(ids) - block - 1`` is equally likely (drawn with replacement).

    Examples
    --------
    >>> sample_windows(np.arange(10), 2, 3, np.random.default_rng(0)).shape
    (2, 4)
    """
    starts = rng.integers(0, len(ids) - block, size=batch_size)  # (B,)
    return ids[starts[:, None] + np.arange(block + 1)]  # (B, block + 1)


def _eval_windows(ids: np.ndarray, block: int, max_windows: int) -> np.ndarray:
    """Fixed, non-overlapping windows of ``block + 1`` ids (each target scored once),
    evenly spread over the stream when there are more than ``max_windows``."""
    if len(ids) <= block:
        return ids[None, :]
    n = (len(ids) - 1) // block
    picks = np.unique(np.linspace(0, n - 1, num=min(n, max_windows)).round().astype(np.int64))
    return ids[picks[:, None] * block + np.arange(block + 1)]  # (W, block + 1)


def evaluate_loss(model, windows: np.ndarray, batch_size: int) -> float:
    """Mean next-token NLL (nats per token) of ``model`` over the rows of ``windows``.

    Uses ``model.token_logprobs`` (a forward pass only, no dropout, no gradient).

    Notes
    -----
    loss = -(1/N) Σ_windows Σ_t log P(x_t | x_<t), N = number of scored targets.

    Examples
    --------
    >>> import seqprob.gpt as g
    >>> model = g.GPT(g.GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
    >>> round(evaluate_loss(model, np.array([[0, 1, 2, 3, 4]]), batch_size=8), 2)  # ~ log 5
    1.61
    """
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        lp = model.token_logprobs(windows[i:i + batch_size])  # (b, T)
        total -= float(lp.sum(dtype=np.float64))
        count += lp.size
    return total / count


def train(model, ids, steps: int, batch_size: int = 16, lr: float = 1e-3, seed: int = 0,
          val_ids=None, eval_every: int | None = None, checkpoint=None,
          checkpoint_every: int | None = None, warmup: int | None = None,
          min_lr: float | None = None, weight_decay: float = 0.1,
          betas: tuple[float, float] = (0.9, 0.99), grad_clip: float | None = 1.0,
          block_size: int | None = None, eval_windows: int = 64, progress: bool = True,
          optimizer: AdamW | None = None, resume=False, stop_at: int | None = None,
          keep_best: bool | None = None, warn_patience: int | None = 3, callback=None):
    """Train ``model`` on random windows of the token stream ``ids``; return the history.

    Parameters
    ----------
    model : Trainable
        Any :class:`~seqprob.protocols.Trainable` model (``params``, ``loss_and_grads(batch)``)
        with a ``config.block_size``; updated in place.
    ids : array_like of int, shape (N,)
        The training token stream (e.g. sentences joined with the EOS id between them).
    steps : int
        Total number of optimizer steps (the schedule's length).
    batch_size : int
        Windows per step.
    lr : float
        Peak learning rate.
    seed : int
        Seeds the window sampler (and dropout): same seed, same run.
    val_ids : array_like of int, optional
        Validation stream, scored every ``eval_every`` steps and at the end on up to
        ``eval_windows`` fixed non-overlapping windows.
    eval_every : int, optional
        Default: ``max(1, steps // 10)``.
    checkpoint : str or Path, optional
        Folder to save to every ``checkpoint_every`` steps (default ``eval_every``), at
        ``stop_at`` and at the end (see :func:`seqprob.gpt.checkpoint.save_checkpoint`).
    warmup : int, optional
        Linear warmup steps; default ``min(100, steps // 10)``.
    min_lr : float, optional
        Learning rate at the end of the cosine; default ``lr / 10``.
    weight_decay, betas : float, (float, float)
        AdamW settings (used when ``optimizer`` is None); decay applies to matrices only.
    grad_clip : float or None
        Global gradient-norm limit (None: no clipping).
    block_size : int, optional
        Window length T (default ``model.config.block_size``); the stream needs T + 1 ids.
    progress : bool
        Show a tqdm progress bar with the loss.
    optimizer : AdamW, optional
        Use this optimizer (its ``lr`` is set by the schedule every step).
    resume : bool or str or Path
        ``True``: continue from ``checkpoint`` if it holds a checkpoint (else start fresh);
        a path: continue from that checkpoint. The weights, optimizer moments, step count,
        sampler RNG and history are restored; pass the same arguments as the first run.
    stop_at : int, optional
        Stop after this step (saving a checkpoint); resume later to finish ``steps``.
    keep_best : bool, optional
        Also keep the model of the lowest validation loss so far in ``checkpoint/best``
        (:data:`BEST_FOLDER`), as Keras's ``ModelCheckpoint(save_best_only=True)`` does: a
        checkpoint folder of its own (load it with ``GPT.load``; no optimizer state), whose
        ``training.json`` holds its ``step`` and ``val_loss``. Default: whenever both
        ``checkpoint`` and ``val_ids`` are given; ``True`` without them is an error. The model
        in memory and ``checkpoint`` itself stay those of the last step.
    warn_patience : int or None
        Issue an :class:`OverfittingWarning` (once) when the validation loss has not reached a
        new lowest for this many evaluations in a row and the latest is more than 1% above the
        lowest; None: never. Training goes on (no early stopping): the lowest-loss model is
        the one in ``checkpoint/best``.
    callback : callable, optional
        ``callback(row)`` after every step, with that step's history row as a dict (keys
        :data:`HISTORY_COLUMNS`), once the step's evaluation and checkpoints are written. It
        may raise: a ``KeyboardInterrupt`` stops training as Ctrl-C does.

    Returns
    -------
    pandas.DataFrame
        One row per step: ``step`` (1-based), ``lr``, ``train_loss`` (nats/token of that
        step's batch, before the update), ``val_loss`` (NaN except at evaluations),
        ``tokens_seen``, ``seconds`` (wall time since the start of training).

    Raises
    ------
    TrainingDivergedError
        The loss or the gradient norm became NaN/inf; ``.step`` names the step, the model
        and the checkpoint keep the last good state, ``.history`` holds the rows so far.
    TrainingInterrupted
        A ``KeyboardInterrupt`` (Ctrl-C, or raised by ``callback``) stopped training (it is a
        ``KeyboardInterrupt`` too); ``.checkpoint`` and ``.checkpoint_step`` name the last saved
        state (``resume=True`` continues from it), ``.best_checkpoint`` and ``.best_step`` the
        lowest-loss model, ``.history`` the rows so far.

    Notes
    -----
    Step s (0-based) draws B windows x_0..x_T, computes
    :math:`L = -\\frac{1}{BT}\\sum_{b,t} \\log P_\\theta(x_t \\mid x_{<t})` and its gradient,
    clips the global gradient norm to ``grad_clip``, and applies AdamW with the learning rate
    ``cosine_schedule(s, lr, warmup, steps, min_lr)``.

    Examples
    --------
    >>> import seqprob.gpt as g
    >>> model = g.GPT(g.GPTConfig(vocab_size=5, block_size=8, n_layer=1, n_head=1, n_embd=8))
    >>> hist = train(model, np.arange(200) % 5, steps=20, batch_size=4, lr=1e-2, progress=False)
    >>> bool(hist.train_loss.iloc[-1] < hist.train_loss.iloc[0])
    True
    """
    import pandas as pd

    run = _Run(model, ids, steps, batch_size, lr, seed, val_ids, eval_every, checkpoint,
               checkpoint_every, warmup, min_lr, grad_clip, block_size, eval_windows, stop_at)
    run.watch_best(keep_best, warn_patience)
    if callback is not None and not callable(callback):
        raise InputError(f"callback must be callable, got {type(callback).__name__}",
                         value=type(callback).__name__)
    opt = optimizer if optimizer is not None else AdamW(
        model.params, lr=lr, betas=betas, weight_decay=weight_decay)
    run.restore(resume, opt)
    try:
        run.loop(opt, progress, callback)
    except TrainingDivergedError as exc:
        exc.history = pd.DataFrame(run.rows, columns=HISTORY_COLUMNS)
        exc.data["history"] = exc.history
        raise
    except KeyboardInterrupt as exc:
        raise run.interrupted() from exc
    if run.best.saved is not None:
        log.info("the lowest validation loss, %.4f at step %d, is kept in %s", run.best.saved[1],
                 run.best.saved[0], run.best.folder)
    return pd.DataFrame(run.rows, columns=HISTORY_COLUMNS)


class _Run:
    """The state of one training run (validated settings, RNG, history, timing)."""

    def __init__(self, model, ids, steps, batch_size, lr, seed, val_ids, eval_every, checkpoint,
                 checkpoint_every, warmup, min_lr, grad_clip, block_size, eval_windows, stop_at):
        if not isinstance(model, Trainable):
            raise InputError(f"{type(model).__name__} cannot be trained: train() needs a Trainable "
                             "model (params and loss_and_grads(batch))", model=type(model).__name__)
        self.model, self.config = model, model.config
        self.steps = check_int("steps", steps, low=1)
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.block = self._block(block_size)
        self.ids = self._stream(ids, "ids", self.block + 1)
        self.val = None
        if val_ids is not None:
            val = self._stream(val_ids, "val_ids", 2)
            self.val = _eval_windows(val, self.block, check_int("eval_windows", eval_windows, low=1))
        self.eval_every = check_int("eval_every", max(1, self.steps // 10) if eval_every is None
                                   else eval_every, low=1)
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        if self.checkpoint is not None:  # fail now, not at the first save after training steps
            from .gpt.checkpoint import check_replaceable
            check_replaceable(self.checkpoint)
        self.ckpt_every = check_int("checkpoint_every", self.eval_every if checkpoint_every is None
                                    else checkpoint_every, low=1)
        self.lr, self.seed = lr, seed
        self.warmup = min(100, self.steps // 10) if warmup is None else warmup
        self.min_lr = lr / 10 if min_lr is None else min_lr
        cosine_schedule(0, self.lr, self.warmup, self.steps, self.min_lr)  # validates them
        if grad_clip is not None and not grad_clip > 0:
            raise InputError(f"grad_clip must be > 0 or None, got {grad_clip!r}", value=grad_clip, limit=0)
        self.grad_clip = grad_clip
        self.stop_at = self.steps if stop_at is None else check_int("stop_at", stop_at, low=1)
        if self.stop_at > self.steps:
            raise InputError(f"stop_at={stop_at} is beyond steps={steps}", value=stop_at, limit=steps)
        check_int("seed", seed, low=0)
        self.rng = np.random.default_rng(seed)
        self.step, self.rows, self.seconds0, self.saved_step = 0, [], 0.0, None
        self.saved_at = None  # the folder holding the state of saved_step (resumed from, or saved to)

    def _block(self, block_size) -> int:
        limit = self.config.block_size
        if block_size is None:
            return limit
        block = check_int("block_size", block_size, low=1)
        if block > limit:
            raise InputError(f"block_size={block} exceeds the model's block_size={limit}",
                             value=block, limit=limit)
        return block

    def _stream(self, ids, name: str, need: int) -> np.ndarray:
        arr = check_ids(ids, self.config.vocab_size, name=name, allow_empty=True)
        if arr.ndim != 1:
            raise InputError(f"{name} must be a 1-D token stream, got shape {arr.shape}", shape=arr.shape)
        if len(arr) < need:
            raise InputError(f"{name} has {len(arr)} tokens; training windows need at least {need} "
                             f"(block_size {self.block} + 1): use more text or a smaller block_size",
                             value=len(arr), limit=need)
        return arr

    def settings(self) -> dict:
        return {"steps": self.steps, "batch_size": self.batch_size, "block_size": self.block,
                "lr": self.lr, "seed": self.seed, "warmup": self.warmup, "min_lr": self.min_lr,
                "grad_clip": self.grad_clip}

    # -- checkpoints ---------------------------------------------------------------------------
    def restore(self, resume, opt) -> None:
        if not resume:
            return
        from .gpt.checkpoint import load_checkpoint

        if resume is True:
            if self.checkpoint is None:
                raise InputError("resume=True needs checkpoint=FOLDER (or pass resume=FOLDER)")
            if not (self.checkpoint / "manifest.json").exists():
                log.info("no checkpoint in %s yet: starting fresh", self.checkpoint)
                return
            resume = self.checkpoint
        taken = {}

        def take_state(opt_state, extra):  # before any weight is written: a refusal changes nothing
            if opt_state is None or not extra or "rng" not in extra:
                raise InputError(f"checkpoint {str(resume)!r} has no optimizer/training state to resume "
                                 f"from (it was saved by model.save, not by train)", path=str(resume))
            taken["progress"] = _training_state(extra, resume)
            taken["rng"] = _rng_state(extra["rng"], resume)
            opt.load_state_dict(opt_state)  # checks everything before it sets anything

        ckpt = load_checkpoint(resume, model=self.model, check=take_state)
        step, seconds, rows = taken["progress"]
        self.rng.bit_generator.state = taken["rng"]
        saved = ckpt.extra.get("settings")
        saved = saved if isinstance(saved, dict) else {}
        changed = {k: (v, saved.get(k)) for k, v in self.settings().items() if saved.get(k) != v}
        if changed:
            log.warning("resuming with settings that differ from the checkpoint's: %s", changed)
        self.step, self.seconds0, self.rows = step, seconds, rows
        self.saved_step, self.saved_at = self.step, Path(resume)
        self.best.restore(self.rows)
        log.info("resumed from %s at step %d", resume, self.step)

    def save(self, opt, elapsed: float) -> None:
        from .gpt.checkpoint import save_checkpoint

        extra = {"step": self.step, "seconds": elapsed, "rng": self.rng.bit_generator.state,
                 "settings": self.settings(),
                 "history": [[None if isinstance(v, float) and math.isnan(v) else v for v in row]
                             for row in self.rows]}
        with self._best_kept():
            save_checkpoint(self.model, self.checkpoint, optimizer=opt, extra=extra)
        self.saved_step, self.saved_at = self.step, self.checkpoint

    @contextmanager
    def _best_kept(self):
        """Keep ``best/`` while save_checkpoint replaces the whole checkpoint folder: moved
        beside it for the swap, then back (an interruption in between is undone by
        :func:`_recover_best` at the next run)."""
        best = self.best.folder
        if best is None or self.best.saved is None or not best.is_dir():
            yield
            return
        aside = _aside_path(self.checkpoint)
        if aside.exists():  # a stale one: best/ itself is the newer
            shutil.rmtree(aside)
        os.replace(best, aside)
        try:
            yield
        finally:
            if self.checkpoint.is_dir():
                os.replace(aside, best)

    def save_best(self, val: float) -> None:
        """Write the model of this step, the lowest validation loss so far, to ``best/``."""
        from .gpt.checkpoint import save_checkpoint

        save_checkpoint(self.model, self.best.folder, extra={"step": self.step, "val_loss": val})
        self.best.saved = (self.step, val)

    def watch_best(self, keep_best, warn_patience) -> None:
        """Check ``keep_best`` and ``warn_patience``; track the lowest validation loss."""
        if keep_best not in (None, True, False):
            raise InputError(f"keep_best must be True, False or None, got {keep_best!r}", value=keep_best)
        missing = [need for need, have in (("checkpoint=FOLDER", self.checkpoint is not None),
                                           ("val_ids", self.val is not None)) if not have]
        if keep_best and missing:
            raise InputError(f"keep_best=True needs {' and '.join(missing)}: the best model is the "
                             f"one of the lowest validation loss, saved in FOLDER/{BEST_FOLDER}",
                             value=keep_best)
        if warn_patience is not None:
            warn_patience = check_int("warn_patience", warn_patience, low=1)
        folder = None
        if keep_best or (keep_best is None and not missing):
            from .gpt.checkpoint import check_replaceable

            folder = self.checkpoint / BEST_FOLDER
            _recover_best(self.checkpoint)
            check_replaceable(folder)
        self.best = _Best(folder, warn_patience)

    # -- the loop ------------------------------------------------------------------------------
    def loop(self, opt, progress: bool, callback=None) -> None:
        start = time.perf_counter() - self.seconds0
        bar = progress_bar(self.steps, "train", progress, initial=self.step)
        try:
            while self.step < self.stop_at:
                row = self.advance(opt, start)
                bar.set_postfix(loss=f"{row[2]:.4f}", lr=f"{row[1]:.2e}", refresh=False)
                bar.update(1)
                self.after_step(opt, row)
                if callback is not None:
                    callback(dict(zip(HISTORY_COLUMNS, row)))
        finally:
            bar.close()

    def advance(self, opt, start: float) -> list:
        """One optimizer step and, when due, an evaluation; returns (and keeps) its history row."""
        lr = cosine_schedule(self.step, self.lr, self.warmup, self.steps, self.min_lr)
        loss = self.one_step(opt, lr)
        self.step += 1
        self.check_weights()
        val = self.maybe_eval()
        row = [self.step, lr, loss, val, self.step * self.batch_size * self.block,
               time.perf_counter() - start]
        self.rows.append(row)
        return row

    def after_step(self, opt, row: list) -> None:
        """This step's checkpoints (the last state when due, ``best/`` on a new lowest
        validation loss) and the overfitting check."""
        val = row[3]
        better = not math.isnan(val) and self.best.update(self.step, val)
        if self.checkpoint is not None:
            keep = better and self.best.folder is not None
            due = self.step % self.ckpt_every == 0 or self.step == self.stop_at
            with _ctrl_c_deferred():  # what is on disk and what the run says was kept agree
                if due or (keep and self.saved_at != self.checkpoint):  # best/ goes in this run's folder
                    self.save(opt, row[5])
                if keep:
                    self.save_best(val)
        if not math.isnan(val) and self.best.rising(val):
            self.warn_overfitting(val)

    def warn_overfitting(self, val: float) -> None:
        best = self.best
        kept = (f"the model of step {best.step} is kept in {str(best.folder)!r}" if best.folder
                else f"keep_best with checkpoint=FOLDER keeps the lowest-loss model in FOLDER/{BEST_FOLDER}")
        warnings.warn(f"validation loss {val:.4f} at step {self.step} is above its lowest, "
                      f"{best.loss:.4f} at step {best.step}, after {best.since} evaluations without "
                      f"a new lowest: the model is overfitting (it fits its training text better "
                      f"than new text); {kept}; fewer steps, more text or dropout would help",
                      OverfittingWarning, stacklevel=5)

    def interrupted(self) -> TrainingInterrupted:
        """The TrainingInterrupted that says what was kept."""
        import pandas as pd

        how = ("resume=True" if self.saved_at == self.checkpoint else f"resume={str(self.saved_at)!r}")
        kept = (f"the checkpoint of step {self.saved_step} is kept in {str(self.saved_at)!r} "
                f"({how} continues from it)" if self.saved_step is not None
                else "no checkpoint was saved")
        best = self.best.saved
        if best is not None:
            kept += (f"; the model of the lowest validation loss, {best[1]:.4f} at step {best[0]}, "
                     f"in {str(self.best.folder)!r}")
        return TrainingInterrupted(
            f"training interrupted after step {self.step} of {self.steps}: {kept}", step=self.step,
            steps=self.steps, checkpoint=None if self.saved_at is None else str(self.saved_at),
            checkpoint_step=self.saved_step,
            best_checkpoint=None if best is None else str(self.best.folder),
            best_step=None if best is None else best[0],
            best_val_loss=None if best is None else best[1],
            history=pd.DataFrame(self.rows, columns=HISTORY_COLUMNS))

    def one_step(self, opt, lr: float) -> float:
        """Draw a batch, compute loss and gradients, clip, update; diverged before any update
        if the loss or the gradient norm is not finite."""
        batch = sample_windows(self.ids, self.batch_size, self.block, self.rng)  # (B, T+1)
        if self.config.dropout > 0:
            loss, grads = self.model.loss_and_grads(batch, rng=self.rng)
        else:
            loss, grads = self.model.loss_and_grads(batch)
        loss = float(loss)
        if not math.isfinite(loss):
            self.diverged(self.step + 1, f"the loss is {loss}", loss, updated=False)
        norm = clip_grad_norm(grads, self.grad_clip if self.grad_clip else math.inf)
        if not math.isfinite(norm):
            self.diverged(self.step + 1, f"the gradient norm is {norm}", loss, updated=False)
        opt.step(grads, lr=lr)
        return loss

    def check_weights(self) -> None:
        """Diverged if the update just made (step ``self.step``) left a non-finite weight."""
        flat = getattr(self.model, "flat_params_", None)  # one pass when there is one buffer
        arrays = [flat] if flat is not None else self.model.params.values()
        if all(np.isfinite(a.max()) and np.isfinite(a.min()) for a in arrays):
            return
        name = next(n for n, v in self.model.params.items() if not np.isfinite(v).all())
        self.diverged(self.step, f"the update made parameter {name!r} non-finite", math.nan,
                      updated=True)

    def maybe_eval(self) -> float:
        if self.val is None or (self.step % self.eval_every and self.step != self.steps):
            return math.nan
        try:
            val = evaluate_loss(self.model, self.val, self.batch_size)
        except InputError as exc:  # finite but huge weights: the forward pass overflowed
            self.diverged(self.step, f"the validation forward pass failed ({exc})", math.nan,
                          updated=True)
        log.info("step %d: val_loss %.4f", self.step, val)
        return val

    def diverged(self, step: int, what: str, loss: float, updated: bool):
        kept = (f"; the last good checkpoint (step {self.saved_step}) is kept in "
                f"{str(self.saved_at)!r}" if self.saved_step is not None else "")
        if self.best.saved is not None:
            kept += (f", the model of the lowest validation loss (step {self.best.saved[0]}) in "
                     f"{str(self.best.folder)!r}")
        state = "the parameters hold that step's update" if updated else "parameters not updated"
        raise TrainingDivergedError(
            f"training diverged at step {step}: {what}; {state}{kept} "
            f"(try a lower lr than {self.lr!r} or grad_clip)", step=step, loss=loss,
            checkpoint=str(self.saved_at) if self.saved_step is not None else None)


class _Best:
    """The lowest validation loss so far, its step, the evaluations since, and ``best/``."""

    def __init__(self, folder: Path | None, patience: int | None):
        self.folder, self.patience = folder, patience  # folder: None when the best is not kept
        self.step, self.loss, self.since, self.warned = None, math.inf, 0, False
        self.saved = None  # (step, val_loss) of the model that ``folder`` holds for this run

    def update(self, step: int, loss: float) -> bool:
        """Count one evaluation; True when it is a new lowest."""
        if loss < self.loss:
            self.step, self.loss, self.since = step, loss, 0
            return True
        self.since += 1
        return False

    def rising(self, loss: float) -> bool:
        """True once: ``patience`` evaluations without a new lowest and the latest clearly above
        it (a loss that only wobbles around its lowest is noise, not overfitting)."""
        if (self.patience is None or self.warned or self.since < self.patience
                or not loss > self.loss * (1 + RISE)):
            return False
        self.warned = True
        return True

    def restore(self, rows: list) -> None:
        """After a resume: the lowest is the model ``best/`` holds (written up to the moment
        the run stopped, possibly after its last checkpoint), the evaluations since are in
        ``rows``; without a kept best, both come from ``rows``."""
        evals = [(row[0], row[3]) for row in rows if not math.isnan(row[3])]
        if self.folder is None:
            for step, loss in evals:
                self.update(step, loss)
            return
        saved = _read_best(self.folder)
        if saved is None:
            if evals:
                log.warning("%s holds no best model: the lowest validation loss is tracked anew "
                            "from here", self.folder)
            return
        self.step, self.loss = self.saved = saved
        self.since = sum(1 for step, _ in evals if step > self.step)


@contextmanager
def _ctrl_c_deferred():
    """Hold a Ctrl-C that comes while checkpoints are written (and their steps recorded) until
    they are; then raise it. Only where Python's own handler is in place (main thread)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


def _aside_path(checkpoint: Path) -> Path:
    """Where ``best/`` waits while its checkpoint folder is replaced."""
    return checkpoint.parent / f".{checkpoint.name}.{BEST_FOLDER}-aside"


def _recover_best(checkpoint: Path) -> None:
    """Put back a ``best/`` that an interrupted save left beside the checkpoint folder."""
    aside = _aside_path(checkpoint)
    if aside.is_dir() and checkpoint.is_dir() and not (checkpoint / BEST_FOLDER).exists():
        os.replace(aside, checkpoint / BEST_FOLDER)
        log.info("put back %s, left beside the folder by an interrupted save", checkpoint / BEST_FOLDER)


def kept_best(checkpoint):
    """``(step, val_loss)`` of the model :func:`train` kept in ``checkpoint/best`` (the lowest
    validation loss of the run), or None when there is none.

    Examples
    --------
    >>> import tempfile
    >>> kept_best(tempfile.mkdtemp()) is None
    True
    """
    return _read_best(Path(checkpoint) / BEST_FOLDER)


def _read_best(folder: Path):
    """(step, val_loss) of a best-model checkpoint, or None when there is none or its
    training.json does not say."""
    import json

    try:
        if not (folder / "manifest.json").is_file() or (folder / "training.json").stat().st_size > 1 << 16:
            return None
        extra = json.loads((folder / "training.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    step, loss = (extra.get("step"), extra.get("val_loss")) if isinstance(extra, dict) else (None, None)
    if (isinstance(step, int) and not isinstance(step, bool) and step >= 1
            and isinstance(loss, (int, float)) and not isinstance(loss, bool) and math.isfinite(loss)):
        return step, float(loss)
    return None


def _training_state(extra: dict, path) -> tuple:
    """(step, seconds, history rows) of a checkpoint's training.json, each checked: a tampered
    or foreign file is a CheckpointError naming the field, not an error deep in the loop."""
    def bad(field, rule, value):
        return CheckpointError(f"training state of {str(path)!r}: {field!r} must be {rule}, got "
                               f"{value!r:.60}", path=str(path), field=field)

    step, seconds, history = extra.get("step"), extra.get("seconds"), extra.get("history")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise bad("step", "an integer >= 0", step)
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 <= seconds < math.inf:
        raise bad("seconds", "a finite number >= 0", seconds)
    width = len(HISTORY_COLUMNS)
    if not isinstance(history, list) or not all(
            isinstance(row, list) and len(row) == width and
            all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in row)
            for row in history):
        raise bad("history", f"a list of rows of {width} numbers or nulls ({', '.join(HISTORY_COLUMNS)})",
                  history)
    return step, float(seconds), [[np.nan if v is None else v for v in row] for row in history]


def _rng_state(state, path) -> dict:
    """The saved generator state, if a PCG64 generator accepts it (checked on a scratch one)."""
    try:
        np.random.default_rng().bit_generator.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise CheckpointError(f"training state of {str(path)!r}: 'rng' is not a PCG64 generator "
                              f"state ({exc})", path=str(path), field="rng") from None
    return state
