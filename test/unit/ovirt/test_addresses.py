import ovirtsdk4.types as types

from machine_controller.ovirt.addresses import machine_addresses, usable_ips
from machine_controller.ovirt.vm_list_reader import ListedDevice, ListedIp


def _dev(name, *ips):
    return types.ReportedDevice(name=name, type=types.ReportedDeviceType.NETWORK,
                                ips=[types.Ip(address=a) for a in ips])


def test_excludes_loopback_link_local_and_vips_and_orders_deterministically():
    devices = [
        _dev("lo", "127.0.0.1", "::1"),
        _dev("eth1", "192.168.1.20", "fe80::2"),
        _dev("eth0", "2001:db8::5", "10.0.0.7", "10.0.0.100", "fe80::1"),
        _dev("docker0", "172.17.0.1"),
    ]
    ips = usable_ips(devices, excluded={"10.0.0.100"})
    assert ips == ["10.0.0.7", "2001:db8::5", "192.168.1.20"]
    assert usable_ips(list(reversed(devices)), excluded={"10.0.0.100"}) == ips
    # The same from a VM as its cluster's list keeps it (cluster_vm_lists.py).
    listed = [ListedDevice(d.name, d.type, tuple(ListedIp(ip.address) for ip in d.ips)) for d in devices]
    assert usable_ips(listed, excluded={"10.0.0.100"}) == ips


def test_br_ex_counts_for_ovn_kubernetes():
    assert usable_ips([_dev("br-ex", "10.1.2.3")], set()) == ["10.1.2.3"]


def test_no_report_gives_no_address_never_an_empty_one():
    assert usable_ips([], set()) == []
    addrs = machine_addresses("worker-0", [])
    assert [(a.type, a.address) for a in addrs] == [("InternalDNS", "worker-0")]
