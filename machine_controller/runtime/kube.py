"""A thin JSON-in/JSON-out path to the API server, shared by informers, leader election and events.

Why not the generated typed APIs: `kubernetes` 37 is built with OpenAPI Generator 7 (pydantic models). A round
trip through those models drops fields the client does not know (any CRD field, newer core fields) and costs a
validation pass per object, while the runtime wants plain dicts it can cache and diff. Every typed method ends in
`ApiClient.param_serialize` + `call_api`; calling those directly with a resource path gives the same
authentication, TLS and proxy handling for core and custom resources alike, with no model layer.
"""

from __future__ import annotations

import enum
import json
import ssl
from dataclasses import dataclass
from typing import Any, Iterator

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from .cluster_proxy import TRUSTED_CA_BUNDLE, existing_file, proxy_for

# (connect, read) seconds for ordinary requests; watches pass their own read timeout.
DEFAULT_REQUEST_TIMEOUT: tuple[float, float] = (10.0, 30.0)


@dataclass(frozen=True)
class Resource:
    """One REST collection: `group=""` is the core group (`/api/v1`), anything else is under `/apis`."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod")
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")


def object_key(obj: dict[str, Any]) -> str:
    """client-go's MetaNamespaceKeyFunc: `namespace/name`, or just `name` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def split_key(key: str) -> tuple[str | None, str]:
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else (None, namespace)


class ErrorKind(enum.Enum):
    """What a caller should do about an API error, decided here once: reconcilers ask `classify(e)` (or the
    `is_*` helpers) and never compare status codes by hand (docs/architecture.md#error-handling)."""

    CONFLICT = "conflict"  # 409: re-read and retry (optimistic concurrency lost)
    ALREADY_EXISTS = "already_exists"  # 409 on create
    NOT_FOUND = "not_found"  # 404
    GONE = "gone"  # 410: resourceVersion or continue token compacted away; relist
    INVALID = "invalid"  # 400/422 and other 4xx: the request as written will never be accepted
    FORBIDDEN = "forbidden"  # 401/403: the identity may not do this (RBAC, expired credentials)
    TOO_MANY_REQUESTS = "too_many_requests"  # 429: an eviction refused by a PodDisruptionBudget, or throttling
    TRANSIENT = "transient"  # 5xx, connection errors, timeouts


def classify(exc: BaseException) -> ErrorKind:
    if isinstance(exc, ApiException):
        status = exc.status or 0
        if status == 409:
            return ErrorKind.ALREADY_EXISTS if _reason(exc) == "AlreadyExists" else ErrorKind.CONFLICT
        if status == 404:
            return ErrorKind.NOT_FOUND
        if status == 410:
            return ErrorKind.GONE
        if status in (401, 403):
            return ErrorKind.FORBIDDEN
        if status == 429:
            return ErrorKind.TOO_MANY_REQUESTS
        if status >= 500 or status == 0:
            return ErrorKind.TRANSIENT
        return ErrorKind.INVALID
    return ErrorKind.TRANSIENT


def is_not_found(exc: BaseException) -> bool:
    return classify(exc) is ErrorKind.NOT_FOUND


def is_conflict(exc: BaseException) -> bool:
    """A write lost to a newer version of the object (409 Conflict, not AlreadyExists): re-read and retry."""
    return classify(exc) is ErrorKind.CONFLICT


def _reason(exc: ApiException) -> str | None:
    try:
        reason = json.loads(exc.body or "{}").get("reason")
        return str(reason) if reason is not None else None
    except (ValueError, AttributeError):
        return None


def load_api_client(
    kubeconfig: str | None = None, context: str | None = None, pool_maxsize: int = 32, user_agent: str | None = None,
    trusted_ca_bundle: str | None = TRUSTED_CA_BUNDLE,
) -> k8s_client.ApiClient:
    """An ApiClient from a kubeconfig path, else the in-cluster service account.

    The pool is sized for N workers plus one long-lived watch connection per informer; urllib3's default
    (cpu_count * 5) can starve workers behind open watches on a small node. `user_agent` names the component: the
    API server records its first word as the field manager of every write (metadata.managedFields), which is how a
    reader tells which controller wrote what (docs/architecture.md#deployment-modes). `trusted_ca_bundle`: the
    cluster-wide CA bundle, used where client-go would use the system roots (see `_as_client_go_would`).
    """
    configuration = k8s_client.Configuration()
    if kubeconfig:
        k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    else:
        k8s_config.load_incluster_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = pool_maxsize
    _as_client_go_would(configuration, existing_file(trusted_ca_bundle))
    client = k8s_client.ApiClient(configuration)
    if user_agent:
        client.user_agent = user_agent
    return client


