"""The handle e2e tests hold on a Kubernetes cluster: its kubeconfigs, the identities tests may use, kubectl, and the
project's CRDs. conftest.py's `cluster` fixture makes the session's; a module with a control plane of its own (e.g.
test_config_applied.py) makes its own."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import kubernetes
import yaml

from hack.controlplane import certs
from hack.controlplane.cluster import LocalControlPlane
from hack.crds_established import wait_established
from machine_controller.runtime.testing import wait_until

REPO = Path(__file__).resolve().parents[2]
CRD_NAMES = (
    "machines.machine.openshift.io",
    "machinesets.machine.openshift.io",
    "machinehealthchecks.machine.openshift.io",
)
# The kinds whose objects the project's controllers hold with a finalizer (api/keys.py, api/remediation.py).
FINALIZED = ("/apis/machine.openshift.io/v1beta1/namespaces/{ns}/machines",
             "/apis/remediation.ovirt.org/v1alpha1/namespaces/{ns}/ovirtremediations")


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
        self._admin: kubernetes.client.ApiClient | None = None
        self._admin_lock = threading.Lock()

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

    def read(self, path: str) -> dict | None:
        """The object at the API path `path`, read as admin; None when the server says 404. For the tests' polls of
        one object, which started a kubectl process each (docs/architecture.md#the-test-bed). Unlike `kubectl get`,
        the object keeps its managedFields."""
        return self._call("GET", path)

    def _call(self, method: str, path: str, body: dict | None = None, none_on: int | None = 404) -> dict | None:
        """One request as admin over a pooled connection: the answer's object, None when the server answers
        `none_on` (404: gone); any other status from 300 up fails."""
        with self._admin_lock:
            if self._admin is None:
                self._admin = self.api_client()
            client = self._admin
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else None
        response = client.call_api(*client.param_serialize(method, path, header_params=headers, body=body,
                                                           auth_settings=["BearerToken"]))
        data = response.read()
        if response.status == none_on:
            return None
        if response.status >= 300:
            raise AssertionError(f"{method} {path}: {response.status} {data[:500]!r}")
        return json.loads(data)

    def delete_namespace(self, name: str) -> None:
        """Delete a test's namespace without waiting, once its controllers are stopped: the finalizers they would
        have removed go first. Left on, they kept the namespace `Terminating` for the rest of the session, and
        kube-controller-manager's namespace controller went back to each such namespace every few seconds, listing
        and deleting every resource type in it each time (docs/architecture.md#the-test-bed)."""
        for kind in FINALIZED:
            collection = kind.format(ns=name)
            for obj in (self._call("GET", collection) or {}).get("items", []):
                if obj["metadata"].get("finalizers"):
                    self._call("PATCH", f"{collection}/{obj['metadata']['name']}", {"metadata": {"finalizers": None}})
        self._call("DELETE", f"/api/v1/namespaces/{name}")

    def _is_impersonating(self) -> bool:
        return "as:" in self.kubeconfig_for("restricted").read_text()

    # --- kubectl ------------------------------------------------------------------------------------
    # `input`, as subprocess.run names it: the tests' many calls read like that function's.
    def kubectl(self, *args: str, input: str | None = None, check: bool = True, user: str = "admin",  # noqa: A002
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """kubectl as `user`. The Machine API's kinds are named as a user of a cluster that also serves Cluster
        API's names them: `machine` alone would be Cluster API's Machine once its CRDs are installed on the same
        control plane (test_capi_*), so the bare names are qualified with machine.openshift.io."""
        args = tuple(_machine_api_qualified(a) for a in args)
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

    def create_namespace(self, name: str, exist_ok: bool = False, timeout: float = 30) -> None:
        """Over the API: a test's set-up starts no kubectl for it. An existing one is an error unless `exist_ok`.
        Returns once kube-controller-manager has made the namespace's `default` ServiceAccount: the API server
        refuses pods that name an account it cannot find, and a test's first pod can come a moment after."""
        self._call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                   none_on=409 if exist_ok else None)
        account = f"/api/v1/namespaces/{name}/serviceaccounts/default"
        if not wait_until(lambda: self.read(account) is not None, timeout, interval=0.05):
            raise TimeoutError(f"no ServiceAccount default in namespace {name} after {timeout}s")

    def ensure_namespace(self, name: str) -> None:
        self.create_namespace(name, exist_ok=True)


# The bare resource names the Machine API shares with Cluster API (docs/cluster-api.md), by their qualified name.
_MACHINE_API_NAMES = {name: f"{plural}.machine.openshift.io" for plural, names in (
    ("machines", ("machine", "machines")),
    ("machinesets", ("machineset", "machinesets")),
    ("machinehealthchecks", ("machinehealthcheck", "machinehealthchecks", "mhc", "mhcs")),
) for name in names}


def _machine_api_qualified(arg: str) -> str:
    """`arg`, with a bare Machine API resource name (alone or as `name/object`) qualified by its group."""
    resource, slash, rest = arg.partition("/")
    qualified = _MACHINE_API_NAMES.get(resource)
    return f"{qualified}{slash}{rest}" if qualified else arg
