"""Structured logs: one JSON object per line on stderr, with the bound context (controller, key, reconcile_id)
merged into every line, and secrets blanked before anything is rendered."""

from __future__ import annotations

import logging
import re
import sys
from typing import Any, MutableMapping, TextIO

import structlog

REDACTED = "***"

# Matched against dict keys (case-insensitive, anywhere in the key): `ovirt_password`, `Authorization`,
# `bearer_token`, `client-secret`... A false positive only hides a value from a log line; a miss leaks a credential.
_SECRET_KEY = re.compile(r"passw(or)?d|secret|token|authorization|credential|api[_-]?key|cookie",
                         re.IGNORECASE)


def _redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and _SECRET_KEY.search(k) else _redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_redact(v) for v in value)
    return value


def redact_secrets(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: blank every value whose key looks secret, at any depth of nested dicts/lists."""
    for key in list(event_dict):
        if _SECRET_KEY.search(key):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = _redact(event_dict[key])
    return event_dict


# The levels every tool's --log-level offers (config.py, storage/csi/server.py).
LOG_LEVELS = ("debug", "info", "warning", "error")


def configure_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Route structlog (and stdlib logging, e.g. urllib3's warnings) to JSON lines on `stream` (stderr)."""
    out = stream if stream is not None else sys.stderr
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
        structlog.processors.format_exc_info,
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    # Third-party libraries log through stdlib logging; render them the same way so every line is JSON.
    handler = logging.StreamHandler(out)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processor=structlog.processors.JSONRenderer(),
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(numeric, logging.WARNING))


def get_logger(name: str, **bound: Any) -> Any:
    return structlog.get_logger(name).bind(logger=name, **bound)
