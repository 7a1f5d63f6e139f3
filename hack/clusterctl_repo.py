"""Render the provider's clusterctl repository from config/ (docs/cluster-api.md#installing-with-clusterctl).

    python -m hack.clusterctl_repo --out DIR          # DIR/infrastructure-ovirt/<version>/ and DIR/clusterctl.yaml
    python -m hack.clusterctl_repo --out DIR --core   # also Cluster API's core provider of the pinned release

The layout is clusterctl's local repository (the provider contract's "Creating a local provider repository"): a
`<type>-<name>` folder with one folder per release, named by its semantic version, holding
- `metadata.yaml`: the release series of this project's version, mapped to the Cluster API contract the kinds
  implement (api/infrastructure.py's CONTRACT_VERSION);
- `infrastructure-components.yaml`: `kubectl kustomize config/clusterctl`, the CRDs, RBAC, admission policy and
  Deployment of the Cluster API front end, with its `${VARIABLES}` left for clusterctl to fill;
- `cluster-template*.yaml`: config/clusterctl/templates, one per flavor.
Nothing is written by hand: each file comes from config/, and the components are checked against the contract's
rules (one Namespace, every object labelled with the provider, the `manager` container) before anything is written.

`--core` adds `cluster-api/<release>/` (`core-components.yaml` built by kustomize from the pinned module's
core/config/default, as a release builds it, and the module's own `metadata.yaml`), so that `clusterctl init` can
take every provider it installs from local files; the images they name come from a registry all the same.
`clusterctl.yaml` beside them names each provider by a file:// URL (clusterctl's `providers:` configuration).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import yaml

from api.infrastructure import CONTRACT_VERSION

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "clusterctl"
TEMPLATES = CONFIG / "templates"
NAME = "ovirt"  # what a user passes to `--infrastructure`
TYPE = "InfrastructureProvider"
PROVIDER = f"infrastructure-{NAME}"  # clusterctl's provider label value and repository folder
PROVIDER_LABEL = "cluster.x-k8s.io/provider"
COMPONENTS = "infrastructure-components.yaml"
METADATA = "metadata.yaml"
METADATA_API_VERSION = "clusterctl.cluster.x-k8s.io/v1alpha3"
MANAGER_CONTAINER = "manager"  # the contract's name for the controller's container
_CORE_DEV_IMAGE = "gcr.io/k8s-staging-cluster-api/cluster-api-controller:main"
_CORE_RELEASE_IMAGE = "registry.k8s.io/cluster-api/cluster-api-controller"
# Kinds without a namespace among those config/clusterctl renders (clusterctl keeps its own list of such kinds).
_CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                   "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
# clusterctl's variables (drone/envsubst): ${NAME}, and ${NAME:=default}, ${NAME=default}, ${NAME:-default}.
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[=-])([^}]*))?\}")


class RepositoryError(Exception):
    """config/ renders something clusterctl's provider contract refuses."""


def project_version() -> str:
    """This project's version as a release folder name (semantic version with the leading v clusterctl expects)."""
    return "v" + tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def variables(text: str) -> dict[str, str | None]:
    """The `${VARIABLES}` of a components file or template, each with its default (None: the user must set it)."""
    found: dict[str, str | None] = {}
    for name, operator, default in _VARIABLE.findall(text):
        if operator:
            found[name] = default
        else:
            found.setdefault(name, None)
    return found


def metadata(version: str) -> dict[str, Any]:
    """metadata.yaml: the release series of `version` and the Cluster API contract it implements."""
    major, minor = (int(part) for part in version.lstrip("v").split(".")[:2])
    return {"apiVersion": METADATA_API_VERSION, "kind": "Metadata",
            "releaseSeries": [{"major": major, "minor": minor, "contract": CONTRACT_VERSION}]}


