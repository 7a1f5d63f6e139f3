"""kube-proxy for the test bed's real nodes: Services, the `kubernetes` one among them, reach their endpoints from
pods, so a pod finds the API server as in any cluster (in-cluster config: the Service's ClusterIP and port 443).

All real nodes of this machine share its network namespace (nodes.py): a pod's packet to a ClusterIP leaves through
its bridge's gateway into the machine, where kube-proxy's iptables rules translate it. So one kube-proxy for the
machine is what a DaemonSet's kube-proxy pod per node is in a cluster. It is the same release as the kubelet, built
from the same module (build.py), in iptables mode, as the `system:kube-proxy` user the bootstrap RBAC provides for.

kube-proxy owns machine-wide chains (KUBE-SERVICES, KUBE-NODEPORTS, ...) and rewrites them whole at every sync: two
of them (two test sessions' control planes on one machine) would erase each other's rules. So one runs on the
machine at a time: it holds a lock (LOCK_FILE) from start to stop, and a second waits for it. Its rules are removed
(`kube-proxy --cleanup`) when it stops, and before it starts, in case a holder was killed.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import yaml

from . import certs
from .address import node_ip
from .build import Binaries, ensure_binaries
from .cluster import LocalControlPlane, _alive, _free_port, stop_process_group
from .kubeconfig import write_kubeconfig

LOCK_FILE = Path("/run/omc-kube-proxy.lock")
# Every real node's pod subnet, 10.244.<slot>.0/24 (nodes.py): traffic from elsewhere to a Service is masqueraded.
CLUSTER_CIDR = "10.244.0.0/16"
START_TIMEOUT_S = 90.0


def _log(msg: str) -> None:
    print(f"[kube-proxy] {msg}", file=sys.stderr, flush=True)


class KubeProxy:
    """kube-proxy for `plane`. Use as a context manager, or `start()`/`stop()`."""

    def __init__(self, plane: LocalControlPlane, binaries: Binaries | None = None, lock_timeout: float = 1800.0):
        """`lock_timeout`: how long to wait while another control plane's kube-proxy runs on the machine."""
        self.plane = plane
        self.dir = plane.dir / "kube-proxy"
        self._binaries = binaries
        self._lock_timeout = lock_timeout
        self._lock: IO[str] | None = None
        self.pid = 0

    def __enter__(self) -> "KubeProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def log_path(self) -> Path:
        return self.dir / "kube-proxy.log"

    def start(self) -> "KubeProxy":
        """Take the machine's kube-proxy lock, start kube-proxy, and return once its rules send the `kubernetes`
        Service's ClusterIP to the API server."""
        binaries = ensure_binaries(self._binaries)
        self._take_lock()
        try:
            self._cleanup(binaries)
            self._spawn(binaries)
            self._wait_synced()
        except BaseException:
            self._dump_log()
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop kube-proxy, remove its rules, release the lock. Safe to call twice."""
        try:
            if self.pid:
                stop_process_group("kube-proxy", self.pid)
                self.pid = 0
            if self._lock:
                self._cleanup(self._binaries or Binaries())
        finally:
            if self._lock:
                self._lock.close()  # closing the descriptor releases the flock
                self._lock = None

    def _take_lock(self) -> None:
        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        lock = open(LOCK_FILE, "a+")
        deadline = time.monotonic() + self._lock_timeout
        waiting = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    lock.close()
                    raise TimeoutError(f"another kube-proxy held {LOCK_FILE} for {self._lock_timeout:.0f} s") from None
                if not waiting:
                    _log(f"another control plane's kube-proxy runs on this machine; waiting for {LOCK_FILE}")
                    waiting = True
                time.sleep(1.0)
        self._lock = lock

    def _cleanup(self, binaries: Binaries) -> None:
        r = subprocess.run([str(binaries.path("kube-proxy")), "--cleanup"], capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            _log(f"kube-proxy --cleanup: exit {r.returncode}: {r.stderr.strip()[-500:]}")

    def _spawn(self, binaries: Binaries) -> None:
        state = self.plane.state
        assert state, "the control plane is not running"
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        pki = certs.Pki(Path(state.dir) / "pki")
        certs.issue_client(pki, certs.KUBE_PROXY)
        kubeconfig = self.dir / "kubeconfig"
        write_kubeconfig(kubeconfig, state.server, pki, certs.KUBE_PROXY)
        address = node_ip()
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables",
            "bindAddress": address,  # the node's primary address, as a node's kube-proxy would find it
            "clusterCIDR": CLUSTER_CIDR,
            "detectLocalMode": "ClusterCIDR",
            "nodePortAddresses": [f"{address}/32"],
            "healthzBindAddress": f"127.0.0.1:{_free_port()}",
            "metricsBindAddress": f"127.0.0.1:{_free_port()}",
            # No CAP_SYS_RESOURCE here (docs/architecture.md#real-nodes): it may not lower its oom_score_adj.
            "oomScoreAdj": 0,
            # Leave the machine's conntrack sysctls as they are: they are shared with everything on the machine.
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            # NodePorts on 127.0.0.1 would need route_localnet, a machine-wide sysctl; no test uses them.
            "iptables": {"localhostNodePorts": False},
        }
        path = self.dir / "config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        log = open(self.log_path, "wb")
        proc = subprocess.Popen([str(binaries.path("kube-proxy")), f"--config={path}", "--v=1"], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.pid = proc.pid

    def _wait_synced(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            r = subprocess.run(["iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES"], capture_output=True,
                               text=True)
            if r.returncode == 0 and "default/kubernetes:https" in r.stdout:
                return
            if not _alive(self.pid):
                raise RuntimeError(f"kube-proxy exited; see {self.log_path}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"kube-proxy wrote no rule for the kubernetes Service in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.2)

    def _dump_log(self) -> None:
        if self.log_path.exists():
            tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
            _log("--- last lines of kube-proxy.log:\n" + "\n".join(tail))

