"""Fresh ServiceAccount identities for tests that must see exactly what some RBAC grants.

The session's `restricted` identity accumulates every binding any test applied to machine-api-controllers, so it
cannot show that one controller's group of rules (config/rbac/<group>) is enough on its own. These helpers bind
chosen groups, renamed for the test, to a ServiceAccount of the test's namespace, and hand back a kubeconfig with
that ServiceAccount's token (TokenRequest API), as a pod would authenticate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
RBAC = REPO / "config" / "rbac"
SHIPPED_NAMESPACE = "openshift-machine-api"
RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


def bind_groups(cluster, groups: tuple[str, ...], namespace: str, account: str) -> list[tuple[str, str]]:
    """Apply config/rbac/<group> for each group, every object renamed with the namespace as a suffix, namespaced
    rules moved to `namespace`, bindings pointing at `namespace`/`account`. Returns (kind, name) to delete."""
    cluster.kubectl("-n", namespace, "create", "serviceaccount", account)
    docs: list[dict[str, Any]] = []
    for group in groups:
        built = cluster.kubectl("kustomize", str(RBAC / group)).stdout
        docs += [d for d in yaml.safe_load_all(built) if d and d["kind"] in RBAC_KINDS]
    for doc in docs:
        meta = doc["metadata"]
        meta["name"] = f"{meta['name']}-{namespace}"
        meta.pop("labels", None)  # no aggregation into anyone else's role
        if doc["kind"] in ("Role", "RoleBinding"):
            assert meta["namespace"] == SHIPPED_NAMESPACE, doc
            meta["namespace"] = namespace
        if "roleRef" in doc:
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{namespace}"
            doc["subjects"] = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    return [(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"].startswith("Cluster")]


def unbind(cluster, cluster_scoped: list[tuple[str, str]]) -> None:
    """Delete the cluster-scoped objects of `bind_groups` (the namespaced ones go with the namespace)."""
    for kind, name in cluster_scoped:
        cluster.kubectl("delete", kind.lower(), name, "--wait=false", "--ignore-not-found", check=False)


def token(cluster, namespace: str, account: str) -> str:
    return cluster.kubectl("-n", namespace, "create", "token", account, "--duration=1h").stdout.strip()


def token_kubeconfig(cluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig for the admin's API server and CA, authenticating as the ServiceAccount's token."""
    view = json.loads(cluster.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    doc = {"apiVersion": "v1", "kind": "Config", "clusters": view["clusters"],
           "users": [{"name": account, "user": {"token": token(cluster, namespace, account)}}],
           "contexts": [{"name": account, "context": {"cluster": view["clusters"][0]["name"], "user": account}}],
           "current-context": account}
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path
