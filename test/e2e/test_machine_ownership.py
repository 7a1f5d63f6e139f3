"""A VM is a Machine's only when it bears the Machine's name (docs/architecture.md#acting-only-on-what-is-ours).

`kubectl get machine A -o yaml`, renamed to B and applied, carries A's `spec.providerID` and `VmId` annotation.
B must neither adopt, nor report, nor stop, nor remove A's VM: it gets a Warning event and a condition naming the
VM it was pointed at, drops that reference and goes on by its own name (its own VM, named B). The same for a Node
whose providerID names a VM of another name. And what cannot succeed is not repeated: a VM whose host does not
answer is sent no stop, and user data the engine could never take ends the Machine `Failed` before any VM exists.
Real API server, simulator and controller process.
"""

from __future__ import annotations

import base64
import json
import time

import pytest
import yaml

from api import keys
from machine_controller.runtime.testing import wait_until
from machines import unique_name

NOT_OWNED = "InstanceNotOwned"


def _events(menv, kind: str, name: str, namespace: str | None = None) -> list[dict]:
    scope = ["-n", namespace] if namespace else ["-A"]
    out = menv.cluster.kubectl("get", "events", *scope, "--field-selector",
                               f"involvedObject.kind={kind},involvedObject.name={name}", "-o", "json").stdout
    return json.loads(out)["items"]


def _warned_not_owned(menv, kind: str, name: str, vm_id: str, namespace: str | None = None) -> bool:
    return any(e["type"] == "Warning" and e["reason"] == NOT_OWNED and vm_id in e["message"]
               for e in _events(menv, kind, name, namespace))


def _copy_of(menv, source: str, name: str) -> dict:
    """What a user gets from `kubectl get machine <source> -o yaml` with only the name changed."""
    obj = menv.machine(source)
    assert obj is not None
    meta = obj["metadata"]
    for server_set in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "finalizers"):
        meta.pop(server_set, None)
    meta["name"] = name
    obj.pop("status", None)
    return obj


def _running_machine(menv) -> tuple[str, str]:
    name = menv.create_machine(unique_name("owner"))
    m = menv.wait_phase(name, "Running", timeout=120)
    vm_id = m["metadata"]["annotations"][keys.ANNOTATION_VM_ID]
    assert m["spec"]["providerID"] == f"ovirt://{vm_id}"
    return name, vm_id


def _assert_untouched(menv, name: str, vm_id: str) -> None:
    vm = menv.sim.control.vm(vm_id)
    assert vm["name"] == name and vm["status"] == "up", f"the VM of {name} was touched: {vm}"
    m = menv.machine(name)
    assert m is not None and m["status"]["phase"] == "Running", (m or {}).get("status")
    assert m["metadata"]["annotations"][keys.ANNOTATION_VM_ID] == vm_id
    assert m["spec"]["providerID"] == f"ovirt://{vm_id}"


def test_a_copied_machine_goes_on_with_its_own_vm_and_says_which_vm_was_not_its_own(menv):
    menv.controller()
    a, a_vm = _running_machine(menv)
    b = unique_name("copy")
    copy = _copy_of(menv, a, b)
    assert copy["spec"]["providerID"] == f"ovirt://{a_vm}"
    assert copy["metadata"]["annotations"][keys.ANNOTATION_VM_ID] == a_vm
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(copy))

    seen: list[dict] = []

    def record(m: dict) -> None:
        seen.extend(c for c in (m.get("status") or {}).get("conditions", [])
                    if c["type"] == "InstanceExists" and c.get("reason") == NOT_OWNED)

    m = menv.wait_phase(b, "Running", timeout=120, on_poll=record)
    b_vm = m["metadata"]["annotations"][keys.ANNOTATION_VM_ID]
    assert b_vm != a_vm
    assert m["spec"]["providerID"] == f"ovirt://{b_vm}"
    assert [vm["id"] for vm in menv.vms_named(b)] == [b_vm]
    assert m["status"]["nodeRef"]["name"] == b
    assert _warned_not_owned(menv, "Machine", b, a_vm, menv.namespace), _events(menv, "Machine", b, menv.namespace)
    assert seen and a_vm in seen[0]["message"] and seen[0]["status"] == "False", seen
    _assert_untouched(menv, a, a_vm)

    menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", b, "--wait=false")
    menv.wait_gone(b, timeout=90)
    assert menv.vms_named(b) == []
    _assert_untouched(menv, a, a_vm)


def test_deleting_a_copied_machine_leaves_the_vm_it_was_pointed_at(menv):
    """Deleted soon after it was applied, before it has a VM of its own: nothing of A's is stopped or removed."""
    menv.controller()
    a, a_vm = _running_machine(menv)
    b = unique_name("copy")
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(_copy_of(menv, a, b)))
    menv.wait_machine(b, lambda m: keys.MACHINE_FINALIZER in m["metadata"].get("finalizers", [])
                      and (m.get("status") or {}).get("phase"), "taken up by the controller", timeout=60)

    menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", b, "--wait=false")
    menv.wait_gone(b, timeout=90)
    assert menv.vms_named(b) == []
    # Long enough for a stop and a removal to have shown in the engine.
    time.sleep(3)
    _assert_untouched(menv, a, a_vm)


