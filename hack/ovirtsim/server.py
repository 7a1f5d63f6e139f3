"""The HTTP(S) side: one server for the engine (API + SSO), one for the control API; and `Simulator`, both together.

Threaded HTTP/1.1 with keep-alive: a single-threaded server deadlocks the SDK, which opens a second connection while
the first is parked (docs/compatibility.md#simulator). TLS handshakes happen in the connection's own thread, so a slow
or broken client cannot stall the accept loop. `Expect: 100-continue` (libcurl, bodies > 1 MiB) is answered by
`BaseHTTPRequestHandler` itself under HTTP/1.1.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hack.controlplane.address import node_ip
from hack.ovirtsim import xmlio
from hack.ovirtsim.config import (
    API_LISTEN_HOST,
    API_PREFIX,
    LISTEN_HOST,
    SSO_LOGOUT_PATH,
    SSO_TOKEN_HTTP_AUTH_PATH,
    SSO_TOKEN_PATH,
    SimConfig,
)
from hack.ovirtsim.control import ControlApi
from hack.ovirtsim.engine import Engine
from hack.ovirtsim.errors import ApiError
from hack.ovirtsim.faults import FaultKind
from hack.ovirtsim.router import ApiResponse
from hack.ovirtsim.tls import generate

log = logging.getLogger("ovirtsim.server")

SSO_TEMPLATES = {SSO_TOKEN_PATH: "/sso/oauth/token", SSO_TOKEN_HTTP_AUTH_PATH: "/sso/oauth/token-http-auth",
                 SSO_LOGOUT_PATH: "/services/sso-logout"}


_MAX_LINE = 65536
_MAX_HEADERS = 100


class _Headers(dict):
    """Request headers by lower-case name; `get` is case-insensitive like the stdlib's message object."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, host: str, port: int, handler: type, ssl_context: ssl.SSLContext | None, owner: Any) -> None:
        self.ssl_context = ssl_context
        self.owner = owner
        super().__init__((host, port), handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            sock = self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ovirtsim"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.settimeout(30)
            try:
                self.connection.do_handshake()
            except (ssl.SSLError, OSError):
                self.close_connection = True
                raise
            self.connection.settimeout(None)

    def handle(self) -> None:
        try:
            super().handle()
        except (ssl.SSLError, ConnectionError, TimeoutError):
            pass

    def handle_one_request(self) -> None:
        """Read one request with a lean header parser: the stdlib's (`email.feedparser`) took about half of the
        simulator's CPU per request; keep-alive and `Expect: 100-continue` are handled as the stdlib does."""
        line = self.rfile.readline(_MAX_LINE + 1)
        if not line:
            self.close_connection = True
            return
        self.raw_requestline = line
        self.requestline = line.decode("iso-8859-1").rstrip("\r\n")
        parts = self.requestline.split()
        if len(line) > _MAX_LINE or len(parts) != 3 or not parts[2].startswith("HTTP/"):
            self.command, self.request_version, self.close_connection = "GET", "HTTP/1.1", True
            self._send(400, b"", "text/plain")
            return
        self.command, self.path, self.request_version = parts
        headers = _Headers()
        while True:
            raw = self.rfile.readline(_MAX_LINE + 1)
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("iso-8859-1").partition(":")
            headers[name.strip().lower()] = value.strip()
            if len(headers) > _MAX_HEADERS:
                self.close_connection = True
                self._send(431, b"", "text/plain")
                return
        self.headers = headers  # type: ignore[assignment]
        connection = headers.get("connection", "").lower()
        self.close_connection = connection == "close" or (self.request_version != "HTTP/1.1"
                                                          and connection != "keep-alive")
        if headers.get("expect", "").lower() == "100-continue" and self.request_version == "HTTP/1.1":
            log.info("100-continue for %s %s", self.command, self.path.split("?", 1)[0])
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        handler = getattr(self, "do_" + self.command, None)
        if handler is None:
            self._send(501, b"", "text/plain")
            return
        handler()
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s %s", self.address_string(), format % args)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, body: bytes | str, content_type: str, headers: dict[str, str] | None = None) -> None:
        """Status line, headers and body in one write: one TLS record and one segment for small replies."""
        data = body.encode() if isinstance(body, str) else body
        lines = [f"{self.protocol_version} {status} {self.responses.get(status, ('',))[0]}",
                 f"Server: {self.server_version}", f"Date: {self.date_time_string()}",
                 f"Content-Type: {content_type}", f"Content-Length: {len(data)}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head if self.command == "HEAD" else head + data)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s %s %s %d", self.address_string(), self.command, self.path, status)

    def _drop(self) -> None:
        """Close the connection without a reply: the client sees an empty reply / connection reset."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # http.server calls do_<METHOD>: the names are its API.
    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = lambda self: self.dispatch()  # noqa: N815

    def dispatch(self) -> None:
        raise NotImplementedError


class ApiHandler(_Handler):
    def dispatch(self) -> None:
        engine: Engine = self.server.owner.engine
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        method = self.command
        body = self._body()
        headers = {k.lower(): v for k, v in self.headers.items()}

        route, params, template = engine.route("GET" if method == "HEAD" else method, path)
        if path in SSO_TEMPLATES:
            template = SSO_TEMPLATES[path]
        engine.counters.count(method, template)

        rule = engine.faults.take(method, path)
        slow = 0.0
        if rule is not None:
            if rule.kind is FaultKind.DROP:
                self._drop()
                return
            if rule.kind is FaultKind.DELAY:
                time.sleep(rule.delay)
            elif rule.kind is FaultKind.SLOW:
                slow = rule.delay
            else:
                if rule.delay:
                    time.sleep(rule.delay)
                err = ApiError(rule.status, rule.reason, rule.detail)
                text = b"" if rule.reason is None else xmlio.render_fault(
                    err, as_action=bool(route and route.is_action))
                self._send(rule.status, text, "application/xml;charset=UTF-8")
                return

        if path in SSO_TEMPLATES:
            if path == SSO_LOGOUT_PATH:
                reply = engine.tokens.revoke(body)
            else:
                reply = engine.tokens.issue(body)
            self._send(reply.status, reply.encode(), "application/json")
            return
        if method == "OPTIONS" and path.startswith(API_PREFIX):
            self._send(200, b"", "application/xml", {"Allow": "GET, HEAD, OPTIONS"})
            return
        if not path.startswith(API_PREFIX):
            self._send(404, b"", "text/plain")
            return
        resp: ApiResponse = engine.handle("GET" if method == "HEAD" else method, path, query, headers, body,
                                          matched=(route, params), slow=slow)
        self._send(resp.status, resp.body, resp.content_type + ";charset=UTF-8" if resp.body else resp.content_type,
                   resp.headers)


class ControlHandler(_Handler):
    def dispatch(self) -> None:
        control: ControlApi = self.server.owner.control
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        status, payload = control.handle(self.command, url.path, query, self._body())
        self._send(status, json.dumps(payload).encode(), "application/json")


class Simulator:
    """The engine with its two listeners; `start()` returns once both accept connections."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.engine = Engine(config)
        self.control = ControlApi(self)
        self.cert_files = None
        ctx = None
        if config.tls:
            self.cert_files = generate(config.cert_dir or tempfile.mkdtemp(prefix="ovirtsim-pki-"))
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.cert_files.cert_file, self.cert_files.key_file)
        self.api_server = _Server(API_LISTEN_HOST, config.port, ApiHandler, ctx, self)
        self.control_server = _Server(LISTEN_HOST, config.control_port, ControlHandler, None, self)
        self._threads: list[threading.Thread] = []
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        return self.api_server.server_address[1]

    @property
    def url(self) -> str:
        scheme = "https" if self.config.tls else "http"
        return f"{scheme}://{LISTEN_HOST}:{self.port}{API_PREFIX}"

    @property
    def pod_url(self) -> str:
        """The URL a pod on a real node reaches the engine at: the machine's address (loopback is not the pod's)."""
        scheme = "https" if self.config.tls else "http"
        return f"{scheme}://{node_ip()}:{self.port}{API_PREFIX}"

    @property
    def control_url(self) -> str:
        return f"http://{LISTEN_HOST}:{self.control_server.server_address[1]}"

    @property
    def ca_file(self) -> str | None:
        return str(self.cert_files.ca_file) if self.cert_files else None

    def start(self) -> None:
        self.engine.start()
        for server, name in ((self.api_server, "api"), (self.control_server, "control")):
            t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        for server in (self.api_server, self.control_server):
            server.shutdown()
            server.server_close()
        self.engine.stop()

    def describe(self) -> dict[str, Any]:
        return {"url": self.url, "pod_url": self.pod_url, "control_url": self.control_url, "ca_file": self.ca_file,
                "username": self.config.username, "password": self.config.password,
                "state_file": self.config.state_file, "profile": self.config.profile.value}
