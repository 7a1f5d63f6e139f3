"""The volume provisioner's input (machine_controller/storage/provisioner.py): a StorageClass's parameters and a
claim's access modes, volume mode, data source and storage request. Whatever they hold, provisioning either makes
one disk and its PV, well formed (a quoted search for the domain, a size in whole MiB within int64, the disk's UUID
in the PV), or stops with TerminalError after a ProvisioningFailed event saying what is wrong
(docs/compatibility.md#storage). The engine is the recording stand-in of engine.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from api.ids import is_ovirt_id
from machine_controller.runtime.controller import TerminalError
from machine_controller.storage.disks import MAX_DISK_BYTES, MIB, Disks
from machine_controller.storage.flexvolume import FS_TYPES, VOLUME_ID
from machine_controller.storage.metrics import StorageMetrics
from machine_controller.storage.provisioner import PROVISIONER, Provisioner, parse_params

from .engine import RecordingClient
from .strategies import INT64_MAX, json_values, texts

_PARAMETER_KEYS = ["storageDomainName", "ovirtStorageDomain", "thinProvisioning", "fsType",
                   "csi.storage.k8s.io/fstype"]
_parameters = st.dictionaries(
    st.sampled_from(_PARAMETER_KEYS) | texts,
    st.sampled_from(["nfs-data", "data domain", "true", "false", " FALSE ", "ext4", "XFS", "btrfs", "*", ""]) | texts,
    max_size=4)
_sizes = st.one_of(
    st.sampled_from(["1Gi", "10G", "1", "1500m", "0", "-1Gi", "8Ei", "9223372036854775807", "1e40", "0.5Ki", "1Gi ",
                     "9223372036853727233"]),
    st.integers(-(2**64), 2**64).map(str), texts, json_values)
_claim_specs = st.fixed_dictionaries({"resources": st.fixed_dictionaries({"requests": st.fixed_dictionaries(
    {}, optional={"storage": _sizes})})}, optional={
    "accessModes": st.lists(st.sampled_from(["ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany", "ReadWriteMany"])
                            | texts, max_size=2),
    "volumeMode": st.sampled_from(["Filesystem", "Block"]) | texts,
    "selector": st.just({"matchLabels": {"a": "b"}}),
    "dataSource": st.fixed_dictionaries({"kind": st.sampled_from(["PersistentVolumeClaim", "VolumeSnapshot", "Pop"]),
                                         "name": texts}),
})


class _Store(dict):
    pass


class _Events:
    def __init__(self) -> None:
        self.warnings: list[tuple[str, str]] = []

    def normal(self, obj, reason, message):
        pass

    def warning(self, obj, reason, message):
        self.warnings.append((reason, message))


class _Rest:
    def __init__(self) -> None:
        self.created: list[dict] = []

    def create(self, resource, body):
        self.created.append(body)


@given(_parameters, _claim_specs)
def test_a_claim_gets_one_well_formed_disk_and_pv_or_a_terminal_refusal(parameters, claim_spec):
    client, events, rest = RecordingClient(), _Events(), _Rest()
    pvc = {"metadata": {"namespace": "ns", "name": "data", "uid": "0000000a-000a-000a-000a-00000000000a"},
           "spec": {"storageClassName": "ovirt", **claim_spec}}
    sc = {"metadata": {"name": "ovirt"}, "provisioner": PROVISIONER, "parameters": parameters}
    provisioner = Provisioner(rest, Disks(client), _Store({"ns/data": pvc}), _Store(), _Store({"ovirt": sc}), events,
                              StorageMetrics(CollectorRegistry()))
    try:
        provisioner.provision("ns/data")
    except TerminalError as e:
        assert events.warnings == [("ProvisioningFailed", str(e))] and str(e)
        assert not client.requests.sizes and not rest.created
        return
    client.requests.well_formed()
    if not client.requests.sizes:
        # A data source of another kind is a volume populator's claim: left alone, as external-provisioner does.
        assert "dataSource" in claim_spec and not rest.created and not events.warnings
        return
    (size,) = client.requests.sizes
    assert size % MIB == 0 and 0 < size <= MAX_DISK_BYTES
    (pv,) = rest.created
    assert 0 < int(pv["spec"]["capacity"]["storage"]) <= INT64_MAX
    flex = pv["spec"]["flexVolume"]
    assert is_ovirt_id(flex["options"][VOLUME_ID]) and flex["fsType"] in FS_TYPES


@given(_parameters)
def test_storage_class_parameters_parse_or_are_refused_naming_the_parameter(parameters):
    try:
        domain, thin, fs = parse_params(parameters)
    except ValueError as e:
        assert "parameter" in str(e), e
        return
    assert domain in parameters.values() and fs in FS_TYPES and isinstance(thin, bool)
