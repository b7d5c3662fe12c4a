"""The README is a front door that tells the truth: the two set-up commands first, at most 200
lines, a Python example that runs as written and prints what the README shows, and links
that resolve to files of the repository."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str) -> list:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_the_two_commands_come_first():
    lines = README.splitlines()
    assert lines[0].startswith("# ")
    assert lines[2:6] == ["```bash", "pip install . && seqprob demo", 'pip install ".[test]" && pytest', "```"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install ".[test]" && pytest' in ci.splitlines()


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 200


def test_the_example_prints_what_the_readme_shows(tmp_path):
    code, = _blocks("python")
    shown = README.split("```python\n", 1)[1].split("prints\n\n```\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                         env={"MPLBACKEND": "Agg", "PATH": "", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == shown.split()


def test_every_relative_link_resolves():
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [link for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]
    assert local
    missing = [link for link in local if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, missing


def test_the_pictures_are_small():
    """The front door's pictures stay under 200 kB each (a clone downloads them all)."""
    pictures = re.findall(r"!\[[^\]]*\]\(([^)\s]+\.png)\)", README)
    assert pictures
    big = {p: (ROOT / p).stat().st_size for p in pictures if (ROOT / p).stat().st_size >= 200_000}
    assert not big, big


SITE = "https://seqprob.readthedocs.io/en/latest/"
#: the site's gallery folders and the source folders they are built from (docs/conf.py)
GALLERIES = {"tutorial": ROOT / "docs" / "tutorial_src", "auto_examples": ROOT / "examples"}


def test_every_site_link_has_a_source_page():
    """A link into the site names a page the site builds: a docs/ page, or a gallery's index."""
    links = [a or b for a, b in re.findall(r"\((https://[^)\s]+)\)|<(https://[^>\s]+)>", README)]
    pages = [link[len(SITE):].split("#")[0] for link in links if link.startswith(SITE)]
    assert len(pages) > 1
    for page in filter(None, pages):
        folder, _, name = page.rpartition("/")
        stem = name.removesuffix(".html")
        if folder in GALLERIES:
            assert stem == "index" and (GALLERIES[folder] / "GALLERY_HEADER.rst").is_file(), page
        else:
            base = ROOT / "docs" / folder / stem
            assert base.with_suffix(".md").is_file() or base.with_suffix(".rst").is_file(), page
