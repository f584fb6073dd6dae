"""The Job admission webhook behind real Mutating/ValidatingWebhookConfigurations on the rig's API server, with
gitopsq's own CA in caBundle; and certificate issue and rotation."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_rig import create_job, job_manifest, rest
from cryptography import x509
from envtest_rig import Envtest
from webhook_rig import JOB_POLICY

from gitopsq.errors import ClusterError
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.policy import parse_policies
from gitopsq.webhook.certs import ensure_certificates, webhook_configurations
from gitopsq.webhook.server import WebhookServer


@pytest.fixture
def webhook(envtest: Envtest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The webhook served on 127.0.0.1 and registered for two fresh namespaces (one managed); yields them."""
    marker = uuid.uuid4().hex[:8]
    managed, free = envtest.new_namespace("managed"), envtest.new_namespace("free")
    for ns in (managed, free):
        envtest.kubectl("label", "namespace", ns, f"gitopsq-webhook-test={marker}")
    certs = ensure_certificates(tmp_path / "certs", ["127.0.0.1"])
    hook = JobWebhook(JobWebhookOptions(managed_namespaces=frozenset({managed}),
                                        policies=parse_policies("policies/jobs.yaml", JOB_POLICY)))
    server = WebhookServer("127.0.0.1:0", hook, certs.cert_file, certs.key_file)
    server.start()
    api = rest(envtest)
    configs = webhook_configurations(certs.ca_pem, url=f"https://127.0.0.1:{server.port}", name=f"gitopsq-{marker}",
                                     namespace_selector={"matchLabels": {"gitopsq-webhook-test": marker}})
    paths = []
    for config in configs:
        plural = config["kind"].lower() + "s"
        path = f"/apis/admissionregistration.k8s.io/v1/{plural}"
        api.request("POST", path, body=config)
        paths.append(f"{path}/{config['metadata']['name']}")
    try:
        yield managed, free
    finally:
        for path in paths:
            api.request("DELETE", path)
        server.close()


def _create_until_registered(envtest: Envtest, manifest: dict[str, object]) -> dict[str, object]:
    """The API server picks up new webhook configurations within about a second: retry until it does."""
    import time

    deadline = time.monotonic() + 15
    name = manifest["metadata"]["name"]  # type: ignore[index]
    while True:
        created = create_job(envtest, manifest)
        if created["spec"]["suspend"] is True or time.monotonic() > deadline:  # type: ignore[index]
            return created
        rest(envtest).request("DELETE", f"/apis/batch/v1/namespaces/{created['metadata']['namespace']}/jobs/{name}",  # type: ignore[index]
                              query=[("propagationPolicy", "Background")])
        time.sleep(0.3)


def test_labelled_job_is_created_suspended(envtest: Envtest, webhook: tuple[str, str]) -> None:
    """A labelled Job submitted with suspend=false is stored suspended; an unlabelled Job in an unmanaged
    namespace is left running."""
    _, free = webhook
    created = _create_until_registered(envtest, job_manifest(free, "labelled", "queue", {"cpu": "1"}, suspend=False))
    assert created["spec"]["suspend"] is True
    plain = create_job(envtest, job_manifest(free, "plain", None, {"cpu": "1"}, suspend=False))
    assert plain["spec"]["suspend"] is False


@pytest.mark.parametrize(("queue", "parallelism", "message"), [
    pytest.param(None, 1, "Jobs there need the label kueue.x-k8s.io/queue-name",
                 id="unlabelled job in a managed namespace"),
    pytest.param("queue", 9, "jobs-at-most-8-pods: a Job may run at most 8 pods in parallel",
                 id="CEL policy denies too many parallel pods"),
])
def test_validating_webhook_refuses(envtest: Envtest, webhook: tuple[str, str], queue: str | None, parallelism: int,
                                    message: str) -> None:
    """The validating webhook refuses Jobs the managed-namespace rule or a CEL policy forbids, with the reason."""
    managed, _ = webhook
    _create_until_registered(envtest, job_manifest(managed, "probe", "queue", {"cpu": "1"}, suspend=False))
    with pytest.raises(ClusterError) as refused:
        create_job(envtest, job_manifest(managed, "refused", queue, {"cpu": "1"}, parallelism=parallelism))
    assert message in str(refused.value)


def test_certificates_are_reused_then_rotated_near_expiry(tmp_path: Path) -> None:
    """A second call reuses valid certificates; near the serving certificate's expiry a new one is issued by
    the same CA; near the CA's expiry a new CA is made and the bundle keeps the old one as well."""
    first = ensure_certificates(tmp_path, ["127.0.0.1", "gitopsq-webhook.gitopsq-system.svc"])
    again = ensure_certificates(tmp_path, ["127.0.0.1", "gitopsq-webhook.gitopsq-system.svc"])
    assert first.renewed and not again.renewed and again.ca_pem == first.ca_pem
    serial = x509.load_pem_x509_certificate(first.cert_file.read_bytes()).serial_number
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=340)
    rotated = ensure_certificates(tmp_path, ["127.0.0.1", "gitopsq-webhook.gitopsq-system.svc"], now=later)
    assert rotated.renewed and rotated.ca_pem == first.ca_pem
    assert x509.load_pem_x509_certificate(rotated.cert_file.read_bytes()).serial_number != serial
    much_later = dt.datetime.now(dt.UTC) + dt.timedelta(days=3640)
    new_ca = ensure_certificates(tmp_path, ["127.0.0.1"], now=much_later)
    cas = x509.load_pem_x509_certificates(new_ca.ca_pem)
    assert len(cas) == 2 and cas[1] == x509.load_pem_x509_certificates(first.ca_pem)[0] != cas[0]
