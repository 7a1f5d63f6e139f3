"""Start and stop etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback.

The running plane is described by a `state.json` in its directory, so `up` in one process and `down` in
another (the CLI, `make demo`, a test session) agree on what to stop. Every process runs in its own session
and is stopped by process group, so nothing strays; the directory (certificates, logs, etcd data) is removed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import certs
from .address import node_ip
from .build import Binaries, ensure_binaries
from .host_python import driver_host_env, volume_plugin_dir
from .kubeconfig import write_kubeconfig

SERVICE_CIDR = "10.0.0.0/24"
START_TIMEOUT_S = 90.0


def default_dir() -> Path:
    explicit = os.environ.get("OMC_CONTROLPLANE_DIR")
    if explicit:
        return Path(explicit)
    return Path(tempfile.gettempdir()) / f"omc-controlplane-{os.getuid()}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log(msg: str) -> None:
    print(f"[controlplane] {msg}", file=sys.stderr, flush=True)


@dataclass
class State:
    """What `up` started; persisted so `down` (possibly another process) can stop exactly that."""

    dir: str
    etcd_data: str
    api_port: int
    pids: dict[str, int] = field(default_factory=dict)
    kubeconfigs: dict[str, str] = field(default_factory=dict)
    argvs: dict[str, list[str]] = field(default_factory=dict)  # how each component was started, for restart

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    def save(self) -> None:
        (Path(self.dir) / "state.json").write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, directory: Path) -> "State | None":
        try:
            return cls(**json.loads((directory / "state.json").read_text()))
        except FileNotFoundError:
            return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def stop_process_group(name: str, pid: int, grace_s: float = 10) -> None:
    """SIGTERM the process group `pid` leads (started with start_new_session), SIGKILL it after `grace_s`."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while _alive(pid) and time.monotonic() < deadline:
        try:
            os.waitpid(pid, os.WNOHANG)  # reap it when it is our own child
        except ChildProcessError:
            pass
        time.sleep(0.05)
    if _alive(pid):
        _log(f"{name} ignored SIGTERM; killing")
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class LocalControlPlane:
    """One control plane rooted at `directory`. Use as a context manager, or `up()`/`down()` from the CLI."""

    def __init__(self, directory: Path | None = None, binaries: Binaries | None = None,
                 controller_manager_args: tuple[str, ...] = (), apiserver_args: tuple[str, ...] = ()):
        """`controller_manager_args` are added to kube-controller-manager's (e.g. a benchmark's longer
        `--node-monitor-grace-period` for simulated kubelets that post status every few minutes), `apiserver_args`
        to kube-apiserver's (e.g. the benchmark's audit log, which counts the controller's writes)."""
        self.dir = Path(directory or default_dir())
        self._binaries = binaries
        self._controller_manager_args = controller_manager_args
        self._apiserver_args = apiserver_args
        self.state: State | None = State.load(self.dir)

    # --- public -----------------------------------------------------------------------------------
    def __enter__(self) -> "LocalControlPlane":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def kubeconfig(self, user: str = "admin") -> Path:
        if not self.state:
            raise RuntimeError(f"no control plane running in {self.dir}")
        return Path(self.state.kubeconfigs[user])

    def running(self) -> bool:
        return bool(self.state) and all(_alive(p) for p in self.state.pids.values())

    def up(self) -> State:
        if self.running():
            _log(f"already running at {self.state.server} ({self.dir})")
            return self.state
        if self.state:  # a previous run died half-way: clear it before starting anew
            self.down()
        binaries = ensure_binaries(self._binaries)
        started = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # etcd fsyncs on every write; on tmpfs that costs nothing, and the data is thrown away anyway.
        shm = Path("/dev/shm")
        etcd_data = tempfile.mkdtemp(prefix="omc-etcd-", dir=shm if shm.is_dir() else self.dir)
        self.state = State(dir=str(self.dir), etcd_data=etcd_data, api_port=_free_port())
        self.state.save()
        try:
            pki = certs.generate(self.dir / "pki", addresses=(node_ip(),))
            for ident in certs.IDENTITIES:
                path = self.dir / f"{ident.name}.kubeconfig"
                write_kubeconfig(path, self.state.server, pki, ident)
                self.state.kubeconfigs[ident.name] = str(path)
            etcd_url = self._start_etcd(binaries)
            self._start_apiserver(binaries, pki, etcd_url)
            self._wait_ready("kube-apiserver", self.state.server + "/readyz", pki)
            self._start_controller_manager(binaries, pki)
            self._start("kube-scheduler", [
                str(binaries.path("kube-scheduler")),
                f"--kubeconfig={self.state.kubeconfigs['scheduler']}",
                f"--authentication-kubeconfig={self.state.kubeconfigs['scheduler']}",
                f"--authorization-kubeconfig={self.state.kubeconfigs['scheduler']}",
                "--secure-port=0", "--leader-elect=false",  # no HTTPS endpoint, as _start_controller_manager says
            ])
            self._wait_default_serviceaccount()
        except BaseException:
            self._dump_logs()
            self.down()
            raise
        _log(f"up at {self.state.server} in {time.monotonic() - started:.1f}s; "
             f"KUBECONFIG={self.state.kubeconfigs['admin']}")
        return self.state

    def down(self) -> None:
        state = self.state or State.load(self.dir)
        if state:
            # Reverse start order: the API server's clients first, etcd last (a restarted one keeps its place).
            for name, pid in reversed(list(state.pids.items())):
                stop_process_group(name, pid)
            shutil.rmtree(state.etcd_data, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.state = None

    def stop(self, component: str) -> None:
        """Stop one component (its pid stays recorded, dead, until `start`)."""
        assert self.state, f"no control plane running in {self.dir}"
        stop_process_group(component, self.state.pids[component])

    def start(self, component: str) -> None:
        """Start a stopped component again with the same flags, data and ports, and wait until it serves."""
        assert self.state, f"no control plane running in {self.dir}"
        self._start(component, self.state.argvs[component])
        if component == "kube-apiserver":
            self._wait_ready("kube-apiserver", self.state.server + "/readyz", certs.Pki(self.dir / "pki"))
        elif component == "etcd":
            self._wait_http("etcd", next(a for a in self.state.argvs["etcd"]
                                         if a.startswith("--advertise-client-urls=")).split("=", 1)[1] + "/health")

    def restart(self, component: str, down_for: float = 0.0) -> None:
        """Stop one component, leave it down `down_for` seconds, start it again: what a test needs to see how
        clients ride an API server restart."""
        self.stop(component)
        time.sleep(down_for)
        self.start(component)

    # --- processes --------------------------------------------------------------------------------
    def _start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        assert self.state
        log = open(self.dir / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
        log.close()
        self.state.pids[name] = proc.pid
        self.state.argvs[name] = argv
        self.state.save()

    def _start_etcd(self, b: Binaries) -> str:
        assert self.state
        client, peer = _free_port(), _free_port()
        url = f"http://127.0.0.1:{client}"
        self._start("etcd", [
            str(b.path("etcd")), f"--data-dir={self.state.etcd_data}", "--name=omc",
            f"--listen-client-urls={url}", f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=omc=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync=true", "--log-level=warn",
        ])
        self._wait_http("etcd", url + "/health")
        return url

    def _start_apiserver(self, b: Binaries, pki: certs.Pki, etcd_url: str) -> None:
        assert self.state
        advertised = node_ip()
        self._start("kube-apiserver", [
            str(b.path("kube-apiserver")),
            f"--etcd-servers={etcd_url}",
            # Pods reach the API server as in a cluster: the `kubernetes` Service's ClusterIP, which kube-proxy
            # (proxy.py) sends to the advertised address, the machine's (pods cannot reach loopback; address.py).
            "--bind-address=0.0.0.0", f"--advertise-address={advertised}", f"--secure-port={self.state.api_port}",
            f"--cert-dir={self.dir / 'apiserver-certs'}",
            f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true",
            # Real nodes (nodes.py): the API server reaches a kubelet (logs, exec) at its InternalIP, since a
            # node's hostname resolves nowhere here, and authenticates with a client certificate the kubelet's
            # webhook authentication accepts.
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            f"--kubelet-client-certificate={pki.client_cert(certs.KUBELET_CLIENT)}",
            f"--kubelet-client-key={pki.client_key(certs.KUBELET_CLIENT)}",
            # Without a route off the machine the only address is loopback, which the API server refuses to publish
            # as the `kubernetes` Service's endpoint; no pod could reach it anyway.
            *(["--endpoint-reconciler-type=none"] if advertised == "127.0.0.1" else []),
            "--profiling=false", *self._apiserver_args,
        ])

    def _start_controller_manager(self, b: Binaries, pki: certs.Pki) -> None:
        assert self.state
        kc = self.state.kubeconfigs["controller-manager"]
        self._start("kube-controller-manager", [
            str(b.path("kube-controller-manager")),
            f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
            # No HTTPS endpoint: nothing here asks it, and a port picked free could be taken by another plane
            # before this one bound it (a scheduler exited on "address already in use" in a full test run).
            "--secure-port=0", "--leader-elect=false",
            # Each controller runs as its own ServiceAccount with its bootstrap RBAC role, as in a real
            # cluster; the garbage collector's role is what deletes Machines owned by a deleted MachineSet.
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key}", f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}", f"--cluster-signing-key-file={pki.ca_key}",
            "--controllers=*",
            # FlexVolume attach and detach run here, from the plugin directory the plane's real nodes share
            # (host_python.py).
            f"--flex-volume-plugin-dir={volume_plugin_dir(self.dir)}", *self._controller_manager_args,
        ], env=driver_host_env(self.dir))

    # --- readiness --------------------------------------------------------------------------------
    def _deadline_check(self, deadline: float, what: str) -> None:
        assert self.state
        for name, pid in self.state.pids.items():
            if not _alive(pid):
                raise RuntimeError(f"{name} exited while waiting for {what}; see {self.dir / (name + '.log')}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {START_TIMEOUT_S:.0f}s waiting for {what}")

    def _wait_http(self, what: str, url: str, ctx: ssl.SSLContext | None = None) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2, context=ctx) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            self._deadline_check(deadline, what)
            time.sleep(0.1)

    def _wait_ready(self, what: str, url: str, pki: certs.Pki) -> None:
        ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        ctx.load_cert_chain(str(pki.client_cert(certs.ADMIN)), str(pki.client_key(certs.ADMIN)))
        self._wait_http(what, url, ctx)

    def _wait_default_serviceaccount(self) -> None:
        """The controller-manager works (its clients authenticate, its controllers run) once it has created
        the `default` ServiceAccount; pods need that account to be admitted."""
        assert self.state
        b = self._binaries or Binaries()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            r = subprocess.run(
                [str(b.path("kubectl")), f"--kubeconfig={self.state.kubeconfigs['admin']}",
                 "-n", "default", "get", "serviceaccount", "default", "-o", "name"],
                capture_output=True, text=True,
            )
            if r.returncode == 0:
                return
            self._deadline_check(deadline, "kube-controller-manager (the default ServiceAccount)")
            time.sleep(0.2)

    def _dump_logs(self) -> None:
        for log in sorted(self.dir.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-15:]
            _log(f"--- last lines of {log.name}:\n" + "\n".join(tail))
