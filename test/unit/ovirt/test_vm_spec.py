import ovirtsdk4.types as types

from api.provider_spec import parse_provider_spec
from machine_controller.ovirt.vm_spec import GIB, MIB, Resolved, build_vm, os_disk_bytes

BASE = {"userDataSecret": {"name": "u"}, "cluster_id": "c1", "template_name": "t", "type": "server",
        "cpu": {"sockets": 2, "cores": 4, "threads": 1}, "memory_mb": 16384, "os_disk": {"size_gb": 120}}


def _vm(**extra):
    spec = parse_provider_spec({**BASE, **extra})
    return build_vm("worker-0", spec, '{"ignition":{"version":"3.2.0"}}', Resolved("tpl-1", ("d1", "d2"), ("h1",)))


def test_server_vm_carries_topology_memory_ignition_and_host_name():
    vm = _vm(guaranteed_memory_mb=8192)
    assert vm.name == "worker-0" and vm.cluster.id == "c1" and vm.template.id == "tpl-1"
    t = vm.cpu.topology
    assert (t.sockets, t.cores, t.threads) == (2, 4, 1)
    assert vm.memory == 16384 * MIB and vm.memory_policy.guaranteed == 8192 * MIB
    assert vm.initialization.custom_script.startswith('{"ignition"') and vm.initialization.host_name == "worker-0"
    assert vm.type == types.VmType.SERVER and vm.placement_policy.affinity == types.VmAffinity.MIGRATABLE
    assert vm.disk_attachments is None  # the template's disk settings apply


def test_high_performance_keeps_topology_and_guaranteed_memory():
    vm = _vm(type="high_performance", guaranteed_memory_mb=4096)
    assert vm.cpu.topology.sockets == 2 and vm.cpu.mode == types.CpuMode.HOST_PASSTHROUGH
    assert vm.memory_policy.guaranteed == 4096 * MIB and vm.memory_policy.ballooning is False
    assert vm.soundcard_enabled is False and vm.console.enabled is True
    assert vm.placement_policy.affinity == types.VmAffinity.USER_MIGRATABLE


def test_disk_settings_apply_to_every_template_disk():
    vm = _vm(sparse=False, format="raw", storage_domain_id="sd-9")
    assert [a.disk.id for a in vm.disk_attachments] == ["d1", "d2"]
    for a in vm.disk_attachments:
        assert a.disk.sparse is False and a.disk.format == types.DiskFormat.RAW
        assert [s.id for s in a.disk.storage_domains] == ["sd-9"]


def test_hugepages_instance_type_and_pinning_hosts():
    vm = build_vm("w", parse_provider_spec({**{k: v for k, v in BASE.items() if k not in ("cpu", "memory_mb")},
                                            "instance_type_id": "it-1", "hugepages": 2048}),
                  "{}", Resolved("tpl", (), ("h1", "h2")))
    assert vm.instance_type.id == "it-1" and vm.cpu is None and vm.memory is None
    assert [(p.name, p.value) for p in vm.custom_properties] == [("hugepages", "2048")]
    assert [h.id for h in vm.placement_policy.hosts] == ["h1", "h2"]
    assert os_disk_bytes(parse_provider_spec(BASE)) == 120 * GIB
