"""`seqprob report`: every figure written (PNG + SVG) and embedded in one self-contained HTML
page, settings included, clear errors; the page opens in headless Chromium with no broken image;
every figure readable (no text cut off or drawn over another) on the toy language and on a
corpus of long sentences under many models; the learning curves' legend uses the table's numbers."""
import base64
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest

from figure_checks import assert_readable, record_texts
from seqprob.app.cli import main
from seqprob.errors import SeqProbFileError
from seqprob.app.report import SECTIONS, build_report

#: Figures of a report on the toy language with a GPT.
FIGURES = ["sentences", "next_token", "lookup_table", "sparsity", "learning_curves", "attention",
           "logit_lens", "embeddings_pca", "analogy", "directions", "calibration"]

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             "/usr/bin/chromium") if p and Path(p).is_file()), None)


@pytest.fixture(scope="module")
def report_run(tmp_path_factory):
    """The acceptance command, once for the module: `seqprob report --out DIR --quick`, with
    its sections kept and the texts of its PNG renders recorded (for the layout checks)."""
    out = tmp_path_factory.mktemp("report")
    with capture_sections() as sections, record_texts() as records:
        assert main(["report", "--out", str(out), "--quick"]) == 0
    return out, sections, records


@pytest.fixture(scope="module")
def report_dir(report_run):
    return report_run[0]


def capture_sections():
    """Keep the sections a report writes (their figures and tables), while it writes them."""
    module = sys.modules["seqprob.app.report"]
    kept, real = [], module.write_files

    def write_files(out_dir, sections, *args, **kwargs):
        kept.extend(sections)
        return real(out_dir, sections, *args, **kwargs)

    patch = mock.patch.object(module, "write_files", write_files)

    class _Capture:
        def __enter__(self):
            patch.__enter__()
            return kept

        def __exit__(self, *exc):
            return patch.__exit__(*exc)

    return _Capture()


def _long_corpus(path: Path, seed: int = 5) -> list:
    """A "real corpus" stand-in: sentences of 40-80 words (toy-language samples run together)."""
    from seqprob.truth import toy_english

    words = " ".join(toy_english().sample(1200, seed=seed)).split()
    lines, i, k = [], 0, 0
    while i < len(words):
        n = 40 + (k * 17) % 41
        lines.append(" ".join(words[i:i + n]))
        i, k = i + n, k + 1
    lines = [ln for ln in lines if len(ln.split()) >= 40]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


@pytest.fixture(scope="module")
def long_report(tmp_path_factory):
    """A report on long sentences under ten models (nine n-grams and a GPT trained here)."""
    from seqprob.app.pipeline import fit_ngrams, ngram_specs
    from seqprob.tokenizers import WhitespaceTokenizer

    tmp = tmp_path_factory.mktemp("long")
    lines = _long_corpus(tmp / "corpus.txt")
    tok = WhitespaceTokenizer.fit(lines)
    baselines = fit_ngrams(ngram_specs((1, 2, 3)), lines, tok)
    with capture_sections() as sections, record_texts() as records:
        path = build_report(tmp / "out", corpus=tmp / "corpus.txt", quick=True, baselines=baselines,
                            formats=("png",))
    return path, sections, records


@pytest.fixture(scope="module")
def page(report_dir):
    return (report_dir / "report.html").read_text(encoding="utf-8")


def _embedded_pngs(page: str) -> dict:
    found = re.findall(r"<figure id='fig-([\w-]+)'><img alt='[^']*' src='data:image/png;base64,([^']+)'", page)
    return {name: base64.b64decode(data) for name, data in found}


def test_every_figure_is_embedded_and_written(report_dir, page):
    pngs = _embedded_pngs(page)
    assert sorted(pngs) == sorted(FIGURES)
    assert page.count("<img ") == len(FIGURES)
    for name, data in pngs.items():
        assert data.startswith(b"\x89PNG\r\n\x1a\n"), name
        assert (report_dir / f"{name}.png").read_bytes() == data
        svg = (report_dir / f"{name}.svg").read_text(encoding="utf-8")
        assert "<svg" in svg[:1000], name
    assert "Not available" not in page  # a GPT on the toy language: every section applies


def test_page_is_self_contained_with_settings_and_tables(page):
    assert not re.search(r"(src|href)=['\"](https?:|//|file:)", page)  # nothing fetched from outside
    assert "<section id='settings'>" in page and "quick" in page and "seed" in page
    for key, title, *_ in SECTIONS:
        assert f"<section id='{key}'>" in page
    assert page.count("<table>") >= 8
    assert "-inf" in page  # the impossible sentence is shown as such
    assert "queen" in page  # the analogy is reported either way


def test_no_temporary_files_left(report_dir):
    assert not [p for p in report_dir.iterdir() if p.name.startswith(".")]


