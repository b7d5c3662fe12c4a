"""`seqprob explore`: the JSON API gives the library's numbers bit for bit, refuses bad and
hostile requests with JSON errors, stays correct under concurrent requests, starts and stops
from the command line, and its page works in headless Chromium with no console error."""
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import seqprob as sp

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from seqprob.app.cli import main  # noqa: E402
from seqprob.app.explore import Explorer, load_served, serve_model  # noqa: E402
from seqprob.app.explore.api import dumps  # noqa: E402
from seqprob.app.explore.server import bind, create_app  # noqa: E402
from seqprob.analysis.lens import attention_patterns, logit_lens  # noqa: E402
from seqprob.sampling import generate, next_token_probs  # noqa: E402

TEXT = "the cat sat on the mat"
BASE = "http://127.0.0.1:8000"


@pytest.fixture(scope="module")
def kn_path(tmp_path_factory):
    """A modified Kneser-Ney trigram fitted on samples of the toy language, saved as ARPA."""
    truth = sp.toy_english()
    with sp.ngram.expected_discount_fallback():
        kn = sp.ngram.ModifiedKneserNey(order=3).fit(truth.sample(5000, seed=1), tokenizer=truth.tokenizer)
    path = tmp_path_factory.mktemp("explore") / "kn3.arpa"
    sp.write_arpa(kn, path)
    return path


@pytest.fixture(scope="module")
def explorer(kn_path):
    return Explorer(load_served(["default", str(kn_path), "toy_english"]))


@pytest.fixture(scope="module")
def models(explorer):
    return {name: served.model for name, served in explorer.served.items()}


@pytest.fixture(scope="module")
def client(explorer):
    with TestClient(create_app(explorer), base_url=BASE) as c:
        yield c


def post(client, endpoint, **body):
    return client.post(f"/api/{endpoint}", json=body)


def ok(response) -> dict:
    assert response.status_code == 200, response.text
    return json.loads(response.content)


def as_float(value) -> float:
    """A number of the API: a JSON number, or "-inf" / "inf" / "nan"."""
    return float(value)


def long_text(n_tokens: int) -> str:
    words = " ".join(sp.toy_english().sample(80, seed=3)).split()
    assert len(words) >= n_tokens
    return " ".join(words[:n_tokens])


# ----------------------------------------------------------------------------- /api/models
def test_models_lists_names_kinds_vocabularies_and_contexts(client):
    rows = {m["name"]: m for m in ok(client.get("/api/models"))["models"]}
    assert list(rows) == ["default", "kn3", "toy_english"]
    assert [rows[n]["kind"] for n in rows] == ["gpt", "ngram", "truth"]
    assert {m["vocab_size"] for m in rows.values()} == {213}
    assert (rows["default"]["context"], rows["kn3"]["context"], rows["toy_english"]["context"]) == (32, 2, None)
    assert rows["default"]["inspectable"] and not rows["kn3"]["inspectable"]
    assert len({m["tokenizer"] for m in rows.values()}) == 1  # one shared tokenizer: comparable


def test_vocab_gives_every_display_string(client, models):
    assert ok(client.get("/api/vocab?model=kn3"))["tokens"] == list(models["kn3"].vocab.tokens)
    assert client.get("/api/vocab?model=nope").status_code == 404


# ----------------------------------------------------------------------------- /api/score
@pytest.mark.parametrize("name", ["default", "kn3", "toy_english"])
@pytest.mark.parametrize("text", [TEXT, "The cat sat on zebra mat", long_text(200)], ids=["short", "oov", "200-tokens"])
def test_score_rows_are_the_librarys_to_the_last_bit(client, models, name, text):
    out = ok(post(client, "score", text=text, model=name))
    df = sp.score(models[name], text, eos=False)
    rows = out["tokens"]
    assert [r["text"] for r in rows] == df["token"].tolist()
    assert [r["id"] for r in rows] == df["token_id"].tolist()
    for column in ("logprob", "surprisal_bits", "entropy_bits"):
        assert [as_float(r[column]) for r in rows] == df[column].tolist(), column  # exact, -inf included
    assert [r["rank"] for r in rows] == df["rank"].tolist()
    assert [r["is_oov"] for r in rows] == df["is_oov"].tolist()
    summary = sp.summarize(df).iloc[0]
    assert out["n_tokens"] == len(df)
    for key, column in (("total_logprob", "logprob"), ("perplexity", "perplexity"), ("bits_per_byte", "bits_per_byte")):
        assert math.isclose(as_float(out[key]), summary[column], rel_tol=1e-12), key


