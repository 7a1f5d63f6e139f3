"""ovirt-machine-controller: Cluster-API Machine actuator and controllers for OpenShift/OKD on oVirt."""
