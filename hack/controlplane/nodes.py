"""Real Kubernetes nodes for the local control plane: one containerd and one kubelet per node, on this machine.

Several nodes run side by side, so each owns everything it touches: a directory (containerd's root, state,
sockets and runc root, the kubelet's root dir and pod logs, the CNI config and IPAM data), a cgroup subtree
`/omc-node<slot>-<name>` in every cgroup v1 controller, a CNI bridge `omcbr<slot>` with the subnet 10.244.<slot>.0/24,
and its own ports. A slot is claimed atomically (a directory under /run), so two processes never pick the same.
`stop()` leaves nothing behind: it kills every process of the node's cgroups and shims, unmounts what the node
mounted, removes its cgroups, bridge and directory.

What this kernel and sandbox need, and why, is in docs/architecture.md#real-nodes.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from hack.csi_host import unmount_under

from . import certs
from .address import node_ip
from .build import Binaries, ensure_binaries
from .cluster import LocalControlPlane, _alive, _free_port, stop_process_group
from .guest_view import KUBELET_ROOT, GuestView, enter_guest_view, nsenter_argv
from .host_python import driver_host_env, volume_plugin_dir
from .kubeconfig import write_kubeconfig

CGROUP_V1 = Path("/sys/fs/cgroup")
SLOTS_DIR = Path("/run/omc-nodes")
MAX_SLOTS = 250  # 10.244.<slot>.0/24
CNI_BIN_DIR = Path("/usr/lib/cni")
# Machine-wide paths the kubelet and containerd 1.6 write whatever their configuration says; stop() removes what
# a node left there: the CNI results of its sandboxes (libcni's cache, which containerd does not let us move), the
# sockets of killed shims, the kubelet's container log links, and with the last node the device-plugin socket.
CNI_RESULTS = Path("/var/lib/cni/results")
SHIM_SOCKETS = Path("/run/containerd/s")
CONTAINER_LOG_LINKS = Path("/var/log/containers")
KUBELET_DEVICE_PLUGINS = Path("/var/lib/kubelet/device-plugins")
# The sandbox ("pause") image every pod starts with; no registry is reachable, so it must have been imported.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
START_TIMEOUT_S = 90.0


def _log(msg: str) -> None:
    print(f"[node] {msg}", file=sys.stderr, flush=True)


def _claim_slot() -> int:
    SLOTS_DIR.mkdir(parents=True, exist_ok=True)
    for slot in range(1, MAX_SLOTS + 1):
        path = SLOTS_DIR / str(slot)
        try:
            path.mkdir()
        except FileExistsError:
            try:
                owner = int((path / "pid").read_text())
            except (OSError, ValueError):
                continue  # being claimed right now
            if _alive(owner):
                continue
            # Its owner died without stopping the node. Renaming the stale directory away succeeds for one
            # claimant only; that one takes the slot.
            stale = SLOTS_DIR / f".stale-{slot}-{os.getpid()}"
            try:
                path.rename(stale)
                path.mkdir()
            except OSError:
                continue
            shutil.rmtree(stale, ignore_errors=True)
        (path / "pid").write_text(str(os.getpid()))
        return slot
    raise RuntimeError(f"all {MAX_SLOTS} node slots under {SLOTS_DIR} are taken")


def _cgroup_controllers() -> list[Path]:
    """One directory per mounted cgroup v1 hierarchy (cpu and cpuacct are often one mount under two names)."""
    seen: set[Path] = set()
    out = []
    for d in sorted(CGROUP_V1.iterdir()):
        real = d.resolve()
        if real in seen or d.name == "unified" or not (real / "cgroup.procs").exists():
            continue
        seen.add(real)
        out.append(real)
    return out


@dataclass(frozen=True)
class NodeNet:
    slot: int

    @property
    def bridge(self) -> str:
        return f"omcbr{self.slot}"

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"10.244.{self.slot}.0/24")


class RealNode:
    """One node named `name` joined to `plane`. Use as a context manager, or `start()`/`stop()`."""

    def __init__(self, plane: LocalControlPlane, name: str, directory: Path | None = None,
                 binaries: Binaries | None = None, pause_image: str = PAUSE_IMAGE, taints: tuple[str, ...] = (),
                 guest: GuestView | None = None):
        """`taints` (key=value:Effect) are registered with the Node, so that only pods which tolerate them land
        there (a test's real node among the simulated guests' Nodes). `guest`: the node stands for a VM and sees
        what its guest would (hack/controlplane/guest_view.py)."""
        self.plane = plane
        self.name = name
        self.dir = Path(directory or plane.dir.parent / f"{plane.dir.name}-node-{name}")
        self.cgroup = ""  # /omc-node<slot>-<name> once started: unique on the machine, like the slot
        self._binaries = binaries
        self._pause_image = pause_image
        self._taints = taints
        self._guest = guest
        self._guest_holder: subprocess.Popen[bytes] | None = None
        self.net: NodeNet | None = None
        self.pids: dict[str, int] = {}
        self.kubelet_port = 0
        self.started_at = 0.0
        self._started_wall = 0.0

    def __enter__(self) -> "RealNode":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- paths ----------------------------------------------------------------------------------------
    @property
    def containerd_socket(self) -> Path:
        # In the slot's directory, not the node's: a unix socket path has at most 107 bytes, and the node's
        # directory is named after the node.
        assert self.net, "the node has not started"
        return SLOTS_DIR / str(self.net.slot) / "containerd.sock"

    def log_path(self, component: str) -> Path:
        return self.dir / f"{component}.log"

    # --- start ----------------------------------------------------------------------------------------
    def start(self, images: tuple[Path, ...] = ()) -> "RealNode":
        """Start containerd, import the docker archives `images` (the pause image among them), start the kubelet;
        return once it runs (`wait_ready` waits for the Node's Ready condition)."""
        binaries = ensure_binaries(self._binaries)
        self.net = NodeNet(_claim_slot())
        self.cgroup = f"/omc-node{self.net.slot}-{self.name}"
        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._make_cgroups()
            self._write_cni()
            if self._guest:
                self._guest_holder = enter_guest_view(self._guest, self.dir / "kubelet", self.dir / "guest-view",
                                                      self.log_path("guest-view"))
            self._start_containerd()
            for archive in images:
                self.import_image(archive)
            self._start_kubelet(binaries)
        except BaseException:
            self._dump_logs()
            self.stop()
            raise
        return self

    def import_image(self, archive: Path) -> None:
        """Load a docker archive into the node's containerd, where the CRI finds it (namespace k8s.io). Pods must
        say `imagePullPolicy: Never` or name a tag other than `latest`: nothing can be pulled here."""
        self._ctr("images", "import", str(archive))

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> float:
        """Wait until this kubelet reports the Node Ready (a Node of the name left Ready by an earlier kubelet
        does not count: its heartbeat is older); return the seconds since the kubelet started."""
        deadline = time.monotonic() + timeout
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._started_wall - 1))
        while True:
            r = self._kubectl("get", "node", self.name, "-o", "jsonpath={range .status.conditions[?(@.type=='Ready')]}"
                              "{.status} {.lastHeartbeatTime}{end}")
            status, _, heartbeat = r.stdout.strip().partition(" ")
            if r.returncode == 0 and status == "True" and heartbeat >= started:
                return time.monotonic() - self.started_at
            for name, pid in self.pids.items():
                if not _alive(pid):
                    self._dump_logs()
                    raise RuntimeError(f"{name} of node {self.name} exited; see {self.log_path(name)}")
            if time.monotonic() > deadline:
                self._dump_logs()
                raise TimeoutError(f"node {self.name} not Ready after {timeout:.0f}s")
            time.sleep(0.2)

    def _make_cgroups(self) -> None:
        """kubelet refuses a --cgroup-root that does not exist in every controller. A new cpuset cgroup starts
        with no CPUs and no memory nodes, and nothing can join it until they are copied from its parent."""
        for ctl in _cgroup_controllers():
            path = ctl / self.cgroup.lstrip("/")
            path.mkdir(exist_ok=True)
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if (ctl / knob).exists() and not (path / knob).read_text().strip():
                    (path / knob).write_text((ctl / knob).read_text())

    def _write_cni(self) -> None:
        assert self.net
        conf_dir = self.dir / "cni" / "net.d"
        conf_dir.mkdir(parents=True, exist_ok=True)
        conf = {
            "cniVersion": "1.0.0",
            "name": f"omc-{self.name}",
            "plugins": [{
                "type": "bridge", "bridge": self.net.bridge, "isGateway": True,
                # No masquerade: it would add iptables rules that only a CNI DEL removes, and a node that is
                # powered off (its VM stopped) gets none. Pods reach the machine through their gateway.
                "ipMasq": False, "hairpinMode": True,
                "ipam": {
                    "type": "host-local", "ranges": [[{"subnet": str(self.net.subnet)}]],
                    "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(self.dir / "cni" / "ipam"),
                },
            }],
        }
        (conf_dir / "10-omc.conflist").write_text(json.dumps(conf, indent=2))

    def _containerd_config(self) -> str:
        d = self.dir / "containerd"
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        return f"""version = 2
root = "{d / 'root'}"
state = "{d / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{self.containerd_socket}"
[ttrpc]
  address = "{self.containerd_socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d / 'opt'}"
[{cri}]
  sandbox_image = "{self._pause_image}"
  # CAP_SYS_RESOURCE is not in this sandbox's bounding set: nothing may lower an oom_score_adj, and runc fails
  # when containerd asks it to (docs/architecture.md#real-nodes).
  restrict_oom_score_adj = true
  disable_apparmor = true
  # kubectl exec/logs/port-forward reach the kubelet, which proxies to this server: loopback is enough.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # Network namespaces under this node's state dir, not the machine-wide /var/run/netns.
  netns_mounts_under_state_dir = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{d / 'runc'}"
  [{cri}.cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{self.dir / 'cni' / 'net.d'}"
    max_conf_num = 1
"""

    def _start_containerd(self) -> None:
        conf = self.dir / "containerd" / "config.toml"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(self._containerd_config())
        self._spawn("containerd", [shutil.which("containerd") or "containerd", f"--config={conf}"])
        deadline = time.monotonic() + START_TIMEOUT_S
        while self._ctr("version", check=False).returncode != 0:
            if not _alive(self.pids["containerd"]):
                raise RuntimeError(f"containerd of node {self.name} exited; see {self.log_path('containerd')}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"containerd of node {self.name} did not serve in {START_TIMEOUT_S:.0f}s")
            time.sleep(0.1)

    def _start_kubelet(self, binaries: Binaries) -> None:
        state = self.plane.state
        assert state, "the control plane is not running"
        pki = certs.Pki(Path(state.dir) / "pki")
        ident = certs.node_identity(self.name)
        certs.issue_client(pki, ident)
        kubeconfig = self.dir / "kubelet.kubeconfig"
        write_kubeconfig(kubeconfig, state.server, pki, ident)
        self.kubelet_port = _free_port()
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": node_ip(),
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": _free_port(),
            # Callers prove who they are with a certificate of the plane's CA or a token (the API server's
            # kubelet-client certificate; a ServiceAccount's token), and the API server says what they may do.
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(pki.ca_cert)}},
            "authorization": {"mode": "Webhook"},
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup,
            # This kernel mounts cgroup v1 only; kubelet 1.35 refuses it unless told (a warning event follows).
            "failCgroupV1": False,
            # The kubelet may not lower its own oom_score_adj either (no CAP_SYS_RESOURCE): keep it at 0.
            "oomScoreAdj": 0,
            # Imported images cannot be pulled again, and containerd 1.6 does not pin the pause image: collect
            # images only when the disk is nearly full.
            "imageGCHighThresholdPercent": 99,
            "imageGCLowThresholdPercent": 98,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "podLogsDir": str(self.dir / "pod-logs"),
            "failSwapOn": False,
            "registerNode": True,
            "registerWithTaints": [_taint(t) for t in self._taints],
            "serializeImagePulls": False,
            # A pod is synced every 10 s rather than every minute: the kubelet grows a mounted volume's filesystem
            # (online expansion) only at its pod's next sync, which the tests wait for. A few pods per node make
            # the extra syncs cheap.
            "syncFrequency": "10s",
            # The Lease is renewed every 2.5 s (a quarter of its duration; by default every 10 s) and the status
            # looked at every 2 s (default 10 s): a plane with a short node-monitor-grace-period (the demo's,
            # hack/demo/__main__.py) sees a dead kubelet within seconds without taking a live one for dead, and a Node
            # is Ready again seconds after its kubelet answers. The status is still posted only when it changed or
            # every 5 min (the report frequency would follow the update frequency if left unset).
            "nodeLeaseDurationSeconds": 10,
            "nodeStatusUpdateFrequency": "2s",
            "nodeStatusReportFrequency": "5m",
            # FlexVolume drivers: the directory the plane's controller-manager and real nodes share
            # (host_python.py).
            "volumePluginDir": str(volume_plugin_dir(self.plane.dir)),
        }
        config_path = self.dir / "kubelet.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.started_at, self._started_wall = time.monotonic(), time.time()
        self._spawn("kubelet", [
            str(binaries.path("kubelet")), f"--config={config_path}", f"--kubeconfig={kubeconfig}",
            f"--root-dir={KUBELET_ROOT if self._guest else self.dir / 'kubelet'}",
            f"--cert-dir={self.dir / 'kubelet-pki'}",
            f"--hostname-override={self.name}", f"--node-ip={node_ip()}", "--v=1",
        ])

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.log_path(name), "wb")
        if self._guest_holder:
            argv = [*nsenter_argv(self._guest_holder.pid), *argv]
        # The kubelet runs FlexVolume drivers, whose wrapper runs the host's python3 (host_python.py).
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=driver_host_env(self.plane.dir))
        log.close()
        self.pids[name] = proc.pid

    # --- cut off --------------------------------------------------------------------------------------
    def cut_off(self, cut: bool) -> None:
        """Freeze the kubelet (and any driver it runs) while `cut`, let it go on when not: a guest whose host the
        engine has lost keeps running with its containers and mounts, but no longer reaches the API server, so its
        Node goes Unknown by the node lifecycle controller; thawed, it posts its status again at once, its overdue
        timers firing."""
        pid = self.pids.get("kubelet")
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGSTOP if cut else signal.SIGCONT)
            except ProcessLookupError:
                pass  # exited: nothing to freeze or thaw

    # --- stop -----------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the kubelet and containerd, kill every container and shim of this node, unmount, remove its
        cgroups, bridge and directory. Safe to call twice, and on a half-started node. Every step is taken even
        when one fails (a node half stopped would go on running unowned); the first failure is raised after."""
        failures: list[Exception] = []
        # A frozen kubelet (cut_off) is thawed first, so that it can act on its SIGTERM.
        for step in (lambda: self.cut_off(False), lambda: self._stop_process("kubelet"), self._kill_cgroup_tree,
                     self._kill_shims, lambda: self._stop_process("containerd"), self._kill_shims,
                     self._leave_guest_view,
                     # Lazily, so that a mount still busy for a moment (a dying shim) goes when it is released.
                     lambda: unmount_under(self.dir), self._remove_cgroups, self._release_slot,
                     lambda: shutil.rmtree(self.dir, ignore_errors=True)):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - whatever a step raises, the steps after it still run (above)
                _log(f"node {self.name}: stopping: {exc!r}")
                failures.append(exc)
        if failures:
            raise failures[0]

    def _leave_guest_view(self) -> None:
        """The namespace's mounts go with its last process: the holder, once nothing else of the node runs."""
        if self._guest_holder:
            self._guest_holder.kill()
            self._guest_holder.wait()
            self._guest_holder = None

    def _stop_process(self, name: str) -> None:
        if name in self.pids:
            stop_process_group(name, self.pids.pop(name))

    def _release_slot(self) -> None:
        if not self.net:
            return
        self._remove_traces()
        subprocess.run(["ip", "link", "delete", self.net.bridge], capture_output=True)
        shutil.rmtree(SLOTS_DIR / str(self.net.slot), ignore_errors=True)
        self.net = None
        if not any(SLOTS_DIR.iterdir()):
            _remove_last_node_traces()

    def _remove_traces(self) -> None:
        """What this node's sandboxes and containers left outside its directory, found by their ids."""
        cri = self.dir / "containerd" / "root" / "io.containerd.grpc.v1.cri"
        for sandbox in _names(cri / "sandboxes"):
            for result in CNI_RESULTS.glob(f"*-{sandbox}-*"):
                result.unlink(missing_ok=True)
            # containerd 1.6 names a shim's socket by the hash of its own address, namespace and the sandbox id.
            digest = hashlib.sha256(f"{self.containerd_socket}/k8s.io/{sandbox}".encode()).hexdigest()
            (SHIM_SOCKETS / digest).unlink(missing_ok=True)
        for container in _names(cri / "containers"):
            for link in CONTAINER_LOG_LINKS.glob(f"*-{container}.log"):
                link.unlink(missing_ok=True)

    def _cgroup_dirs(self) -> list[Path]:
        """Every cgroup of this node, deepest first; the kubelet mirrors its tree into the empty cgroup v2
        hierarchy (`unified`) too."""
        out: list[Path] = []
        if not self.cgroup:
            return out
        for ctl in (*_cgroup_controllers(), CGROUP_V1 / "unified"):
            # os.walk, not rglob: the runtime removes a killed container's cgroup while we walk, and os.walk skips
            # what vanished where rglob raises.
            for parent, _dirs, _files in os.walk(ctl / self.cgroup.lstrip("/")):
                out.append(Path(parent))
        return sorted(out, key=lambda p: len(p.parts), reverse=True)

    def _kill_cgroup_tree(self) -> None:
        """The containers are the processes of the node's cgroups; SIGKILL them until none is left (a process
        may fork while we read)."""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            pids = {int(p) for d in self._cgroup_dirs() for p in _read(d / "cgroup.procs").split()}
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        _log(f"node {self.name}: processes left in its cgroups after 15 s")

    def _kill_shims(self) -> None:
        """containerd's shims run detached from containerd; ours are the ones given our socket's address."""
        if not self.net:
            return
        address = str(self.containerd_socket)
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            argv = _read(proc / "cmdline").split("\0")
            if "-address" in argv and address in argv and "shim" in argv[0]:
                try:
                    os.kill(int(proc.name), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _remove_cgroups(self) -> None:
        deadline = time.monotonic() + 10
        for d in self._cgroup_dirs():
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY while a killed process is still being reaped
                    if time.monotonic() > deadline:
                        _log(f"node {self.name}: cannot remove cgroup {d}")
                        break
                    time.sleep(0.05)

    # --- helpers --------------------------------------------------------------------------------------
    def _ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(["ctr", f"--address={self.containerd_socket}", "-n", "k8s.io", *args],
                           capture_output=True, text=True, timeout=300)
        if check and r.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)} failed on node {self.name}: {r.stderr.strip()}")
        return r

    def _kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        b = self._binaries or Binaries()
        return subprocess.run([str(b.path("kubectl")), f"--kubeconfig={self.plane.kubeconfig('admin')}", *args],
                              capture_output=True, text=True, timeout=60)

    def _dump_logs(self) -> None:
        for name in ("containerd", "kubelet"):
            log = self.log_path(name)
            if log.exists():
                tail = log.read_text(errors="replace").splitlines()[-15:]
                _log(f"--- last lines of node {self.name}'s {name}.log:\n" + "\n".join(tail))


