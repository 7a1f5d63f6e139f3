"""Strategies shared by the property-based tests: JSON-like values of every type, and the texts users get wrong."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

INT64_MAX = 2**63 - 1

# Integers around every boundary a parser checks: zero, int32, int64, and beyond what any field can hold.
wide_ints = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, INT64_MAX, INT64_MAX + 1, -(2**63), 2**64]),
)

# Characters a search, a path or a message handles specially, mixed into otherwise arbitrary text.
_TRICKY = st.sampled_from(['*', '"', "\\", "\n", "\x00", "\x7f", " ", "/", "%", "'", "=", "\u00e9", "\u0663"])
texts = st.one_of(st.text(max_size=40), st.lists(st.one_of(_TRICKY, st.text(max_size=4)), max_size=8).map("".join))

uuids = st.uuids().map(str)
# An id field's value: a UUID most of the time, one written in capitals, or anything at all.
ids = st.one_of(uuids, uuids.map(str.upper), texts, st.just(str(uuid.UUID(int=0)) + "\n"))

json_scalars = st.one_of(st.none(), st.booleans(), wide_ints, st.floats(), texts)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)


def maybe(strategy: st.SearchStrategy, other: st.SearchStrategy = json_values) -> st.SearchStrategy:
    """Mostly a value of the expected shape, sometimes any JSON value at all (a wrong type)."""
    return st.one_of(strategy, strategy, strategy, other)
