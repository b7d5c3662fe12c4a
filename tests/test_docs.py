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
              "registry", "functional", "protocols", "optim", "training", "vocab", "checks", "table", "hub",
              "base", "nn"}
    assert public <= {p.stem for p in API.glob("*.rst")}
    assert set(seqprob._SUBMODULES) <= public | {"gpt"}


TRACKER = re.compile(r"\b[Ii]ssues? #?\d+\b|\bsee #\d+")  # citations of upstream trackers (kpu/kenlm) are fine
FORBIDDEN = re.compile("/" + r"work/|" + r"\.\./shared|DESIGN\.md|FIELD-" + r"NOTES|\bintegrator\b")
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


def test_the_documentation_url_is_one_constant():
    """Messages and the CLI's --help point at the site; the package metadata names the same URL."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from seqprob._docs import DOCS_URL, docs_url

    urls = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    assert urls["Documentation"] == DOCS_URL
    assert docs_url() == DOCS_URL and docs_url("api/index") == DOCS_URL + "api/index.html"
    from seqprob.app.cli import build_parser

    assert DOCS_URL in " ".join(build_parser().format_help().split())


def _docs_url_calls():
    """(file, line, page, anchor) of every ``docs_url("page"[, "anchor"])`` call in the package."""
    for path in (ROOT / "seqprob").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "docs_url" and node.args:
                assert all(isinstance(a, ast.Constant) for a in node.args), f"{path}:{node.lineno}: not literals"
                page, anchor = ([a.value for a in node.args] + [""])[:2]
                yield path.relative_to(ROOT), node.lineno, page, anchor


def _heading_anchors(page: Path) -> set:
    """The anchors MyST gives a Markdown page's headings (lower case, spaces to '-', no punctuation)."""
    headings = re.findall(r"^#{1,6} (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_page_a_message_points_at_exists():
    calls = list(_docs_url_calls())
    assert calls, "no docs_url() call found: the scan is broken"
    missing = []
    for f, n, page, anchor in calls:
        found = [ROOT / "docs" / f"{page}{suffix}" for suffix in (".md", ".rst")]
        found = [p for p in found if p.is_file()]
        if not found or (anchor and anchor not in _heading_anchors(found[0])):
            missing.append(f"{f}:{n}: {page!r} {anchor!r}")
    assert not missing, "\n".join(missing)


def test_an_unsupported_architecture_points_at_the_models_page(tmp_path):
    import json

    from seqprob import GPT
    from seqprob._docs import docs_url
    from seqprob.errors import CheckpointError

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mamba"}), encoding="utf-8")
    with pytest.raises(CheckpointError, match="mamba") as info:
        GPT.from_hf(tmp_path)
    assert docs_url("models") in str(info.value)


def test_the_guide_names_every_public_name():
    """The user guide's 'Public API' table is the one-page overview: a new name joins it."""
    text = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    table = text.split("## Public API", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(\w+)", table))
    missing = [n for n in seqprob.__all__ if n not in named]
    assert not missing, f"names missing from the Public API table of docs/guide.md: {missing}"


#: pages whose measurements and history the benchmark suite keeps (they cite removed probe scripts)
BENCH_PAGES = {"benchmarks.md", "performance.md"}


def _pages():
    return [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in BENCH_PAGES]


def test_every_repository_path_a_page_names_exists():
    """``seqprob/scoring/words.py`` on a page is a file of the tree (``git show REV:path`` aside)."""
    pattern = re.compile(r"(?<![\w/.:])((?:seqprob|tests|examples|analysis|benchmarks|docs)/[\w./*-]*\w)")
    built = ("docs/_build", "docs/auto_examples", "docs/tutorial/", "docs/api/generated")  # outputs of a build
    missing = [f"{p.name}: {m}" for p in _pages() for m in sorted(set(pattern.findall(p.read_text("utf-8"))))
               if not m.startswith(built) and not list(ROOT.glob(m))]
    assert not missing, "\n".join(missing)


def _resolve(dotted: str):
    """The object ``seqprob.<dotted>``: attributes first, then submodules of that name."""
    obj, parts = seqprob, dotted.split(".")
    for i, part in enumerate(parts):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            obj = importlib.import_module("seqprob." + ".".join(parts[: i + 1]))
    return obj


def test_every_name_a_page_cites_exists():
    """``sp.scoring.bootstrap_ratio`` on a page is a name of the package, not a renamed one."""
    missing = []
    for p in _pages():
        for dotted in sorted(set(re.findall(r"`(?:sp|seqprob)\.([\w.]*\w)", p.read_text("utf-8")))):
            try:
                _resolve(dotted)
            except (ImportError, AttributeError):
                missing.append(f"{p.name}: sp.{dotted}")
    assert not missing, "\n".join(missing)
