"""One actuator per engine identity (ovirt/engines.py), for Cluster API's front end: made when first asked for,
kept while its Secret stays, its credentials swapped live when the Secret changes, replaced when the Secret names
another engine; a Secret missing or unusable is a MissingDependency naming it and its key. And the bootstrap data
Secret every engine's actuator reads (key `value`, `format` cloud-config or ignition)."""

from __future__ import annotations

import base64

import pytest
from kubernetes.client.exceptions import ApiException

from hack.ovirtsim.seed import CLUSTER_NAME, stable_id
from machine_controller.controllers.provider import EngineIdentity, InvalidMachineConfiguration, MissingDependency
from machine_controller.ovirt.connection import ConnectionPool
from machine_controller.ovirt.engines import OvirtEngines
from machine_controller.runtime.kube import SECRETS
from manual_clock import ManualClock

ID = EngineIdentity("capi-ns", "engine-a")


class _Secrets:
    """Duck-types `Rest.get` for Secrets, with resourceVersions; counts the reads."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict] = {}
        self.reads = 0
        self._rv = 1

    def put(self, namespace: str, name: str, **values: str) -> None:
        self._rv += 1
        self.objects[(namespace, name)] = {
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(self._rv)},
            "data": {k.replace("_", "."): base64.b64encode(v.encode()).decode() for k, v in values.items()}}

    def get(self, resource, name: str, namespace: str | None = None) -> dict:
        assert resource == SECRETS
        self.reads += 1
        if (namespace, name) not in self.objects:
            raise ApiException(status=404, reason="Not Found")
        return self.objects[(namespace, name)]


def engines(secrets: _Secrets, clock: ManualClock, pools: list | None = None) -> OvirtEngines:
    """`pools`: each engine's connection pool, in the order they were made."""
    def new_pool() -> ConnectionPool:
        pool = ConnectionPool(size=1)
        if pools is not None:
            pools.append(pool)
        return pool
    return OvirtEngines(secrets, keep_s=10.0, clock=clock, new_pool=new_pool)  # type: ignore[arg-type]


def test_an_engine_is_made_when_first_asked_for_and_kept_while_its_secret_stays():
    secrets, clock = _Secrets(), ManualClock()
    secrets.put("capi-ns", "engine-a", url="https://a.example/ovirt-engine/api", username="u@internal",
                password="p", insecure="true")
    e = engines(secrets, clock)
    assert secrets.reads == 0
    first = e.actuator(ID)
    assert e.actuator(ID) is first and secrets.reads == 1  # one read serves the calls of `keep_s`
    clock.t += 11
    assert e.actuator(ID) is first and secrets.reads == 2  # read again, unchanged: the same engine
    secrets.put("capi-ns", "engine-b", url="https://b.example/ovirt-engine/api", username="u", password="p",
                insecure="true")
    other = e.actuator(EngineIdentity("capi-ns", "engine-b"))
    assert other is not first and other.client is not first.client  # one engine per identity


def test_a_rotated_password_is_used_live_and_another_url_is_another_engine():
    secrets, clock = _Secrets(), ManualClock()
    secrets.put("capi-ns", "engine-a", url="https://a.example/ovirt-engine/api", username="u", password="old",
                insecure="true")
    pools: list[ConnectionPool] = []
    e = engines(secrets, clock, pools)
    first = e.actuator(ID)
    old_pool = pools[0]
    secrets.put("capi-ns", "engine-a", url="https://a.example/ovirt-engine/api", username="u", password="new",
                insecure="true")
    clock.t += 11
    assert e.actuator(ID) is first  # what the actuator knows of its VMs is kept
    assert old_pool.credentials.password == "new"
    secrets.put("capi-ns", "engine-a", url="https://c.example/ovirt-engine/api", username="u", password="new",
                insecure="true")
    clock.t += 11
    replaced = e.actuator(ID)
    assert replaced is not first and pools[1].credentials.url == "https://c.example/ovirt-engine/api"
    assert old_pool.credentials is None  # the old engine's connections are closed


def test_a_missing_secret_is_a_missing_dependency_naming_it_and_is_read_again_at_the_next_call():
    secrets, clock, pools = _Secrets(), ManualClock(), []
    e = engines(secrets, clock, pools)
    with pytest.raises(MissingDependency, match="capi-ns/engine-a not found"):
        e.actuator(ID)
    secrets.put("capi-ns", "engine-a", url="https://a.example/ovirt-engine/api", username="u", password="p",
                ca_crt="-----BEGIN CERTIFICATE-----\n")
    e.actuator(ID)
    creds = pools[0].credentials  # no wait for `keep_s`: an absent Secret is not kept
    assert creds.insecure is False and creds.ca_bundle.startswith("-----BEGIN")  # ca.crt without insecure


