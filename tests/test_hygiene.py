"""The suite's own rules: doctests of every module run, profiles reach
every property test, no machine-specific paths."""
import os
import re
from pathlib import Path

from hypothesis import settings

from budget import DEFAULT_EXAMPLES, examples

ROOT = Path(__file__).resolve().parents[1]
TESTS = sorted((ROOT / "tests").glob("*.py"))


def test_doctests_of_every_module_run_with_the_suite():
    from test_doctests import MODULES

    sources = {".".join(p.relative_to(ROOT).with_suffix("").parts)
               for p in (ROOT / "seqprob").rglob("*.py")}
    sources = {name.removesuffix(".__init__") for name in sources} - {"seqprob.__main__", "seqprob"}
    assert sources <= set(MODULES)


def test_no_property_test_pins_its_example_count():
    pinned = [f"{p.name}:{i}" for p in TESTS for i, line in enumerate(p.read_text().splitlines(), 1)
              if re.search(r"max_examples=\d", line) and p.name not in ("conftest.py", "test_hygiene.py")]
    assert pinned == []


def test_budgets_follow_the_active_profile():
    base = settings.default.max_examples
    assert examples(15) == max(1, round(15 * base / DEFAULT_EXAMPLES))
    settings.register_profile("_hygiene_big", max_examples=10 * DEFAULT_EXAMPLES)
    try:
        settings.load_profile("_hygiene_big")
        assert examples(15) == 150
    finally:
        settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))  # as conftest.py does


def test_no_machine_specific_paths():
    needle = "/" + "work/"  # split so this file does not match itself
    assert [p.name for p in TESTS if needle in p.read_text()] == []


def test_formats_doc_states_the_true_arpa_order_limit():
    from seqprob.ngram.counts import MAX_ORDER

    text = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    assert f"order <= {MAX_ORDER} (`seqprob.ngram.counts.MAX_ORDER`)" in text


def test_temporary_files_of_a_test_land_in_its_tmp_path(tmp_path):
    """conftest points tempfile at each test's tmp_path: docstring examples that call
    tempfile.mkdtemp() leave nothing in the system temp folder."""
    import tempfile

    assert Path(tempfile.mkdtemp()).parent == tmp_path
