"""The MachineSet controller: replicas, delete policy, adoption, status (no oVirt), and the scale-from-zero capacity
annotations of the cluster-autoscaler (a controller of its own)."""