@pytest.mark.parametrize("values, key", [
    ({"username": "u", "password": "p", "insecure": "true"}, "key url is missing"),
    ({"url": "https://a/api", "username": "u", "password": "p", "insecure": "maybe"}, "key insecure must be"),
    ({"url": "a.example", "username": "u", "password": "p"}, "key url must be the engine's API URL"),
])
def test_an_unusable_secret_is_a_missing_dependency_naming_its_key(values, key):
    secrets, clock = _Secrets(), ManualClock()
    secrets.put("capi-ns", "engine-a", **values)
    with pytest.raises(MissingDependency, match=key):
        engines(secrets, clock).actuator(ID)


def test_missing_clusters_are_those_the_engine_has_not(sim_and_client):
    sim, _ = sim_and_client
    secrets, clock = _Secrets(), ManualClock()
    secrets.put("capi-ns", "engine-a", url=sim.url, username=sim.username, password=sim.password,
                ca_crt=open(sim.ca_file).read())
    e = engines(secrets, clock)
    try:
        present, absent = stable_id("cluster", CLUSTER_NAME), "9f1c2b7e-0000-4000-8000-0000000000ff"
        assert e.missing_clusters(ID, [present, absent, present]) == [absent]
    finally:
        e.close()


def _bootstrap(secrets: _Secrets, **values: str) -> str:
    secrets.objects[("capi-ns", "boot")] = {
        "metadata": {"name": "boot", "namespace": "capi-ns", "resourceVersion": "1"},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}}
    return engines(secrets, ManualClock()).bootstrap_data("capi-ns", "boot")


@pytest.mark.parametrize("fmt", [None, "cloud-config", "ignition"])
def test_bootstrap_data_is_the_value_key_in_either_format(fmt):
    values = {"value": "#cloud-config\n"} if fmt is None else {"value": "data", "format": fmt}
    assert _bootstrap(_Secrets(), **values) == values["value"]


def test_bootstrap_data_of_an_unknown_format_is_an_invalid_configuration_naming_the_machines_field():
    with pytest.raises(InvalidMachineConfiguration,
                       match=r"Machine spec\.bootstrap\.dataSecretName: Invalid value: 'boot': the format .* 'mime'"):
        _bootstrap(_Secrets(), value="x", format="mime")


@pytest.mark.parametrize("fmt, data", [("cloud-config", "#cloud-config\nruncmd: [true]\n"),
                                       ("ignition", '{"ignition": {"version": "3.2.0"}}')])
def test_the_bootstrap_data_becomes_the_vms_initialization_in_either_format(sim_and_client, fmt, data):
    """The engine takes both as the VM's initialization custom script: it gives it to cloud-init, or as the Ignition
    config to an Ignition OS (docs/compatibility.md#user-data). So one field carries both, as the Machine API's
    Ignition does."""
    from api.infrastructure import load_ovirt_machine_spec, to_provider_spec
    from api.machine import Machine
    from hack.ovirtsim.seed import KUBE_NODE_TEMPLATE_NAME

    sim, client = sim_and_client
    secrets = _Secrets()
    secrets.put("capi-ns", "engine-a", url=sim.url, username=sim.username, password=sim.password,
                ca_crt=open(sim.ca_file).read())
    secrets.objects[("capi-ns", "boot")] = {
        "metadata": {"name": "boot", "namespace": "capi-ns", "resourceVersion": "1"},
        "data": {"value": base64.b64encode(data.encode()).decode(), "format": base64.b64encode(fmt.encode()).decode()}}
    spec = load_ovirt_machine_spec({"template_name": KUBE_NODE_TEMPLATE_NAME, "type": "server",
                                    "cluster_id": stable_id("cluster", CLUSTER_NAME), "memory_mb": 1024,
                                    "cpu": {"sockets": 1, "cores": 1, "threads": 1}, "os_disk": {"size_gb": 20}})
    machine = Machine.from_dict({"metadata": {"name": f"om-{fmt}", "namespace": "capi-ns"},
                                 "spec": {"providerSpec": {"value": to_provider_spec(spec, "boot")}}})
    e = engines(secrets, ManualClock())
    try:
        progress = e.actuator(ID).provision(machine)
        vm = client.vm(progress.instance_id)
        assert vm.initialization.custom_script == data
        assert vm.initialization.host_name == f"om-{fmt}"
    finally:
        e.close()
