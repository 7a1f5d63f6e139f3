"""One pool of SDK connections, shared safely by every worker.

An `ovirtsdk4.Connection` drives a single libcurl handle and is not safe to use from two threads at once, so
workers borrow whole connections from the pool and give them back. Each connection keeps its SSO token and
its HTTP keep-alive, so a steady state costs no logins; the SDK itself logs in again on a 401.

Credentials are swapped live (the secret can be rotated without a restart, docs/compatibility.md#credentials):
`set_credentials` bumps a generation, idle connections of an older generation are closed at once, borrowed
ones when they come back.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from typing import Iterator

import ovirtsdk4 as sdk

from machine_controller.runtime.cluster_proxy import TRUSTED_CA_BUNDLE

from .credentials import OvirtCredentials
from .errors import TransientError

_SYSTEM_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


class NoCredentials(TransientError):
    """The credentials secret has not been read (yet): nothing can be asked of oVirt."""


class ConnectionPool:
    """`trusted_ca_bundle`: the cluster-wide CA bundle file, trusted beside the secret's CA when it exists (it is
    only there when mounted, docs/compatibility.md#cluster-wide-trust-and-proxy); "" trusts no such file."""

    def __init__(self, size: int = 4, timeout_s: int = 60, user_agent: str = "ovirt-machine-controller",
                 trusted_ca_bundle: str = TRUSTED_CA_BUNDLE):
        # Checked here, not only by the flag: with no connection to lend, every borrower waits forever.
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"ConnectionPool size must be an integer of at least 1, got {size!r} (with no "
                             "connection every request would wait forever)")
        if not isinstance(timeout_s, int) or timeout_s < 1:
            raise ValueError(f"ConnectionPool timeout_s must be an integer of at least 1 second, got {timeout_s!r} "
                             "(libcurl reads 0 as no timeout at all)")
        self._size = size
        self._trusted_ca_bundle = trusted_ca_bundle
        self._timeout = timeout_s
        self._headers = {"User-Agent": user_agent}
        self._cond = threading.Condition()
        self._idle: list[tuple[int, sdk.Connection]] = []
        self._borrowed = 0
        self._generation = 0
        self._creds: OvirtCredentials | None = None
        self._problem = "no oVirt credentials have been read yet"
        self._ca_path: str | None = None
        self._bundle_read: tuple[int, int, int] | None = None  # the cluster bundle as `_ca_path` holds it

    @property
    def credentials(self) -> OvirtCredentials | None:
        return self._creds

    def set_credentials(self, creds: OvirtCredentials | None, problem: str = "no oVirt credentials") -> bool:
        """Use these credentials from now on. Returns True when they differ from the current ones. With None,
        `problem` says why there are none (naming the secret and key), and every borrower is told so."""
        with self._cond:
            if creds is None:
                self._problem = problem
            if creds == self._creds:
                return False
            self._creds = creds
            stale = self._renew()
        _discard(*stale)
        return True

    @contextlib.contextmanager
    def connection(self) -> Iterator[sdk.Connection]:
        gen, conn = self._borrow()
        try:
            yield conn
        finally:
            self._give_back(gen, conn)

    def close(self) -> None:
        self.set_credentials(None)

    # --- internals ---------------------------------------------------------------------------------------------
    def _renew(self) -> tuple[list[tuple[int, sdk.Connection]], str | None]:
        """Under the lock: a new generation with the current credentials and the cluster bundle as it is now;
        returns the idle connections and the CA file of the old one, for `_discard` outside the lock."""
        self._generation += 1
        old_ca, self._ca_path = self._ca_path, None
        self._bundle_read = _file_identity(self._trusted_ca_bundle)
        if self._creds is not None:
            self._ca_path = self._write_ca(self._creds, self._trusted_ca_bundle)
        stale, self._idle = self._idle, []
        self._cond.notify_all()
        return stale, old_ca

    def _borrow(self) -> tuple[int, sdk.Connection]:
        # The mounted bundle is rewritten when the cluster's trusted CAs change: taken in by the next request
        # (docs/compatibility.md#cluster-wide-trust-and-proxy), at the cost of a stat per borrow.
        with self._cond:
            changed = self._creds is not None and _file_identity(self._trusted_ca_bundle) != self._bundle_read
            stale = self._renew() if changed else ([], None)
        _discard(*stale)
        return self._lend()

    def _lend(self) -> tuple[int, sdk.Connection]:
        with self._cond:
            while True:
                if self._creds is None:
                    raise NoCredentials(self._problem)
                if self._idle:
                    self._borrowed += 1
                    return self._idle.pop()
                if self._borrowed < self._size:
                    self._borrowed += 1
                    creds, gen, ca = self._creds, self._generation, self._ca_path
                    break
                self._cond.wait()
        try:
            return gen, self._open(creds, ca)
        except BaseException:
            with self._cond:
                self._borrowed -= 1
                self._cond.notify()
            raise

    def _give_back(self, gen: int, conn: sdk.Connection) -> None:
        with self._cond:
            self._borrowed -= 1
            keep = gen == self._generation
            if keep:
                self._idle.append((gen, conn))
            self._cond.notify()
        if not keep:
            _close_quietly(conn)

    def _open(self, creds: OvirtCredentials, ca_path: str | None) -> sdk.Connection:
        return sdk.Connection(
            url=creds.url,
            username=creds.username,
            password=creds.password,
            insecure=creds.insecure,
            ca_file=None if creds.insecure else ca_path,
            timeout=self._timeout,
            headers=self._headers,
        )

    @staticmethod
    def _write_ca(creds: OvirtCredentials, trusted_ca_bundle: str) -> str | None:
        """One CA file for libcurl: the secret's CA file and bundle, the cluster-wide bundle and the system roots,
        since OpenShift trusts them all (docs/compatibility.md#credentials and #cluster-wide-trust-and-proxy) and
        libcurl takes a single file. Written with mode 0600, again for new credentials or a changed bundle."""
        cluster_bundle = trusted_ca_bundle if trusted_ca_bundle and os.path.isfile(trusted_ca_bundle) else ""
        if creds.insecure or not (creds.ca_file or creds.ca_bundle or cluster_bundle):
            return None  # libcurl's own system roots
        parts: list[str] = []
        for path in (creds.ca_file, cluster_bundle, *_SYSTEM_CA_BUNDLES):
            if path and os.path.isfile(path):
                with open(path) as f:
                    parts.append(f.read())
        if creds.ca_bundle:
            parts.append(creds.ca_bundle)
        fd, path = tempfile.mkstemp(prefix="ovirt-ca-", suffix=".pem")
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(parts))
        return path


def _file_identity(path: str) -> tuple[int, int, int] | None:
    """What changes when a file is replaced or rewritten (a ConfigMap volume swaps a symlink): None if absent."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns) if st else None


def _discard(connections: list[tuple[int, sdk.Connection]], ca_path: str | None) -> None:
    for _, conn in connections:
        _close_quietly(conn)
    if ca_path:
        with contextlib.suppress(OSError):
            os.unlink(ca_path)


def _close_quietly(conn: sdk.Connection) -> None:
    with contextlib.suppress(Exception):
        conn.close(logout=False)
