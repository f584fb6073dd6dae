"""Helpers the chart's rig tests share (no tests here): a free port, applying rendered objects with kubectl, and
a kubeconfig that authenticates as a ServiceAccount."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import yaml
from envtest_rig import Envtest
from kubernetes import client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def apply(rig: Envtest, objects: list[dict[str, Any]], *, dry_run: bool) -> subprocess.CompletedProcess[str]:
    args = ["apply", "--server-side", "--field-manager=helm", "-o", "name", "-f", "-"]
    if dry_run:
        args.insert(1, "--dry-run=server")
    return rig.kubectl(*args, stdin=yaml.safe_dump_all(objects), check=False)


def service_account_kubeconfig(rig: Envtest, namespace: str, account: str, target: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount with a TokenRequest token (what the pod would get)."""
    with rig.api_client() as api:
        request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[],
                                                                                     expiration_seconds=3600))
        token = client.CoreV1Api(api).create_namespaced_service_account_token(account, namespace, request).status.token
    admin = yaml.safe_load(rig.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    config = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
              "users": [{"name": "sa", "user": {"token": token}}],
              "contexts": [{"name": "sa", "context": {"cluster": cluster["name"], "user": "sa"}}],
              "current-context": "sa"}
    target.write_text(yaml.safe_dump(config))
    target.chmod(0o600)
    return target
