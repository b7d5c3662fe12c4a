"""The explorer's web server: Starlette routes over :class:`~seqprob.app.explore.api.Explorer`,
served by uvicorn. Both are imported only when a server is built (``pip install "seqprob[explore]"``).

A server on localhost is reachable from any page the browser opens, so the app answers only to
the names of the address it serves (a DNS-rebinding page sends its own name in ``Host``: 400),
refuses a cross-origin ``Origin`` (403) and POST bodies that are not ``application/json`` (415,
which a page cannot send cross-origin without asking first), and sends no CORS headers.
"""
from __future__ import annotations

import ipaddress
import logging
from importlib import resources
from urllib.parse import urlsplit

from ..._docs import docs_url
from ...errors import SeqProbError
from .api import ApiError, Explorer, dumps

__all__ = ["create_app", "serve", "allowed_hosts", "MissingExtraError", "require_extra"]

log = logging.getLogger(__name__)

#: The page and its assets, shipped in the package (no CDN: the page works offline).
ASSETS = {"index.html": "text/html; charset=utf-8", "explore.js": "text/javascript; charset=utf-8",
          "explore.css": "text/css; charset=utf-8", "favicon.svg": "image/svg+xml"}
#: Sent with every answer: the page may load only its own assets and talk only to its server.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                               "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; "
                               "base-uri 'none'; form-action 'none'",
    "x-content-type-options": "nosniff", "referrer-policy": "no-referrer", "cache-control": "no-store",
    "x-frame-options": "DENY",
}
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


class MissingExtraError(SeqProbError, ImportError):
    """The explorer's optional dependencies (starlette, uvicorn) are not installed."""


def require_extra() -> None:
    """:class:`MissingExtraError` naming the install command unless starlette and uvicorn import."""
    import importlib.util

    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(f"seqprob explore needs {' and '.join(missing)}: "
                                'pip install "seqprob[explore]"', missing=missing)


def allowed_hosts(host: str, extra=()) -> set:
    """Host names the server answers to: the loopback names, the address it serves and ``extra``
    (lower case, IPv6 without brackets).

    Examples
    --------
    >>> sorted(allowed_hosts("127.0.0.1"))
    ['127.0.0.1', '::1', 'localhost']
    """
    return LOOPBACK_NAMES | {h.strip("[]").lower() for h in (host, *extra) if h}


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(value: str) -> str:
    """The host of a ``Host`` header value ``name[:port]`` / ``[v6][:port]``, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class _Guard:
    """ASGI middleware: refuse a foreign ``Host`` (400) or ``Origin`` (403), add the security
    headers to every answer."""

    def __init__(self, app, hosts: set):
        self.app, self.hosts = app, hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(headers)
        if refusal is not None:
            return await _send_json(send, *refusal)

        async def send_secured(message):
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + [
                    (k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
            await send(message)
        return await self.app(scope, receive, send_secured)

    def _refusal(self, headers: dict):
        host = _host_name(headers.get("host", ""))
        if host not in self.hosts:
            return 400, f"Host {headers.get('host', '')!r:.80} is not allowed: this server answers to " \
                        f"{', '.join(sorted(self.hosts))} (start it with --allow-host NAME for another name)"
        origin = headers.get("origin")
        if origin is not None and (urlsplit(origin).hostname or "") not in self.hosts:
            return 403, f"cross-origin request from {origin!r:.80} refused"
        return None


async def _send_json(send, status: int, message: str) -> None:
    body = dumps({"error": message})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _assets() -> dict:
    """name -> (bytes, media type) of the page's files, read once from the package."""
    folder = resources.files(__package__) / "static"
    return {name: ((folder / name).read_bytes(), media) for name, media in ASSETS.items()}


