"""gitopsq's Kubernetes test rig: a real kube-apiserver and etcd on loopback (bare profile), plus
kube-controller-manager, kube-scheduler and KWOK (full profile), with the JobSet controller (operators.py) and
the Kubeflow Trainer controller manager (trainer.py) beside them; shared by `scripts/envtest` and the pytest
fixtures in tests/envtest_rig.py. Standard library only (plus the openssl, go and etcd commands)."""

from envtestrig.build import Binaries, PrepareError, find_binaries, kubernetes_version, prepare
from envtestrig.rig import FAKE_NODE_ANNOTATION, Rig, RigError, RigState

__all__ = [
    "FAKE_NODE_ANNOTATION",
    "Binaries",
    "PrepareError",
    "Rig",
    "RigError",
    "RigState",
    "find_binaries",
    "kubernetes_version",
    "prepare",
]
