"""A Machine's Ignition text: read from its user-data Secret, kept for a burst of creates, never kept when the
Secret is missing or refused (docs/compatibility.md#user-data)."""

from __future__ import annotations

import base64
import threading

import pytest
from kubernetes.client.exceptions import ApiException

from machine_controller.controllers.provider import InvalidMachineConfiguration
from machine_controller.ovirt.cluster_inputs import UserData
from machine_controller.ovirt.errors import MissingDependencyError
from machine_controller.runtime.kube import SECRETS
from manual_clock import ManualClock


class _Secrets:
    """Duck-types `Rest.get` for Secrets: counts the reads, answers 404 for a Secret it does not hold."""

    def __init__(self) -> None:
        self.data: dict[tuple[str, str], dict[str, str]] = {}
        self.reads = 0
        self.gate: threading.Event | None = None

    def put(self, namespace: str, name: str, text: bytes | None) -> None:
        self.data[(namespace, name)] = {} if text is None else {"userData": base64.b64encode(text).decode()}

    def get(self, resource, name: str, namespace: str | None = None) -> dict:
        assert resource == SECRETS
        self.reads += 1
        if self.gate is not None:
            self.gate.wait(2)
        if (namespace, name) not in self.data:
            raise ApiException(status=404, reason="Not Found")
        return {"metadata": {"name": name, "namespace": namespace}, "data": self.data[(namespace, name)]}


def test_a_burst_of_creates_reads_the_secret_once_and_a_changed_secret_after_the_keep_time():
    secrets, clock = _Secrets(), ManualClock()
    secrets.put("ns", "worker-user-data", b'{"ignition": {"version": "3.2.0"}}')
    user_data = UserData(secrets, keep_s=10, clock=clock)
    assert {user_data("ns", "worker-user-data") for _ in range(100)} == {'{"ignition": {"version": "3.2.0"}}'}
    assert secrets.reads == 1

    secrets.put("ns", "worker-user-data", b'{"ignition": {"version": "3.4.0"}}')
    clock.t += 9.9
    assert user_data("ns", "worker-user-data") == '{"ignition": {"version": "3.2.0"}}'
    clock.t += 0.2
    assert user_data("ns", "worker-user-data") == '{"ignition": {"version": "3.4.0"}}'
    assert secrets.reads == 2


def test_each_secret_is_kept_apart_by_namespace_and_name():
    secrets = _Secrets()
    secrets.put("a", "worker-user-data", b"worker a")
    secrets.put("b", "worker-user-data", b"worker b")
    secrets.put("a", "infra-user-data", b"infra a")
    user_data = UserData(secrets, clock=ManualClock())
    assert [user_data("a", "worker-user-data"), user_data("b", "worker-user-data"),
            user_data("a", "infra-user-data"), user_data("a", "worker-user-data")] == [
        "worker a", "worker b", "infra a", "worker a"]
    assert secrets.reads == 3


@pytest.mark.parametrize("text, error", [
    (None, MissingDependencyError),  # the Secret is absent
    (b"", MissingDependencyError),  # no userData key
    (b"\xff\xfe", InvalidMachineConfiguration),  # not UTF-8
    (b"ignition\x01", InvalidMachineConfiguration),  # a control character the engine's XML cannot carry
])
def test_a_missing_or_refused_secret_is_read_again_at_the_next_create_so_the_fix_is_seen_at_once(text, error):
    secrets = _Secrets()
    if text is not None:
        secrets.put("ns", "worker-user-data", text or None)
    user_data = UserData(secrets, clock=ManualClock())
    for _ in range(2):
        with pytest.raises(error):
            user_data("ns", "worker-user-data")
    assert secrets.reads == 2

    secrets.put("ns", "worker-user-data", b"fixed")
    assert user_data("ns", "worker-user-data") == "fixed"
    assert secrets.reads == 3


def test_workers_creating_together_share_one_read():
    secrets = _Secrets()
    secrets.put("ns", "worker-user-data", b"ignition")
    secrets.gate = threading.Event()
    user_data = UserData(secrets, clock=ManualClock())
    seen: list[str] = []
    threads = [threading.Thread(target=lambda: seen.append(user_data("ns", "worker-user-data"))) for _ in range(8)]
    for t in threads:
        t.start()
    secrets.gate.set()
    for t in threads:
        t.join(5)
    assert seen == ["ignition"] * 8
    assert secrets.reads == 1