async def _read_body(request, limit: int) -> bytes:
    """The request body, or a 413 as soon as it passes ``limit`` bytes (a too-long body is
    never read whole, whatever its Content-Length claims)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body has {declared} bytes, over the limit of {limit} (--max-bytes)",
                       value=int(declared), limit=limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"the request body is over the limit of {limit} bytes (--max-bytes)", limit=limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _response(body: bytes, media: str, status: int = 200):
    from starlette.responses import Response

    return Response(body, status_code=status, media_type=media)


def _json(payload, status: int = 200):
    return _response(dumps(payload), "application/json", status)


class _Endpoints:
    """The routes' handlers over one :class:`Explorer` and the page's files."""

    def __init__(self, explorer: Explorer):
        self.explorer, self.assets = explorer, _assets()

    async def page(self, request):
        name = request.path_params.get("name", "index.html")
        if name not in self.assets:
            return _json({"error": f"no file {name!r:.80}"}, 404)
        return _response(*self.assets[name])

    async def favicon(self, request):
        return _response(*self.assets["favicon.svg"])

    async def models(self, request):
        return _json(self.explorer.models())

    async def vocab(self, request):
        return _json(self.explorer.vocab(request.query_params.get("model")))

    async def api(self, request):
        from starlette.concurrency import run_in_threadpool

        endpoint = request.path_params["endpoint"]
        if endpoint not in _POST_ENDPOINTS:
            raise ApiError(404, f"no endpoint /api/{endpoint:.80}: the endpoints are listed at "
                                f"{docs_url('explore', 'the-json-api')}")
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            raise ApiError(415, "POST /api/* takes a JSON body: send Content-Type: application/json")
        body = await _read_body(request, self.explorer.max_bytes)
        # in a worker thread: the event loop keeps serving while a model computes
        return _json(await run_in_threadpool(self.explorer.handle, endpoint, body))

    @staticmethod
    async def api_error(request, exc):
        return _json({"error": str(exc)}, exc.status)

    @staticmethod
    async def http_error(request, exc):
        return _json({"error": exc.detail or "error"}, exc.status_code)

    @staticmethod
    async def server_error(request, exc):  # uvicorn logs the traceback
        return _json({"error": f"internal error: {type(exc).__name__}: {str(exc)[:200]}"}, 500)


def create_app(explorer: Explorer, hosts=None):
    """The ASGI app of ``explorer``: the page at ``/``, its assets, the JSON API under ``/api``.

    Parameters
    ----------
    explorer : Explorer
    hosts : set of str, optional
        Host names to answer to (default :func:`allowed_hosts` of 127.0.0.1); any other
        ``Host`` header gets a 400, a foreign ``Origin`` a 403.
    """
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.routing import Route

    e = _Endpoints(explorer)
    routes = [Route("/", e.page), Route("/static/{name}", e.page), Route("/favicon.ico", e.favicon),
              Route("/api/models", e.models), Route("/api/vocab", e.vocab),
              Route("/api/{endpoint}", e.api, methods=["POST"])]
    handlers = {ApiError: e.api_error, HTTPException: e.http_error, Exception: e.server_error}
    app = Starlette(routes=routes, exception_handlers=handlers)
    return _Guard(app, allowed_hosts("127.0.0.1") if hosts is None else set(hosts))


_POST_ENDPOINTS = ("score", "words", "next", "sample", "inside", "compare")


def bind(host: str, port: int):
    """A listening TCP socket on ``host``:``port`` (0: any free port), or a clear error."""
    import errno
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except (OSError, UnicodeError) as exc:
        raise SeqProbError(f"cannot serve on host {host!r}: {exc}", host=host) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        hint = " (pass --port N, or --port 0 for any free port)" if exc.errno == errno.EADDRINUSE else ""
        raise SeqProbError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}",
                           host=host, port=port) from None
    sock.set_inheritable(True)
    return sock


def url_of(sock) -> str:
    """``http://HOST:PORT/`` of a bound socket (IPv6 in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def serve(app, sock, log_level: str = "warning", on_started=None) -> None:
    """Run ``app`` on the listening ``sock`` until SIGINT (Ctrl-C) or SIGTERM, then return.

    A stop signal ends the server within about half a second (requests still running get
    0.5 s to finish); the signals' previous handlers are restored afterwards.
    ``on_started(server)``, if given, runs in a thread once the server accepts requests.
    """
    import signal
    import threading

    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, lifespan="off", timeout_graceful_shutdown=0.5,
                            access_log=log_level in ("info", "debug"))
    server = uvicorn.Server(config)
    if on_started is not None:
        threading.Thread(target=_when_started, args=(server, on_started), daemon=True).start()
    stops = (signal.SIGINT, signal.SIGTERM)
    # uvicorn handles the signals while it runs, then re-raises the one it caught: with these
    # handlers in place that is a no-op, so a stop is a normal return, not KeyboardInterrupt.
    previous = {s: signal.signal(s, lambda *_: None) for s in stops} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _when_started(server, callback) -> None:
    import time

    while not server.started and not server.should_exit:
        time.sleep(0.01)
    if server.started:
        callback(server)
