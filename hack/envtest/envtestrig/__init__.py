"""gitopsq's Kubernetes test rig: a real kube-apiserver and etcd on loopback, shared by `scripts/envtest` and
the pytest fixture in tests/envtest_rig.py. Standard library only (plus the openssl, go and etcd commands)."""

from envtestrig.build import Binaries, PrepareError, find_binaries, kubernetes_version, prepare
from envtestrig.rig import Rig, RigError, RigState

__all__ = [
    "Binaries",
    "PrepareError",
    "Rig",
    "RigError",
    "RigState",
    "find_binaries",
    "kubernetes_version",
    "prepare",
]
