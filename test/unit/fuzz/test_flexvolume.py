"""The FlexVolume driver's input (machine_controller/storage/flexvolume.py): whatever options JSON and arguments
kubelet passes, the driver answers one JSON reply, and a failure is its own message, never the catch-all that
names an exception (docs/compatibility.md#storage). No engine is reached: the configuration file does not exist
and no device appears, so every command stops at its input or at that file."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from machine_controller.storage import flexvolume

from .strategies import json_values, texts, uuids

_OPTION_KEYS = [flexvolume.VOLUME_ID, "kubernetes.io/fsType", "kubernetes.io/readwrite",
                "kubernetes.io/pvOrVolumeName", "kubernetes.io/fsGroup"]
_option_values = st.one_of(uuids, st.sampled_from(["ext4", "xfs", "XFS", "btrfs", "ro", "rw", ""]), texts,
                           json_values)
_options = st.one_of(
    st.dictionaries(st.sampled_from(_OPTION_KEYS) | texts, _option_values, max_size=5).map(json.dumps),
    json_values.map(json.dumps),
    texts,
)
_node = st.one_of(st.just("worker-0"), texts)


@pytest.fixture(scope="module", autouse=True)
def no_engine_and_no_devices(tmp_path_factory):
    devices = tmp_path_factory.mktemp("by-id")
    saved = {k: os.environ.get(k) for k in (flexvolume.CONF_ENV, flexvolume.DEV_DIR_ENV, "OVIRT_FLEXDRIVER_WAIT_S")}
    os.environ.update({flexvolume.CONF_ENV: str(devices / "absent.json"), flexvolume.DEV_DIR_ENV: str(devices),
                       "OVIRT_FLEXDRIVER_WAIT_S": "0"})
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


_argv = st.one_of(
    st.tuples(st.just("getvolumename"), _options).map(list),
    st.tuples(st.sampled_from(["attach", "isattached"]), _options, _node).map(list),
    st.tuples(st.sampled_from(["attach", "isattached"]), _node, _options).map(list),
    st.tuples(st.just("waitforattach"), st.just("/dev/absent"), _options).map(list),
    st.tuples(st.just("mountdevice"), st.just("/absent/mount"), st.just(""), _options).map(list),
    st.tuples(st.just("detach"), texts, _node).map(list),
    st.lists(texts, max_size=3),
)


@given(_argv)
def test_any_call_gets_one_json_reply_and_a_failure_in_the_drivers_own_words(argv):
    out = flexvolume.dispatch(argv)
    json.dumps(out)
    assert out["status"] in ("Success", "Failure", "Not supported"), out
    if out["status"] == "Failure":
        message = out["message"]
        assert message and not (argv and message.startswith(f"{argv[0]}: ")), message
    if out["status"] == "Success":
        assert argv[0] in ("init", "getvolumename"), out
        if argv[0] == "getvolumename":
            assert out["volumeName"] and "/" not in out["volumeName"], out


@given(_options)
def test_options_are_an_object_of_strings_or_refused(raw):
    try:
        opts = flexvolume.parse_options(raw)
    except flexvolume.Failure:
        return
    assert all(isinstance(v, str) for v in opts.values()), opts
    try:
        disk_id = flexvolume.disk_id_of(opts)
    except flexvolume.Failure as e:
        assert flexvolume.VOLUME_ID in str(e)
        return
    assert disk_id == opts[flexvolume.VOLUME_ID].strip() and flexvolume.find_device(disk_id) is None


@pytest.mark.parametrize("argv", [
    ["getvolumename", '{"volumeID": null}'],
    ["mountdevice", "/absent/mount", "", '{"kubernetes.io/fsType": [null]}'],
])
def test_an_option_that_is_no_string_is_refused_by_its_key(argv):
    # Found by the two properties above: a null volumeID was read as the text "None", a list fsType was an
    # AttributeError in the catch-all reply.
    out = flexvolume.dispatch(argv)
    assert out["status"] == "Failure" and "not a string" in out["message"], out
