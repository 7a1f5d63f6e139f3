"""Converting OpenShift's Machine API objects to Cluster API's and back
(docs/cluster-api.md#migrating-from-the-machine-api): a MachineSet with an oVirt provider spec is a MachineDeployment
and an OvirtMachineTemplate, a Machine is a Cluster API Machine and an OvirtMachine that adopts the same VM.

Pure functions on the objects as `kubectl get -o yaml` gives them; no I/O. Every key of the input is either mapped
or refused by its path (`spec.providerSpec.value.someField: has no Cluster API equivalent`): nothing is dropped
silently, since a setting lost in a conversion changes the next VM without anyone being told. What is not a setting
is left behind on purpose, and said so here: the status (the controllers' observations, written again by the new
side; a Machine's recorded VM id is read from it), the metadata the API server sets (uid, resourceVersion,
generation, creationTimestamp, managedFields), the Machine API's own finalizer and the owner reference to the source
MachineSet (the target side sets its own), and `spec.authoritativeAPI` (the switch of the migration itself).

Cluster API's objects are emitted paused (the `cluster.x-k8s.io/paused` annotation), as OpenShift's sync controller
creates them: nothing acts on them until the Machine API side has handed over (its `authoritativeAPI`) and the
annotation is removed. The Machine API objects converted back carry `spec.authoritativeAPI: ClusterAPI`, the form in
which OpenShift lets a Machine API copy of a Cluster API object be created, to be switched back by its user.

The modules: fields (the walker that maps or refuses every key by path, ConversionError), targets (where the
converted objects go), metadata, machine_fields (hooks, taints, the delete annotation, the provider spec),
machinesets, machines and secrets. Callers import the names below from this package.
"""

from __future__ import annotations

from api.migration.fields import ConversionError
from api.migration.machines import machine_to_capi, machine_to_mapi
from api.migration.machinesets import (
    DEPLOYMENT_NAME_LABEL,
    machinedeployment_to_mapi,
    machineset_to_capi,
    set_labels,
)
from api.migration.metadata import ADOPT_VM_ANNOTATION, CONVERTED_FROM_ANNOTATION, MACHINE_DEPLOYMENT_KIND
from api.migration.secrets import (
    bootstrap_to_user_data,
    credentials_to_identity,
    identity_to_credentials,
    secrets_named,
    user_data_to_bootstrap,
)
from api.migration.targets import ToClusterAPI, ToMachineAPI, ovirt_cluster_for

__all__ = [
    "ADOPT_VM_ANNOTATION",
    "CONVERTED_FROM_ANNOTATION",
    "DEPLOYMENT_NAME_LABEL",
    "MACHINE_DEPLOYMENT_KIND",
    "ConversionError",
    "ToClusterAPI",
    "ToMachineAPI",
    "bootstrap_to_user_data",
    "credentials_to_identity",
    "identity_to_credentials",
    "machine_to_capi",
    "machine_to_mapi",
    "machinedeployment_to_mapi",
    "machineset_to_capi",
    "ovirt_cluster_for",
    "secrets_named",
    "set_labels",
    "user_data_to_bootstrap",
]
