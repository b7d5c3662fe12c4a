"""Temporary files: recognisable names, removed on every failure Python sees, stale ones of a
killed process removed by the next write to the same place; path containment."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import seqprob as sp
from seqprob import _io
from seqprob._io import atomic_write, make_temp_dir, remove_stale_temps, resolve_inside
from seqprob.errors import FileFormatError, InputError, SeqProbFileError
from seqprob.gpt.checkpoint import save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TMP_NAME = re.compile(r"^\.out\.txt\.seqprob-tmp-(\d+)-[0-9a-f]{8}$")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _leftovers(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir() if ".seqprob-tmp-" in p.name)


def test_temp_file_is_named_after_target_and_pid(tmp_path):
    with atomic_write(tmp_path / "out.txt") as handle:
        handle.write("x")
        (name,) = _leftovers(tmp_path)
        assert TMP_NAME.match(name) and int(TMP_NAME.match(name).group(1)) == os.getpid()
    assert (tmp_path / "out.txt").read_text() == "x" and not _leftovers(tmp_path)


@pytest.mark.parametrize("error", [RuntimeError("boom"), PermissionError(13, "Permission denied"),
                                   OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_failure_inside_the_write_leaves_old_file_and_no_temp(tmp_path, error):
    (tmp_path / "out.txt").write_text("old")
    expected = SeqProbFileError if isinstance(error, OSError) else type(error)
    with pytest.raises(expected) as info:
        with atomic_write(tmp_path / "out.txt") as handle:
            handle.write("new, half written")
            raise error
    if isinstance(error, OSError):
        assert "out.txt" in str(info.value) and error.strerror in str(info.value)
    assert (tmp_path / "out.txt").read_text() == "old" and not _leftovers(tmp_path)


def test_permission_error_on_rename_is_a_seqprob_error(tmp_path, monkeypatch):
    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", str(dst))

    monkeypatch.setattr(_io.os, "replace", refuse)
    with pytest.raises(SeqProbFileError, match="Permission denied"):
        with atomic_write(tmp_path / "out.txt") as handle:
            handle.write("x")
    assert not list(tmp_path.iterdir())


def test_lone_surrogate_while_writing_is_an_input_error_and_no_temp(tmp_path):
    with pytest.raises(InputError, match="surrogate"):
        with atomic_write(tmp_path / "out.txt") as handle:
            handle.write("ok \ud800")
    assert not list(tmp_path.iterdir())


def test_writing_onto_a_folder_or_into_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "out.arpa").mkdir()
    with pytest.raises(SeqProbFileError, match="a folder of that name exists"):
        with atomic_write(tmp_path / "out.arpa") as handle:
            handle.write("x")
    (tmp_path / "file").write_text("")
    with pytest.raises(SeqProbFileError, match="is not a folder"):
        with atomic_write(tmp_path / "file" / "x") as handle:
            handle.write("x")
    assert not _leftovers(tmp_path)


def test_write_arpa_onto_an_existing_folder(tmp_path):
    tok = sp.WhitespaceTokenizer.fit(["a b c"])
    model = sp.ngram.KneserNey(order=2).fit(["a b c", "a b"], tokenizer=tok)
    (tmp_path / "kn.arpa").mkdir()
    with pytest.raises(SeqProbFileError, match="folder"):
        sp.write_arpa(model, tmp_path / "kn.arpa")


def test_stale_temps_of_dead_processes_are_removed_live_ones_kept(tmp_path):
    dead, live = _dead_pid(), os.getppid()
    stale = tmp_path / f".out.txt.seqprob-tmp-{dead}-0123abcd"
    stale_dir = tmp_path / f".out.txt.seqprob-tmp-{dead}-89abcdef"
    alive = tmp_path / f".out.txt.seqprob-tmp-{live}-0123abcd"
    other = tmp_path / f".other.txt.seqprob-tmp-{dead}-0123abcd"
    for p in (stale, alive, other):
        p.write_text("partial")
    stale_dir.mkdir()
    (stale_dir / "inner").write_text("x")
    with atomic_write(tmp_path / "out.txt") as handle:
        handle.write("x")
    assert not stale.exists() and not stale_dir.exists()
    assert alive.exists() and other.exists()  # a running writer's, and another target's


def test_stale_checkpoint_temp_folder_removed_by_next_save(tmp_path):
    model = sp.GPT(sp.GPTConfig(vocab_size=9, block_size=4, n_layer=1, n_head=1, n_embd=4))
    stale = tmp_path / f".ck.seqprob-tmp-{_dead_pid()}-0123abcd"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"partial")
    save_checkpoint(model, tmp_path / "ck")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]


def test_make_temp_dir_name(tmp_path):
    tmp = make_temp_dir(tmp_path / "ck")
    assert tmp.is_dir() and tmp.name.startswith(f".ck.seqprob-tmp-{os.getpid()}-")
    assert remove_stale_temps(tmp_path / "ck") == [] and tmp.exists()  # ours: still alive


_BLOCKING_WRITER = textwrap.dedent("""
    import sys, time
    from seqprob._io import atomic_write
    with atomic_write(sys.argv[1]) as handle:
        handle.write("half of the new content")
        handle.flush()
        print("writing", flush=True)
        time.sleep(600)
