"""Expectations: a burst of creates/deletes is not repeated before the cache shows it (client-go's idea)."""

from __future__ import annotations

from machine_controller.controllers.machineset.expectations import Expectations


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_nothing_pending_for_an_unknown_owner():
    assert Expectations().pending("ns/ms", lambda name: None) is None


def test_create_is_pending_until_the_cache_has_the_machine():
    cache: dict[str, dict] = {}
    exp = Expectations(ttl=300, clock=Clock())
    exp.expect_created("ns/ms", "ms-abcde")
    exp.expect_created("ns/ms", "ms-fghij")
    assert exp.pending("ns/ms", cache.get) == 300
    cache["ms-abcde"] = {"metadata": {"name": "ms-abcde"}}
    assert exp.pending("ns/ms", cache.get) is not None
    cache["ms-fghij"] = {"metadata": {"name": "ms-fghij"}}
    assert exp.pending("ns/ms", cache.get) is None


def test_delete_is_confirmed_by_absence_or_a_deletion_timestamp():
    cache = {"a": {"metadata": {"name": "a"}}, "b": {"metadata": {"name": "b"}}}
    exp = Expectations()
    exp.expect_deleted("ns/ms", "a")
    exp.expect_deleted("ns/ms", "b")
    assert exp.pending("ns/ms", cache.get) is not None
    cache["a"] = {"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    del cache["b"]
    assert exp.pending("ns/ms", cache.get) is None


def test_unconfirmed_expectation_expires_after_ttl():
    clock = Clock()
    exp = Expectations(ttl=300, clock=clock)
    exp.expect_created("ns/ms", "never-seen")
    clock.t += 200
    assert exp.pending("ns/ms", lambda name: None) == 100
    clock.t += 100
    assert exp.pending("ns/ms", lambda name: None) is None


def test_owners_are_independent_and_forget_clears_one():
    exp = Expectations()
    exp.expect_created("ns/a", "a-1")
    exp.expect_created("ns/b", "b-1")
    exp.forget("ns/a")
    assert exp.pending("ns/a", lambda name: None) is None
    assert exp.pending("ns/b", lambda name: None) is not None