def test_unwritable_output_folder(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert main(["report", "--out", str(blocker / "sub"), "--quick"]) == 2
    err = capsys.readouterr().err
    assert "not writable" in err and "a_file" in err
    with pytest.raises(SeqProbFileError, match="not writable"):
        build_report(blocker / "sub", quick=True)


def test_unknown_section(tmp_path, capsys):
    assert main(["report", "--out", str(tmp_path), "--only", "nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err


def test_report_on_a_model_without_attention(tmp_path):
    """An n-gram as the model: the transformer sections become notes, the rest is drawn."""
    from seqprob.ngram import ModifiedKneserNey
    from seqprob.truth import toy_english

    truth = toy_english()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kn = ModifiedKneserNey(order=2).fit(truth.sample(300, seed=3), tokenizer=truth.tokenizer)
    history = pd.DataFrame({"step": [1, 2], "tokens_seen": [10, 20], "train_loss": [3.0, 2.5],
                            "val_loss": [float("nan"), 2.6]})
    path = build_report(tmp_path, model=kn, model_name="kn2", quick=True, history=history,
                        baselines={}, only=["sentences", "attention", "lens", "learning"], formats=("png",))
    page = path.read_text(encoding="utf-8")
    assert sorted(_embedded_pngs(page)) == ["learning_curves", "sentences"]
    assert page.count("Not available for this model") == 2
    assert "has no attention" in page
    assert (tmp_path / "sentences.png").exists() and not (tmp_path / "sentences.svg").exists()


_CHECK_SCRIPT = """<img alt='control-broken' src='data:image/png;base64,AAAA'>
<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (im) { return !im.complete || im.naturalWidth === 0; });
  var div = document.createElement('div');
  div.id = 'image-check';
  div.textContent = 'images=' + imgs.length + ';broken=' + broken.map(function (im) { return im.alt; }).join(',') + ';';
  document.body.appendChild(div);
});
</script>"""


@pytest.mark.browser
def test_report_opens_in_chromium_without_broken_images(report_dir, page, tmp_path):
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    # The report's own HTML plus a script that lists broken images; a deliberately broken
    # control image proves the check can fail.
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", _CHECK_SCRIPT + "</body>"), encoding="utf-8")
    profile = tmp_path / "profile"
    profile.mkdir()
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    match = re.search(r'<div id="image-check">images=(\d+);broken=([^;]*);</div>', result.stdout)
    assert match, f"no result from chromium (rc={result.returncode}): {result.stderr[-2000:]}"
    assert int(match.group(1)) == len(FIGURES) + 1
    assert match.group(2) == "control-broken", f"broken images: {match.group(2)}"


def test_analysis_scripts_are_thin_wrappers(tmp_path):
    """analysis/fig_*.py build their part of the report with the installed package."""
    import os
    import sys

    root = Path(__file__).resolve().parents[1]
    scripts = sorted(p.name for p in (root / "analysis").glob("*.py"))
    assert "make_report.py" in scripts and len([s for s in scripts if s.startswith("fig_")]) >= 7
    env = dict(os.environ, PYTHONPATH=str(root), MPLBACKEND="Agg")
    result = subprocess.run([sys.executable, str(root / "analysis" / "fig_sparsity.py"), "--quick",
                             "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(_embedded_pngs((tmp_path / "sparsity.html").read_text(encoding="utf-8"))) == \
        ["lookup_table", "sparsity"]


def _figures(sections):
    return [(name, getattr(fig, "figure", fig)) for s in sections for name, fig, _ in s.figures]


def test_every_report_figure_is_readable(report_run):
    """The toy language: no title, label, legend or note cut off at the edge of its PNG, and no
    two texts (labels of the PCA and the directions included) drawn over each other."""
    _, sections, records = report_run
    figures = _figures(sections)
    assert sorted(name for name, _ in figures) == sorted(FIGURES)
    for name, fig in figures:
        assert_readable(fig, records, name=name)


def test_every_figure_is_readable_with_long_sentences_and_many_models(long_report):
    """A corpus of 40-80-word sentences and ten models: every section applies (attention and
    the logit lens on a short probe), every figure is readable, and the per-token figure
    shows a readable subset of the models, saying so."""
    path, sections, records = long_report
    page = path.read_text(encoding="utf-8")
    assert "Not available" not in page
    figures = _figures(sections)
    assert {"sentences", "learning_curves", "attention", "logit_lens", "embeddings_pca"} <= \
        {name for name, _ in figures}
    for name, fig in figures:
        assert_readable(fig, records, name=name)
    from seqprob.app.report.sections import FIGURE_BARS

    sentences = next(s for s in sections if s.key == "sentences")
    fig = sentences.figures[0][1]
    drawn = len([t for t in fig.axes[1].get_legend().get_texts() if "log P" in t.get_text()])
    assert 2 <= drawn < 10 and f"{drawn} of the 10 models" in sentences.figures[0][2]
    assert max(len(ax.patches) for ax in fig.axes[::2]) <= FIGURE_BARS


def test_learning_legend_shows_the_tables_numbers(report_run):
    """Each reference line's legend entry gives the held-out cross-entropy per scored token
    exactly as the table beside it (and the true entropy as the note), besides its value on
    the axis (per stream token)."""
    _, sections, _ = report_run
    learning = next(s for s in sections if s.key == "learning")
    ax = learning.figures[0][1]
    legend = {t.get_text().split(":")[0]: t.get_text() for t in ax.get_legend().get_texts()}
    table = learning.tables[0][1].set_index("model")["cross-entropy (nats/token)"]
    shown = 0
    for model, value in table.items():
        if model in legend and value != float("inf"):
            assert f"= {value:.3f} nats/scored token" in legend[model], (model, legend[model])
            shown += 1
    assert shown >= 2
    truth = float(re.search(r"True entropy of the source: ([\d.]+) nats/token", " ".join(learning.notes))[1])
    assert f"= {truth:.3f} nats/scored token" in legend["true entropy H(P*)"]
    assert "per stream token" in " ".join(ax.get_ylabel().split())


def test_calibration_shows_a_kneser_ney_beside_the_model(report_run):
    """The default baselines are named mkn-N: the calibration section draws one of them."""
    _, sections, _ = report_run
    section = next(s for s in sections if s.key == "calibration")
    table = dict(section.tables)["Expected calibration error"]
    assert len(table) == 2 and table["model"].iloc[1].startswith("mkn")
