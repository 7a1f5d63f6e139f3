"""The Machine's provider spec (api/provider_spec.py, api/validation.py): whatever the user writes loads or is
refused with InvalidProviderSpec, each problem at a field path under spec.providerSpec.value; and a spec that loads
makes a VM request the engine can take: every id a UUID, every size an int64, the template's name searchable
(docs/compatibility.md#provider-spec)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from api import keys
from api.ids import is_ovirt_id
from api.provider_spec import PROVIDER_SPEC_PATH, VMType, parse_provider_spec
from api.quantity import parse_bytes
from api.validation import (
    MAX_DISK_GB,
    MAX_MEMORY_MB,
    MAX_VCPUS,
    InvalidProviderSpec,
    load_provider_spec,
)
from machine_controller.controllers.machineset.capacity import capacity_from_provider_spec
from machine_controller.ovirt import search
from machine_controller.ovirt.vm_spec import Resolved, build_vm, os_disk_bytes

from .strategies import INT64_MAX, ids, json_values, maybe, texts, uuids, wide_ints

# The `<Type>: <detail>` shapes of Kubernetes' field errors (api/field_errors.py).
_ERROR_TYPE = re.compile(r"^(Required value|Invalid value|Unsupported value|Forbidden|Duplicate value)(: |$)")


def _ints(low: int, high: int) -> st.SearchStrategy:
    return st.one_of(st.integers(low, high), st.sampled_from([low, high]))


def _object(**fields) -> st.SearchStrategy:
    """An object with any of `fields`."""
    return st.fixed_dictionaries({}, optional=fields)


def _full(**fields) -> st.SearchStrategy:
    """An object with all of `fields`."""
    return st.fixed_dictionaries(fields)


def _mostly(good: st.SearchStrategy, bad: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly a value the rules keep, one time in twenty one of `bad`: most specs then validate, each with an odd
    value or two, and the properties of a valid spec are checked across all the validator lets through. (one_of
    would pick either half the time, whatever the weights.)"""
    return st.integers(0, 19).flatmap(lambda i: bad if i == 0 else good)


_nonblank = texts.filter(lambda t: t.strip())
# Each field: (a value within the rules, values of its type that break them or of another type).
_FIELDS = {
    "userDataSecret": (_full(name=_nonblank), maybe(_object(name=maybe(texts)))),
    "credentialsSecret": (_full(name=texts), json_values),
    "id": (texts, json_values),
    "name": (texts, json_values),
    "template_name": (texts.filter(bool), maybe(texts)),
    "cluster_id": (uuids, maybe(ids)),
    "instance_type_id": (st.just(""), maybe(ids)),
    "cpu": (_full(sockets=_ints(1, 16), cores=_ints(1, 16), threads=_ints(1, 2)),
            maybe(_object(sockets=maybe(wide_ints), cores=maybe(wide_ints), threads=maybe(wide_ints)))),
    "memory_mb": (_ints(1024, MAX_MEMORY_MB), maybe(wide_ints)),
    "os_disk": (_full(size_gb=_ints(1, MAX_DISK_GB)), maybe(_object(size_gb=maybe(wide_ints)))),
    "type": (st.sampled_from([t.value for t in VMType]), maybe(texts)),
    "network_interfaces": (st.lists(_full(vnic_profile_id=uuids), max_size=3),
                           maybe(st.lists(_object(vnic_profile_id=maybe(ids)), max_size=3))),
    "affinity_groups_names": (st.lists(_nonblank, max_size=3, unique=True), maybe(st.lists(texts, max_size=3))),
    "auto_pinning_policy": (st.sampled_from(["", "none", "resize_and_pin"]), maybe(texts)),
    "hugepages": (st.sampled_from([0, 2048, 1048576]), maybe(wide_ints)),
    "guaranteed_memory_mb": (_ints(0, 1024), maybe(wide_ints)),
    "clone": (st.just(True), maybe(st.booleans())),
    "sparse": (st.booleans(), json_values),
    "format": (st.sampled_from(["", "raw", "cow"]), maybe(texts)),
    "storage_domain_id": (uuids, maybe(ids)),
}
_REQUIRED = ("userDataSecret", "template_name", "cluster_id", "cpu", "memory_mb", "os_disk", "type")


def _specs(plausible: bool) -> st.SearchStrategy:
    """Provider specs as decoded JSON: plausible ones have the required keys and mostly valid values; the others
    any subset of the keys, each of any value of its type or another."""
    if not plausible:
        return st.fixed_dictionaries({}, optional={k: st.one_of(good, bad) for k, (good, bad) in _FIELDS.items()})
    fields = {k: _mostly(good, bad) for k, (good, bad) in _FIELDS.items()}
    return st.fixed_dictionaries({k: fields.pop(k) for k in _REQUIRED}, optional=fields)


