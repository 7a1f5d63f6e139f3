"""The one way a reconciler writes to the object it reconciles: a merge patch of only the fields that changed, of
its metadata (and spec) or of its status, optionally guarded by resourceVersion
(docs/architecture.md#writing-an-object).

A guarded write is optimistic concurrency: it fails with 409 when the object moved on since it was read, so a pass
that decided from an old version never overwrites a newer one. A lost race ends the pass with the runtime's own
`Conflict` (the controller loop looks at the newer object again shortly) or `Gone` (the object was deleted while
the pass ran: nothing is left to do), as controller-runtime's loop treats a conflict and a not-found. Neither is an
error, neither is counted as one, and no reconciler needs an exception class of its own for them. A unit test
that calls a reconciler's `reconcile(key)` itself ends a pass the same way through `runtime.controller.settle`.
"""

from __future__ import annotations

from typing import Any, Mapping

from .kube import Resource, Rest, is_conflict, is_not_found


class Conflict(Exception):
    """The object moved on since it was read (409 on a guarded write): the pass is repeated on the newer one."""


class Gone(Exception):
    """The object was deleted while the pass was writing to it (404): nothing is left to do."""


def changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """What of `new` a merge patch must carry to make `old` hold it (RFC 7386): a map is merged key by key, so of a
    map present in both only its changed keys are kept; anything else (a list, a value) is sent whole when it
    differs. A None removes its field, so a None for a field `old` does not have is no change."""
    changed: dict[str, Any] = {}
    for k, v in new.items():
        was = old.get(k)
        if isinstance(v, Mapping) and isinstance(was, Mapping):
            inner = changed_fields(was, v)
            if inner:
                changed[k] = inner
        elif was != v and not (v is None and k not in old):
            changed[k] = v
    return changed


def write(rest: Rest, resource: Resource, obj: dict[str, Any], *, metadata: Mapping[str, Any] | None = None,
          spec: Mapping[str, Any] | None = None, status: Mapping[str, Any] | None = None,
          guarded: bool = False, stamp: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Merge-patch the changed fields of `obj`: `metadata` (with `spec`) to the object, or `status` to its
    `/status`, never both in one call (the API server takes each through its own endpoint). Returns the object as
    the server stored it, or None when nothing changed and nothing was sent. `guarded` sends `obj`'s
    resourceVersion. `stamp` (a status's `lastUpdated`) is sent along only when some other field changed. Raises
    `Conflict` or `Gone` when the write lost a race; any other failure as it came."""
    if status is not None and (metadata is not None or spec is not None):
        raise ValueError("status is written through /status, metadata and spec through the object: one per write")
    meta = obj["metadata"]
    patch: dict[str, Any] = {}
    if status is not None:
        changed = changed_fields(obj.get("status") or {}, status)
        if changed:
            patch["status"] = {**changed, **(stamp or {})}
    else:
        changed_meta = changed_fields(meta, metadata or {})
        if changed_meta:
            patch["metadata"] = changed_meta
        changed_spec = changed_fields(obj.get("spec") or {}, spec or {})
        if changed_spec:
            patch["spec"] = changed_spec
    if not patch:
        return None
    if guarded:
        patch.setdefault("metadata", {})["resourceVersion"] = meta["resourceVersion"]
    try:
        return rest.merge_patch(resource, meta["name"], patch, meta.get("namespace"),
                                subresource="status" if status is not None else None)
    except Exception as e:
        if is_conflict(e):
            raise Conflict(f"{resource.kind} {meta.get('namespace') or ''}/{meta['name']} changed meanwhile") from e
        if is_not_found(e):
            raise Gone(f"{resource.kind} {meta.get('namespace') or ''}/{meta['name']} was deleted") from e
        raise
