# The two commands of the README: `make demo` (the main job) and `make test` (every test).
# Each does its own set-up on a fresh machine: system packages, the virtualenv, the Kubernetes binaries.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Five pytest workers, each with its own control plane and simulator (pyproject.toml says why); 0 runs serially.
PYTEST_WORKERS ?= 5

.PHONY: demo test venv system-deps kube-binaries mao-binaries capi-binaries csi-tools promtool java-client images bench-deps
.PHONY: crds lint unit clean clusterctl-repo

# The failover scene runs real nodes: they import the images (hack/images, built once and cached); the Cluster API
# scene runs Cluster API's core manager (hack/controlplane/capi.py, built once and cached).
demo: venv kube-binaries capi-binaries images
	$(PY) -m hack.demo

test: lint kube-binaries mao-binaries capi-binaries csi-tools promtool java-client images
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The checks that read the code without running it (docs/development.md#linters): seconds, so `make test` runs
# them first.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m hack.gen_crds --check

# The tests that need no control plane: minutes for all of them, seconds for one file (docs/development.md).
unit: venv
	$(PY) -m pytest -q test/unit test/ovirtsim $(PYTEST_ARGS)

system-deps:
	bash hack/install-system-deps.sh

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	bash hack/install-system-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

# Built once per machine into ~/.cache/ovirt-machine-controller (see hack/controlplane/build.py).
kube-binaries: venv
	$(PY) -m hack.controlplane.build >/dev/null

# machine-api-operator's machineset, nodelink and health-check controllers, for the drop-in tests (built once into
# the same cache, see hack/controlplane/mao.py).
mao-binaries: venv
	$(PY) -m hack.controlplane.mao >/dev/null

# Cluster API's core manager and clusterctl, for the Cluster API bed (built once into the same cache, see
# hack/controlplane/capi.py).
capi-binaries: venv
	$(PY) -m hack.controlplane.capi >/dev/null

# csi-sanity, external-provisioner and external-attacher, for the CSI driver's tests (built once into the same
# cache, see hack/controlplane/csi_tools.py); the CSI stubs are generated from csi.proto at the same step.
csi-tools: venv
	$(PY) -m hack.controlplane.csi_tools >/dev/null
	$(PY) -m machine_controller.storage.csi.spec >/dev/null

# promtool, which checks config/monitoring's alerts in the tests (built once into the same cache, see
# hack/controlplane/promtool.py).
promtool: venv
	$(PY) -m hack.controlplane.promtool >/dev/null

# The oVirt Java SDK client of the simulator (hack/javaclient), built by Maven once per machine into the same
# cache (its Maven repository is <cache>/m2).
java-client: venv
	$(PY) -m hack.javaclient.build >/dev/null

# The images the real nodes run: the pause image, the product image from the Dockerfile (buildah, on stand-in base
# images) and the CSI sidecars, cached by content in the same cache (docs/images.md); only a changed input rebuilds
# one. system-deps
# again: a virtualenv made before buildah and debootstrap joined the install script does not run it.
images: venv system-deps
	$(PY) -m hack.images >/dev/null

crds: venv
	$(PY) -m hack.gen_crds

# The provider's clusterctl repository (docs/cluster-api.md#installing-with-clusterctl), rendered from config/ into
# $(CLUSTERCTL_REPO) with the clusterctl.yaml that names it; CLUSTERCTL_ARGS=--core adds Cluster API's core provider
# of the pinned release (built from its module like capi-binaries).
CLUSTERCTL_REPO ?= build/clusterctl-repo
clusterctl-repo: venv
	$(PY) -m hack.clusterctl_repo --out $(CLUSTERCTL_REPO) $(CLUSTERCTL_ARGS)

# The benchmark's own extras (hack/bench: matplotlib for --plot, py-spy for --py-spy); no product code needs them.
bench-deps: venv
	$(PY) -m pip install -q -c constraints.txt -e '.[test,bench]'

clean:
	rm -rf $(VENV) .pytest_cache
