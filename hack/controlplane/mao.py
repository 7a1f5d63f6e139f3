"""Build machine-api-operator's generic controllers (machineset, nodelink, machine-healthcheck) from its Go module,
pinned, cached outside the repository (go_bundle.py says how), so the end-to-end tests can run this project's
actuator side beside them as on an OpenShift cluster (docs/architecture.md#deployment-modes,
docs/architecture.md#the-test-bed).

The wrapper requires github.com/openshift/machine-api-operator at a pinned pseudo-version and nothing else: MAO's
own `replace` lines are not inherited, which is what we want, since their targets under github.com/openshift/kubernetes
are refused by the module proxy and serve only MAO's test binaries. The OpenShift CRDs the controllers read
(Infrastructure, ...) come from the github.com/openshift/api module MAO requires.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from .go_bundle import CopiedFile, FileSet, GoBundle, print_bundle

MAO_MODULE = "github.com/openshift/machine-api-operator"
MAO_VERSION = "v0.2.1-0.20260226113419-88465550a74b"
MAO_COMMANDS = ("machineset", "nodelink-controller", "machine-healthcheck")
OPENSHIFT_API_MODULE = "github.com/openshift/api"
# The config.openshift.io CRDs the controllers read, by their file in openshift/api (the Default feature set's
# variant where there is one): cmd/machineset reads the Infrastructure and DNS objects named `cluster` at start-up
# and exits without them (docs/compatibility.md#machine-api-operators-own-controllers).
OPENSHIFT_CRDS = (
    "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_infrastructures-Default.crd.yaml",
    "config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_dnses.crd.yaml",
)
MAO = GoBundle(
    title="machine-api-operator",
    cache="mao",
    module=MAO_MODULE,
    version=MAO_VERSION,
    commands=tuple((c, f"{MAO_MODULE}/cmd/{c}") for c in MAO_COMMANDS),
    file_sets=(FileSet("crds", OPENSHIFT_API_MODULE, tuple(CopiedFile(rel) for rel in OPENSHIFT_CRDS)),),
)


@dataclass(frozen=True)
class MaoBinaries:
    """Where the MAO controllers and the OpenShift CRDs of the pinned MAO version live."""

    bundle: GoBundle = MAO

    def path(self, command: str) -> Path:
        return self.bundle.path(command)

    def crds(self) -> list[Path]:
        return sorted(self.bundle.folder("crds").glob("*.yaml"))


def ensure_mao(b: MaoBinaries | None = None) -> MaoBinaries:
    b = b or MaoBinaries()
    b.bundle.ensure()
    return b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.controlplane.mao", description=__doc__.splitlines()[0])
    parser.add_argument("--print-dir", action="store_true", help="print the cache directory and exit")
    return print_bundle(MAO, parser.parse_args(argv).print_dir)


if __name__ == "__main__":
    raise SystemExit(main())
