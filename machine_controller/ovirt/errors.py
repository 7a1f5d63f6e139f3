"""What an oVirt failure means, decided once, here, where the engine's faults are understood.

The controllers never look at HTTP codes or fault texts: they see one of these classes. Reference
docs/compatibility.md#engine-faults-and-retries tells what the SDK raises and what the engine sends, and which
engine conditions the Go client retried.
"""

from __future__ import annotations

import ovirtsdk4 as sdk

from machine_controller.controllers.provider import ActionRefused, ActuatorError, MissingDependency


class OvirtError(ActuatorError):
    """Base of every classified oVirt failure: an ActuatorError of the seam, so the generic controllers retry it
    without knowing oVirt. The message never contains credentials."""

    transient = False  # the runtime logs classified failures as one line, without a traceback


class TransientError(OvirtError):
    """Worth retrying as it is: connection loss, timeout, 5xx, a locked VM or disk, a token to renew.
    A transient error must never make a Machine Failed."""

    transient = True


class ConflictError(TransientError, ActionRefused):
    """409: the object is in a state that refuses the operation now (locked, powering up...)."""


class NotFoundError(OvirtError):
    """The object does not exist (404, or an empty search)."""


class MissingDependencyError(OvirtError, MissingDependency):
    """Something the spec names does not exist in oVirt (template, cluster, affinity group, vNIC profile, tag).
    Not the Machine's fault for ever: an admin may create it, so it is re-checked with backoff."""


class BadRequestError(OvirtError):
    """The engine refused the request as invalid (400) for a reason that retrying will not change."""


class UnreadableRequestError(BadRequestError):
    """400 because the engine could not read the request body at all: a free text it carried (a VM's user data)
    holds something the API's XML cannot."""


class AuthenticationError(OvirtError):
    """The engine refused the credentials (401/403 after the SDK's own re-login)."""


# The engine's REST layer (UsageFinder) and the simulator on a body they cannot parse.
_UNREADABLE_TEXTS = ("request syntactically incorrect", "failed to parse the request body")
# Engine texts that mean "a state conflict that will pass" even when sent with another status code.
_TRANSIENT_TEXTS = (
    "is locked",
    "try again in a few minutes",
    "related operation is currently in progress",
    "409 conflict",
)


def _fault_text(err: sdk.Error) -> str:
    fault = getattr(err, "fault", None)
    parts = [str(err)]
    if fault is not None:
        parts += [fault.reason or "", fault.detail or ""]
    return " ".join(parts)


def classify(err: BaseException, what: str = "") -> OvirtError:
    """Map an SDK (or socket) exception to one of the classes above, keeping the engine's own words."""
    if isinstance(err, OvirtError):
        return err
    prefix = f"{what}: " if what else ""
    if isinstance(err, (sdk.ConnectionError, sdk.TimeoutError, ConnectionError, TimeoutError, OSError)):
        return TransientError(f"{prefix}oVirt engine unreachable: {err}")
    if not isinstance(err, sdk.Error):
        return OvirtError(f"{prefix}{err}")
    text = _fault_text(err)
    message = f"{prefix}{_describe(err)}"
    code = getattr(err, "code", None)
    if isinstance(err, sdk.NotFoundError) or code == 404:
        return NotFoundError(message)
    if code == 409 or any(t in text.lower() for t in _TRANSIENT_TEXTS):
        return ConflictError(message)
    if isinstance(err, sdk.AuthError) or code in (401, 403):
        return AuthenticationError(message)
    if code is None or code >= 500:
        # No code: the SDK failed before or while reading the answer (a dropped connection surfaces so).
        return TransientError(message)
    if code == 400:
        unreadable = any(t in text.lower() for t in _UNREADABLE_TEXTS)
        return UnreadableRequestError(message) if unreadable else BadRequestError(message)
    return OvirtError(message)


def _describe(err: sdk.Error) -> str:
    fault = getattr(err, "fault", None)
    if fault is not None and (fault.reason or fault.detail):
        detail = (fault.detail or "").strip()
        if detail.startswith("[") and detail.endswith("]"):
            # The engine renders its message list as a Java list (docs/compatibility.md#annotations-and-labels).
            detail = detail[1:-1]
        reason = fault.reason or ""
        return f"{reason}: {detail} (HTTP {err.code})" if detail else f"{reason} (HTTP {err.code})"
    return str(err)
