"""Build Cluster API's core manager and clusterctl from the sigs.k8s.io/cluster-api Go module, pinned, cached
outside the repository (go_bundle.py says how), so the end-to-end tests can run upstream Cluster API's own
controllers against the local control plane (docs/architecture.md#the-test-bed).

The wrapper requires sigs.k8s.io/cluster-api and its API submodule sigs.k8s.io/cluster-api/api at the same pinned
release: the main module replaces the submodule with its own ./api directory, and a dependency's `replace` lines
never apply, so the wrapper names the published twin itself. The CRDs and the webhook configuration the manager
serves come from the module's directory (core/config/crd/bases, core/config/webhook), so the bed installs exactly
what a release installs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from .go_bundle import CopiedFile, FileSet, GoBundle, print_bundle

CAPI_MODULE = "sigs.k8s.io/cluster-api"
CAPI_VERSION = "v1.14.2"
WEBHOOK_MANIFEST = "webhooks.yaml"
CAPI = GoBundle(
    title="Cluster API",
    cache="capi",
    module=CAPI_MODULE,
    version=CAPI_VERSION,
    go="1.26.0",
    # The core manager is what the bed runs; clusterctl serves the provider's clusterctl contract.
    commands=(("capi-manager", f"{CAPI_MODULE}/core"), ("clusterctl", f"{CAPI_MODULE}/cmd/clusterctl")),
    siblings=(f"{CAPI_MODULE}/api",),
    file_sets=(FileSet("config", CAPI_MODULE, (CopiedFile("core/config/crd/bases/*.yaml", into="crds"),
                                               CopiedFile("core/config/webhook/manifests.yaml",
                                                          name=WEBHOOK_MANIFEST))),),
)


@dataclass(frozen=True)
class CapiBinaries:
    """Where the Cluster API binaries, CRDs and webhook manifest of the pinned release live."""

    bundle: GoBundle = CAPI

    def path(self, command: str) -> Path:
        return self.bundle.path(command)

    def crds(self) -> list[Path]:
        return sorted((self.bundle.folder("config") / "crds").glob("*.yaml"))

    @property
    def webhooks(self) -> Path:
        return self.bundle.folder("config") / WEBHOOK_MANIFEST


def ensure_capi(b: CapiBinaries | None = None) -> CapiBinaries:
    b = b or CapiBinaries()
    b.bundle.ensure()
    return b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.controlplane.capi", description=__doc__.splitlines()[0])
    parser.add_argument("--print-dir", action="store_true", help="print the cache directory and exit")
    return print_bundle(CAPI, parser.parse_args(argv).print_dir)


if __name__ == "__main__":
    raise SystemExit(main())
