"""The benchmark suite's harness: it imports, lists its row groups, and a quick row runs.

No timing assertions: the figures depend on the machine; what is checked is that the command
runs with no reference side installed and prints the machine header and a table.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NO_REFERENCE = "import sys; sys.exit(1)"  # a "reference Python" that imports nothing


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def suite():
    """benchmarks/__main__.py as a module (benchmarks/ is not an installed package)."""
    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location("_benchmarks_main", ROOT / "benchmarks" / "__main__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # puts benchmarks/ on sys.path for its _harness
    yield module
    sys.path[:] = saved


def test_discovery_finds_the_row_groups_and_the_standalone_scripts(suite):
    groups, alone = suite.discover()
    assert {"matmul", "gpt-small", "train", "llama", "gpt2-124m", "ngram"} <= set(groups)
    for module in groups.values():
        assert module.SUITE["about"] and callable(module.suite_rows)
    every = {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert every == {m.__file__.rsplit("/", 1)[-1] for m in groups.values()} | set(alone)
    assert not any("does not import" in name for name in alone)


def test_list_prints_every_group(tmp_path):
    done = _run("--list", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "matmul" in done.stdout and "standalone only" in done.stdout


def test_unknown_group_names_the_groups(tmp_path):
    done = _run("--only", "no-such-group", tmp_path=tmp_path)
    assert done.returncode != 0
    assert "no-such-group" in done.stderr and "matmul" in done.stderr


def test_quick_row_without_reference_prints_header_and_table(tmp_path):
    fake = tmp_path / "python-without-torch"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c '{NO_REFERENCE}'\n")
    fake.chmod(0o755)
    out = tmp_path / "table.md"
    done = _run("--quick", "--only", "matmul", "--runs", "1", "--warmups", "1",
                "--reference-python", str(fake), "--out", str(out), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    for field in ("**cpu**", "**cores**", "**blas**", "**numpy**", "**python**", "**date**",
                  "**commit**", "**load average**", "--quick"):
        assert field in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("| matmul"))
    assert "not run (missing torch)" in row
    assert "python -m benchmarks --only matmul --quick" in row
    assert out.read_text() == done.stdout
    assert not list(tmp_path.glob(".table.md.*"))  # the temporary file was renamed


def _opts(suite, tmp_path, threads=(1, 2)):
    harness = sys.modules["_harness"]
    return harness, harness.SuiteOptions(quick=False, threads=list(threads), runs=7, warmups=2, repeats=3,
                                         reference_python=sys.executable, folder=tmp_path, group="g")


def _side(seconds: float, rss: float = 100.0, gflops: float | None = None) -> dict:
    side = {"t": {"median": seconds, "min": seconds, "max": seconds}, "peak_rss_mib": rss}
    if gflops:
        side["matmul"] = {"gflops": gflops}
    return side


def test_ratio_rows_give_met_missed_and_the_spread(suite, tmp_path):
    harness, opts = _opts(suite, tmp_path)
    results = {1: [(_side(1.0), _side(2.0)), (_side(1.0), _side(1.5)), (_side(1.0), _side(3.0))],
               2: [(_side(1.0), _side(0.5)), (_side(1.0), _side(0.9)), (_side(1.0), _side(1.2))]}
    one, two = harness.ratio_rows(opts, results, "work", "ref", "t", "t", min_ratio=1.0)
    assert one["ratios"] == [2.0, 1.5, 3.0] and one["status"] == "met" and one["threads"] == 1
    assert two["status"] == "MISSED" and sorted(two["ratios"]) == [0.5, 0.9, 1.2]
    lines = suite.table([one, two])
    assert "2.00x [1.50-3.00]" in lines[2] and "**MISSED**" in lines[3] and "0.90x [0.50-1.20]" in lines[3]


def test_missing_reference_is_not_run_and_peak_rows_judge_seqprob_alone(suite, tmp_path):
    harness, opts = _opts(suite, tmp_path, threads=(2,))
    alone = {2: [(_side(0.5, gflops=100.0), None)] * 3}
    row, = harness.ratio_rows(opts, alone, "work", "ref", "t", "t", min_ratio=1.0, reference_module="torch")
    assert row["status"] == "not run (missing torch)" and row["reference_s"] is None
    # 25 GFLOP in 0.5 s at a 100 GFLOP/s peak: 50%, under an 85% target at 2 threads
    peak, = harness.ratio_rows(opts, alone, "work", "-", "t", "t", flops=25e9, min_peak=(85, {2}))
    assert peak["peak_pct"] == [50.0] * 3 and peak["status"] == "MISSED" and not peak["ratios"]
    met, = harness.ratio_rows(opts, alone, "work", "-", "t", "t", flops=45e9, min_peak=(85, {2}))
    assert met["status"] == "met"


def test_header_flags_a_shared_machine(suite, tmp_path):
    harness, opts = _opts(suite, tmp_path)
    machine = {"usable cores": 2, "cpu": "x"}
    args = suite.parse(["--quick"])
    quiet = suite.header(machine, (0.2, 0.2, 0.2), (0.9, 0.5, 0.3), args, opts)
    busy = suite.header(machine, (0.2, 0.2, 0.2), (1.1, 0.5, 0.3), args, opts)
    assert not any("shared machine" in line for line in quiet)
    assert any("shared machine" in line for line in busy)


def test_llamacpp_rows_say_not_run_without_the_binaries(suite, tmp_path, monkeypatch):
    harness, opts = _opts(suite, tmp_path)
    groups, _ = suite.discover()
    module = groups["llamacpp"]
    monkeypatch.delenv("LLAMACPP_BIN", raising=False)
    rows = module.suite_rows(opts, bin_dir=str(tmp_path / "no-llama-cpp-here"))
    assert rows and all(r["status"] == "not run (missing llama.cpp binaries (LLAMACPP_BIN))" for r in rows)
    assert suite.table(rows)  # renders


def test_ngram_fit_rows_judge_the_budget_and_say_not_run_without_lmplz(suite, tmp_path, monkeypatch):
    harness, _ = _opts(suite, tmp_path)
    opts = harness.SuiteOptions(quick=True, threads=[1], runs=1, warmups=1, repeats=1,
                                reference_python=sys.executable, folder=tmp_path, group="ngram-fit")
    monkeypatch.setenv("KENLM_BIN", str(tmp_path / "no-kenlm-here"))
    groups, _ = suite.discover()
    module = groups["ngram-fit"]
    monkeypatch.setattr(module, "find_lmplz", lambda given: None)
    timed, memory = module.suite_rows(opts)
    assert timed["status"] == "not run (missing lmplz (KENLM_BIN))" and timed["seqprob_s"] > 0
    assert memory["target"] == "<= 1,024 MiB" and memory["status"] == "met"
    assert 0 < float(memory["peak_rss"].replace(",", "")) <= 1024


def test_load_rows_judge_each_checkpoint_against_its_absolute_target(suite, tmp_path):
    """bench_load is a suite group: one row per checkpoint (tiny shapes with --quick), with the
    load's time, its own memory (peak - import) / W in the work column and a met/MISSED verdict."""
    harness, _ = _opts(suite, tmp_path)
    opts = harness.SuiteOptions(quick=True, threads=[1], runs=1, warmups=1, repeats=1,
                                reference_python=sys.executable, folder=tmp_path, group="load")
    groups, _ = suite.discover()
    rows = groups["load"].suite_rows(opts)
    assert [r["work"].split(" ")[1] for r in rows] == ["0.5b-bf16", "0.5b-f32", "124m"]
    for row in rows:
        assert row["status"] in ("met", "MISSED") and row["seqprob_s"] > 0
        assert "(peak - import) / W = " in row["work"] and float(row["peak_rss"].replace(",", "")) > 0
    assert suite.table(rows)
