import ovirtsdk4 as sdk
import ovirtsdk4.types as types
import pytest

from machine_controller.ovirt.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    TransientError,
    classify,
)


def _fault(code, reason, detail):
    return sdk.Error(f'Fault reason is "{reason}". Fault detail is "{detail}". HTTP response code is {code}.',
                     code=code, fault=types.Fault(reason=reason, detail=detail))


def test_locked_vm_is_a_transient_conflict_with_the_engines_words():
    err = classify(_fault(409, "Operation Failed", "[Cannot run VM: VM is locked. Please try again in a few minutes.]"),
                   "start VM")
    assert isinstance(err, ConflictError) and err.transient
    assert str(err) == ("start VM: Operation Failed: Cannot run VM: VM is locked. Please try again in a few minutes."
                        " (HTTP 409)")


def test_not_found_and_bad_request_are_not_transient():
    assert isinstance(classify(sdk.NotFoundError("gone", code=404)), NotFoundError)
    bad = classify(_fault(400, "Operation Failed",
                          "[Cannot add VM. Physical Memory Guaranteed cannot exceed Memory Size.]"))
    assert isinstance(bad, BadRequestError) and not bad.transient


@pytest.mark.parametrize("exc", [sdk.ConnectionError("Failed to connect"), sdk.TimeoutError("timed out"),
                                 ConnectionResetError("reset"), _fault(503, "Service Unavailable", "")])
def test_connection_faults_and_5xx_are_transient(exc):
    assert isinstance(classify(exc), TransientError)


def test_auth_failure_is_its_own_class():
    assert isinstance(classify(sdk.AuthError("bad credentials", code=401)), AuthenticationError)
