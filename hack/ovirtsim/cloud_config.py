"""What a cloud-init guest makes of the user data it boots with (hack/ovirtsim/README.md#behaviour): whether it is a
cloud-config the guest runs, and the provider ID its kubelet is started with.

A Kubernetes node image for Cluster API (kubeadm's, image-builder's) joins with the kubelet flags its bootstrap
cloud-config writes; a Node gets `spec.providerID` only from the kubelet's `--provider-id` flag (or a cloud
controller manager), and Cluster API's Machine controller finds a Machine's Node by that field alone. The simulated
kubelet reads the flag where the distributions' kubelet units read extra flags from (`KUBELET_EXTRA_ARGS` in
/etc/default/kubelet on Debian and Ubuntu, /etc/sysconfig/kubelet on RHEL), from a `write_files` entry of the
cloud-config. The VM's id cannot be in a bootstrap Secret that every Machine of a MachineDeployment shares, so, as
cloud-init does for user data starting with `## template: jinja`, the instance data variable `{{ v1.instance_id }}`
is replaced with the instance id, which the simulator's config drive gives as the VM id.
"""

from __future__ import annotations

import re
import shlex

import yaml

CLOUD_CONFIG_HEADER = "#cloud-config"
JINJA_HEADER = "## template: jinja"
KUBELET_ENV_FILES = ("/etc/default/kubelet", "/etc/sysconfig/kubelet")
_INSTANCE_ID = re.compile(r"\{\{\s*v1\.instance_id\s*\}\}")


def _rendered(payload: str, instance_id: str) -> str | None:
    """The cloud-config cloud-init would run (jinja's instance id filled in), or None when it is none."""
    first, _, rest = payload.partition("\n")
    if first.strip() == JINJA_HEADER:
        payload = _INSTANCE_ID.sub(instance_id, rest)
    if not payload.startswith(CLOUD_CONFIG_HEADER):
        return None
    return payload


def parse(payload: str | None, instance_id: str) -> dict | None:
    """The cloud-config as a mapping, or None when the payload is not one cloud-init would run (no header, YAML that
    does not parse, or not a mapping)."""
    rendered = _rendered(payload or "", instance_id)
    if rendered is None:
        return None
    try:
        doc = yaml.safe_load(rendered)
    except yaml.YAMLError:
        return None
    if doc is None:
        return {}
    return doc if isinstance(doc, dict) else None


def kubelet_provider_id(config: dict) -> str | None:
    """The `--provider-id` the kubelet is started with, from the extra-flags file the cloud-config writes."""
    for entry in config.get("write_files") or ():
        if not isinstance(entry, dict) or entry.get("path") not in KUBELET_ENV_FILES:
            continue
        for line in str(entry.get("content") or "").splitlines():
            name, _, value = line.partition("=")
            if name.strip() != "KUBELET_EXTRA_ARGS":
                continue
            # The file is read as shell assignments; the unit then splits the value at blanks ($KUBELET_EXTRA_ARGS).
            for flag in " ".join(shlex.split(value)).split():
                if flag.startswith("--provider-id="):
                    return flag.removeprefix("--provider-id=")
    return None
