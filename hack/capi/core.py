"""Run upstream Cluster API's core manager (built by hack/controlplane/capi.py) against the local control plane,
with its CRDs and admission/conversion webhooks installed as a release installs them, so the end-to-end tests prove
behaviour against Cluster API's real controllers, and `make demo` and the benchmark drive them
(docs/architecture.md#the-test-bed).

What a release install does, and what the bed does instead:
- The CRDs of core/config/crd/bases are installed with the conversion webhook the release's kustomize patches add
  (`spec.conversion.strategy: Webhook`, path `/convert`), and the mutating and validating webhook configurations of
  core/config/webhook under the names the release gives them (`capi-` prefix), with every webhook, path, rule and
  failure policy unchanged.
- A release reaches the manager through a Service (`capi-webhook-service`) in front of its Pod, with a serving
  certificate issued by cert-manager's self-signed Issuer and the CA bundle injected by cert-manager's cainjector.
  The bed has no Pod network for a host process and no cert-manager: the manager runs as a process on this
  machine, the webhook clientConfigs name it by `url: https://127.0.0.1:<port><path>` (the API server is a process
  on the same machine), and the serving certificate is self-signed for 127.0.0.1 (hack/controlplane/certs.py), its
  own certificate being the CA bundle, exactly what cert-manager's self-signed Issuer leaves in a Secret's ca.crt.
- Flags are a clusterctl install's (core/config/manager/manager.yaml with its defaults: the same feature gates,
  secure diagnostics), except: leader election is off (one replica; controller-runtime finds the Lease namespace
  only in a Pod), and every listener is on a free loopback port (the defaults 9440/8443/9443 would clash between
  test workers). The webhook server has no address flag: it listens on every interface, on its free port.
- The manager runs with the admin kubeconfig: the release's ClusterRole is not what is proven here.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Callable

import yaml

from hack.controller_process import Process, free_port
from hack.controlplane.capi import CapiBinaries, ensure_capi
from hack.controlplane.certs import self_signed_serving
from hack.crds_established import wait_established

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

# The feature gates of a clusterctl install at their defaults (core/config/manager/manager.yaml of the pinned
# release): none is changed for the bed.
FEATURE_GATES = ("MachinePool=true,ClusterTopology=false,RuntimeSDK=false,MachineSetPreflightChecks=true,"
                 "MachineWaitForVolumeDetachConsiderVolumeAttachments=true,PriorityQueue=true,"
                 "ReconcilerRateLimiting=true,InPlaceUpdates=false,MachineTaintPropagation=false")
# The names a release's kustomize (namePrefix `capi-`) gives the two webhook configurations.
WEBHOOK_CONFIGURATIONS = {"MutatingWebhookConfiguration": "capi-mutating-webhook-configuration",
                          "ValidatingWebhookConfiguration": "capi-validating-webhook-configuration"}
# Marks the CRDs this bed installed, so a cluster with a real Cluster API install is never overwritten.
BED_LABEL = "ovirt-machine-controller.testbed/capi"


class CapiCore:
    """Cluster API's core manager as one process, and what it needs installed in the cluster."""

    def __init__(self, kubectl: Kubectl, kubeconfig: Path, work_dir: Path, binaries: CapiBinaries | None = None):
        self.kubectl = kubectl
        self.binaries = ensure_capi(binaries)
        self.work_dir = work_dir
        self.webhook_port = free_port()
        self.cert_dir = work_dir / "capi-serving-certs"
        health = free_port()
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}  # the flag is the one source of truth
        args = [str(self.binaries.path("capi-manager")), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
                f"--health-addr=127.0.0.1:{health}", f"--diagnostics-address=127.0.0.1:{free_port()}",
                "--insecure-diagnostics=false", f"--feature-gates={FEATURE_GATES}",
                f"--webhook-port={self.webhook_port}", f"--webhook-cert-dir={self.cert_dir}"]
        self.process = Process(args, work_dir / "capi-manager.log", health, env=env)

    def _url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.webhook_port}{path}"

    def _client_config(self, path: str, ca_bundle: str) -> dict[str, str]:
        return {"url": self._url(path), "caBundle": ca_bundle}

    def _refuse_foreign_install(self) -> None:
        out = self.kubectl("get", "crd", "clusters.cluster.x-k8s.io", "-o", "json", check=False)
        if out.returncode == 0 and BED_LABEL not in (json.loads(out.stdout)["metadata"].get("labels") or {}):
            raise RuntimeError("this cluster already has Cluster API installed (CRD clusters.cluster.x-k8s.io not "
                               f"labelled {BED_LABEL}); the test bed does not overwrite it")

    def _crds(self, ca_bundle: str) -> list[dict[str, Any]]:
        crds = []
        for path in self.binaries.crds():
            crd = yaml.safe_load(path.read_text())
            crd["metadata"].setdefault("labels", {})[BED_LABEL] = "true"
            crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"], "clientConfig": self._client_config("/convert", ca_bundle)}}
            crds.append(crd)
        return crds

    def _webhook_configurations(self, ca_bundle: str) -> list[dict[str, Any]]:
        docs = [d for d in yaml.safe_load_all(self.binaries.webhooks.read_text()) if d]
        for doc in docs:
            doc["metadata"] = {"name": WEBHOOK_CONFIGURATIONS[doc["kind"]], "labels": {BED_LABEL: "true"}}
            for hook in doc["webhooks"]:
                hook["clientConfig"] = self._client_config(hook["clientConfig"]["service"]["path"], ca_bundle)
        return docs

    def _apply(self, items: list[dict[str, Any]]) -> None:
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                     input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    def start(self, timeout: float = 120.0) -> "CapiCore":
        """Install the CRDs, start the manager, and once it is ready (caches synced, webhook server serving) install
        the webhook configurations: before that, every write of its kinds would be refused (failurePolicy Fail)."""
        self._refuse_foreign_install()
        ca_bundle = base64.b64encode(self_signed_serving(self.cert_dir, ("127.0.0.1", "localhost")).read_bytes()
                                     ).decode()
        crds = self._crds(ca_bundle)
        self._apply(crds)
        wait_established(lambda *args: self.kubectl(*args, check=False).stdout,
                         *(c["metadata"]["name"] for c in crds))
        self.process.start()
        self.process.wait_ready(timeout)
        self._apply(self._webhook_configurations(ca_bundle))
        return self

    def stop(self) -> None:
        """Stop the manager and remove its webhook configurations, which would refuse every later write of Cluster
        API's kinds with no server behind them. The CRDs stay (objects in them may outlive the test)."""
        self.process.stop()
        for kind, name in WEBHOOK_CONFIGURATIONS.items():
            self.kubectl("delete", kind.lower(), name, "--ignore-not-found", check=False)

    def logs(self, tail: int = 8000) -> str:
        return f"--- {self.process.log_path.name}\n{self.process.log_text()[-tail:]}"
