"""Search values and engine ids (machine_controller/ovirt/search.py, api/ids.py): a user string is either searched
for as a quoted literal or refused with UnsearchableValue, and only a canonical UUID is ever an id
(docs/architecture.md#acting-only-on-what-is-ours)."""

from __future__ import annotations

import re
import uuid

from hypothesis import given
from hypothesis import strategies as st

from api.ids import is_ovirt_id, provider_id, vm_id_from_provider_id
from machine_controller.ovirt import search

from .strategies import texts, uuids

# What the engine's search cannot take as a literal (search.py's docstring says why).
_UNSEARCHABLE = re.compile(r'[*"\\\x00-\x1f\x7f]')


@given(texts, st.sampled_from(["name", "disk name", "template name"]))
def test_a_search_value_is_quoted_as_it_is_or_refused_naming_what_it_is(value, what):
    try:
        quoted = search.quote(value, what)
    except search.UnsearchableValue as e:
        assert what in str(e)
        assert not value or _UNSEARCHABLE.search(value), f"{value!r} refused for nothing"
        return
    assert quoted == f'"{value}"'
    assert value and not _UNSEARCHABLE.search(value)
    assert search.equals("name", value, what) == f"name={quoted}"


@given(st.one_of(texts, uuids, uuids.map(lambda u: u + "\n"), st.none()))
def test_only_a_canonical_uuid_is_an_engine_id(value):
    if is_ovirt_id(value):
        assert len(value) == 36 and str(uuid.UUID(value)) == value.lower()


@given(uuids)
def test_every_uuid_is_an_engine_id_and_round_trips_through_a_provider_id(vm_id):
    assert is_ovirt_id(vm_id) and is_ovirt_id(vm_id.upper())
    assert vm_id_from_provider_id(provider_id(vm_id)) == vm_id


@given(st.one_of(texts, texts.map(lambda t: "ovirt://" + t), uuids.map(lambda u: f"ovirt://{u}\n"), st.none()))
def test_a_provider_id_names_an_engine_id_or_nothing(pid):
    vm_id = vm_id_from_provider_id(pid)
    assert vm_id is None or (is_ovirt_id(vm_id) and pid == provider_id(vm_id))
