"""csi-sanity, the CSI conformance suite (built from its Go module, hack/controlplane/csi_tools.py), against
ovirt-csi-driver on unix sockets with the simulator as its engine and loop devices as the node's disks
(hack/csi_host.py): every test it runs must pass, and every test it skips must be one of the reasons listed here,
all of them capabilities the driver does not advertise (docs/storage.md#csi-sanity). It runs for mount and for block
volumes against one process serving both sides; against the split layout config/storage/csi deploys (a controller
process and a node process, each on its own endpoint); and, for the Node tests, with staging and target paths the
mount table spells otherwise than the request (under a symlinked kubelet root, with spaces, a trailing slash).
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import pytest

from hack.controlplane.csi_tools import CSI_SANITY, build_tool
from hack.csi_host import Host, loop_devices_usable, node_host

# Skip message -> why the driver does not offer it.
EXPECTED_SKIPS = {
    "ListSnapshots not supported": "oVirt disk snapshots are not offered (no CREATE_DELETE_SNAPSHOT)",
    "GetSnapshot not supported": "no snapshots",
    "CreateSnapshot not supported": "no snapshots",
    "DeleteSnapshot not supported": "no snapshots",
    "Snapshot not supported": "no volumes from snapshots",
    "Volume Cloning not supported": "no CLONE_VOLUME",
    "GroupControllerService not supported": "no group snapshots",
    "ListVolumes not supported": "LIST_VOLUMES not advertised (the sidecars used here do not need it)",
    "ControllerGetVolumeHealth not supported": "no volume health monitoring",
    "ControllerListVolumeHealth not supported": "no volume health monitoring",
    "NodeGetVolumeHealth not supported": "no volume health monitoring",
    "NodeGetStorageHealth not supported": "no volume health monitoring",
    "ControllerModifyVolume not supported": "no MODIFY_VOLUME (VolumeAttributesClass)",
    "Modify volume not supported": "no MODIFY_VOLUME",
    "Modify Volume not supported": "no MODIFY_VOLUME",
    "Service does not have single node multi writer capability": "SINGLE_NODE_MULTI_WRITER not advertised",
    "testnodevolumeattachlimit not enabled": "NodeGetInfo sets no max_volumes_per_node",
    # Marked pending in csi-test itself, whatever the driver.
    "pending": "csi-test marks the ListVolumes pagination test pending",
}


@pytest.fixture(scope="module")
def sanity_binary():
    return build_tool(CSI_SANITY)


@pytest.fixture
def usable():
    why = loop_devices_usable()
    if why:
        pytest.skip(f"machine limitation: {why}")


def run_sanity(binary, tmp_path, host: Host, access_type: str, staging: str, mountdir: str,
               focus: str = "") -> list[ET.Element]:
    """csi-sanity's run against `host` (its Node tests on host.endpoint, its Controller tests on
    host.controller_endpoint), only the tests named with `focus` if given: the cases that passed, once every case is
    proven passed, or skipped for a listed reason, or (named without `focus`) left out."""
    params = tmp_path / "params.yaml"
    params.write_text("storageDomainName: nfs-data\nthinProvisioning: \"true\"\n")
    junit = tmp_path / "junit.xml"
    proc = subprocess.run(
        [str(binary), f"--csi.endpoint={host.endpoint}", f"--csi.controllerendpoint={host.controller_endpoint}",
         f"--csi.mountdir={mountdir}", f"--csi.stagingdir={staging}", f"--csi.testvolumesize={2**30}",
         f"--csi.testvolumeexpandsize={2 * 2**30}", f"--csi.testvolumeparameters={params}",
         f"--csi.testvolumeaccesstype={access_type}", f"--ginkgo.junit-report={junit}", "--ginkgo.no-color",
         *([f"--ginkgo.focus={focus}"] if focus else [])],
        capture_output=True, text=True, timeout=300)
    cases = list(ET.parse(junit).iter("testcase"))
    failed = [c.get("name") for c in cases if c.find("failure") is not None or c.find("error") is not None]
    assert proc.returncode == 0 and not failed, f"{failed}\n{proc.stdout[-6000:]}"
    skips = {c.get("name"): (c.find("skipped").get("message") or "").removeprefix("skipped - ")
             for c in cases if c.find("skipped") is not None}
    unexplained = {name: msg for name, msg in skips.items()
                   if msg not in EXPECTED_SKIPS and not (focus and focus not in name and msg == "skipped")}
    assert not unexplained, unexplained
    return [c for c in cases if all(e.tag in ("system-err", "system-out") for e in c)]


def _ran(passed: list[ET.Element], service: str) -> int:
    return sum(1 for c in passed if service in (c.get("name") or ""))


@pytest.mark.parametrize("access_type", ["mount", "block"])
def test_csi_sanity_passes(sanity_binary, usable, tmp_path, access_type):
    with node_host(tmp_path) as host:
        passed = run_sanity(sanity_binary, tmp_path, host, access_type, f"{tmp_path}/staging",
                               f"{tmp_path}/mnt")
    # Identity, Controller and Node (with the full lifecycle, 10 times over) all ran.
    assert len(passed) >= 50, len(passed)


@pytest.mark.parametrize("access_type", ["mount", "block"])
def test_csi_sanity_passes_split_layout(sanity_binary, usable, tmp_path, access_type):
    """The node process alone on csi-sanity's --csi.endpoint: it must report the controller service as the
    controller process does, or csi-sanity never publishes the volume to the node before staging it."""
    with node_host(tmp_path, split=True) as host:
        passed = run_sanity(sanity_binary, tmp_path, host, access_type, f"{tmp_path}/staging",
                            f"{tmp_path}/mnt")
    assert len(passed) >= 50 and _ran(passed, "Node Service") >= 20, len(passed)


@pytest.mark.parametrize("access_type", ["mount", "block"])
def test_csi_sanity_node_paths_under_symlink_with_spaces(sanity_binary, usable, tmp_path, access_type):
    """Only the Node tests: the paths matter to the node service alone."""
    (tmp_path / "kubelet root").mkdir()
    (tmp_path / "kubelet link").symlink_to(tmp_path / "kubelet root")
    kubelet = f"{tmp_path}/kubelet link"
    with node_host(tmp_path) as host:
        passed = run_sanity(sanity_binary, tmp_path, host, access_type, f"{kubelet}/staging dir/",
                               f"{kubelet}/pods dir", focus="Node Service")
    assert _ran(passed, "Node Service") >= 20 and len(passed) == _ran(passed, "Node Service"), len(passed)
