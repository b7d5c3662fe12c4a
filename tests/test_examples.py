"""Every script in examples/ runs in its quick mode (a subprocess, as a user would run it)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("[0-9][0-9]_*.py"))

#: A phrase each example prints when it worked.
EXPECT = {"01_score_sentences.py": "-inf", "02_compare_smoothings.py": "modified Kneser-Ney",
          "03_temperature_sampling.py": "entropy", "04_train_on_your_text.py": "held-out perplexity",
          "05_gpt2_checkpoint.py": "skipped", "06_distance_to_truth.py": "true entropy"}


def _run(script: Path, *args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd or ROOT)


def test_every_example_is_listed():
    assert [p.name for p in EXAMPLES] == sorted(EXPECT)


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_quick(script, tmp_path):
    args = ["--quick"]
    if script.name in ("01_score_sentences.py", "03_temperature_sampling.py", "04_train_on_your_text.py"):
        args += ["--out", str(tmp_path)]
    result = _run(script, *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert EXPECT[script.name] in result.stdout + result.stderr
    if "--out" in args:
        assert any(tmp_path.glob("*.png")), "the example should save its figure"


def test_gpt2_example_without_files_says_so(tmp_path):
    result = _run(ROOT / "examples" / "05_gpt2_checkpoint.py", "--model", str(tmp_path / "nowhere"))
    assert result.returncode == 2
    assert "nowhere" in result.stderr and "config.json" in result.stderr


def test_train_on_a_given_text_file(tmp_path):
    text = tmp_path / "mine.txt"
    text.write_text("\n".join(f"line {i} has the word {w}" for i in range(30) for w in ("red", "blue")),
                    encoding="utf-8")
    result = _run(ROOT / "examples" / "04_train_on_your_text.py", str(text), "--steps", "5")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "held-out perplexity of kn3" in result.stdout