def test_a_node_whose_provider_id_names_another_vm_is_warned_and_left_alone(menv):
    menv.controller()
    a, a_vm = _running_machine(menv)
    impostor = unique_name("impostor")
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": impostor},
            "spec": {"providerID": f"ovirt://{a_vm}"}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(node))
    try:
        assert wait_until(lambda: _warned_not_owned(menv, "Node", impostor, a_vm), timeout=60, interval=0.5), \
            f"no {NOT_OWNED} event for Node {impostor}\n{menv.controller_logs()}"
        assert menv.cluster.kubectl("get", "node", impostor, check=False).returncode == 0
        _assert_untouched(menv, a, a_vm)
        # Nodelink neither links A to the impostor nor writes A's annotation on it: it bears another name, so it is
        # not A's Node. A's own Node, linked by its address a moment before its providerID came, stays linked and
        # gets nodelink's part beside the impostor.
        def annotation(node_name: str) -> str | None:
            got = menv.cluster.read(f"/api/v1/nodes/{node_name}")
            assert got is not None, f"no Node {node_name}"
            return (got["metadata"].get("annotations") or {}).get(keys.ANNOTATION_NODE_MACHINE)

        assert wait_until(lambda: annotation(a) == f"{menv.namespace}/{a}", timeout=30, interval=0.5)
        time.sleep(2)
        assert annotation(impostor) is None
        assert menv.machine(a)["status"]["nodeRef"]["name"] == a
    finally:
        menv.cluster.kubectl("delete", "node", impostor, "--wait=false", check=False)


def test_a_node_whose_provider_id_is_ovirt_but_names_no_vm_id_is_warned_and_left_alone(menv):
    """`ovirt://` followed by something that is no VM id names nothing of ours: the Node must not be taken for one
    whose VM is gone (no VM bears its name either) and deleted."""
    menv.controller()
    odd = unique_name("odd")
    pid = "ovirt://not-a-vm-id"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": odd}, "spec": {"providerID": pid}}
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(node))
    try:
        def decided() -> str | None:
            if menv.cluster.kubectl("get", "node", odd, check=False).returncode != 0:
                return "deleted"
            warned = any(e["type"] == "Warning" and e["reason"] == NOT_OWNED and pid in e["message"]
                         for e in _events(menv, "Node", odd))
            return "warned" if warned else None
        assert wait_until(decided, timeout=60, interval=0.5) and decided() == "warned", \
            f"Node {odd}: {decided()}\n{menv.controller_logs()}"
    finally:
        menv.cluster.kubectl("delete", "node", odd, "--wait=false", check=False)


def _condition(m: dict, ctype: str) -> dict:
    return next((c for c in (m.get("status") or {}).get("conditions", []) if c["type"] == ctype), {})


def test_deleting_a_machine_whose_vm_is_unknown_sends_no_stop_until_the_engine_sees_it_again(menv):
    """A stop of a VM whose host does not answer can neither be carried out nor confirmed
    (docs/fencing.md#why-the-deletion-path-is-fence-safe-too), so none is sent, however often the Machine is
    looked at, until the engine sees the VM again."""
    control = menv.sim.control
    menv.controller()
    name, vm_id = _running_machine(menv)
    # A rule that only counts: every stop of this VM, refused or not, adds one to its `fired`.
    stops = control.delay(f"/vms/{vm_id}/stop", 0.0, method="POST", count=None)

    def stops_sent() -> int:
        return next(r["fired"] for r in control.faults() if r["id"] == stops)

    host = control.vm(vm_id)["host"]
    control.set_host_status(host, "non_responsive")
    try:
        assert wait_until(lambda: control.vm(vm_id)["status"] == "unknown", timeout=30, interval=0.3)
        menv.cluster.kubectl("-n", menv.namespace, "delete", "machine", name, "--wait=false")
        m = menv.wait_machine(name, lambda m: _condition(m, "InstanceRunning").get("reason") == "InstanceStateUnknown",
                              "told that its VM is unknown", timeout=60)
        running = _condition(m, "InstanceRunning")
        assert m["status"]["phase"] == "Deleting" and running["status"] == "Unknown", m["status"]
        assert vm_id in running["message"]
        assert any(e["type"] == "Warning" and e["reason"] == "InstanceStateUnknown"
                   for e in _events(menv, "Machine", name, menv.namespace))
        time.sleep(10)  # several of the Machine's backoff retries: a stop sent on any of them would count
        assert stops_sent() == 0, f"{stops_sent()} stops sent to a VM whose host does not answer"
        assert control.vm(vm_id)["status"] == "unknown" and menv.machine(name) is not None
    finally:
        control.set_host_status(host, "up")
        try:
            # Once the engine sees the VM again, the deletion goes on: stopped, removed, finalizer gone.
            menv.wait_gone(name, timeout=90)
        finally:
            control.clear_faults(stops)
    assert menv.vms_named(name) == []


@pytest.mark.parametrize("user_data", [b"\xff\xfe{\"ignition\": {}}", b'{"ignition": {"version": "3.2.0"}}\x01'],
                         ids=["not_utf8", "control_character"])
def test_user_data_the_engine_cannot_take_fails_naming_the_field_and_creates_no_vm(menv, user_data):
    """User data the engine cannot carry can never succeed: it is not sent again and again, and the Machine says
    which field is wrong."""
    menv.controller()
    secret = unique_name("bad-user-data")
    menv.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret, "namespace": menv.namespace},
        "data": {"userData": base64.b64encode(user_data).decode()}}))
    name = menv.create_machine(unique_name("baduser"), userDataSecret={"name": secret})

    m = menv.wait_phase(name, "Failed", timeout=60)
    assert m["status"]["errorReason"] == "InvalidConfiguration"
    assert m["status"]["errorMessage"].startswith(f"spec.providerSpec.value.userDataSecret: Invalid value: '{secret}'")
    assert menv.vms_named(name) == []
