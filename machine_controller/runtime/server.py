"""Liveness, readiness and Prometheus metrics (MAO: metrics :8081, health :9440, docs/architecture.md#deployment-modes).

`/healthz` and `/readyz` run named checks and answer 200 "ok" or 500 listing the failures, in
controller-runtime's healthz format (`[+]name ok` / `[-]name failed`, the list shown on failure or with
`?verbose`). `/metrics` renders a prometheus-client registry. One server can serve all three, or two servers
can split health and metrics onto separate ports, as MAO's deployment does. A metrics server may be protected:
HTTPS with a serving certificate read from files (re-read when they change, as the service CA rotates them), and
every request let through only by a `MetricsAuth` (docs/architecture.md#protected-metrics).
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from .bounds import check_number
from .logging import get_logger
from .metrics_auth import MetricsAuth

Check = Callable[[], bool]


class ServingCert:
    """`tls.crt` and `tls.key` of a directory (a mounted kubernetes.io/tls Secret), loaded into a fresh TLS context
    whenever either file changes: a new connection after a rotation gets the new certificate, open ones keep theirs."""

    def __init__(self, cert_dir: str, cert_name: str = "tls.crt", key_name: str = "tls.key") -> None:
        self.cert_file = os.path.join(cert_dir, cert_name)
        self.key_file = os.path.join(cert_dir, key_name)
        self._lock = threading.Lock()
        self._stamp: tuple[float, float] | None = None
        self._context: ssl.SSLContext | None = None
        self.context()  # a missing or broken certificate is a start-up error, not a failure at the first scrape

    def context(self) -> ssl.SSLContext:
        with self._lock:
            try:
                stamp = (os.stat(self.cert_file).st_mtime, os.stat(self.key_file).st_mtime)
                if self._context is None or stamp != self._stamp:
                    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                    context.minimum_version = ssl.TLSVersion.TLSv1_2
                    context.load_cert_chain(self.cert_file, self.key_file)
                    self._context, self._stamp = context, stamp
            except (OSError, ssl.SSLError):
                if self._context is None:
                    raise
                # Caught in the middle of a rotation (a file missing, or a new key with the old certificate):
                # serve the pair loaded last, and look again at the next connection.
            return self._context


class _TlsHTTPServer(ThreadingHTTPServer):
    serving_cert: ServingCert

    def get_request(self) -> tuple[socket.socket, object]:
        sock, addr = super().get_request()
        # The handshake runs on the connection's own thread (first read), so a slow client never stalls accept().
        return self.serving_cert.context().wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that fails the handshake (plain HTTP, an unknown CA) or hangs up: its problem, one debug line.
        get_logger("server").debug("metrics connection failed", client=str(client_address))


class HealthServer:
    def __init__(
        self,
        host: str = "0.0.0.0",
        port: int = 9440,
        registry: CollectorRegistry | None = None,
        serve_health: bool = True,
        serve_metrics: bool = True,
        serving_cert: ServingCert | None = None,
        metrics_auth: MetricsAuth | None = None,
    ) -> None:
        check_number("HealthServer port", port, 0, 65535, integer=True, why="0 for any free port")
        self.healthz: dict[str, Check] = {"ping": lambda: True}
        self.readyz: dict[str, Check] = {"ping": lambda: True}
        self._registry = registry if registry is not None else REGISTRY
        self._serve_health = serve_health
        self._serve_metrics = serve_metrics
        self._metrics_auth = metrics_auth
        self._log = get_logger("server")
        if serving_cert is not None:
            tls = _TlsHTTPServer((host, port), self._handler_class())
            tls.serving_cert = serving_cert
            self._httpd: ThreadingHTTPServer = tls
        else:
            self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self._httpd.server_address[1])

    def add_healthz_check(self, name: str, check: Check) -> None:
        self.healthz[name] = check

    def add_readyz_check(self, name: str, check: Check) -> None:
        self.readyz[name] = check

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="health-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _run_checks(self, checks: dict[str, Check]) -> tuple[bool, str]:
        lines, healthy = [], True
        for name, check in list(checks.items()):
            try:
                ok = bool(check())
            except Exception as exc:  # noqa: BLE001 - a crashing check is a failing check
                self._log.warning("health check raised", check=name, error=str(exc))
                ok = False
            healthy &= ok
            lines.append(f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}")
        return healthy, "\n".join(lines)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if server._serve_metrics and url.path == "/metrics":
                    verdict = (server._metrics_auth.check(self.headers.get("Authorization"), "GET", url.path)
                               if server._metrics_auth is not None else None)
                    if verdict is not None and verdict.status != 200:
                        self._reply(verdict.status, f"{verdict.message}\n".encode(), "text/plain; charset=utf-8")
                    else:
                        self._reply(200, generate_latest(server._registry), CONTENT_TYPE_LATEST)
                elif server._serve_health and url.path in ("/healthz", "/readyz"):
                    checks = server.healthz if url.path == "/healthz" else server.readyz
                    healthy, detail = server._run_checks(checks)
                    verbose = "verbose" in parse_qs(url.query, keep_blank_values=True)
                    if healthy:
                        body = f"{detail}\n{url.path[1:]} check passed\n" if verbose else "ok"
                    else:
                        body = f"{detail}\n{url.path[1:]} check failed\n"
                    self._reply(200 if healthy else 500, body.encode(), "text/plain; charset=utf-8")
                else:
                    self._reply(404, b"not found\n", "text/plain; charset=utf-8")

            def _reply(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
                pass  # probes every few seconds would drown the JSON log

        return Handler
