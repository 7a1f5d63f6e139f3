"""A clock the test moves by hand (`clock.t = ...`), for the objects of ovirt/ that take a `clock`."""

from __future__ import annotations


class ManualClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
