"""A local HTTP CONNECT proxy for one test: what a cluster-wide proxy is to an HTTPS client (docs/compatibility.md
#cluster-wide-trust-and-proxy).

It listens on 127.0.0.1, tunnels `CONNECT host:port` to the target and counts the tunnels by target, so a test can
tell that a client went through it. Host names may be given addresses only the proxy knows (`hosts=`), which makes
the proxy the only way to such a name. With `credentials`, a CONNECT without them in a Basic
Proxy-Authorization header is answered 407, as an authenticating proxy does. Anything but CONNECT is refused with
405. It is bounded: at most `max_tunnels` tunnels in all, each closed after `idle_s` without traffic, and the whole
proxy stops by itself after `lifetime_s` if the test never stops it.
"""

from __future__ import annotations

import base64
import collections
import selectors
import socket
import socketserver
import threading
from typing import Self

_HEAD_LIMIT = 8192


class ConnectProxy:
    def __init__(self, hosts: dict[str, str] | None = None, credentials: tuple[str, str] | None = None,
                 max_tunnels: int = 256, idle_s: float = 30.0, lifetime_s: float = 600.0):
        self.hosts = dict(hosts or {})
        self._authorization = ("Basic " + base64.b64encode(":".join(credentials).encode()).decode()
                               if credentials else None)
        self.max_tunnels = max_tunnels
        self.idle_s = idle_s
        self.lifetime_s = lifetime_s
        self._lock = threading.Lock()
        self._connects: collections.Counter[str] = collections.Counter()
        self._refused: list[str] = []
        self._open: set[socket.socket] = set()
        self._server: socketserver.ThreadingTCPServer | None = None
        self._timer: threading.Timer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the proxy is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def connects(self, target: str | None = None) -> int:
        """How many CONNECTs were tunnelled (or answered 502), to `target` ("host:port") or in all."""
        with self._lock:
            return self._connects[target] if target else sum(self._connects.values())

    def targets(self) -> dict[str, int]:
        with self._lock:
            return dict(self._connects)

    @property
    def refused(self) -> list[str]:
        """The request lines refused (not CONNECT, over the bound, unparsable)."""
        with self._lock:
            return list(self._refused)

    def start(self) -> Self:
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        server.daemon_threads = True
        server.allow_reuse_address = True
        server.server_bind()
        server.server_activate()
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="connect-proxy",
                         daemon=True).start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            sockets, self._open = self._open, set()
        for s in sockets:
            _close(s)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- one client ---------------------------------------------------------------------------------------------
    def _serve(self, client: socket.socket) -> None:
        client.settimeout(self.idle_s)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < _HEAD_LIMIT:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
        except OSError:
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = line.partition(" ")
        target = rest.partition(" ")[0]
        host, sep, port = target.rpartition(":")
        authorized = self._authorization is None or self._authorization in _header_values(head, "proxy-authorization")
        with self._lock:
            over = sum(self._connects.values()) >= self.max_tunnels
            if method != "CONNECT" or not sep or not port.isdigit() or over or not authorized:
                self._refused.append(line)
                refuse = True
            else:
                self._connects[target] += 1
                refuse = False
        if refuse and not authorized:
            _reply(client, b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\n"
                           b"Content-Length: 0\r\nConnection: close\r\n\r\n")
            return
        if refuse:
            _reply(client, b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        address = self.hosts.get(host.strip("[]"), host.strip("[]"))
        try:
            upstream = socket.create_connection((address, int(port)), timeout=self.idle_s)
        except OSError:
            _reply(client, b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        with self._lock:
            self._open.update((client, upstream))
        try:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            extra = head.split(b"\r\n\r\n", 1)[1]
            if extra:
                upstream.sendall(extra)
            self._pump(client, upstream)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.difference_update((client, upstream))
            _close(upstream)

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        peer = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as sel:
            for s in peer:
                sel.register(s, selectors.EVENT_READ)
            while True:
                ready = sel.select(self.idle_s)
                if not ready:
                    return  # idle: the tunnel is closed, as a real proxy's idle timeout does
                for key, _ in ready:
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    peer[key.fileobj].sendall(data)  # type: ignore[index]


def _header_values(head: bytes, name: str) -> list[str]:
    values = []
    for line in head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name:
            values.append(value.strip())
    return values


def _reply(client: socket.socket, data: bytes) -> None:
    try:
        client.sendall(data)
    except OSError:
        pass


def _close(s: socket.socket) -> None:
    try:
        s.close()
    except OSError:
        pass
