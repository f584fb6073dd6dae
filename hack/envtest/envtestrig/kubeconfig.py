"""The rig's kubeconfig: admin by client certificate (default context), admin by token, and a no-rights user.

A client-certificate identity is what Kueue's own tooling (its benchmark runner) expects; the token contexts
let tests exercise bearer-token auth and RBAC refusals.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from envtestrig.pki import Pki

CONTEXTS = {"envtest": "envtest-admin", "envtest-token": "envtest-admin-token", "envtest-nobody": "envtest-nobody"}


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, api_url: str, credentials: Pki) -> None:
    """Write a self-contained kubeconfig (certificates inline) readable only by the user."""
    users = {
        "envtest-admin": {
            "client-certificate-data": _b64(credentials.admin_cert),
            "client-key-data": _b64(credentials.admin_key),
        },
        "envtest-admin-token": {"token": credentials.admin_token},
        "envtest-nobody": {"token": credentials.nobody_token},
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "envtest",
                "cluster": {"server": api_url, "certificate-authority-data": _b64(credentials.serving_ca)},
            }
        ],
        "users": [{"name": name, "user": user} for name, user in users.items()],
        "contexts": [{"name": c, "context": {"cluster": "envtest", "user": u}} for c, u in CONTEXTS.items()],
        "current-context": "envtest",
        "preferences": {},
    }
    # JSON is YAML: kubectl and the Python client read it, and the rig needs no YAML library
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
