"""Every instance of ovirt-csi-driver reports the same plugin capabilities, whichever services it serves: the CSI
spec's GetPluginCapabilities says so, and tools that ask the node instance (csi-sanity does) otherwise take another
path. Run in the split layout config/storage/csi deploys: a controller process and a node process."""

from __future__ import annotations

from hack.csi_host import CsiClient, node_host


def test_controller_and_node_processes_report_the_same_capabilities(tmp_path):
    with node_host(tmp_path, split=True) as host:
        assert host.endpoint != host.controller_endpoint
        answers = []
        for endpoint in (host.controller_endpoint, host.endpoint):
            csi = CsiClient(endpoint)
            try:
                answers.append(csi.identity.GetPluginCapabilities(csi.pb.GetPluginCapabilitiesRequest()))
            finally:
                csi.close()
    pb = csi.pb
    controller, node = ({c.SerializeToString() for c in a.capabilities} for a in answers)
    assert node == controller
    assert pb.PluginCapability.Service.CONTROLLER_SERVICE in {
        c.service.type for c in answers[1].capabilities if c.HasField("service")}