def test_score_alternatives_are_the_ten_likeliest_of_the_row(client, models):
    rows = ok(post(client, "score", text=TEXT))["tokens"]
    model = models["default"]
    ids = np.array([model.vocab.bos_id] + model.tokenizer.encode(TEXT))
    full = model.logprobs(ids[None, :-1])[0]  # (T, V)
    for r, row in zip(rows, full):
        top = r["top"]
        assert len(top) == 10
        assert [a["id"] for a in top] == np.argsort(-row, kind="stable")[:10].tolist()
        assert [a["logprob"] for a in top] == [float(row[a["id"]]) for a in top]
        assert [a["text"] for a in top] == [model.vocab.tokens[a["id"]] for a in top]


def test_impossible_tokens_travel_as_the_string_minus_inf(client):
    out = ok(post(client, "score", text="the cat sat on zebra mat", model="toy_english"))
    zebra = out["tokens"][4]
    assert (zebra["logprob"], zebra["surprisal_bits"], zebra["is_oov"]) == ("-inf", "inf", True)
    assert (out["total_logprob"], out["perplexity"]) == ("-inf", "inf")
    assert "prefix itself is impossible" in out["note"]
    assert ok(post(client, "score", text="the cat sat on the zebra", model="toy_english"))["note"] is None


def test_floats_are_written_with_full_precision():
    x = 0.1 + 0.2
    assert json.loads(dumps({"x": x, "y": np.float32(1 / 3)})) == {"x": x, "y": float(np.float32(1 / 3))}
    assert json.loads(dumps({"a": np.array([-np.inf, np.nan, 1.5])})) == {"a": ["-inf", "nan", 1.5]}


def test_words_are_word_scores_rows(client, models):
    text = "the cat sat on the mat"
    out = ok(post(client, "words", text=text, model="kn3"))
    df = sp.word_scores(models["kn3"], text, eos=False)
    assert [w["word"] for w in out["words"]] == df["word"].tolist()
    assert [w["logprob"] for w in out["words"]] == df["logprob"].tolist()
    assert out["word_boundary"] == "whole_word"
    long = ok(post(client, "words", text=long_text(60)))  # past the GPT's context: sliding windows
    assert len(long["words"]) == 60


# ----------------------------------------------------------------------------- /api/next and /api/sample
def _row(model, text):
    ids = [model.vocab.bos_id] + model.tokenizer.encode(text)
    row = np.array(model.start(np.array(ids)).logprobs, dtype=np.float64)
    return model.vocab.mask_never_predicted(row, -np.inf)


@pytest.mark.parametrize("settings", [{}, {"temperature": 0.5}, {"temperature": 3.0, "top_k": 5},
                                      {"temperature": 1.5, "top_p": 0.8}, {"temperature": 0.0}])
def test_next_is_next_token_probs_of_the_row(client, models, settings):
    out = ok(post(client, "next", text="the cat", k=20, logprobs=True, **settings))
    row = _row(models["default"], "the cat")
    assert [as_float(v) for v in out["logprobs"]] == row.tolist()
    t = settings.get("temperature", 1.0)
    p = next_token_probs(row, t if t > 0 else 1e-320, settings.get("top_k"), settings.get("top_p"))
    best = np.argsort(-p, kind="stable")[:min(20, np.count_nonzero(p))]
    assert [x["id"] for x in out["tokens"]] == best.tolist()
    assert [x["prob"] for x in out["tokens"]] == p[best].tolist()
    nz = p[p > 0]
    assert math.isclose(out["entropy_bits"], -(nz * np.log2(nz)).sum(), rel_tol=1e-9, abs_tol=1e-12)