""")


def test_kill_9_mid_write_keeps_old_file_and_next_write_cleans_up(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _BLOCKING_WRITER, str(target)], stdout=subprocess.PIPE,
                            env=env, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        (left,) = _leftovers(tmp_path)
        assert TMP_NAME.match(left).group(1) == str(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert target.read_text() == "old" and _leftovers(tmp_path) == [left]  # what kill -9 leaves
    with atomic_write(target) as handle:
        handle.write("new")
    assert target.read_text() == "new" and not _leftovers(tmp_path)


def test_kill_9_during_ngram_fit_output_then_rerun_cleans_up(tmp_path):
    """The CLI path of the issue: ``seqprob ngram fit -o out.arpa`` killed while writing."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\nthe dog sat\n" * 50)
    out = tmp_path / "out.arpa"
    script = textwrap.dedent("""
        import sys, time
        import seqprob._io as io
        real = io.atomic_write
        def slow(path, *a, **k):
            ctx = real(path, *a, **k)
            handle = ctx.__enter__()
            print("writing", flush=True)
            time.sleep(600)
        io.atomic_write = slow
        import seqprob.ngram.arpa
        seqprob.ngram.arpa.atomic_write = slow
        from seqprob.app.cli import main
        main(sys.argv[1:])
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", script, "ngram", "fit", str(corpus), "-o", str(out),
                             "--order", "2"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert len([p for p in tmp_path.iterdir() if ".seqprob-tmp-" in p.name]) == 1 and not out.exists()
    from seqprob.app.cli import main
    assert main(["ngram", "fit", str(corpus), "-o", str(out), "--order", "2"]) == 0
    assert out.exists() and not [p for p in tmp_path.iterdir() if ".seqprob-tmp-" in p.name]


# ----------------------------------------------------------------------------- containment
def test_resolve_inside_accepts_plain_and_nested_names(tmp_path):
    assert resolve_inside(tmp_path, "model.safetensors") == tmp_path / "model.safetensors"
    assert resolve_inside(tmp_path, "sub/part-1.bin") == tmp_path / "sub" / "part-1.bin"


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc/passwd", "", "a\x00b", 3, None, ["x"]])
def test_resolve_inside_refuses_escapes_and_non_names(tmp_path, name):
    with pytest.raises(FileFormatError):
        resolve_inside(tmp_path / "model", name)


def test_resolve_inside_refuses_a_symlink_out(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "secret").write_text("x")
    (folder / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(FileFormatError, match="symbolic link"):
        resolve_inside(folder, "link")
