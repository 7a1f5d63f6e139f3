"""A Node's volumes, once its VM can write through them no more: what still holds them there, and the out-of-service
taint that makes Kubernetes release them at once (non-graceful node shutdown; docs/fencing.md#one-cycle).

Kubernetes detaches a volume from a Node that cannot confirm the unmount (it is unreachable, or deleted) only
after six minutes (the attach-detach controller's maxWaitForUnmountDuration), and a ReadWriteOnce volume attaches
nowhere else until then. The taint says the node is shut down: its pods are deleted and its volumes detached now.
It is put on only when the VM is confirmed off (fencing) or removed (a Machine's deletion), never on a guess.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable

from api.meta import format_time, now, parse_time
from api.remediation import OUT_OF_SERVICE_TAINT_KEY, OUT_OF_SERVICE_TAINT_VALUE
from machine_controller.runtime.controller import Result
from machine_controller.runtime.events import EventRecorder
from machine_controller.runtime.kube import Rest, is_conflict, is_not_found

from machine_controller.controllers.resources import NODES, VOLUME_ATTACHMENTS

# The VM is gone whatever happens: a Node whose volumes Kubernetes has not released this long after the taint is
# deleted all the same (its attachments then wait out Kubernetes' own six minutes).
RELEASE_TIMEOUT_S = 300.0
RELEASE_POLL_S = 2.0


class TaintsChanged(Exception):
    """The Node's taints changed since they were read: read the Node again and retry."""


def volume_attachments(rest: Rest, node_name: str) -> list[dict]:
    """The VolumeAttachments that attach a volume to `node_name`."""
    items = rest.request("GET", VOLUME_ATTACHMENTS.path()).get("items", [])
    return [a for a in items if (a.get("spec") or {}).get("nodeName") == node_name]


def out_of_service_taint(time_added: str) -> dict[str, str]:
    return {"key": OUT_OF_SERVICE_TAINT_KEY, "value": OUT_OF_SERVICE_TAINT_VALUE, "effect": "NoExecute",
            "timeAdded": time_added}


def patch_taints(rest: Rest, node_name: str, old: list[dict], new: list[dict]) -> None:
    """Replace the Node's taints `old` (as read) by `new`. A JSON patch that tests the taints it read: a concurrent
    change of the taints (not a heartbeat) raises TaintsChanged. A Node gone meanwhile has nothing to patch."""
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/spec/taints", "value": old}] if old else []
    ops.append({"op": "add", "path": "/spec/taints", "value": new})
    try:
        rest.request("PATCH", NODES.path(None, node_name), body=ops, content_type="application/json-patch+json")
    except Exception as e:
        if is_not_found(e):
            return
        if is_conflict(e) or getattr(e, "status", None) == 422:  # the test op failed: taints changed meanwhile
            raise TaintsChanged() from None
        raise


@dataclass(frozen=True)
class Release:
    held: int  # VolumeAttachments the Node still has
    tainted_now: bool  # this call put the out-of-service taint on
    waited_s: float  # since the taint was put on (its timeAdded)

    @property
    def done(self) -> bool:
        """The Node may be deleted: nothing is attached to it any more, or it was given RELEASE_TIMEOUT_S."""
        return not self.held or self.waited_s >= RELEASE_TIMEOUT_S


def release_volumes(rest: Rest, node: dict, clock: Callable[[], dt.datetime] = now,
                    attached: list[dict] | None = None) -> Release:
    """For a Node whose VM is gone (removed, or no longer exists): the out-of-service taint if it still has
    VolumeAttachments, so that Kubernetes deletes its pods and detaches them now. The taint's timeAdded says since
    when, for every controller and across restarts. Raises TaintsChanged when its taints changed since `node` was
    read. `attached`: the Node's VolumeAttachments when the caller has just listed them."""
    name = node["metadata"]["name"]
    if attached is None:
        attached = volume_attachments(rest, name)
    if not attached:
        return Release(0, False, 0.0)
    taints = list((node.get("spec") or {}).get("taints") or [])
    mine = next((t for t in taints if t.get("key") == OUT_OF_SERVICE_TAINT_KEY and t.get("effect") == "NoExecute"),
                None)
    if mine is None:
        patch_taints(rest, name, taints, [*taints, out_of_service_taint(format_time(clock()))])
        return Release(len(attached), True, 0.0)
    added = parse_time(mine["timeAdded"]) if mine.get("timeAdded") else clock()
    return Release(len(attached), False, (clock() - added).total_seconds())


def hold_for_volumes(rest: Rest, node: dict, events: EventRecorder, involved: dict, why: str,
                     attached: list[dict] | None = None) -> Result | None:
    """Before deleting a Node whose VM is gone (`why` says how, for the events on `involved`): release its volumes
    (release_volumes, given `attached` if the caller has just listed them) and wait for them. None: the Node may be
    deleted now."""
    name = node["metadata"]["name"]
    try:
        release = release_volumes(rest, node, attached=attached)
    except TaintsChanged:
        return Result(requeue_after=0.2)
    if release.tainted_now:
        events.normal(involved, "ReleasingStorage", f"{why}: node {name} tainted out-of-service, so that Kubernetes "
                      f"detaches its {release.held} volume(s) now")
    if not release.done:
        return Result(requeue_after=RELEASE_POLL_S)
    if release.held:
        events.warning(involved, "StorageReleaseSlow", f"{release.held} volume attachment(s) of node {name} still "
                       f"there {RELEASE_TIMEOUT_S:.0f}s after the out-of-service taint; deleting the node all the same")
    return None