def test_temperature_zero_is_the_argmax_and_entropy_rises_with_temperature(client, models):
    cold = ok(post(client, "next", text="the cat", temperature=0))
    assert len(cold["tokens"]) == 1 and cold["tokens"][0]["prob"] == 1.0 and cold["entropy_bits"] == 0.0
    assert cold["tokens"][0]["id"] == int(np.argmax(_row(models["default"], "the cat")))
    entropies = [ok(post(client, "next", text="the cat", temperature=t))["entropy_bits"] for t in (0.3, 1, 2, 5)]
    assert entropies == sorted(entropies) and entropies[0] < entropies[-1]


def test_sample_draws_generates_token_with_the_seed(client, models):
    model = models["default"]
    ids = [model.vocab.bos_id] + model.tokenizer.encode("the cat")
    for seed in range(5):
        out = ok(post(client, "sample", text="the cat", temperature=1.5, top_k=30, seed=seed))
        want = generate(model, ids, max_new_tokens=1, temperature=1.5, top_k=30, seed=seed, stop_at_eos=False)[0]
        assert out["token"]["id"] == want
        assert out["text"] == "the cat " + model.vocab.tokens[want]
        assert out == ok(post(client, "sample", text="the cat", temperature=1.5, top_k=30, seed=seed))


def test_sampling_the_end_of_sentence_ends_the_text(client):
    out = ok(post(client, "sample", text=TEXT, model="toy_english", temperature=0))  # P*(</s> | text) = 0.9
    assert out["ended"] and out["token"] == {"text": "</s>", "id": 2} and out["text"] == TEXT


def test_sample_keeps_unknown_words_as_typed(client):
    out = ok(post(client, "sample", text="the Cat sat on the", temperature=0))
    assert not out["ended"] and out["text"] == "the Cat sat on the " + out["token"]["text"]


# ----------------------------------------------------------------------------- /api/inside
def test_inside_is_attention_patterns_and_the_logit_lens(client, models):
    out = ok(post(client, "inside", text=TEXT, layer=1, head=2))
    attn, tokens = attention_patterns(models["default"], TEXT)
    assert out["tokens"] == tokens == ["<s>", *TEXT.split()]
    assert out["attention"] == attn[1, 2].tolist()
    assert (out["n_layer"], out["n_head"]) == attn.shape[:2]
    lens = logit_lens(models["default"], TEXT, eos=True)
    assert [r["top_token"] for r in out["logit_lens"]] == lens["top_token"].tolist()
    assert [r["logprob"] for r in out["logit_lens"]] == lens["logprob"].tolist()


@pytest.mark.parametrize("body, message", [
    ({"model": "kn3", "layer": 0, "head": 0}, "no attention"),
    ({"layer": 2, "head": 0}, "layer must be an integer in [0, 1]"),
    ({"layer": 0, "head": 4}, "head must be an integer in [0, 3]"),
    ({"layer": -1, "head": 0}, "layer must be an integer >= 0"),
])
def test_inside_refuses_what_the_model_has_not(client, body, message):
    response = post(client, "inside", text=TEXT, **body)
    assert response.status_code == 422 and message in response.json()["error"]


def test_inside_of_a_text_longer_than_the_context_is_a_422(client):
    response = post(client, "inside", text=long_text(40), layer=0, head=0)
    assert response.status_code == 422 and "block_size=32" in response.json()["error"]


