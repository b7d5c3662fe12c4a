#!/usr/bin/env bash
# Installs exactly the minimum versions pyproject.toml declares (each "pkg>=X" as "pkg==X") in
# a fresh virtual environment, then seqprob itself with --no-deps, and runs a smoke test: import,
# score a sentence with the embedded default model, fit an n-gram model, the demo's quick path
# and a small pytest subset. A floor that is not true fails here.
# Usage: bash .ci/min_versions.sh [VENV_DIR]   (default: a temporary folder, removed afterwards)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${1:-$(mktemp -d)/venv}
"$PY" -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install -q --upgrade pip
mapfile -t PINS < <("$PY" - <<'PYEOF'
import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
for dep in deps:
    m = re.fullmatch(r"\s*([A-Za-z0-9_.\-\[\]]+)\s*>=\s*([0-9][^,;\s]*)\s*", dep)
    if not m:
        raise SystemExit(f"dependency without a plain >= floor: {dep!r}")
    print(f"{m.group(1)}=={m.group(2)}")
PYEOF
)
echo "minimum versions: ${PINS[*]}"
"$PIP" install -q "${PINS[@]}" pytest hypothesis
"$PIP" install -q --no-deps .
"$VENV/bin/pip" check
OUT=$(mktemp -d)
(cd "$OUT" && "$VENV/bin/python" - <<'PYEOF'
import numpy, pandas, scipy, matplotlib
import seqprob as sp
print("seqprob", sp.__version__, "numpy", numpy.__version__, "pandas", pandas.__version__,
      "scipy", scipy.__version__, "matplotlib", matplotlib.__version__)
df = sp.score(sp.default_model(), "the cat sat on the mat")
assert abs(df["logprob"].sum() - sp.joint_logprob(sp.default_model(), "the cat sat on the mat")) < 1e-9
corpus = sp.toy_english().sample(300, seed=0)
lm = sp.ngram.ModifiedKneserNey(order=3).fit(corpus)
assert sp.perplexity(lm, corpus[:20]) > 1
print("smoke: scored", len(df), "tokens; fitted", lm)
PYEOF
"$VENV/bin/seqprob" demo --quick --out "$OUT/demo" >/dev/null)
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -x tests/test_functional.py tests/test_scoring.py \
    tests/test_ngram.py tests/test_gpt.py tests/test_tokenizers.py tests/test_plots.py tests/test_truth.py
echo "minimum versions: OK"
