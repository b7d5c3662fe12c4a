"""The package as a user installs it: one version, a license, a changelog, true floors."""
import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the package itself supports 3.10

import seqprob

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def _floors() -> dict:
    floors = {}
    for dep in PROJECT["dependencies"]:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9.]*)", dep.strip())
        assert m, f"dependency {dep!r} is not a plain '>=' floor (.ci/min_versions.sh reads them)"
        floors[m.group(1)] = tuple(int(x) for x in m.group(2).split("."))
    return floors


def test_one_version_from_pyproject():
    """``seqprob.__version__`` (and so ``seqprob --version``, tests/test_cli_documents.py) is
    the installed package's metadata, which pyproject.toml writes."""
    assert seqprob.__version__ == PROJECT["version"]


def test_a_source_tree_not_installed_has_a_version(monkeypatch):
    """Imported from a checkout that pip never installed, seqprob still has a version string
    (a PEP 440 local version that sorts below every release) instead of failing to import."""
    import importlib.metadata

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert seqprob._installed_version() == "0+unknown"


def test_license_changelog_and_type_marker_ship():
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert PROJECT["license"] == {"text": "MIT"}
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog
    assert f"## [{PROJECT['version']}] - " in changelog
    assert (ROOT / "seqprob" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["seqprob"]
    assert PROJECT["urls"]["Documentation"].startswith("https://")


def _code_lines():
    return [line for path in (ROOT / "seqprob").rglob("*.py") for line in path.read_text().splitlines()]


#: (what the library's code calls, the package, the first version that has it)
NEWER_APIS = [
    (("np.reshape(", "copy="), "numpy", (2, 1)),
    (("np.astype(",), "numpy", (2, 1)),
    (("include_groups=",), "pandas", (2, 2)),
    (("tick_labels=",), "matplotlib", (3, 9)),
]


@pytest.mark.parametrize("needles, package, first", NEWER_APIS, ids=lambda x: str(x))
def test_a_floor_is_true_of_the_code(needles, package, first):
    """Code that calls an API a release introduced needs that release as its floor (the venv of
    .ci/min_versions.sh checks the floors by running; this catches a new call before CI)."""
    if any(all(n in line for n in needles) for line in _code_lines()):
        assert _floors()[package] >= first, f"{needles} needs {package} >= {first}"


def test_every_floor_is_in_the_changelog():
    """A floor raised is a change users must hear of: each 'name >= version' is in CHANGELOG.md."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    for name, version in _floors().items():
        assert f"{name} >= {'.'.join(map(str, version))}" in changelog, name


@pytest.mark.parametrize("name", ["numpy", "scipy", "pandas", "matplotlib", "tiktoken", "regex", "tqdm",
                                  "threadpoolctl"])
def test_every_core_dependency_has_a_floor(name):
    assert name in _floors()
