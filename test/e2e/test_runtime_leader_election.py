"""Lease-based leader election between two candidates on a real API server."""

from __future__ import annotations

import threading
import time

import pytest

from machine_controller.runtime.kube import LEASES, Rest
from machine_controller.runtime.leader_election import LeaderElectionConfig, LeaderElector
from machine_controller.runtime.testing import wait_until

# Short, configurable durations; the bounds asserted below are derived from them, never from wall-clock speed.
LEASE, RENEW, RETRY = 4.0, 3.0, 0.5


class Candidate:
    def __init__(self, cluster, namespace: str, identity: str) -> None:
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.elector = LeaderElector(
            cluster.api_client(),
            LeaderElectionConfig(namespace, "runtime-e2e", identity, LEASE, RENEW, RETRY),
            on_started_leading=self.started.set,
            on_stopped_leading=self.stopped.set,
        )


@pytest.fixture
def candidates(cluster, namespace):
    made: list[Candidate] = []

    def make(identity: str) -> Candidate:
        candidate = Candidate(cluster, namespace, identity)
        made.append(candidate)
        candidate.elector.start()
        return candidate

    yield make
    for candidate in made:
        candidate.elector.stop(release=False, timeout=2)


def lease_spec(cluster, namespace: str) -> dict:
    return Rest(cluster.api_client()).get(LEASES, "runtime-e2e", namespace)["spec"]


def test_exactly_one_of_two_candidates_leads(cluster, namespace, candidates):
    a, b = candidates("a"), candidates("b")
    assert wait_until(lambda: a.elector.is_leader() or b.elector.is_leader(), timeout=5 * RETRY + 10)
    # Over several renew periods, never both and never neither.
    for _ in range(20):
        assert a.elector.is_leader() != b.elector.is_leader()
        time.sleep(RETRY / 4)
    leader = a if a.elector.is_leader() else b
    spec = lease_spec(cluster, namespace)
    assert spec["holderIdentity"] == leader.elector.config.identity
    assert spec["leaseDurationSeconds"] == int(LEASE)
    assert spec["acquireTime"] and spec["renewTime"]
    assert leader.started.is_set() and not leader.stopped.is_set()


def test_release_on_shutdown_hands_over_at_the_next_retry(cluster, namespace, candidates):
    a = candidates("a")
    assert a.started.wait(10)
    b = candidates("b")
    time.sleep(2 * RETRY)
    assert not b.elector.is_leader(), "a valid lease is respected"
    transitions = lease_spec(cluster, namespace)["leaseTransitions"]

    a.elector.stop(release=True)
    assert a.stopped.is_set()
    released = lease_spec(cluster, namespace)
    assert released["holderIdentity"] in ("", None, "b")
    # Released: b takes over at its next retry, well before a lease duration would have run out.
    assert wait_until(b.elector.is_leader, timeout=RETRY * 1.2 + 5)
    spec = lease_spec(cluster, namespace)
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == transitions + 1


def test_a_leader_that_stops_renewing_is_replaced_after_the_lease_expires(cluster, namespace, candidates):
    a = candidates("a")
    assert a.started.wait(10)
    b = candidates("b")
    assert not b.elector.is_leader()
    stopped_at = time.monotonic()
    a.elector.stop(release=False)  # as if the process died: the lease is left to expire
    assert wait_until(b.elector.is_leader, timeout=LEASE + 3 * RETRY + 5)
    # b measures expiry from when *it* last saw the record change (<= one retry before a stopped), so it cannot
    # have taken over sooner than a lease duration minus that retry.
    assert time.monotonic() - stopped_at >= LEASE - RETRY * 1.2
    spec = lease_spec(cluster, namespace)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


def test_a_leader_that_cannot_renew_within_the_deadline_stops_leading(cluster, namespace, candidates):
    a = candidates("a")
    assert a.started.wait(10)
    # Someone else grabs the Lease with a long duration (a split brain from a's point of view): a's renewals
    # are refused, and after the renew deadline it must step down on its own.
    Rest(cluster.api_client()).merge_patch(LEASES, "runtime-e2e", {"spec": {
        "holderIdentity": "intruder", "leaseDurationSeconds": 3600}}, namespace)
    lost_by = time.monotonic()
    assert a.stopped.wait(RENEW + 2 * RETRY + 5)
    assert not a.elector.is_leader()
    assert time.monotonic() - lost_by >= RENEW - RETRY * 1.2, "not before the renew deadline"
    assert lease_spec(cluster, namespace)["holderIdentity"] == "intruder"
