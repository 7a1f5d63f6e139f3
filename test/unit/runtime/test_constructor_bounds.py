"""Every number a flag range-checks is checked again by the class that would misbehave with it,
so that a caller in code cannot bring the fault back: a negative resync period spun a core, 0 workers or 0 power
slots never did anything, a zero backoff retried in a busy loop. Each refusal is a ValueError naming the class, the
argument, the value and why it cannot be."""

from __future__ import annotations

import math

import pytest

from machine_controller.controllers.remediation.reconciler import RemediationTiming
from machine_controller.runtime.controller import Controller
from machine_controller.runtime.informer import Informer
from machine_controller.runtime.kube import NODES
from machine_controller.runtime.leader_election import LeaderElectionConfig
from machine_controller.runtime.ratelimit import ItemExponentialBackoff, TokenBucket
from machine_controller.runtime.server import HealthServer
from machine_controller.runtime.workqueue import WorkQueue


def _informer(**kw):
    return Informer(None, NODES, **kw)


def _controller(workers):
    return Controller("c", WorkQueue("bounds-test"), lambda key: None, workers=workers)


@pytest.mark.parametrize("build, words", [
    (lambda: _informer(resync_period=-1), ["Informer resync_period", "above 0", "-1"]),
    (lambda: _informer(resync_period=-0.001), ["Informer resync_period", "above 0"]),
    (lambda: _informer(resync_period=math.nan), ["Informer resync_period", "finite", "nan"]),
    (lambda: _informer(resync_period=math.inf), ["Informer resync_period", "finite", "inf"]),
    (lambda: _controller(0), ["Controller workers", "at least 1", "got 0"]),
    (lambda: _controller(-2), ["Controller workers", "at least 1", "got -2"]),
    (lambda: _controller(2.5), ["Controller workers", "integer", "2.5"]),
    (lambda: ItemExponentialBackoff(base=0, cap=10), ["ItemExponentialBackoff base", "above 0", "got 0"]),
    (lambda: ItemExponentialBackoff(base=-1, cap=10), ["ItemExponentialBackoff base", "above 0", "got -1"]),
    (lambda: ItemExponentialBackoff(base=5, cap=1), ["ItemExponentialBackoff cap", "at least 5", "got 1"]),
    (lambda: ItemExponentialBackoff(base=1, cap=math.nan), ["ItemExponentialBackoff cap", "finite"]),
    (lambda: TokenBucket(qps=0, burst=10), ["TokenBucket qps", "above 0", "got 0"]),
    (lambda: TokenBucket(qps=1, burst=0), ["TokenBucket burst", "at least 1", "got 0"]),
    (lambda: LeaderElectionConfig("ns", "l", "me", lease_duration=10, renew_deadline=10, retry_period=2),
     ["renew_deadline", "below lease_duration", "10"]),
    (lambda: LeaderElectionConfig("ns", "l", "me", lease_duration=10, renew_deadline=5, retry_period=5),
     ["retry_period", "renew_deadline", "5"]),
    (lambda: LeaderElectionConfig("ns", "l", "me", lease_duration=-3, renew_deadline=-4, retry_period=-5),
     ["LeaderElectionConfig lease_duration", "above 0", "-3"]),
    (lambda: LeaderElectionConfig("ns", "l", "me", lease_duration=math.nan), ["lease_duration", "finite"]),
    (lambda: RemediationTiming(max_concurrent_power=0), ["RemediationTiming max_concurrent_power", "at least 1"]),
    (lambda: RemediationTiming(poll_s=-1), ["RemediationTiming poll_s", "above 0", "got -1"]),
    (lambda: RemediationTiming(storage_release_timeout_s=0), ["RemediationTiming storage_release_timeout_s",
                                                               "above 0"]),
    (lambda: HealthServer("127.0.0.1", 70000), ["HealthServer port", "at most 65535", "70000"]),
    (lambda: HealthServer("127.0.0.1", -1), ["HealthServer port", "at least 0", "-1"]),
])
def test_a_class_refuses_a_number_it_cannot_work_with(build, words):
    with pytest.raises(ValueError) as refused:
        build()
    message = str(refused.value)
    assert all(w in message for w in words), message


def test_the_values_the_flags_allow_are_accepted():
    assert _informer(resync_period=None).resync_period is None
    assert _informer(resync_period=0).resync_period == 0  # client-go's 0: no resync
    assert _informer(resync_period=0.3).resync_period == 0.3
    assert _controller(1).workers == 1
    assert ItemExponentialBackoff(base=5, cap=5).cap == 5
    assert RemediationTiming(max_concurrent_power=1).max_concurrent_power == 1
    server = HealthServer("127.0.0.1", 0)  # 0: any free port
    server.start()
    server.stop()
