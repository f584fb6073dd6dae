"""Operators the full rig runs beside Kubernetes' own controllers: the JobSet controller (built by build.py from
hack/jobset, its CRD read from the Go module cache)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from envtestrig.build import jobset_crds
from envtestrig.processes import free_port
from envtestrig.rig import Rig, RigError


def install_jobset(rig: Rig) -> None:
    """Install the JobSet CRD (read from the Go module cache) and start the JobSet controller.

    The controller needs its JobSet webhooks (their defaulting fills fields its reconciler dereferences) and
    has no flag to turn them off, so it serves them on a free loopback port with the rig's serving
    certificate (its own certificate rotation, which wants a Service and a Secret, is off), and the JobSet
    mutating and validating webhooks are registered with the API server by URL. Its Pod webhooks (only for
    exclusive placement) are not registered: a pod create never depends on this process (docs/envtest.md)."""
    assert rig._binaries is not None and rig._binaries.jobset is not None
    kubectl = [str(rig._binaries.kubectl), f"--kubeconfig={rig.kubeconfig}"]
    apply_crds(kubectl, jobset_crds(), ("jobsets.jobset.x-k8s.io",))
    certs = rig.workdir / "jobset-certs"
    certs.mkdir(exist_ok=True)
    shutil.copyfile(rig.pki_dir / "apiserver.crt", certs / "tls.crt")
    shutil.copyfile(rig.pki_dir / "apiserver.key", certs / "tls.key")
    port, webhook_port = free_port(), free_port()
    config = rig.workdir / "jobset-config.yaml"
    config.write_text(json.dumps({
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(certs)},
        "metrics": {"bindAddress": "0"}, "health": {"healthProbeBindAddress": f"127.0.0.1:{port}"},
        "clientConnection": {"qps": 100, "burst": 200}}))
    argv = [str(rig._binaries.jobset), f"--kubeconfig={rig.kubeconfig}", f"--config={config}"]
    env = {**os.environ, "KUBE_FEATURE_WatchListClient": "false"}
    pid = rig._spawn(argv, "jobset.log", env)
    rig._replace_state(jobset_pid=pid, jobset_port=port, jobset_webhook_port=webhook_port)
    rig._wait_http(f"http://127.0.0.1:{port}/healthz", pid=pid, log_name="jobset.log", context=None)
    bundle = base64.b64encode((rig.pki_dir / "serving-ca.crt").read_bytes()).decode()

    def hook(name: str, path: str, operations: list[str]) -> dict[str, object]:
        return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                "clientConfig": {"url": f"https://127.0.0.1:{webhook_port}{path}", "caBundle": bundle},
                "rules": [{"apiGroups": ["jobset.x-k8s.io"], "apiVersions": ["v1alpha2"],
                           "operations": operations, "resources": ["jobsets"]}]}

    configs = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "jobset-rig"},
         "webhooks": [hook("mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset", ["CREATE"])]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "jobset-rig"},
         "webhooks": [hook("vjobset.kb.io", "/validate-jobset-x-k8s-io-v1alpha2-jobset", ["CREATE", "UPDATE"])]},
    ]}
    done = subprocess.run([*kubectl, "apply", "--server-side", "-f", "-"], input=json.dumps(configs),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RigError(f"registering the JobSet webhooks failed: {done.stderr.strip()[-800:]}")


def apply_crds(kubectl: list[str], crds: Sequence[Path], names: Iterable[str]) -> None:
    """Apply an operator's CRD files (server-side: they are too large for a client-side apply's annotation) and wait
    until each CRD in ``names`` is Established (JobSet, KubeRay, Trainer)."""
    for crd in crds:
        done = subprocess.run([*kubectl, "apply", "--server-side", "-f", str(crd)], capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            raise RigError(f"installing {crd.name} failed: {done.stderr.strip()[-800:]}")
    established = '{.status.conditions[?(@.type=="Established")].status}'
    deadline = time.monotonic() + 60
    for name in names:
        while True:  # `kubectl wait` fails at once while a new CRD has no status yet
            done = subprocess.run([*kubectl, "get", f"crd/{name}", "-o", f"jsonpath={established}"],
                                  capture_output=True, text=True, check=False)
            if done.stdout.strip() == "True":
                break
            if time.monotonic() > deadline:
                raise RigError(f"the CRD {name} did not become established: {done.stderr.strip()[-800:]}")
            time.sleep(0.2)
