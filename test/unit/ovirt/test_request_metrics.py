"""The engine request metrics the alerts of config/monitoring read: counted by the client method that asked and by
the outcome `errors.classify` gave, against the simulated engine (its fault rules make the failures)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from machine_controller.ovirt.client import OvirtClient
from machine_controller.ovirt.connection import NoCredentials
from machine_controller.ovirt.errors import (
    AuthenticationError,
    ConflictError,
    NotFoundError,
    OvirtError,
    TransientError,
)
from machine_controller.ovirt.request_metrics import OUTCOMES, RequestMetrics, outcome


def _count(registry: CollectorRegistry, operation: str, result: str) -> float:
    return registry.get_sample_value("ovirt_engine_requests_total", {"operation": operation, "outcome": result}) or 0.0


@pytest.fixture
def metered(sim_and_client):
    sim, plain = sim_and_client
    registry = CollectorRegistry()
    return sim, OvirtClient(plain.pool, attempts=3, max_wait_s=0.01, metrics=RequestMetrics.of(registry)), registry


def test_each_request_is_counted_under_the_method_that_sent_it_with_its_outcome(metered):
    sim, client, registry = metered
    assert client.product_version()[0] == 4
    assert client.vm("00000000-0000-0000-0000-000000000000") is None  # a 404 the client answers with None
    assert _count(registry, "product_version", "ok") == 1
    assert _count(registry, "vm", "not_found") == 1
    # The operation label never carries the request's object: one series per method, whatever VM it names.
    labels = {s.labels["operation"] for m in registry.collect() for s in m.samples
              if s.name == "ovirt_engine_requests_total"}
    assert labels == {"product_version", "vm"}
    count = registry.get_sample_value("ovirt_engine_request_duration_seconds_count", {"operation": "vm"})
    assert count == 1


def test_every_retried_attempt_counts_and_a_caller_through_call_is_named(metered):
    sim, client, registry = metered
    sim.control.inject_fault("/hosts", method="GET", status=503, count=2)

    def list_the_hosts() -> list:
        return client.call("list hosts", lambda s: s.hosts_service().list())
    list_the_hosts()  # two 503s, then the answer: three requests sent
    assert _count(registry, "list_the_hosts", "transient") == 2
    assert _count(registry, "list_the_hosts", "ok") == 1


def test_a_refused_power_action_is_one_conflict(metered):
    sim, client, registry = metered
    sim.control.inject_fault("/vms/*/stop", method="POST", status=409, count=None)
    with pytest.raises(ConflictError):
        client.stop_vm("00000000-0000-0000-0000-000000000001", correlation_id="test-stop")
    assert _count(registry, "stop_vm", "conflict") == 1


@pytest.mark.parametrize("err, expected", [
    (NoCredentials("no secret"), "no_credentials"), (ConflictError("409"), "conflict"),
    (TransientError("timeout"), "transient"), (NotFoundError("404"), "not_found"),
    (AuthenticationError("401"), "unauthorized"), (OvirtError("?"), "error"), (ValueError("bug"), "error"),
    (None, "ok")])
def test_outcomes_take_the_most_specific_class(err, expected):
    assert outcome(err) == expected and expected in OUTCOMES
