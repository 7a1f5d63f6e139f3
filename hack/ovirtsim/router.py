"""Path templates -> handlers, and the request/response shapes handlers see.

A template such as `/vms/{vm}/diskattachments/{disk}` is both the routing rule and the key of the request
counters (`GET /vms/{vm}/diskattachments/{disk}`), which benchmarks read.
"""

from __future__ import annotations

import re
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from ovirtsdk4 import types

from hack.ovirtsim import xmlio
from hack.ovirtsim.config import Timings
from hack.ovirtsim.errors import ApiError
from hack.ovirtsim.store import Store

_CORRELATION_STRIP = re.compile(r"[^0-9a-zA-Z_-]")


def correlation_id(headers: dict[str, str], query: dict[str, str]) -> str:
    """Header first, then query parameter, else random; stripped to [0-9a-zA-Z_-], max 36 chars
    (docs/compatibility.md#correlation-ids)."""
    raw = headers.get("correlation-id") or query.get("correlation_id") or str(uuid.uuid4())
    return _CORRELATION_STRIP.sub("", raw)[:36]


@dataclass
class ApiRequest:
    method: str
    path: str  # relative to the API prefix, e.g. /vms/123
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes
    params: dict[str, str] = field(default_factory=dict)
    template: str = ""
    correlation_id: str = ""
    action: Any = None  # the parsed `<action>` of an action endpoint
    job: Any = None  # the job a slow action started on its arrival (faults.FaultKind.SLOW); its handler's job

    def flag(self, name: str, default: bool = False) -> bool:
        """Boolean query parameter; present without a value means true (engine rule,
        docs/compatibility.md#simulator)."""
        if name not in self.query:
            return default
        value = self.query[name].strip().lower()
        return value in ("", "true", "1", "yes")

    def int_param(self, name: str) -> int | None:
        value = self.query.get(name)
        if value is None or value == "":
            return None
        try:
            return int(value)
        except ValueError:
            raise ApiError(400, "Invalid value",
                           f"Value '{value}' of parameter '{name}' isn't a valid integer") from None

    def parse(self, expected: type | None = None) -> Any:
        return xmlio.parse(self.body, expected)


@dataclass
class ApiResponse:
    status: int = 200
    body: str | bytes = b""
    content_type: str = "application/xml"
    headers: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def xml(text: str, status: int = 200, location: str | None = None) -> "ApiResponse":
        resp = ApiResponse(status, text)
        if location:
            resp.headers["Location"] = location
        return resp


class EngineView(Protocol):
    """What a handler (resources/) and the guests' node agent see of the engine: its store, its timings (replaced
    whole when the control API overrides them, so read through the engine each time) and its jobs. Here, beside
    the request and response, so that neither imports engine.py, which imports them to serve the routes."""

    store: Store
    timings: Timings

    def add_job(self, req: ApiRequest, description: str, duration: float = 0.0) -> types.Job: ...


Handler = Callable[[EngineView, ApiRequest], ApiResponse]


@dataclass
class Route:
    method: str
    template: str
    regex: re.Pattern[str]
    handler: Handler
    is_action: bool


class Router:
    def __init__(self) -> None:
        self.routes: list[Route] = []
        self._by_method: dict[str, list[Route]] = {}

    def route(self, method: str, template: str, action: bool = False) -> Callable[[Handler], Handler]:
        """Register a handler. `action=True` marks `POST .../<verb>` endpoints, whose faults are `<action>`s."""

        def register(handler: Handler) -> Handler:
            pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "/?$"
            r = Route(method, template, re.compile(pattern), handler, action)
            self.routes.append(r)
            self._by_method.setdefault(method, []).append(r)
            return handler

        return register

    def match(self, method: str, path: str) -> tuple[Route | None, dict[str, str]]:
        for r in self._by_method.get(method, ()):
            m = r.regex.match(path)
            if m:
                return r, {k: urllib.parse.unquote(v) for k, v in m.groupdict().items()}
        return None, {}

    def template_for(self, method: str, path: str) -> str | None:
        """The template of any method matching the path (for a 405 vs 404 decision)."""
        for r in self.routes:
            if r.regex.match(path):
                return r.template
        return None


ROUTES = Router()
route = ROUTES.route
