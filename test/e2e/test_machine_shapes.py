"""Every provider-spec setting reaches the VM (docs/compatibility.md#provider-spec): a high_performance Machine
with NICs, hugepages, auto-pinning and disk format/sparse keeps its CPU topology and guaranteed memory, is
headless, and has exactly the requested NICs."""

from __future__ import annotations

import ovirtsdk4.types as types

from machines import unique_name


def test_high_performance_machine_gets_every_requested_setting(menv):
    conn = menv.sim.connection()
    try:
        profile = next(p for p in conn.system_service().vnic_profiles_service().list())
    finally:
        conn.close()
    menv.controller()
    name = menv.create_machine(
        unique_name("hp"), type="high_performance", cpu={"sockets": 2, "cores": 2, "threads": 2},
        memory_mb=8192, guaranteed_memory_mb=8192, hugepages=2048,
        network_interfaces=[{"vnic_profile_id": profile.id}, {"vnic_profile_id": profile.id}],
        clone=True, sparse=False, format="raw")
    m = menv.wait_phase(name, "Running", timeout=90)
    vm_id = m["metadata"]["annotations"]["VmId"]

    conn = menv.sim.connection()
    try:
        svc = conn.system_service().vms_service().vm_service(vm_id)
        vm = svc.get()
        assert vm.type == types.VmType.HIGH_PERFORMANCE
        t = vm.cpu.topology
        # Not lost to the CPU mode (docs/compatibility.md#go-provider-defects).
        assert (t.sockets, t.cores, t.threads) == (2, 2, 2)
        assert vm.cpu.mode == types.CpuMode.HOST_PASSTHROUGH
        assert vm.memory_policy.guaranteed == 8192 * 1024 * 1024 and vm.memory_policy.ballooning is False
        assert {(p.name, p.value) for p in vm.custom_properties or []} >= {("hugepages", "2048")}
        assert vm.soundcard_enabled is False and vm.console.enabled is True
        assert vm.placement_policy.affinity == types.VmAffinity.USER_MIGRATABLE
        assert svc.graphics_consoles_service().list() == []  # headless
        nics = sorted((n.name, n.vnic_profile.id) for n in svc.nics_service().list())
        assert nics == [("nic1", profile.id), ("nic2", profile.id)]
        for att in svc.disk_attachments_service().list():
            disk = conn.system_service().disks_service().disk_service(att.disk.id).get()
            assert disk.format == types.DiskFormat.RAW and disk.sparse is False
    finally:
        conn.close()


def test_auto_pinning_pins_to_the_clusters_hosts_and_resizes_to_them(menv):
    menv.controller()
    name = menv.create_machine(unique_name("pin"), auto_pinning_policy="resize_and_pin")
    m = menv.wait_phase(name, "Running", timeout=90)
    conn = menv.sim.connection()
    try:
        system = conn.system_service()
        vm = system.vms_service().vm_service(m["metadata"]["annotations"]["VmId"]).get()
        hosts = {h.id for h in system.hosts_service().list() if h.cluster.id == menv.inst.cluster_id}
        assert {h.id for h in vm.placement_policy.hosts} == hosts
        # resize_and_pin gives the VM the topology of its host (the engine's documented behaviour).
        assert (vm.cpu.topology.sockets, vm.cpu.topology.cores) != (1, 4)
    finally:
        conn.close()
    assert any(k.endswith("/autopincpuandnumanodes") for k in menv.sim.control.counts())


def test_an_invalid_auto_pinning_policy_is_an_invalid_configuration(menv):
    menv.controller()
    name = menv.create_machine(unique_name("pin"), auto_pinning_policy="adjust")
    m = menv.wait_phase(name, "Failed", timeout=60)
    assert "auto_pinning_policy" in m["status"]["errorMessage"]
    assert menv.vms_named(name) == []
