"""Build the CSI test tools from their Go modules at pinned releases (go_tools.py says how), cached outside the
repository: csi-sanity (the CSI conformance suite) and the external-provisioner and external-attacher sidecars, so the
tests can run the real Kubernetes side of CSI against ovirt-csi-driver (docs/storage.md#csi-driver).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .go_tools import GoTool, build_tool

__all__ = ["CSI_ATTACHER", "CSI_PROVISIONER", "CSI_SANITY", "TOOLS", "GoTool", "build_tool", "ensure_tools"]

# Pinned versions, the newest of each major the module proxy listed when they were chosen.
CSI_SANITY = GoTool("csi-sanity", "github.com/kubernetes-csi/csi-test/v5", "v5.6.0", "cmd/csi-sanity")
CSI_PROVISIONER = GoTool("csi-provisioner", "github.com/kubernetes-csi/external-provisioner/v6", "v6.4.0",
                         "cmd/csi-provisioner")
CSI_ATTACHER = GoTool("csi-attacher", "github.com/kubernetes-csi/external-attacher/v4", "v4.13.0",
                      "cmd/csi-attacher")
TOOLS = (CSI_SANITY, CSI_PROVISIONER, CSI_ATTACHER)


def ensure_tools(tools: tuple[GoTool, ...] = TOOLS) -> dict[str, Path]:
    return {t.name: build_tool(t) for t in tools}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.controlplane.csi_tools", description=__doc__.splitlines()[0])
    parser.add_argument("tools", nargs="*", help=f"which of {', '.join(t.name for t in TOOLS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = set(args.tools) - {t.name for t in TOOLS}
    if unknown:
        parser.error(f"unknown tools: {', '.join(sorted(unknown))}")
    chosen = tuple(t for t in TOOLS if not args.tools or t.name in args.tools)
    for path in ensure_tools(chosen).values():
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
