"""How `make test` shares its tests among workers (`-n N --dist loadfile`): whole files, except that the files whose
pods need Services go to one worker together, one after another.

Those pods reach the API server through the machine's single kube-proxy (hack/controlplane/proxy.py), which one
test session holds at a time. Given to two workers, such files waited for each other: in one run a module sat 478 s
in its set-up while another worker's module held kube-proxy. On one worker they wait for nothing, and the other
workers take the rest of the suite meanwhile (docs/architecture.md#the-test-bed).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The budgets of the property-based tests (test/unit/fuzz/README.md). Registered here, in the conftest every run
# loads before the options are read, so that hypothesis' own `--hypothesis-profile=long` finds its profile. "ci",
# the default: few examples, the same ones every run (derandomize), nothing written into the tree (no database), no
# per-example deadline on a loaded machine. "long": many random examples, failures kept in .hypothesis/ to replay.
settings.register_profile("ci", max_examples=40, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

# The files that start kube-proxy, by the `kube_proxy` fixture or KubeProxy itself (the fixture's users are checked
# against this list at collection).
KUBE_PROXY_FILES = frozenset({
    "test/e2e/test_storage_csi_real.py",
    "test/e2e/test_config_applied.py",
    "test/e2e/test_images.py",
})
KUBE_PROXY_SCOPE = "kube-proxy"


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class OneWorkerForKubeProxy(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return KUBE_PROXY_SCOPE if scope in KUBE_PROXY_FILES else scope

    return OneWorkerForKubeProxy(config, log)


def pytest_collection_modifyitems(config, items):
    root = Path(config.rootpath)
    unlisted = {Path(item.fspath).relative_to(root).as_posix() for item in items
                if "kube_proxy" in getattr(item, "fixturenames", ())} - KUBE_PROXY_FILES
    if unlisted:
        raise pytest.UsageError(f"{sorted(unlisted)} use kube_proxy: add them to KUBE_PROXY_FILES in {__file__}")
