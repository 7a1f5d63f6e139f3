"""API types of machine.openshift.io/v1beta1 and the oVirt provider spec. Pure data and validation: no I/O."""
