"""End-to-end fixtures: a real Kubernetes API server.

With $KUBECONFIG set, the suite runs against that cluster (kind, OpenShift, anything); otherwise it starts
the local control plane of `hack/controlplane` (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
for the session and stops it at the end. Tests talk to it the way a user does: the pinned `kubectl` and the
official Python client.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from hack.controlplane.build import Binaries, ensure_binaries
from hack.controlplane.cluster import LocalControlPlane
from kube_cluster import Cluster  # the e2e helpers sit beside this file


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)
    # Modules marked `long_module` run for minutes (real nodes, image imports): `make test` hands whole files to its
    # workers in collection order (--dist loadfile), and one of them handed out last kept its worker busy minutes
    # after the others had finished. The sort is stable, so every worker collects the same order.
    items.sort(key=lambda item: item.get_closest_marker("long_module") is None)


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


@pytest.fixture(scope="module")
def kube_proxy(cluster: Cluster) -> Iterator[None]:
    """Services for pods of the local plane's real nodes, for one module: a real kube-proxy
    (hack/controlplane/proxy.py), so that a pod reaches the API server by the `kubernetes` Service as in any cluster
    (in-cluster config). One runs on the machine at a time (it owns machine-wide iptables chains): this waits while
    another session's module holds it, so ask for it only in modules whose pods need a Service. An existing cluster
    ($KUBECONFIG) has its own."""
    if cluster.plane is None:
        yield
        return
    from hack.controlplane.proxy import KubeProxy

    with KubeProxy(cluster.plane):
        yield


@pytest.fixture
def namespace(cluster: Cluster, request) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (without waiting for it to finish terminating; the
    finalizers the stopped controllers would have removed go first, `Cluster.delete_namespace`)."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"e2e-{stem}-{uuid.uuid4().hex[:5]}"
    cluster.create_namespace(name)
    yield name
    cluster.delete_namespace(name)



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
        # pod_url: the machine's address, which host processes and pods on real nodes (the CSI controller
        # Deployment, test_storage_csi_real.py) both reach; loopback would be the pod's own.
        secret = ovirt_install.credentials_secret(sim.pod_url, sim.username, sim.password,
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


@pytest.fixture
def renv(menv):
    """menv once the remediation CRD is served: the remediation tests of several files share it."""
    menv.cluster.wait_established("ovirtremediations.remediation.ovirt.org")
    return menv


# --- upstream Cluster API: its core controllers beside this project's Cluster API front end ------------------------

@pytest.fixture(scope="session")
def capi_core(cluster: Cluster, tmp_path_factory):
    """Cluster API's core manager (hack/capi/core.py) for the session, with the bed's control plane kind
    (hack/capi/controlplane.py): the management cluster is the workload cluster."""
    from hack.capi import controlplane
    from hack.capi.core import CapiCore

    core = CapiCore(cluster.kubectl, cluster.kubeconfig, tmp_path_factory.mktemp("capi"))
    core.start()
    controlplane.install(cluster.kubectl)
    try:
        yield core
    finally:
        core.stop()


@pytest.fixture
def capi(menv, capi_core):
    """One test's Cluster API view (capi_clusters.CapiEnv) over `menv`: its namespace, the engine, this project's
    controller with the Cluster API front end; what its Clusters leave is released before the namespace goes."""
    from capi_clusters import INFRA_CRDS, CapiEnv, release_namespace

    menv.cluster.wait_established(*INFRA_CRDS)  # config/crd, applied by `menv`
    env = CapiEnv(menv, capi_core)
    try:
        yield env
    finally:
        release_namespace(env)