# What reaches the parser (its declared input: a decoded object, text or bytes, or None): a spec, the JSON or YAML
# text or bytes of one, any other object, any JSON value as text, any text, any bytes.
_raw = st.one_of(
    _specs(False), _specs(True),
    _specs(False).map(json.dumps), _specs(True).map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
    _specs(True).map(lambda d: json.dumps(d).encode()),
    st.dictionaries(texts, json_values, max_size=4), json_values.map(json.dumps), st.none(), texts,
    st.binary(max_size=40),
)


@given(_raw)
def test_any_provider_spec_loads_or_is_refused_naming_its_fields(raw):
    try:
        load_provider_spec(raw)
    except InvalidProviderSpec as e:
        assert e.errors and str(e)
        for err in e.errors:
            # A decoded object's problems are its fields'; text that is no object at all is the value's own.
            assert err.path.startswith(PROVIDER_SPEC_PATH + "." if isinstance(raw, dict) else PROVIDER_SPEC_PATH)
            assert _ERROR_TYPE.match(err.message), err


def _loaded(raw):
    """The spec, or None when it is refused (that case is the property above's)."""
    try:
        return load_provider_spec(raw)
    except InvalidProviderSpec:
        return None


@given(_specs(True))
def test_a_spec_that_loads_makes_a_vm_request_of_uuids_and_int64_sizes(raw):
    spec = _loaded(raw)
    if spec is None:
        return
    resolved = Resolved("0000000a-000a-000a-000a-00000000000a", ("0000000b-000b-000b-000b-00000000000b",))
    vm = build_vm("worker-0", spec, "{}", resolved)
    sent_ids = [vm.cluster.id, vm.template.id] + [n.vnic_profile_id for n in spec.network_interfaces]
    if vm.instance_type is not None:
        sent_ids.append(vm.instance_type.id)
    for attachment in vm.disk_attachments or []:
        sent_ids += [attachment.disk.id] + [sd.id for sd in attachment.disk.storage_domains or []]
    assert all(is_ovirt_id(i) for i in sent_ids), sent_ids
    sizes = [os_disk_bytes(spec)]
    if vm.memory is not None:
        sizes.append(vm.memory)
    if vm.memory_policy is not None and vm.memory_policy.guaranteed is not None:
        sizes.append(vm.memory_policy.guaranteed)
    assert all(0 < size <= INT64_MAX for size in sizes), sizes
    if vm.cpu is not None and vm.cpu.topology is not None:
        t = vm.cpu.topology
        assert 0 < t.sockets * t.cores * t.threads <= MAX_VCPUS


@given(_specs(True))
def test_a_spec_that_loads_names_a_template_the_engine_can_search_for(raw):
    spec = _loaded(raw)
    if spec is not None:
        search.equals("name", spec.template_name, "template name")


@pytest.mark.parametrize("name", ["rhcos-*", "\x1f", 'the "rhcos" template'])
def test_a_template_name_the_engine_cannot_search_for_is_refused_at_validation(name):
    # Found by test_a_spec_that_loads_names_a_template_the_engine_can_search_for ('\x1f'): such a name passed
    # validation and failed only at the template lookup, as a bad request.
    raw = {"userDataSecret": {"name": "u"}, "template_name": name, "cluster_id": "0000000a-000a-000a-000a-00000000000a",
           "cpu": {"sockets": 1, "cores": 1, "threads": 1}, "memory_mb": 1024, "os_disk": {"size_gb": 1},
           "type": "server"}
    with pytest.raises(InvalidProviderSpec) as e:
        load_provider_spec(raw)
    assert [err.path for err in e.value.errors] == [f"{PROVIDER_SPEC_PATH}.template_name"]


@given(_raw)
def test_a_machinesets_provider_spec_gives_int64_capacity_annotations_or_says_why_not(raw):
    capacity = capacity_from_provider_spec(raw)
    if capacity.unknown is not None:
        assert not capacity.annotations and capacity.unknown
        return
    spec = parse_provider_spec(raw)
    assert all(0 < n for n in (spec.cpu.sockets, spec.cpu.cores, spec.cpu.threads)), spec.cpu
    assert int(capacity.annotations[keys.ANNOTATION_VCPU]) <= MAX_VCPUS
    assert parse_bytes(capacity.annotations[keys.ANNOTATION_CAPACITY_MEMORY]) <= INT64_MAX


@pytest.mark.parametrize("cpu, memory_mb", [({"sockets": -2, "cores": -3, "threads": 1}, 1024),
                                            ({"sockets": 1, "cores": 1, "threads": 1}, 8_796_093_022_208)])
def test_a_machineset_whose_template_no_vm_can_have_gets_no_capacity_annotations(cpu, memory_mb):
    # Found by test_a_machinesets_provider_spec_gives_int64_capacity_annotations_or_says_why_not in a long run
    # (memory_mb 2**43: "8796093022208Mi", beyond int64 bytes, for the cluster-autoscaler to read); and two negative
    # factors made a positive vCPU count.
    capacity = capacity_from_provider_spec({"cpu": cpu, "memory_mb": memory_mb})
    assert capacity.annotations == {} and capacity.unknown
