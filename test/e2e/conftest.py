"""End-to-end fixtures: a real Kubernetes API server.

With $KUBECONFIG set, the suite runs against that cluster (kind, OpenShift, anything); otherwise it starts
the local control plane of `hack/controlplane` (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
for the session and stops it at the end. Tests talk to it the way a user does: the pinned `kubectl` and the
official Python client.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Iterator

import kubernetes
import pytest
import yaml

from hack.controlplane import certs
from hack.controlplane.build import Binaries, ensure_binaries
from hack.controlplane.cluster import LocalControlPlane
from hack.crds_established import wait_established

REPO = Path(__file__).resolve().parents[2]
CRD_NAMES = (
    "machines.machine.openshift.io",
    "machinesets.machine.openshift.io",
    "machinehealthchecks.machine.openshift.io",
)


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)


class Cluster:
    """A running API server and the identities tests may use.

    `admin` is cluster-admin. `restricted` is the controller's ServiceAccount identity
    (system:serviceaccount:openshift-machine-api:machine-api-controllers), which has only the permissions
    `config/rbac` grants it: on the local plane a client certificate with that user name, on an existing
    cluster the admin's credentials impersonating it.
    """

    RESTRICTED_USER = certs.RESTRICTED.user
    RESTRICTED_GROUPS = certs.RESTRICTED.groups

    def __init__(self, admin_kubeconfig: Path, restricted_kubeconfig: Path | None, kubectl_path: Path,
                 plane: LocalControlPlane | None = None):
        self.kubeconfig = admin_kubeconfig
        self.plane = plane  # the local control plane, which real nodes join; None on an existing cluster
        self._restricted = restricted_kubeconfig
        self.kubectl_path = kubectl_path
        self._crds_applied = False

    # --- kubeconfigs and clients --------------------------------------------------------------------
    def kubeconfig_for(self, user: str = "admin") -> Path:
        if user == "admin":
            return self.kubeconfig
        if user != "restricted":
            raise ValueError(user)
        if self._restricted is None:
            self._restricted = self._impersonating_kubeconfig()
        return self._restricted

    def _impersonating_kubeconfig(self) -> Path:
        doc = yaml.safe_load(self.kubeconfig.read_text())
        ctx_name = doc.get("current-context")
        ctx = next(c for c in doc["contexts"] if c["name"] == ctx_name)["context"]
        user = next(u for u in doc["users"] if u["name"] == ctx["user"])
        user["user"]["as"] = self.RESTRICTED_USER
        user["user"]["as-groups"] = list(self.RESTRICTED_GROUPS)
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"omc-restricted-{os.getpid()}.kubeconfig"
        path.write_text(yaml.safe_dump(doc))
        return path

    def api_client(self, user: str = "admin") -> kubernetes.client.ApiClient:
        config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=str(self.kubeconfig_for(user)), client_configuration=config)
        client = kubernetes.client.ApiClient(config)
        if user == "restricted" and self._restricted is not None and self._is_impersonating():
            # The Python client ignores `as:` in kubeconfigs; send the impersonation headers ourselves.
            client.set_default_header("Impersonate-User", self.RESTRICTED_USER)
            client.set_default_header("Impersonate-Group", ",".join(self.RESTRICTED_GROUPS))
        return client

    def _is_impersonating(self) -> bool:
        return "as:" in self.kubeconfig_for("restricted").read_text()

    # --- kubectl ------------------------------------------------------------------------------------
    def kubectl(self, *args: str, input: str | None = None, check: bool = True, user: str = "admin",
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.kubectl_path), f"--kubeconfig={self.kubeconfig_for(user)}", *args]
        result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def wait_established(self, *crds: str) -> None:
        wait_established(lambda *args: self.kubectl(*args, check=False).stdout, *crds)

    def apply_crds(self) -> None:
        """Install the project's CRDs (config/crd) and wait until the API server serves them."""
        if self._crds_applied:
            return
        self.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(REPO / "config" / "crd"))
        self.wait_established(*CRD_NAMES)
        self._wait_discoverable("machine.openshift.io/v1beta1")
        self._crds_applied = True

    def _wait_discoverable(self, group_version: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.kubectl("api-resources", f"--api-group={group_version.split('/')[0]}", "-o", "name",
                           check=False).stdout.strip() == "":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group_version} not discoverable after {timeout}s")
            time.sleep(0.2)

    def ensure_namespace(self, name: str) -> None:
        r = self.kubectl("create", "namespace", name, check=False)
        if r.returncode != 0 and "AlreadyExists" not in r.stderr:
            raise AssertionError(r.stderr)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    binaries = ensure_binaries(Binaries())
    kubectl = binaries.path("kubectl")
    external = os.environ.get("KUBECONFIG")
    if external:
        yield Cluster(Path(external.split(os.pathsep)[0]), None, kubectl)
        return
    plane = LocalControlPlane(Path(os.environ.get("TMPDIR", "/tmp")) / f"omc-e2e-{os.getpid()}")
    with plane:
        yield Cluster(plane.kubeconfig("admin"), plane.kubeconfig("restricted"), kubectl, plane)


