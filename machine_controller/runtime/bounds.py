"""Range checks for the numbers a class is built with, in one wording shared with the flags (config.py).

A flag's range check protects only the process started from the command line; the class that would misbehave (a
negative resync period spins a core, 0 workers reconcile nothing, 0 power slots remediate nothing) checks again, so
that no caller in code can bring the fault back. The classes raise ValueError naming the class, the argument, the
value and why; the flags turn the same problem into one line naming the flag.
"""

from __future__ import annotations

import math


def number_problem(value: object, low: float, high: float | None = None, *, above: bool = False,
                   integer: bool = False) -> str | None:
    """What is wrong with `value` for the range [low, high] (or (low, high] with `above`), or None."""
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return f"must be {'an integer' if integer else 'a number'}, got {value!r}"
    if not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if above and value <= low:
        return f"must be above {low:g}, got {value:g}"
    if value < low:
        return f"must be at least {low:g}, got {value:g}"
    if high is not None and value > high:
        return f"must be at most {high:g}, got {value:g}"
    return None


def check_number(name: str, value: object, low: float, high: float | None = None, *, above: bool = False,
                 integer: bool = False, why: str = "") -> None:
    """ValueError `<name> <problem> (<why>)` unless `value` is in range; `name` is `Class argument`."""
    problem = number_problem(value, low, high, above=above, integer=integer)
    if problem:
        raise ValueError(f"{name} {problem}" + (f" ({why})" if why else ""))
