"""Downloading a model missing from the cache, against a local HTTP server that stands in for
the Hugging Face hub (selected with HF_ENDPOINT): never the real hub, no network."""
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

import seqprob as sp
from seqprob import hub

pytest.importorskip("huggingface_hub")

LLAMA = Path(__file__).parent / "fixtures" / "hf_models" / "llama_gqa"
COMMIT = "c0ffee" + "0" * 34


class StandIn:
    """The hub routes snapshot_download uses: the revision's commit, the file tree, and each
    file by HEAD and GET with the commit and an ETag; ``cut`` truncates one file's body."""

    def __init__(self, files: dict, cut: str | None = None):
        self.files, self.cut, self.requests = files, cut, []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                stand_in.answer(self, head=False)

            def do_HEAD(self):
                stand_in.answer(self, head=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def answer(self, req, head: bool):
        self.requests.append((req.command, req.path))
        parts = req.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) > 4 and parts[4] == "tree":
            tree = [{"type": "file", "path": n, "size": len(d), "oid": hashlib.sha1(d).hexdigest()}
                    for n, d in self.files.items()]
            return self._send(req, json.dumps(tree).encode(), head, {"Content-Type": "application/json"})
        if parts[:2] == ["api", "models"]:
            info = {"id": "/".join(parts[2:4]), "sha": COMMIT, "siblings": [{"rfilename": n} for n in self.files]}
            return self._send(req, json.dumps(info).encode(), head, {"Content-Type": "application/json"})
        if len(parts) >= 5 and parts[2] == "resolve" and "/".join(parts[4:]) in self.files:
            name = "/".join(parts[4:])
            data = self.files[name]
            headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}
            body = data[: len(data) // 2] if name == self.cut and not head else data
            return self._send(req, body, head, headers, length=len(data))
        req.send_response(404)
        req.send_header("X-Error-Code", "EntryNotFound")
        req.end_headers()

    @staticmethod
    def _send(req, body: bytes, head: bool, headers: dict, length: int | None = None):
        req.send_response(200)
        for key, value in headers.items():
            req.send_header(key, value)
        req.send_header("Content-Length", str(len(body) if length is None else length))
        req.end_headers()
        if not head:
            req.wfile.write(body)
        if length is not None and len(body) < length:
            req.close_connection = True  # the connection drops mid-file


@pytest.fixture
def online(tmp_path, monkeypatch):
    """A fresh cache, downloads allowed, and the stand-in as the hub."""
    import huggingface_hub.constants as constants

    files = {f.name: f.read_bytes() for f in LLAMA.iterdir() if f.suffix in (".json", ".safetensors")}
    files["README.md"] = b"not needed to load a model"
    cache = tmp_path / "hf"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")

    def serve(cut=None):
        stand_in = StandIn(files, cut)
        monkeypatch.setenv("HF_ENDPOINT", stand_in.url)
        return stand_in

    yield cache, serve


def test_a_missing_model_is_downloaded_then_loaded_from_the_cache(online):
    cache, serve = online
    stand_in = serve()
    model = sp.load_model("org/tiny")
    ids = np.load(LLAMA / "ids.npy")
    np.testing.assert_array_equal(model.logits(ids), sp.load_model(LLAMA).logits(ids))
    snapshot = cache / "models--org--tiny" / "snapshots" / COMMIT
    assert sorted(p.name for p in snapshot.iterdir()) == ["config.json", "model.safetensors"]  # no README
    fetched = len(stand_in.requests)
    sp.load_model("org/tiny")  # the second time from the cache: no request
    assert len(stand_in.requests) == fetched


def test_offline_names_the_cache_and_the_command(online, monkeypatch):
    cache, serve = online
    stand_in = serve()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.ModelNotCachedError, match="HF_HUB_OFFLINE is set") as info:
        sp.load_model("org/tiny")
    assert str(cache / "models--org--tiny") in str(info.value)
    assert "hf download org/tiny" in str(info.value)
    assert stand_in.requests == []


def test_an_interrupted_download_leaves_no_model_file(online):
    cache, serve = online
    serve(cut="model.safetensors")
    with pytest.raises(hub.HubError, match="downloading 'org/tiny'"):
        sp.load_model("org/tiny")
    snapshot = cache / "models--org--tiny" / "snapshots" / COMMIT
    assert not (snapshot / "model.safetensors").exists()
    # the partial snapshot (config only) is refused by name later, never loaded half-written
    with pytest.raises(sp.SeqProbError, match="no model.safetensors"):
        sp.GPT.from_hf(hub.resolve("org/tiny", download=False))


def test_downloads_can_be_refused_per_call(online):
    _, serve = online
    stand_in = serve()
    with pytest.raises(hub.ModelNotCachedError):
        hub.resolve("org/tiny", download=False)
    assert stand_in.requests == []
