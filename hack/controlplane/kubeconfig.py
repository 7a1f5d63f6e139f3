"""Kubeconfig files for the local control plane's identities (certificates embedded, so a file is enough)."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from .certs import Identity, Pki


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, server: str, pki: Pki, ident: Identity) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_cert)}}],
        "users": [{"name": ident.name, "user": {
            "client-certificate-data": _b64(pki.client_cert(ident)),
            "client-key-data": _b64(pki.client_key(ident)),
        }}],
        "contexts": [{"name": ident.name, "context": {"cluster": "local", "user": ident.name}}],
        "current-context": ident.name,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