@pytest.fixture(scope="session")
def real_node_images(cluster: Cluster) -> tuple[Path, ...]:
    """The docker archives a real node (hack/controlplane/nodes.py) imports: the pause image, built locally by
    hack/images (no registry is reachable; `make test` builds it first, `make images`, and a plain pytest run builds
    it here). Real nodes join the local control plane only."""
    if cluster.plane is None:
        pytest.skip("real nodes join the local control plane only; this run uses an existing cluster ($KUBECONFIG)")
    from hack import images

    return (images.archive("pause"),)


@pytest.fixture
def namespace(cluster: Cluster, request) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (without waiting for it to finish terminating)."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"e2e-{stem}-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)



# --- the oVirt side: a simulated engine, prepared like an OpenShift installation ------------------------------------

from machines import INFRA_ID, MACHINE_API_NS  # noqa: E402 - the e2e helpers sit beside this file


@pytest.fixture(scope="session")
def ovirt(cluster: Cluster, tmp_path_factory):
    """A simulated oVirt engine (HTTPS, CA-verified) whose guests join `cluster` as Nodes, prepared with the
    installer's tag and affinity group, and the `ovirt-credentials` secret pointing at it."""
    from hack import ovirt_install
    from hack.ovirtsim.testing import running_simulator

    with running_simulator(tmp_path_factory.mktemp("ovirt"), kubeconfig=cluster.kubeconfig, tls=True) as sim:
        # Room for the session: VMs of finished tests stay (their namespaces go without waiting), and which test
        # files share this engine depends on the pytest worker. More hosts of the seeded size, never a bigger one:
        # a VM larger than every host must stay unschedulable (test_machine_bad_input).
        for n in range(4, 13):
            sim.control.add_host(f"host{n}", memory=128 * 2**30)
        conn = sim.connection()
        try:
            sim.installation = ovirt_install.prepare(conn, INFRA_ID)
        finally:
            conn.close()
        cluster.ensure_namespace(MACHINE_API_NS)
        secret = ovirt_install.credentials_secret(sim.url, sim.username, sim.password,
                                                  ca_pem=Path(sim.ca_file).read_text())
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(secret))
        yield sim


@pytest.fixture
def menv(cluster: Cluster, ovirt, namespace: str, tmp_path: Path, request):
    """A namespace with the worker user-data secret, the CRDs, the simulated engine, and controller processes
    started on demand (stopped, and the engine's faults cleared, afterwards). Standalone unless the test is
    parametrized with a mode (`machines.both_modes`)."""
    from machines import STANDALONE, MachineEnv

    cluster.apply_crds()
    env = MachineEnv(cluster, ovirt, namespace, tmp_path, mode=getattr(request, "param", STANDALONE))
    try:
        yield env
    finally:
        env.stop_controllers()
        ovirt.control.clear_faults()
