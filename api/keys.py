"""Every label, annotation and finalizer key of the Machine API (docs/compatibility.md#annotations-and-labels), in one
place.

Controllers, the actuator and the CRD printer columns import these names; no other module spells a key.
"""

from __future__ import annotations

GROUP = "machine.openshift.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"

# --- labels on Machines / MachineSets -------------------------------------------------------------------
# Infra ID of the cluster; the machine controller refuses Machines without it (docs/compatibility.md#machine-phases) and
# the oVirt actuator attaches the oVirt tag of that name to the VM (4.3 step 11).
LABEL_CLUSTER = "machine.openshift.io/cluster-api-cluster"
LABEL_MACHINE_ROLE = "machine.openshift.io/cluster-api-machine-role"
LABEL_MACHINE_TYPE = "machine.openshift.io/cluster-api-machine-type"
# The installer puts it in a MachineSet's selector and template: ownership matching (docs/compatibility.md#machinesets).
LABEL_MACHINESET = "machine.openshift.io/cluster-api-machineset"
LABEL_INTERRUPTIBLE_INSTANCE = "machine.openshift.io/interruptible-instance"
# Set by cloud providers only, never on oVirt; the Type/Region/Zone printer columns read them (1.1).
LABEL_INSTANCE_TYPE = "machine.openshift.io/instance-type"
LABEL_REGION = "machine.openshift.io/region"
LABEL_ZONE = "machine.openshift.io/zone"
LABEL_OS_ID = "machine.openshift.io/os-id"
LABEL_ACCELERATOR = "cluster-api/accelerator"

# --- annotations on Machines ----------------------------------------------------------------------------
# Raw lower-case oVirt VM status ("up", "down", ...); "Unknown" once the Machine is Failed (3.1, 4.5).
ANNOTATION_INSTANCE_STATE = "machine.openshift.io/instance-state"
INSTANCE_STATE_UNKNOWN = "Unknown"
# The oVirt VM UUID; deliberately without a prefix, as the Go actuator writes it
# (docs/compatibility.md#annotations-and-labels).
ANNOTATION_VM_ID = "VmId"
ANNOTATION_EXCLUDE_NODE_DRAINING = "machine.openshift.io/exclude-node-draining"
ANNOTATION_DELETE_MACHINE = "machine.openshift.io/delete-machine"
# Older cluster-autoscaler spelling, still honoured by the delete policies (3.2).
ANNOTATION_DELETE_MACHINE_LEGACY = "machine.openshift.io/cluster-api-delete-machine"
DELETE_MACHINE_ANNOTATIONS = (ANNOTATION_DELETE_MACHINE, ANNOTATION_DELETE_MACHINE_LEGACY)
ANNOTATION_EXTERNAL_REMEDIATION = "host.metal3.io/external-remediation"
# This project's MachineSet controller stamps each Machine it creates with a digest of the set's spec.template (a
# Deployment's pod-template-hash): a Machine that fails as invalid proves only its own template invalid.
ANNOTATION_TEMPLATE_HASH = "ovirt.org/machineset-template-hash"

# --- annotations on Nodes -------------------------------------------------------------------------------
# "<namespace>/<machine-name>", written by nodelink (3.3).
ANNOTATION_NODE_MACHINE = "machine.openshift.io/machine"
LABEL_NODE_ROLE_MASTER = "node-role.kubernetes.io/master"
LABEL_NODE_ROLE_CONTROL_PLANE = "node-role.kubernetes.io/control-plane"

# --- annotations on MachineSets (cluster-autoscaler) ----------------------------------------------------
ANNOTATION_AUTOSCALER_MIN_SIZE = "machine.openshift.io/cluster-api-autoscaler-node-group-min-size"
ANNOTATION_AUTOSCALER_MAX_SIZE = "machine.openshift.io/cluster-api-autoscaler-node-group-max-size"
ANNOTATION_MACHINE_AUTOSCALER = "autoscaling.openshift.io/machineautoscaler"
# Scale-from-zero capacity hints. The Go oVirt provider never wrote them (docs/compatibility.md#annotations-and-labels);
# this project's MachineSet controller does, from the template's provider spec
# (machine_controller/controllers/machineset/capacity.py).
ANNOTATION_VCPU = "machine.openshift.io/vCPU"
ANNOTATION_MEMORY_MB = "machine.openshift.io/memoryMb"
ANNOTATION_GPU = "machine.openshift.io/GPU"
ANNOTATION_MAX_PODS = "machine.openshift.io/maxPods"
# The upstream spellings of the same hints (docs/compatibility.md#autoscaler): cluster-autoscaler from
# release-4.19 prefers them, older OpenShift forks read only the machine.openshift.io ones, so both are written.
CAPACITY_PREFIX = "capacity.cluster-autoscaler.kubernetes.io/"
ANNOTATION_CAPACITY_CPU = CAPACITY_PREFIX + "cpu"  # a quantity: whole vCPUs
ANNOTATION_CAPACITY_MEMORY = CAPACITY_PREFIX + "memory"  # a quantity, e.g. "16384Mi"
ANNOTATION_CAPACITY_MAX_PODS = CAPACITY_PREFIX + "maxPods"  # the autoscaler assumes 110 when absent
ANNOTATION_CAPACITY_GPU_TYPE = CAPACITY_PREFIX + "gpu-type"
ANNOTATION_CAPACITY_GPU_COUNT = CAPACITY_PREFIX + "gpu-count"

# --- annotations on MachineHealthChecks and remediation objects -----------------------------------------
ANNOTATION_REMEDIATION_STRATEGY = "machine.openshift.io/remediation-strategy"
REMEDIATION_STRATEGY_EXTERNAL_BAREMETAL = "external-baremetal"
ANNOTATION_PAUSED = "cluster.x-k8s.io/paused"
ANNOTATION_CLONED_FROM_NAME = "machine.openshift.io/cloned-from-name"
ANNOTATION_CLONED_FROM_GROUPKIND = "machine.openshift.io/cloned-from-groupkind"

# --- finalizers ---------------------------------------------------------------------------------------
MACHINE_FINALIZER = "machine.machine.openshift.io"


def jsonpath_for(field: str, key: str) -> str:
    """The kubectl JSONPath of a label or annotation key, e.g. `.metadata.labels['a\\.b/c']`.

    JSONPath bracket keys treat a dot as a separator unless escaped, so every dot of the key is escaped.
    """
    escaped = key.replace(".", "\\.")
    return f".metadata.{field}['{escaped}']"
