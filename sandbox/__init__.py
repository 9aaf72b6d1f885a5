"""The local sandbox: a real Kubernetes control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler), Prometheus and a synthetic node exporter, all on
127.0.0.1, started and stopped by loadsched's own code. Used by tests/e2e, the demo and the
benchmarks; not part of the installed package."""