def _as_client_go_would(configuration: k8s_client.Configuration, trusted_ca_bundle: str | None) -> None:
    """The proxy and trust client-go's transport would use (docs/compatibility.md#cluster-wide-trust-and-proxy).

    The client's own reading of the proxy environment differs from Go's (the lower-case variable first, proxy
    credentials in the URL never sent, a proxy without a scheme refused, loopback proxied), so the choice is made
    here by `proxy_for`, for the one API server this client talks to. Go verifies a server with the system roots
    when the configuration names no CA, and an HTTPS proxy always with them; on the images MAO runs, those roots are
    the mounted cluster bundle."""
    proxy = proxy_for(configuration.host)
    configuration.proxy = proxy.url if proxy else None  # set explicitly: the client reads the environment no more
    configuration.no_proxy = None
    if proxy and (proxy.username or proxy.password):
        configuration.proxy_headers = urllib3.make_headers(proxy_basic_auth=f"{proxy.username}:{proxy.password}")
    if proxy and proxy.url.startswith("https:"):
        configuration.proxy_ssl_context = ssl.create_default_context(cafile=trusted_ca_bundle)
    if trusted_ca_bundle and configuration.verify_ssl and not (configuration.ssl_ca_cert or configuration.ca_cert_data):
        configuration.ssl_ca_cert = trusted_ca_bundle


class Rest:
    """Raw JSON requests through an ApiClient (see the module docstring for why)."""

    def __init__(self, api_client: k8s_client.ApiClient, timeout: tuple[float, float] = DEFAULT_REQUEST_TIMEOUT):
        self.api_client = api_client
        self.timeout = timeout

    def _send(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Any = None,
    ) -> Any:
        """Send and return the raw urllib3 response (status already checked)."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        request = self.api_client.param_serialize(
            method, path, query_params=params, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        response = self.api_client.call_api(*request, _request_timeout=timeout or self.timeout)
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response

    def request(self, method: str, path: str, query: dict[str, Any] | None = None, body: Any = None,
                content_type: str = "application/json") -> dict[str, Any]:
        response = self._send(method, path, query, body, content_type)
        data = response.read()
        return json.loads(data) if data else {}

    def open_stream(self, path: str, query: dict[str, Any], read_timeout: float) -> "Stream":
        """A long-lived GET (a watch) read line by line; `Stream.close()` may be called from another thread."""
        response = self._send("GET", path, query, timeout=(self.timeout[0], read_timeout))
        return Stream(response.response)

    # Small verbs used across the runtime.
    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.request("GET", resource.path(namespace, name))

    def create(self, resource: Resource, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        return self.request("POST", resource.path(namespace), body=body)

    def replace(self, resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        return self.request("PUT", resource.path(meta.get("namespace"), meta["name"]), body=body)

    def merge_patch(self, resource: Resource, name: str, patch: dict[str, Any], namespace: str | None = None,
                    subresource: str | None = None) -> dict[str, Any]:
        return self.request("PATCH", resource.path(namespace, name, subresource), body=patch,
                            content_type="application/merge-patch+json")

    def delete(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.request("DELETE", resource.path(namespace, name))


class Stream:
    def __init__(self, raw: Any) -> None:
        self._raw = raw  # a urllib3 HTTPResponse

    def lines(self) -> Iterator[bytes]:
        buffer = b""
        for chunk in self._raw.stream(amt=None, decode_content=True):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield line
        if buffer.strip():
            yield buffer

    def close(self) -> None:
        # shutdown() (urllib3 >= 2.3) unblocks a read in progress in another thread; close() alone would wait
        # for the server's next byte, which on a quiet watch may be minutes away.
        try:
            shutdown = getattr(self._raw, "shutdown", None)
            if shutdown is not None:
                shutdown()
            self._raw.close()
            self._raw.release_conn()
        except Exception:  # noqa: BLE001 - closing a broken connection may fail; it is closed either way
            pass

