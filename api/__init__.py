"""API types of machine.openshift.io/v1beta1 and the oVirt provider spec. Pure data and validation: no I/O.

Modules:
- `keys`: every label/annotation/finalizer key and the group/version (docs/compatibility.md#annotations-and-labels).
- `meta`: ObjectMeta subset, owner/object references, LabelSelector (matching, kubectl string form),
  Condition with MAO's set semantics, Taint, NodeAddress, time helpers.
- `machine`, `machineset`, `machinehealthcheck`: the three Kubernetes kinds, their enums and helpers.
- `provider_spec`: OvirtMachineProviderSpec / OvirtMachineProviderStatus and `parse_provider_spec`.
- `validation`: `validate_provider_spec`, `load_provider_spec` (parse + validate), re-exported errors.
- `field_errors`: FieldError and InvalidProviderSpec.
- `crd_info`: CRD names, printer columns and subresources declared by the kinds (read by hack/gen_crds.py).
- `_fields`, `_codec`: the `prop(...)` field declarations and the dict <-> dataclass codec they drive.
"""