# ----------------------------------------------------------------------------- /api/compare
def test_compare_gives_each_models_rows_the_difference_and_the_kl_to_the_truth(client, models):
    text = "the cat sat on zebra mat"
    out = ok(post(client, "compare", text=text))
    assert out["tokens"] == text.split() and out["reference"] == out["baseline"] == "toy_english"
    rows = {m["name"]: m for m in out["models"]}
    truth = models["toy_english"]
    ids = np.array([1] + truth.tokenizer.encode(text))[:-1]  # x_0 .. x_{T-1}
    t_rows = truth.logprobs(ids)  # (T, V)
    for name in ("default", "kn3"):
        df = sp.score(models[name], text, eos=False)
        assert [as_float(v) for v in rows[name]["logprob"]] == df["logprob"].tolist()
        m_rows = models[name].logprobs(ids[None])[0].astype(np.float64)
        p = np.exp(t_rows)
        with np.errstate(invalid="ignore"):
            kl = np.where(p > 0, p * (t_rows - m_rows), 0.0).sum(axis=-1) / np.log(2)
        got = [as_float(v) for v in rows[name]["kl_bits"]]
        np.testing.assert_allclose(got[:5], np.maximum(kl, 0)[:5], rtol=1e-12, atol=1e-15)
        assert rows[name]["kl_bits"][5] == "nan"  # after "zebra" (P* = 0) the context is impossible
        bits, base = df["surprisal_bits"].to_numpy(), sp.score(truth, text, eos=False)["surprisal_bits"].to_numpy()
        assert [as_float(v) for v in rows[name]["diff_bits"]][:4] == (bits - base)[:4].tolist()
        assert rows[name]["diff_bits"][4] == "-inf"  # P* gives the unknown word probability 0
    assert rows["toy_english"]["kl_bits"] is None
    assert "prefix itself is impossible" in out["note"]
    assert ok(post(client, "compare", text=TEXT))["note"] is None


