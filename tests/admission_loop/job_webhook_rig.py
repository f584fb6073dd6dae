"""gitopsq's job webhook on a full rig, as the webhook tests of each job kind set it up: a fresh namespace that
only this webhook manages (a marker label selects it), the webhook server with the options the controller would
give it, and its webhook configurations registered with the API server for the kinds of the integrations run."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from cluster_rig import rest, wait_for
from envtest_rig import FullCluster

from gitopsq.admission_loop.integrations import Integration, select, webhook_kinds
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.webhook.certs import ensure_certificates, webhook_configurations
from gitopsq.webhook.server import WebhookServer

MERGE = "application/merge-patch+json"
# (the managed namespaces, the running integrations) -> the webhook's options
Options = Callable[[frozenset[str], tuple[Integration, ...]], JobWebhookOptions]


def plain(namespaces: frozenset[str], running: tuple[Integration, ...]) -> JobWebhookOptions:
    return JobWebhookOptions(managed_namespaces=namespaces)


@contextlib.contextmanager
def managed_namespace(cluster: FullCluster, tmp_path: Path, prefix: str, frameworks: Sequence[str],
                      options: Options = plain) -> Iterator[str]:
    """A fresh namespace behind gitopsq's job webhook registered for ``frameworks``; everything is removed after."""
    marker = uuid.uuid4().hex[:8]
    ns = cluster.new_namespace(prefix)
    cluster.kubectl("label", "namespace", ns, f"gitopsq-webhook-test={marker}")
    running = select(frameworks)
    certs = ensure_certificates(tmp_path / "certs", ["127.0.0.1"])
    server = WebhookServer("127.0.0.1:0", JobWebhook(options(frozenset({ns}), running)), certs.cert_file,
                           certs.key_file)
    server.start()
    api = rest(cluster)
    paths = []
    try:
        for config in webhook_configurations(certs.ca_pem, url=f"https://127.0.0.1:{server.port}",
                                             name=f"gq-{marker}",
                                             namespace_selector={"matchLabels": {"gitopsq-webhook-test": marker}},
                                             kinds=webhook_kinds(running)):
            path = f"/apis/admissionregistration.k8s.io/v1/{config['kind'].lower()}s"
            api.request("POST", path, body=config)
            paths.append(f"{path}/{config['metadata']['name']}")
        yield ns
    finally:
        for path in paths:
            api.request("DELETE", path)
        server.close()
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def create_until_suspended(cluster: FullCluster, collection: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """New webhook configurations take about a second to reach the API server: create the object in
    ``collection``, deleting and retrying until it is stored suspended (15 s at most; the last answer is returned
    for the caller to assert on)."""
    api, name = rest(cluster), manifest["metadata"]["name"]
    deadline = time.monotonic() + 15
    while True:
        created: dict[str, Any] = api.request("POST", collection, body=manifest)
        if created["spec"].get("suspend") is True or time.monotonic() > deadline:
            return created
        api.request("DELETE", f"{collection}/{name}", query=[("propagationPolicy", "Background")])
        wait_for("the object gone", lambda: name not in {o["metadata"]["name"] for o in
                                                        api.request("GET", collection)["items"]})
        time.sleep(0.3)
