"""After the API server has been away long enough for retries to back off (a restart, an upgrade), the informers
resume within seconds of it answering again, not after a back-off of up to 30 s. A control plane of its own, so
that the session's shared one is never stopped."""

from __future__ import annotations

import os
import time

import pytest

from hack.controlplane.cluster import LocalControlPlane
from machine_controller.runtime.informer import EventHandler, Informer
from machine_controller.runtime.kube import CONFIG_MAPS, Rest, load_api_client
from machine_controller.runtime.testing import wait_until

# client-go's back-off alone (0.8 s doubling to a 30 s cap) retries at 0.8, 2.4, 5.6, 12 and 24.8 s: a server down
# for 15 s (ready again at about 17 s) would be seen only at 24.8 s, past RESUME_WITHIN_S. The informer retries an
# unreachable server at most every 2 s (machine_controller/runtime/informer.py), which these figures tell apart.
DOWN_S = 15.0
RESUME_WITHIN_S = 5.0


@pytest.fixture
def own_plane(tmp_path):
    if os.environ.get("KUBECONFIG"):
        pytest.skip("needs a control plane it may stop: not possible against an external $KUBECONFIG cluster")
    with LocalControlPlane(tmp_path / "plane") as plane:
        yield plane


def test_informer_resumes_within_seconds_after_the_api_server_comes_back(own_plane):
    api = load_api_client(str(own_plane.kubeconfig()))
    rest = Rest(api)
    seen: dict[str, float] = {}
    informer = Informer(api, CONFIG_MAPS, namespace="default")
    informer.add_handler(EventHandler(on_add=lambda obj: seen.setdefault(obj["metadata"]["name"], time.monotonic())))
    informer.start()
    try:
        assert wait_until(informer.has_synced, timeout=30)
        own_plane.restart("kube-apiserver", down_for=DOWN_S)
        back = time.monotonic()  # restart() returns once /readyz answers
        rest.create(CONFIG_MAPS, {"metadata": {"name": "after-restart"}, "data": {"k": "v"}}, "default")
        assert wait_until(lambda: "after-restart" in seen, timeout=40, interval=0.05)
        resumed = seen["after-restart"] - back
        print(f"informer saw a new object {resumed:.1f}s after the API server was ready again")
        assert resumed <= RESUME_WITHIN_S, f"resumed only after {resumed:.1f}s"
    finally:
        informer.stop(5)