def _name(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind')} {'/'.join(filter(None, (meta.get('namespace'), meta.get('name'))))}"


def check_components(docs: list[dict[str, Any]]) -> None:
    """Refuse components that break the clusterctl contract's rules, naming the object and the rule."""
    namespaces = [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]
    if len(namespaces) != 1:
        raise RepositoryError(f"the components hold {len(namespaces)} Namespace objects {namespaces}; clusterctl "
                              "needs exactly one (its default target namespace)")
    for doc in docs:
        meta = doc.get("metadata") or {}
        if (meta.get("labels") or {}).get(PROVIDER_LABEL) != PROVIDER:
            raise RepositoryError(f"{_name(doc)} is not labelled {PROVIDER_LABEL}={PROVIDER}")
        if doc["kind"] not in _CLUSTER_SCOPED and meta.get("namespace") != namespaces[0]:
            raise RepositoryError(f"{_name(doc)} is not in the target namespace {namespaces[0]}")
        if doc["kind"] == "Deployment":
            names = [c["name"] for c in doc["spec"]["template"]["spec"]["containers"]]
            if MANAGER_CONTAINER not in names:
                raise RepositoryError(f"{_name(doc)} has no container named {MANAGER_CONTAINER} (it has {names})")


def _kustomize(kubectl: Path, directory: Path) -> str:
    out = subprocess.run([str(kubectl), "kustomize", str(directory)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RepositoryError(f"kubectl kustomize {directory} failed: {out.stderr.strip()}")
    return out.stdout


def components(kubectl: Path) -> str:
    """infrastructure-components.yaml: config/clusterctl as kustomize builds it, checked."""
    text = _kustomize(kubectl, CONFIG)
    check_components([d for d in yaml.safe_load_all(text) if d])
    return text


def templates() -> dict[str, str]:
    """The cluster templates by file name (`cluster-template.yaml`, `cluster-template-<flavor>.yaml`)."""
    found = {p.name: p.read_text() for p in sorted(TEMPLATES.glob("cluster-template*.yaml"))}
    if "cluster-template.yaml" not in found:
        raise RepositoryError(f"{TEMPLATES} has no cluster-template.yaml (the default flavor)")
    for name, text in found.items():
        for doc in yaml.safe_load_all(text):
            if doc and (doc.get("metadata") or {}).get("namespace") != "${NAMESPACE}":
                raise RepositoryError(f"{name}: {_name(doc)} is not in ${{NAMESPACE}} (the contract puts every "
                                      "object of a template in the target namespace)")
    return found


def flavors(names: Iterable[str]) -> list[str]:
    """The flavors of template file names: '' for the default one."""
    return sorted(n.removeprefix("cluster-template").removeprefix("-").removesuffix(".yaml") for n in names)


@dataclass(frozen=True)
class Repository:
    """A rendered local repository: `root` holds one folder per provider and clusterctl.yaml."""

    root: Path
    version: str

    @property
    def folder(self) -> Path:
        return self.root / PROVIDER / self.version

    @property
    def components(self) -> Path:
        return self.folder / COMPONENTS

    @property
    def config(self) -> Path:
        """The clusterctl configuration naming every provider of the repository by a file:// URL."""
        return self.root / "clusterctl.yaml"


def _write_config(root: Path, providers: list[dict[str, str]]) -> None:
    # JSON is YAML: clusterctl reads it with its YAML reader.
    (root / "clusterctl.yaml").write_text(json.dumps({"providers": providers}, indent=2) + "\n")


def capi_module() -> Path:
    """The pinned sigs.k8s.io/cluster-api module's directory (its config/ trees), the release the bed's manager and
    clusterctl are built from: the one the bundle's own wrapper module selects."""
    from hack.controlplane.capi import CAPI, CAPI_MODULE
    from hack.controlplane.go_bundle import module_dir

    return module_dir(CAPI.ensure().root / "src", CAPI_MODULE)


def render_core(root: Path, kubectl: Path) -> dict[str, str]:
    """Cluster API's core provider of the pinned release in `root`/cluster-api/<release>/, and its providers entry."""
    from hack.controlplane.capi import CAPI_VERSION

    module = capi_module()
    folder = root / "cluster-api" / CAPI_VERSION
    folder.mkdir(parents=True, exist_ok=True)
    text = _kustomize(kubectl, module / "core" / "config" / "default")
    # The module's kustomization names the development image; a release's manifests name the production registry's
    # image of the release (the module's Makefile: manifest-modification with PROD_REGISTRY and RELEASE_TAG).
    if _CORE_DEV_IMAGE not in text:
        raise RepositoryError(f"{CAPI_VERSION}'s core/config/default no longer names {_CORE_DEV_IMAGE}")
    text = text.replace(_CORE_DEV_IMAGE, f"{_CORE_RELEASE_IMAGE}:{CAPI_VERSION}")
    (folder / "core-components.yaml").write_text(text)
    (folder / METADATA).write_text((module / METADATA).read_text())
    return {"name": "cluster-api", "type": "CoreProvider", "url": f"file://{folder / 'core-components.yaml'}"}


def render(root: Path, kubectl: Path, version: str | None = None, core: bool = False) -> Repository:
    """Write the repository under `root` (its folders replaced, nothing else touched) and return where it is."""
    repo = Repository(root, version or project_version())
    text, files = components(kubectl), templates()
    repo.folder.mkdir(parents=True, exist_ok=True)
    for stale in repo.folder.glob("*.yaml"):
        stale.unlink()
    repo.components.write_text(text)
    (repo.folder / METADATA).write_text(yaml.safe_dump(metadata(repo.version), sort_keys=False))
    for name, body in files.items():
        (repo.folder / name).write_text(body)
    providers = [{"name": NAME, "type": TYPE, "url": f"file://{repo.components}"}]
    if core:
        providers.insert(0, render_core(root, kubectl))
    _write_config(root, providers)
    return repo


def main(argv: list[str] | None = None) -> int:
    from hack.controlplane.build import Binaries, ensure_binaries

    parser = argparse.ArgumentParser(prog="python -m hack.clusterctl_repo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the repository's root directory")
    parser.add_argument("--version", default=None, help="the release folder (default: this project's version)")
    parser.add_argument("--core", action="store_true",
                        help="also Cluster API's core provider of the pinned release (builds it if needed)")
    args = parser.parse_args(argv)
    kubectl = ensure_binaries(Binaries()).path("kubectl")
    repo = render(args.out.resolve(), kubectl, args.version, core=args.core)
    print(f"{repo.folder}\nclusterctl --config {repo.config} ... --infrastructure {NAME}:{repo.version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
