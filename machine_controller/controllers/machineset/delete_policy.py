"""Which Machines a MachineSet deletes when it scales down (docs/compatibility.md#machinesets "Delete policies",
docs/compatibility.md#autoscaler). Pure functions over parsed Machines; the reconciler does the deleting.

MAO gives every Machine a float priority and sorts with Go's unstable `sort.Sort`, so equal priorities come out
in an arbitrary order, and under its release-4.13 `Oldest` formula a very old healthy Machine ties with one the
autoscaler marked. Here the ranking is a tuple, compared tier first, so the order is total and deterministic:

1. already being deleted (MAO's mustDelete under every policy);
2. carrying a delete-machine annotation with a non-empty value, either spelling, under every policy. MAO's Random
   and Newest read only the new key, but cluster-autoscaler up to 4.10 writes only the legacy one, and the
   autoscaler has already decremented replicas for *that* Machine: deleting another one leaves its node running
   and the annotation stale (kubernetes/autoscaler#3034);
3. with `status.errorReason` or `status.errorMessage` set (a failed Machine is worth nothing);
4. then the policy: Random prefers Machines without a nodeRef (no workload yet, MAO's preferDelete), Newest the
   youngest, Oldest the oldest. Newest/Oldest ignore nodeRef, as MAO does: during a replacement (scale up by one,
   then down by one with Oldest) the new, still node-less Machine must survive.
Within a rank, name order decides. MAO's "Random" is no random draw either: it means "no age preference".

A Machine without a usable creationTimestamp (absent, or in the future: clock skew) counts as the newest one,
matching MAO, where such a Machine is mustNotDelete under Oldest and mustDelete under Newest.
"""

from __future__ import annotations

import datetime as dt
from typing import Sequence

from api import keys
from api.machine import Machine
from api.machineset import DeletePolicy
from api.meta import parse_time


def is_marked_for_deletion(machine: Machine) -> bool:
    """The autoscaler's (or a user's) mark: either annotation key, with a non-empty value."""
    return any(machine.metadata.annotations.get(k) for k in keys.DELETE_MACHINE_ANNOTATIONS)


def has_error(machine: Machine) -> bool:
    return bool(machine.status.error_reason or machine.status.error_message)


def _age_seconds(machine: Machine, now: dt.datetime) -> float:
    """Age in seconds; 0 for a Machine whose creation time is unknown or in the future."""
    created = machine.metadata.creation_timestamp
    if not created:
        return 0.0
    return max((now - parse_time(created)).total_seconds(), 0.0)


def delete_rank(machine: Machine, policy: DeletePolicy, now: dt.datetime) -> tuple:
    """Sort key: Machines with the larger rank are deleted first."""
    tier = (machine.metadata.deleting, is_marked_for_deletion(machine), has_error(machine))
    if policy == DeletePolicy.RANDOM:
        return (*tier, machine.status.node_ref is None, 0.0)
    age = _age_seconds(machine, now)
    return (*tier, False, age if policy == DeletePolicy.OLDEST else -age)


def machines_to_delete(machines: Sequence[Machine], count: int, policy: DeletePolicy,
                       now: dt.datetime) -> list[Machine]:
    """The `count` Machines to delete, most deletable first; all of them if `count` >= len(machines)."""
    if count <= 0:
        return []
    by_name = sorted(machines, key=lambda m: m.metadata.name)
    # sorted() is stable: after ordering by name, equal ranks stay in name order.
    ranked = sorted(by_name, key=lambda m: delete_rank(m, policy, now), reverse=True)
    return ranked[:count]
