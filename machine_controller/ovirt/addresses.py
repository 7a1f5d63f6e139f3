"""Machine addresses from the guest agent's reported devices (docs/compatibility.md#status).

The Go actuator took the first IP of a random interface, kept IPv6 link-local and wrote an empty InternalIP
when nothing was reported. Here: every usable address, in a stable order, never an empty one.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Iterable

import ovirtsdk4.types as types

from api.meta import AddressType, NodeAddress

# eth*/en* are RHCOS's NIC names; with OVN-Kubernetes the node IP moves to br-ex (BZ 1984481).
_INTERFACE = re.compile(r"^(eth|en|br-ex)")


def usable_ips(devices: Iterable[types.ReportedDevice], excluded: set[str]) -> list[str]:
    """Guest IPs a Node can be reached at: no loopback, no link-local, not the API/ingress VIPs.
    Ordered by interface name, IPv4 before IPv6, then as reported: the same answer every time."""
    found: list[tuple[str, int, int, str]] = []
    for dev in devices:
        if dev.type is not None and dev.type != types.ReportedDeviceType.NETWORK:
            continue
        if not dev.name or not _INTERFACE.match(dev.name):
            continue
        for i, ip in enumerate(dev.ips or []):
            if not ip.address:
                continue
            try:
                addr = ipaddress.ip_address(ip.address.split("%")[0])
            except ValueError:
                continue
            if addr.is_loopback or addr.is_link_local or addr.is_unspecified or str(addr) in excluded:
                continue
            found.append((dev.name, addr.version, i, str(addr)))
    seen: set[str] = set()
    ordered = []
    for _, _, _, ip in sorted(found):
        if ip not in seen:
            seen.add(ip)
            ordered.append(ip)
    return ordered


def machine_addresses(vm_name: str, ips: list[str]) -> list[NodeAddress]:
    # InternalDNS = the VM (= Machine = Node) name: cluster-machine-approver matches kubelet CSRs on it (3.6).
    return [NodeAddress(type=AddressType.INTERNAL_DNS, address=vm_name)] + [
        NodeAddress(type=AddressType.INTERNAL_IP, address=ip) for ip in ips
    ]
