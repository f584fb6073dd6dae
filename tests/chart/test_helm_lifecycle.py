"""`helm install`, `helm upgrade` and `helm uninstall` of the chart against the rig's real API server (no kubelet:
the Deployment is stored but runs no pods), pinning what docs/deploy.md promises about CRDs, the certificate
Secret and objects gitopsq created."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helm import CHART, Helm
from envtest_rig import Envtest

pytestmark = pytest.mark.envtest
FIXTURES = Path(__file__).parent / "fixtures"


def helm_on(helm: Helm, rig: Envtest, *args: str) -> str:
    done = helm.run(*args, "--kubeconfig", str(rig.kubeconfig))
    assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
    return done.stdout


def get(rig: Envtest, *args: str) -> dict[str, Any] | None:
    done = rig.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def test_install_upgrade_uninstall(helm: Helm, kueue_crds: Envtest, tmp_path: Path) -> None:
    """Install creates every object (CRDs already present are left alone); an upgrade changes the Deployment
    and keeps the certificate data the controller wrote; uninstall removes the release's objects but keeps the
    CRDs, the certificate Secret and the GitSource the controller created."""
    rig = kueue_crds
    rig.kubectl("apply", "--server-side", "--field-manager=chart-tests", "-f", str(FIXTURES / "foreign-crds.yaml"))
    rig.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(FIXTURES / "foreign-crds.yaml"))
    namespace = rig.new_namespace("helm")
    release = f"h{uuid.uuid4().hex[:6]}"
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({
        "repo": {"url": "https://git.example.com/platform/queues.git"},
        # the webhook is real here: select only a label no namespace carries, so no other test's Jobs are judged
        "webhook": {"enabled": True, "namespaceSelector": {"matchLabels": {"gitopsq-helm-test": release}}},
    }))
    helm_on(helm, rig, "install", release, str(CHART), "-n", namespace, "-f", str(values))
    fullname = f"{release}-gitopsq"
    try:
        deployment = get(rig, "deployment", fullname, "-n", namespace)
        assert deployment is not None and deployment["spec"]["replicas"] == 2
        for kind, name in (("mutatingwebhookconfiguration", fullname), ("validatingwebhookconfiguration", fullname),
                           ("clusterrole", fullname), ("prometheusrule", fullname), ("servicemonitor", fullname),
                           ("configmap", f"{fullname}-dashboard"), ("secret", f"{fullname}-webhook-cert")):
            scope = [] if kind.startswith(("mutating", "validating", "clusterrole")) else ["-n", namespace]
            assert get(rig, kind, name, *scope) is not None, kind
        # what the controller would do at start: fill the certificate Secret, create its GitSource
        cert = base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()
        rig.kubectl("patch", "secret", f"{fullname}-webhook-cert", "-n", namespace, "--field-manager=gitopsq",
                    "--type=merge", "-p", json.dumps({"data": {"tls.crt": cert}}))
        rig.kubectl("apply", "--server-side", "--field-manager=gitopsq", "-f", "-", stdin=yaml.safe_dump(
            {"apiVersion": "gitopsq.dev/v1alpha1", "kind": "GitSource", "metadata": {"name": "queues",
             "namespace": namespace}, "spec": {"url": "https://git.example.com/platform/queues.git", "ref": "main"}}))

        helm_on(helm, rig, "upgrade", release, str(CHART), "-n", namespace, "--reuse-values",
                "--set", "replicaCount=3", "--set", "repo.interval=1m")
        deployment = get(rig, "deployment", fullname, "-n", namespace)
        assert deployment is not None and deployment["spec"]["replicas"] == 3
        assert "--interval=1m" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        secret = get(rig, "secret", f"{fullname}-webhook-cert", "-n", namespace)
        assert secret is not None and secret["data"]["tls.crt"] == cert
    finally:
        helm_on(helm, rig, "uninstall", release, "-n", namespace)
    for kind, name in (("mutatingwebhookconfiguration", fullname), ("clusterrole", fullname),
                       ("clusterrolebinding", fullname)):
        assert get(rig, kind, name) is None, kind
    assert get(rig, "deployment", fullname, "-n", namespace) is None
    assert get(rig, "crd", "clusterqueues.kueue.x-k8s.io") is not None
    assert get(rig, "gitsource", "queues", "-n", namespace) is not None
    kept = get(rig, "secret", f"{fullname}-webhook-cert", "-n", namespace)
    assert kept is not None and kept["data"]["tls.crt"] == cert
    rig.kubectl("delete", "gitsource", "queues", "-n", namespace)
