"""The documentation site cannot silently miss a public name, and nothing in the tree points
at our tracker, at reviewers or at files outside the repository. (The site's build itself,
``python -m sphinx -W``, runs in CI, not here.)"""
import ast
import importlib
import re
from pathlib import Path

import pytest

import seqprob

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"


def _listed(page: Path) -> set:
    text = page.read_text(encoding="utf-8")
    names = set(re.findall(r"^   ([A-Za-z_][\w]*)\s*$", text, flags=re.M))  # autosummary entries
    names |= set(re.findall(r":obj:`seqprob\.(\w+)`", text))  # "documented at the top level"
    return names


def test_every_top_level_name_has_an_api_page():
    listed = _listed(API / "index.rst")
    submodule_pages = {p.stem for p in API.glob("*.rst")}
    missing = [n for n in seqprob.__all__ if n not in listed and n not in submodule_pages]
    assert not missing, f"seqprob names missing from docs/api/index.rst: {missing}"


@pytest.mark.parametrize("module", sorted(p.stem for p in API.glob("*.rst") if p.stem != "index"))
def test_every_name_of_a_documented_submodule_is_listed(module):
    mod = importlib.import_module(f"seqprob.{module}")
    missing = [n for n in mod.__all__ if n not in _listed(API / f"{module}.rst")]
    assert not missing, f"seqprob.{module} names missing from docs/api/{module}.rst: {missing}"


def test_every_public_submodule_has_a_page():
    public = {"ngram", "gpt", "analysis", "plots", "sampling", "errors", "tokenizers", "truth", "scoring",
              "registry", "functional", "protocols", "optim", "training", "vocab", "checks", "table"}
    assert public <= {p.stem for p in API.glob("*.rst")}
    assert set(seqprob._SUBMODULES) <= public | {"gpt"}


TRACKER = re.compile(r"\b[Ii]ssues? \d+\b")  # citations of upstream trackers (kpu/kenlm) are fine
FORBIDDEN = re.compile("/" + r"work/|" + r"\.\./shared|DESIGN\.md|\bintegrator\b")
TREE = ["README.md", "CHANGELOG.md", "docs", "seqprob", "examples", "analysis", "tests", "benchmarks", ".ci"]


def _files():
    for entry in TREE:
        path = ROOT / entry
        paths = [path] if path.is_file() else path.rglob("*")
        for p in paths:
            if p.suffix in {".py", ".md", ".rst", ".sh", ".txt", ".toml"} and "_build" not in p.parts \
                    and not {"auto_examples", "generated", "tutorial"} & set(p.relative_to(ROOT).parts[:3]) \
                    and p.name != "test_docs.py":
                yield p


def test_no_tracker_numbers_reviewers_or_outside_paths():
    hits = []
    for p in _files():
        for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if FORBIDDEN.search(line) or (TRACKER.search(line) and "kenlm" not in line.lower()):
                hits.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def _message_strings(path: Path):
    """String constants of a module that are not docstrings (messages, f-string parts)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_no_message_points_at_a_repository_file():
    """A pip install has no docs/ folder: messages point at the site or at --help."""
    hits = [f"{p.relative_to(ROOT)}:{line}: {text[:80]!r}"
            for p in (ROOT / "seqprob").rglob("*.py")
            for line, text in _message_strings(p) if re.search(r"\bdocs/[\w./-]*\.md\b", text)]
    assert not hits, "\n".join(hits)
