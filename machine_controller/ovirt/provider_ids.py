"""The VM a providerID names, for the code that acts on a VM by providerID (fencing, the node controller): one check,
here, so that no caller puts into a request what names no VM of ours (docs/architecture.md#acting-only-on-what-is-ours).
"""

from __future__ import annotations

from api.ids import PROVIDER_ID_PREFIX, vm_id_from_provider_id
from machine_controller.controllers.provider import InstanceNotOwned


def vm_id_named_by(provider_id: str | None, whose: str) -> str:
    """The VM id of `provider_id`; InstanceNotOwned (nothing asked, nothing done) when it names no oVirt VM:
    another provider's, or `ovirt://` followed by no VM id. `whose`: the object that gave it, for the message."""
    vm_id = vm_id_from_provider_id(provider_id)
    if vm_id is None:
        raise InstanceNotOwned(f"{whose}'s providerID {provider_id!r} names no oVirt VM (that is "
                               f"{PROVIDER_ID_PREFIX}<VM id>, a UUID): nothing is read from or sent to any VM for it",
                               "", provider_id or "")
    return vm_id