def test_compare_refuses_models_with_different_tokenizers(kn_path):
    chars = sp.CharTokenizer.fit(["the cat sat on the mat"])
    served = load_served([str(kn_path)]) + [serve_model("chars", sp.UniformModel(chars.vocab), chars)]
    with TestClient(create_app(Explorer(served)), base_url=BASE) as c:
        response = post(c, "compare", text=TEXT)
        assert response.status_code == 422 and "share a tokenizer" in response.json()["error"]
        models = ok(c.get("/api/models"))["models"]
        assert models[0]["tokenizer"] != models[1]["tokenizer"]


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("body, status, message", [
    (b"{not json", 400, "not valid JSON"),
    (b'{"text": NaN}', 400, "not valid JSON"),
    (b"\xff\xfe", 400, "not valid JSON"),
    (b"[" * 50_000 + b"]" * 50_000, 400, "not valid JSON"),
    (b'["the cat"]', 422, "must be a JSON object"),
    (b"{}", 422, "missing field 'text'"),
    (b'{"text": 5}', 422, "text must be a str"),
    (b'{"text": "a", "temprature": 1}', 422, "unknown field 'temprature'"),
    (b'{"text": "a", "temperature": -1}', 422, "temperature must be a number >= 0"),
    (b'{"text": "a", "temperature": "hot"}', 422, "temperature must be a number"),
    (b'{"text": "a", "temperature": 1' + b"0" * 400 + b"}", 422, "temperature must be a finite number"),
    (b'{"text": "a", "top_p": 0}', 422, "top_p must be a number in (0, 1]"),
    (b'{"text": "a", "top_p": 1.5}', 422, "top_p must be a number in (0, 1]"),
    (b'{"text": "a", "top_k": 0}', 422, "top_k must be an integer >= 1"),
    (b'{"text": "a", "top_k": 1.5}', 422, "top_k must be an integer >= 1"),
    (b'{"text": "a", "k": 0}', 422, "k must be an integer >= 1"),
    (b'{"text": "a", "logprobs": 1}', 422, "logprobs must be true or false"),
    (b'{"text": "\\ud800"}', 422, "lone surrogate"),
    (b'{"text": "a", "model": "../../etc/passwd"}', 404, "no model named"),
    (b'{"text": "a", "model": ["default"]}', 422, "model must be a model name"),
])
def test_bad_requests_get_a_json_error(client, body, status, message):
    response = client.post("/api/next", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    assert message in response.json()["error"]


@pytest.mark.parametrize("endpoint, body", [("sample", {"text": "a", "seed": -1}), ("score", {"text": ""}),
                                            ("score", {"text": "a", "seed": 1}), ("compare", {"text": "a", "models": []}),
                                            ("compare", {"text": "a", "models": ["default", "nope"]})])
def test_every_endpoint_checks_its_fields(client, endpoint, body):
    response = post(client, endpoint, **body)
    assert response.status_code in (404, 422) and response.json()["error"]


def test_bodies_and_texts_over_the_limits_are_413(explorer, client):
    big = {"text": "the " * 30_000}
    response = post(client, "score", **big)
    assert response.status_code == 413 and "over the limit of 100000" in response.json()["error"]

    def chunks():  # no Content-Length: the limit holds while reading
        for _ in range(30):
            yield b"x" * 10_000
    response = client.post("/api/score", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    small = Explorer(list(explorer.served.values()), max_tokens=5)
    with TestClient(create_app(small), base_url=BASE) as c:
        response = post(c, "score", text=TEXT)
        assert response.status_code == 413 and "6 tokens, over the limit of 5" in response.json()["error"]
        assert post(c, "score", text="the cat").status_code == 200


def test_only_json_posts_and_known_routes(client):
    assert client.post("/api/score", content=b'{"text": "a"}', headers={"content-type": "text/plain"}).status_code == 415
    for response in (client.get("/api/score"), client.post("/api/nope", json={}), client.get("/static/../x"),
                     client.get("/static/secret.py"), client.put("/api/models")):
        assert response.status_code in (404, 405), response.url
        assert "error" in response.json()


def test_an_unknown_endpoint_points_at_the_api_documentation(client):
    from seqprob._docs import docs_url

    response = client.post("/api/nope", json={})
    assert response.status_code == 404
    assert docs_url("explore", "the-json-api") in response.json()["error"]


# ----------------------------------------------------------------------------- safety
@pytest.mark.parametrize("host, status", [("127.0.0.1:8000", 200), ("localhost:8000", 200), ("[::1]:8000", 200),
                                          ("evil.example:8000", 400), ("127.0.0.1.evil.example", 400), ("", 400)])
def test_host_header_must_name_this_server(client, host, status):
    response = client.get("/api/models", headers={"host": host})
    assert response.status_code == status
    if status != 200:
        assert "is not allowed" in response.json()["error"]


def test_cross_origin_requests_are_refused_and_no_cors_headers_are_sent(client):
    response = post(client, "score", text="a")
    assert "access-control-allow-origin" not in response.headers
    evil = client.post("/api/score", json={"text": "a"}, headers={"origin": "http://evil.example"})
    assert evil.status_code == 403 and "cross-origin" in evil.json()["error"]
    same = client.post("/api/score", json={"text": "the"}, headers={"origin": "http://127.0.0.1:8000"})
    assert same.status_code == 200
    preflight = client.options("/api/score", headers={"origin": "http://127.0.0.1:8000",
                                                      "access-control-request-method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers


def test_requests_cannot_load_models(client, kn_path):
    for spec in (str(kn_path), "default", "toy_english", "gpt2", "https://example.com/m.arpa"):
        response = post(client, "score", text="the", model=spec)
        assert response.status_code == (200 if spec in ("default", "toy_english") else 404)


def test_the_page_and_its_assets_ship_in_the_package(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    for hook in ("<textarea", 'type="range" id="temperature" name="temperature"', 'name="sample"',
                 "data-entropy-bits"):
        assert hook in html
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name, kind in (("explore.js", "text/javascript"), ("explore.css", "text/css")):
        asset = client.get(f"/static/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
        assert not re.search(r"https?://", asset.text), f"{name} loads something from the network"
    assert not re.search(r"(src|href)=\"https?://", html)
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"


def test_importing_seqprob_and_the_cli_needs_no_web_server():
    code = ("import sys, seqprob, seqprob.app.cli, seqprob.app.explore; "
            "print(any(m.split('.')[0] in ('starlette', 'uvicorn') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------- a real server
class _Server:
    """uvicorn serving an explorer in a thread, on a free port."""

    def __init__(self, explorer):
        import uvicorn

        self.sock = bind("127.0.0.1", 0)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(create_app(explorer), log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self):
        self.thread.start()
        while not self.server.started:
            assert self.thread.is_alive(), "the server did not start"
            self.thread.join(0.01)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture(scope="module")
def server(explorer):
    with _Server(explorer) as s:
        yield s


def _post(url, endpoint, body):
    request = urllib.request.Request(f"{url}/api/{endpoint}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def test_concurrent_requests_give_the_serial_answers(server):
    texts = [" ".join(s.split()[:8]) for s in sp.toy_english().sample(48, seed=5)]
    jobs = [("score", {"text": t}) for t in texts[:16]] + [("next", {"text": t, "temperature": 0.7}) for t in texts[16:24]] \
        + [("inside", {"text": t, "layer": 1, "head": 1}) for t in texts[24:32]]
    serial = [_post(server.url, *job) for job in jobs]
    with ThreadPoolExecutor(32) as pool:
        parallel = list(pool.map(lambda job: _post(server.url, *job), jobs))
    assert parallel == serial


def test_port_in_use_is_a_clear_error(server):
    port = int(server.url.rsplit(":", 1)[1])
    with pytest.raises(sp.errors.SeqProbError, match="pass --port N"):
        bind("127.0.0.1", port)


# ----------------------------------------------------------------------------- the command
def test_explore_command_prints_the_url_and_opens_the_browser(monkeypatch, capsys, kn_path):
    import uvicorn
    import webbrowser

    opened, runs = [], []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)

    def fake_run(self, sockets=None):  # the real run is the subprocess test's
        runs.append(sockets)
        self.started = True
        threading.Event().wait(0.2)  # let the opener thread see it started
    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    assert main(["explore", "--port", "0", f"ngram={kn_path}", "toy_english"]) == 0
    out = capsys.readouterr().out
    url = re.search(r"http://127\.0\.0\.1:\d+/", out).group(0)
    assert "ngram (ngram), toy_english (truth)" in out and opened == [url] and len(runs) == 1
    assert main(["explore", "--port", "0", "--no-browser"]) == 0
    assert opened == [url]


def test_explore_warns_when_it_serves_beyond_this_machine(monkeypatch, capsys):
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)
    assert main(["explore", "--port", "0", "--no-browser", "--host", "0.0.0.0"]) == 0
    assert "warning: serving on 0.0.0.0" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["default", "default"], "two models are named 'default'"),
    (["no/such/model.arpa"], "does not exist"),
    (["bad name=default"], "model name 'bad name' is not valid"),
])
def test_explore_refuses_bad_models_and_options(capsys, argv, message):
    assert main(["explore", "--no-browser", *argv]) == 2
    assert message in capsys.readouterr().err


def test_explore_refuses_a_port_out_of_range(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["explore", "--port", "70000"])
    assert exc.value.code == 2 and "must be a port in [0, 65535]" in capsys.readouterr().err


def test_explore_without_the_extra_names_the_install_command(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a))
    assert main(["explore", "--no-browser"]) == 2
    assert 'needs uvicorn: pip install "seqprob[explore]"' in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_explore_serves_until_a_stop_signal_then_exits_cleanly(sig):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "seqprob", "explore", "--no-browser", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        with urllib.request.urlopen(url + "api/models", timeout=30) as response:
            assert json.loads(response.read())["models"][0]["name"] == "default"
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0
        assert "stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ----------------------------------------------------------------------------- the page in Chromium
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def page(server):
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        tab = browser.new_page(viewport={"width": 1400, "height": 1000})
        tab.errors = []
        tab.on("console", lambda m: tab.errors.append(m.text) if m.type == "error" else None)
        tab.on("pageerror", lambda e: tab.errors.append(str(e)))
        tab.goto(server.url + "/")
        tab.wait_for_selector("body[data-ready=true]", timeout=30_000)
        yield tab
        browser.close()


def _wait_for_tokens(page, n):
    page.wait_for_function("n => document.querySelectorAll('#tokens [data-token-id]').length === n", arg=n,
                           timeout=30_000)


def _set_range(page, value):
    page.eval_on_selector("input[name=temperature]", "(el, v) => { el.value = v; "
                          "el.dispatchEvent(new Event('input', {bubbles: true})); }", str(value))
    return float(page.get_attribute("[data-entropy-bits]", "data-entropy-bits"))


@pytest.mark.browser
def test_page_shows_the_librarys_numbers_and_reacts(page, explorer, models):
    text = "the dog sat on a mat"
    page.fill("textarea", text)
    _wait_for_tokens(page, 6)
    page.wait_for_function("() => document.querySelectorAll('#tokens .tok .t')[1].textContent === 'dog'")
    chips = page.query_selector_all("#tokens [data-token-id]")
    df = sp.score(models["default"], text, eos=False)
    assert [int(c.get_attribute("data-token-id")) for c in chips] == df["token_id"].tolist()
    assert [float(c.get_attribute("data-logprob")) for c in chips] == df["logprob"].tolist()  # to the last bit

    page.wait_for_function("t => document.querySelector('#next-bars').dataset.context === t", arg=text)
    cold, warm, hot = (_set_range(page, t) for t in (0.5, 1.0, 2.5))
    assert cold < warm < hot
    api = explorer.api_next(text, temperature=2.5)
    assert math.isclose(hot, api["entropy_bits"], rel_tol=1e-9)

    page.eval_on_selector("textarea", "el => el.setSelectionRange(el.value.length, el.value.length)")
    page.click("button[name=sample]")
    want = explorer.api_sample(text, temperature=2.5, seed=0)
    page.wait_for_function("t => document.querySelector('textarea').value === t", arg=want["text"], timeout=30_000)
    page.click("button[name=back]")
    page.wait_for_function("t => document.querySelector('textarea').value === t", arg=text)

    page.wait_for_function("t => document.querySelector('#compare').dataset.text === t", arg=text)
    rows = page.query_selector_all("#compare td[data-model=kn3]")
    kn = sp.score(models["kn3"], text, eos=False)["logprob"].tolist()
    assert [float(r.get_attribute("data-logprob")) for r in rows] == kn
    assert page.query_selector("#compare th:text('KL(P* ‖ kn3) bits')") is not None
    assert page.errors == []


def test_a_model_that_fails_gets_a_500_and_the_server_goes_on(kn_path):
    class Broken(sp.UniformModel):
        def logprobs(self, ids):
            raise RuntimeError("disk on fire")

    truth = sp.toy_english()
    served = [serve_model("broken", Broken(truth.vocab), truth.tokenizer), *load_served([str(kn_path)])]
    with TestClient(create_app(Explorer(served)), base_url=BASE, raise_server_exceptions=False) as c:
        response = post(c, "score", text=TEXT)
        assert response.status_code == 500 and "disk on fire" in response.json()["error"]
        assert ok(post(c, "score", text=TEXT, model="kn3"))["n_tokens"] == 6


def test_a_byte_level_bpe_model_keeps_its_spaces():
    """A GPT-2-style model (tiktoken encoding, leading-space tokens): rows exact, the sampled
    token appended as decoded, word scores with the beginning-of-word correction."""
    from seqprob.gpt import GPT
    from seqprob.tokenizers import TiktokenTokenizer

    folder = Path(__file__).parent / "fixtures" / "hf_gpt2" / "tiktoken"
    tok = TiktokenTokenizer(folder / "enc.tiktoken")
    model = GPT.from_hf(folder, tokenizer=tok)
    ex = Explorer([serve_model("bpe", model)])
    text = "the cat sat, on the mat!"
    rows = ex.api_score(text)["tokens"]
    df = sp.score(model, text, eos=False)
    assert [r["text"] for r in rows] == df["token"].tolist() and " cat" in [r["text"] for r in rows]
    assert [r["logprob"] for r in rows] == df["logprob"].tolist()
    assert ex.models()["models"][0]["separator"] == "" and ex.models()["models"][0]["word_boundary"] == "leading_space"
    out = ex.api_sample("the cat", seed=3)
    assert out["text"] == tok.decode(tok.encode("the cat") + [out["token"]["id"]])
    words = ex.api_words(text)["words"]
    assert [w["logprob"] for w in words] == sp.word_scores(model, text, eos=False)["logprob"].tolist()
