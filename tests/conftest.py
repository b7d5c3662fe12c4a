import os
import tempfile

import matplotlib
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")

# CI is deterministic: derandomized, bounded examples, no deadline flakiness on slow machines.
settings.register_profile("ci", derandomize=True, max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=400, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
# The default profile's max_examples sets the pace of the default run; slow tests ask for a
# share of it with budget.examples(n), so HYPOTHESIS_PROFILE=dev/thorough raises every test.
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# fixture generators import torch/transformers: not part of the suite (nor of --doctest-modules)
collect_ignore = ["fixtures"]


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _temporary_files_in_tmp_path(tmp_path, monkeypatch):
    """Whatever a test creates with :mod:`tempfile` (docstring examples call ``mkdtemp()``)
    lands in its own ``tmp_path``, which pytest removes: the suite leaves nothing in /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


@pytest.fixture(autouse=True)
def _no_real_hugging_face_cache(tmp_path_factory, monkeypatch):
    """No test reads or writes a real Hugging Face cache or reaches the hub: offline, and the
    cache an empty folder of the test session (tests that build a cache point HF_HUB_CACHE at
    their own)."""
    empty = tmp_path_factory.getbasetemp() / "pytest-hf-home"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(empty))
    monkeypatch.setenv("HF_HUB_CACHE", str(empty / "hub"))
