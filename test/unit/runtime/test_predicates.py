from machine_controller.runtime.controller import when_changed
from machine_controller.runtime.informer import EventHandler


def _recorder():
    seen = []
    return seen, EventHandler(on_add=lambda o: seen.append(("add", o["n"])),
                              on_update=lambda old, new: seen.append(("update", new["n"])),
                              on_delete=lambda o: seen.append(("delete", o["n"])))


def test_heartbeat_updates_are_dropped_but_watched_fields_resyncs_adds_and_deletes_pass():
    seen, handler = _recorder()
    h = when_changed(handler, ("spec", "providerID"))
    a = {"n": 1, "spec": {}, "status": {"conditions": [{"lastHeartbeatTime": "t1"}]}}
    b = {"n": 2, "spec": {}, "status": {"conditions": [{"lastHeartbeatTime": "t2"}]}}
    c = {"n": 3, "spec": {"providerID": "ovirt://x"}, "status": b["status"]}
    h.on_add(a)
    h.on_update(a, b)  # heartbeat only
    h.on_update(b, c)  # providerID set
    h.on_update(c, c)  # resync
    h.on_delete(c)
    assert seen == [("add", 1), ("update", 3), ("update", 3), ("delete", 3)]
