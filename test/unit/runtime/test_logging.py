"""JSON lines on the configured stream, with bound context, and no secrets."""

from __future__ import annotations

import io
import json
import logging

import structlog

from machine_controller.runtime.logging import REDACTED, configure_logging, get_logger


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_each_event_is_one_json_line_with_bound_context() -> None:
    out = io.StringIO()
    configure_logging("info", stream=out)
    with structlog.contextvars.bound_contextvars(key="ns/m1", reconcile_id="abc", controller="machine"):
        get_logger("test").info("creating vm", vm="m1")
    get_logger("test").debug("hidden below info")
    [record] = lines(out)
    assert record["event"] == "creating vm"
    assert record["key"] == "ns/m1" and record["reconcile_id"] == "abc" and record["controller"] == "machine"
    assert record["level"] == "info" and "timestamp" in record


def test_values_under_secret_looking_keys_are_redacted_at_any_depth() -> None:
    out = io.StringIO()
    configure_logging("debug", stream=out)
    get_logger("test").info(
        "connecting",
        ovirt_password="hunter2",
        token="abc.def",
        url="https://engine/ovirt-engine/api",
        headers={"Authorization": "Bearer xyz", "Accept": "json"},
        secrets=[{"name": "s", "password": "p"}],
        config={"nested": {"api_key": "k", "user": "admin@internal"}},
    )
    [record] = lines(out)
    text = out.getvalue()
    for secret in ("hunter2", "abc.def", "Bearer xyz", '"p"', '"k"'):
        assert secret not in text
    assert record["ovirt_password"] == REDACTED and record["token"] == REDACTED
    assert record["headers"] == {"Authorization": REDACTED, "Accept": "json"}
    assert record["config"]["nested"] == {"api_key": REDACTED, "user": "admin@internal"}
    assert record["url"] == "https://engine/ovirt-engine/api"


def test_stdlib_logging_is_rendered_as_json_too() -> None:
    out = io.StringIO()
    configure_logging("info", stream=out)
    logging.getLogger("urllib3.connectionpool").warning("retrying, password=%s", "x")
    [record] = lines(out)
    assert record["event"].startswith("retrying") and record["level"] == "warning"
