"""The machine's own address: where pods meet the test bed's host processes.

Real nodes share the machine's network namespace (nodes.py), and their pods reach the machine through their
bridge's gateway. Loopback is not theirs to reach (the kubelet's KUBE-FIREWALL chain drops packets for 127.0.0.0/8
that did not come from loopback), so whatever a pod must reach (the API server, the oVirt simulator) listens on this
address too and names it in its certificate.
"""

from __future__ import annotations

import socket


def node_ip() -> str:
    """The machine's address on its default route: what a kubelet registers as InternalIP, where the API server
    dials it, and where pods find the API server and the simulator."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))  # no packet is sent: connect() on UDP only chooses the route
        except OSError:  # no route at all: everything is on loopback, and pods reach nothing of the machine's
            return "127.0.0.1"
        return s.getsockname()[0]