# Chains every kubelet makes on the machine (shared by all nodes, so removed with the last one): canaries in
# each table, and KUBE-FIREWALL, which drops packets for 127.0.0.0/8 that do not come from loopback.
_KUBELET_CHAINS = {"filter": ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY"), "nat": ("KUBE-KUBELET-CANARY",),
                   "mangle": ("KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY")}


def _remove_last_node_traces() -> None:
    (KUBELET_DEVICE_PLUGINS / "kubelet.sock").unlink(missing_ok=True)
    for empty in (KUBELET_DEVICE_PLUGINS, KUBELET_DEVICE_PLUGINS.parent, CONTAINER_LOG_LINKS):
        try:
            empty.rmdir()
        except OSError:  # not there, or someone else's files are in it
            pass
    for tool in ("iptables", "ip6tables"):
        if not shutil.which(tool):
            continue
        for hook in ("INPUT", "OUTPUT"):
            while subprocess.run([tool, "-D", hook, "-j", "KUBE-FIREWALL"], capture_output=True).returncode == 0:
                pass
        for table, chains in _KUBELET_CHAINS.items():
            for chain in chains:
                subprocess.run([tool, "-t", table, "-F", chain], capture_output=True)
                subprocess.run([tool, "-t", table, "-X", chain], capture_output=True)


def _taint(spec: str) -> dict[str, str]:
    key_value, _, effect = spec.partition(":")
    key, _, value = key_value.partition("=")
    if not key or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise ValueError(f"taint {spec!r}: want key[=value]:NoSchedule|PreferNoSchedule|NoExecute")
    return {"key": key, "value": value, "effect": effect}


def _names(directory: Path) -> list[str]:
    try:
        return [p.name for p in directory.iterdir()]
    except OSError:
        return []


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
