"""OpenShift's cluster-wide Proxy as a process sees it: the trusted CA bundle file and the proxy environment
(docs/compatibility.md#cluster-wide-trust-and-proxy).

machine-api-operator mounts the cluster's trusted CA bundle at `TRUSTED_CA_BUNDLE` and passes the Proxy as
HTTP_PROXY, HTTPS_PROXY and NO_PROXY. The Go provider's clients choose a proxy with Go's
`http.ProxyFromEnvironment`; `proxy_for` is that choice, so the Kubernetes client here goes where client-go would:
the upper-case variable before the lower-case one, a proxy without a scheme is `http://`, loopback and `localhost`
never through a proxy, and NO_PROXY entries that are `*`, an IP, a CIDR, a domain (itself and its subdomains), a
`.domain` or `*.domain` (subdomains only), each optionally with a `:port`.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import SplitResult, unquote, urlsplit

# Where machine-api-operator mounts the cluster's trusted CA bundle (its ConfigMap `mao-trusted-ca`, key
# `ca-bundle.crt`) in the provider's container.
TRUSTED_CA_BUNDLE = "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"

_DEFAULT_PORTS = {"http": "80", "https": "443"}


def existing_file(path: str | None) -> str | None:
    """`path` if it names a file, else None: the bundle is only there when mounted."""
    return path if path and os.path.isfile(path) else None


@dataclass(frozen=True)
class Proxy:
    """A proxy to send one URL's requests through: its URL without credentials, and the credentials (both
    percent-decoded) that the Proxy-Authorization header carries, as Go's transport sends them."""

    url: str
    username: str = ""
    password: str = ""


def proxy_for(url: str, environ: Mapping[str, str] | None = None) -> Proxy | None:
    """The proxy for requests to `url` by Go's ProxyFromEnvironment rules, or None to go direct."""
    env = os.environ if environ is None else environ
    target = urlsplit(url)
    scheme = target.scheme.lower()
    if scheme == "https":
        raw = _first(env, "HTTPS_PROXY", "https_proxy")
    elif scheme == "http" and "REQUEST_METHOD" not in env:  # Go ignores HTTP_PROXY under CGI (httpoxy)
        raw = _first(env, "HTTP_PROXY", "http_proxy")
    else:
        raw = ""
    if not raw:
        return None
    host = (target.hostname or "").lower()
    port = str(target.port) if target.port else _DEFAULT_PORTS.get(scheme, "")
    if not _use_proxy(host, port, _first(env, "NO_PROXY", "no_proxy")):
        return None
    proxy = urlsplit(raw)
    if proxy.scheme not in ("http", "https", "socks5", "socks5h") or not proxy.hostname:
        proxy = urlsplit("http://" + raw)  # Go's parseProxy: "proxy:3128" means http://proxy:3128
    bare = SplitResult(proxy.scheme, proxy.netloc.rpartition("@")[2], proxy.path, "", "").geturl()
    return Proxy(bare, unquote(proxy.username or ""), unquote(proxy.password or ""))


def libcurl_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables libcurl reads first (the lower-case ones), set so that it picks the proxy Go would.

    The oVirt SDK has no proxy parameter: libcurl reads the environment itself, with rules of its own. It reads
    https_proxy before HTTPS_PROXY and never an upper-case HTTP_PROXY; in its no_proxy a `*` counts only alone,
    `*.domain` and `host:port` entries match nothing, and loopback is proxied. So Go's choice of each variable is
    written under the lower-case name, with NO_PROXY's entries in libcurl's spelling and loopback added. Two
    differences remain: a `.domain` entry also matches the domain itself, and an entry's port is dropped (the entry
    holds for every port). Empty when no proxy is set."""
    env = os.environ if environ is None else environ
    https, http = _first(env, "HTTPS_PROXY", "https_proxy"), _first(env, "HTTP_PROXY", "http_proxy")
    if "REQUEST_METHOD" in env:
        http = ""
    if not (https or http):
        return {}
    out = {"https_proxy": https} if https else {}
    if http:
        out["http_proxy"] = http
    entries = ["localhost", "127.0.0.0/8", "::1"]
    for entry in (e.strip().lower() for e in _first(env, "NO_PROXY", "no_proxy").split(",")):
        if entry == "*":
            entries = ["*"]
            break
        if entry and "/" not in entry:
            entry = _split_host_port(entry)[0]
            entry = entry[1:] if entry.startswith("*.") else entry
        if entry:
            entries.append(entry)
    out["no_proxy"] = ",".join(entries)
    return out


def export_for_libcurl() -> None:
    """Write `libcurl_environment()` into this process's environment. Call it at start-up, before any thread runs:
    libcurl reads the environment at every transfer, and changing it while another thread reads it is unsafe."""
    os.environ.update(libcurl_environment())


def _first(env: Mapping[str, str], *names: str) -> str:
    for name in names:
        if env.get(name):
            return env[name]
    return ""


def _use_proxy(host: str, port: str, no_proxy: str) -> bool:
    if not host or host == "localhost":
        return host == ""  # Go: an empty address is proxied, localhost never
    ip = _ip(host)
    if ip is not None and ip.is_loopback:
        return False
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return False
        if "/" in entry:
            try:
                if ip is not None and ip in ipaddress.ip_network(entry, strict=False):
                    return False
            except ValueError:
                pass
            continue
        entry_host, entry_port = _split_host_port(entry)
        if entry_port and entry_port != port:
            continue
        entry_ip = _ip(entry_host)
        if entry_ip is not None:  # an IP entry matches that IP only, never a name
            if ip == entry_ip:
                return False
            continue
        if entry_host.startswith("*."):
            entry_host = entry_host[1:]
        if entry_host.startswith("."):
            if host.endswith(entry_host):  # subdomains only
                return False
        elif host == entry_host or host.endswith("." + entry_host):
            return False
    return True


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _split_host_port(entry: str) -> tuple[str, str]:
    """"host:port" or "[v6]:port" into its parts; a bare IPv6 address or a host has no port."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else ""
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, port
    return entry, ""
