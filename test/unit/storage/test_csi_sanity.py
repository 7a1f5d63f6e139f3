"""csi-sanity, the CSI conformance suite (built from its Go module, hack/controlplane/csi_tools.py), against
ovirt-csi-driver on a unix socket with the simulator as its engine and loop devices as the node's disks
(hack/csi_host.py): every test it runs must pass, for mount and for block volumes, and every test it skips must be
one of the reasons listed here, all of them capabilities the driver does not advertise (docs/storage.md#csi-sanity).
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import pytest

from hack.controlplane.csi_tools import CSI_SANITY, build_tool
from hack.csi_host import loop_devices_usable, node_host

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


@pytest.mark.parametrize("access_type", ["mount", "block"])
def test_csi_sanity_passes(sanity_binary, tmp_path, access_type):
    why = loop_devices_usable()
    if why:
        pytest.skip(f"machine limitation: {why}")
    params = tmp_path / "params.yaml"
    params.write_text("storageDomainName: nfs-data\nthinProvisioning: \"true\"\n")
    junit = tmp_path / "junit.xml"
    with node_host(tmp_path) as (_sim, _vm, endpoint):
        proc = subprocess.run(
            [str(sanity_binary), f"--csi.endpoint={endpoint}", f"--csi.mountdir={tmp_path}/mnt",
             f"--csi.stagingdir={tmp_path}/staging", f"--csi.testvolumesize={2**30}",
             f"--csi.testvolumeexpandsize={2 * 2**30}", f"--csi.testvolumeparameters={params}",
             f"--csi.testvolumeaccesstype={access_type}", f"--ginkgo.junit-report={junit}", "--ginkgo.no-color"],
            capture_output=True, text=True, timeout=300)
    cases = list(ET.parse(junit).iter("testcase"))
    failed = [c.get("name") for c in cases if c.find("failure") is not None or c.find("error") is not None]
    assert proc.returncode == 0 and not failed, f"{failed}\n{proc.stdout[-6000:]}"
    skips = {c.get("name"): (c.find("skipped").get("message") or "").removeprefix("skipped - ")
             for c in cases if c.find("skipped") is not None}
    unexplained = {name: msg for name, msg in skips.items() if msg not in EXPECTED_SKIPS}
    assert not unexplained, unexplained
    passed = [c for c in cases if len(c) == 0 or all(e.tag == "system-err" or e.tag == "system-out" for e in c)]
    # Identity, Controller and Node (with the full lifecycle, 10 times over) all ran.
    assert len(passed) >= 50, len(passed)
