"""The simulated cloud-init guest's reading of its user data (hack/ovirtsim/cloud_config.py): only a cloud-config
provisions it, and its kubelet's provider ID comes from the flags file the cloud-config writes, with the instance
id filled in by jinja."""

from __future__ import annotations

import pytest

from hack.ovirtsim import cloud_config

VM_ID = "0f6d1c8e-2a1b-4c3d-9e8f-000000000001"


def _kubelet_file(line: str, path: str = "/etc/default/kubelet") -> str:
    return f"#cloud-config\nwrite_files:\n- path: {path}\n  content: |\n    {line}\n"


@pytest.mark.parametrize("payload", [None, "", "#!/bin/sh\necho hi", '{"ignition": {"version": "3.2.0"}}',
                                     "#cloud-config\n- a list\n", "#cloud-config\nkey: [unclosed\n"])
def test_anything_but_a_cloud_config_mapping_is_not_run(payload):
    assert cloud_config.parse(payload, VM_ID) is None


def test_an_empty_cloud_config_runs_and_gives_no_provider_id():
    config = cloud_config.parse("#cloud-config\n", VM_ID)
    assert config == {} and cloud_config.kubelet_provider_id(config) is None


@pytest.mark.parametrize("path", cloud_config.KUBELET_ENV_FILES)
def test_provider_id_comes_from_the_kubelet_extra_args_with_the_instance_id_rendered(path):
    payload = "## template: jinja\n" + _kubelet_file(
        'KUBELET_EXTRA_ARGS="--v=2 --provider-id=ovirt://{{ v1.instance_id }}"', path)
    assert cloud_config.kubelet_provider_id(cloud_config.parse(payload, VM_ID)) == f"ovirt://{VM_ID}"


def test_without_the_jinja_header_the_template_text_stays_as_written():
    payload = _kubelet_file('KUBELET_EXTRA_ARGS="--provider-id=ovirt://{{ v1.instance_id }}"')
    assert cloud_config.kubelet_provider_id(cloud_config.parse(payload, VM_ID)) == "ovirt://{{"


@pytest.mark.parametrize("payload", [
    _kubelet_file('KUBELET_EXTRA_ARGS="--v=2"'),
    _kubelet_file('OTHER_ARGS="--provider-id=ovirt://x"'),
    _kubelet_file('KUBELET_EXTRA_ARGS="--provider-id=ovirt://x"', path="/etc/kubelet.env"),
])
def test_no_provider_id_unless_the_kubelet_file_sets_it(payload):
    assert cloud_config.kubelet_provider_id(cloud_config.parse(payload, VM_ID)) is None
