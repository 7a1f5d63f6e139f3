"""Health, readiness and metrics over HTTP on loopback."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from machine_controller.runtime.server import HealthServer


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def server():
    registry = CollectorRegistry()
    Counter("demo_things", "things", registry=registry).inc(3)
    srv = HealthServer("127.0.0.1", 0, registry=registry)
    srv.start()
    yield srv
    srv.stop()


def test_healthz_and_readyz_pass_when_checks_pass(server: HealthServer) -> None:
    base = f"http://127.0.0.1:{server.port}"
    assert fetch(base + "/healthz") == (200, "ok")
    assert fetch(base + "/readyz") == (200, "ok")
    status, body = fetch(base + "/readyz?verbose")
    assert status == 200 and "[+]ping ok" in body


def test_readyz_fails_until_the_check_passes_and_names_it(server: HealthServer) -> None:
    synced = {"value": False}
    server.add_readyz_check("informers-synced", lambda: synced["value"])
    base = f"http://127.0.0.1:{server.port}"
    status, body = fetch(base + "/readyz")
    assert status == 500 and "[-]informers-synced failed" in body
    assert fetch(base + "/healthz")[0] == 200, "liveness is independent of readiness"
    synced["value"] = True
    assert fetch(base + "/readyz") == (200, "ok")


def test_a_check_that_raises_counts_as_failed(server: HealthServer) -> None:
    server.add_healthz_check("engine", lambda: 1 / 0)
    status, body = fetch(f"http://127.0.0.1:{server.port}/healthz")
    assert status == 500 and "[-]engine failed" in body


def test_metrics_exposes_the_registry(server: HealthServer) -> None:
    status, body = fetch(f"http://127.0.0.1:{server.port}/metrics")
    assert status == 200
    assert "demo_things_total 3.0" in body


def test_unknown_path_is_404(server: HealthServer) -> None:
    assert fetch(f"http://127.0.0.1:{server.port}/nope")[0] == 404


def test_metrics_only_server_does_not_serve_health() -> None:
    srv = HealthServer("127.0.0.1", 0, registry=CollectorRegistry(), serve_health=False)
    srv.start()
    try:
        assert fetch(f"http://127.0.0.1:{srv.port}/healthz")[0] == 404
        assert fetch(f"http://127.0.0.1:{srv.port}/metrics")[0] == 200
    finally:
        srv.stop()
