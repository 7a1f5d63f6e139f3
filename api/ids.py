"""oVirt ids and providerIDs, in one place: what counts as an engine id, and how a providerID names a VM.

Every id the engine gives (VMs, disks, clusters, hosts) is a UUID. A string that is not one names nothing of ours,
so it is refused where it enters (a Machine's annotation or providerID, a CSI volume id, a PV's handle) instead of
being put into a URL path or a search, where a space or a quote turns into an HTTP parse error retried for ever
(docs/architecture.md#acting-only-on-what-is-ours).
"""

from __future__ import annotations

import re

PROVIDER_ID_PREFIX = "ovirt://"
# The form of an engine id, as a whole-string pattern that Python's re and CEL's RE2 (the admission policy,
# hack/gen_admission.py) read alike.
OVIRT_ID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_UUID = re.compile(OVIRT_ID_PATTERN)
# What a message shows as the form an id must have.
OVIRT_ID_EXAMPLE = "5f4c6a1e-8d3b-4f2a-9c7e-1b2d3e4f5a6b"
NOT_AN_OVIRT_ID = f"must be an oVirt ID, a UUID such as {OVIRT_ID_EXAMPLE}"


def is_ovirt_id(value: str | None) -> bool:
    """An engine id: a UUID, in its canonical 8-4-4-4-12 form. The whole string (`fullmatch`: with `match`, the
    pattern's `$` would take a trailing newline too)."""
    return isinstance(value, str) and _UUID.fullmatch(value) is not None


def provider_id(vm_id: str) -> str:
    return PROVIDER_ID_PREFIX + vm_id


def is_ovirt_provider_id(pid: str | None) -> bool:
    """A providerID of this provider's form (whatever follows the prefix): another provider's is not ours."""
    return (pid or "").startswith(PROVIDER_ID_PREFIX)


def vm_id_from_provider_id(pid: str | None) -> str | None:
    """The VM id a providerID names, or None when it is another provider's or what follows `ovirt://` is no id."""
    if not is_ovirt_provider_id(pid):
        return None
    vm_id = (pid or "")[len(PROVIDER_ID_PREFIX):]
    return vm_id if is_ovirt_id(vm_id) else None
