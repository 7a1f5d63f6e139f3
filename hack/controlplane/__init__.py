"""A real local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
built from the upstream Go modules and run on loopback for tests and the demo."""
