"""The rig's API server (a Go TLS client, no SNI for an IP address) calling the Job webhook across a certificate
renewal, while a slow-header attacker holds connections open on the same port."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import time
import uuid
from pathlib import Path

import pytest
from cluster_rig import create_job, job_manifest, rest
from cryptography import x509
from envtest_rig import Envtest

from gitopsq.errors import ClusterError
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.serving import ServerLimits
from gitopsq.webhook.certs import ensure_certificates, webhook_configurations
from gitopsq.webhook.server import WebhookServer

pytestmark = pytest.mark.envtest


def served_serial(port: int) -> int:
    pem = ssl.get_server_certificate(("127.0.0.1", port))
    return x509.load_pem_x509_certificate(pem.encode()).serial_number


def create_suspended(envtest: Envtest, namespace: str, name: str) -> bool:
    """Create a queued Job; whether it came back suspended (the webhook answered), retrying while the API server
    has not picked up the new configurations."""
    deadline = time.monotonic() + 20
    while True:
        try:
            created = create_job(envtest, job_manifest(namespace, name, "queue", {"cpu": "1"}, suspend=False))
            if created["spec"]["suspend"] is True:
                return True
            rest(envtest).request("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
        except ClusterError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)


def test_the_api_server_is_answered_across_a_renewal_and_a_slow_header_attack(envtest: Envtest,
                                                                              tmp_path: Path) -> None:
    marker = uuid.uuid4().hex[:8]
    namespace = envtest.new_namespace("renewal")
    envtest.kubectl("label", "namespace", namespace, f"gitopsq-renewal-test={marker}")
    certs = ensure_certificates(tmp_path / "certs", ["127.0.0.1"])
    server = WebhookServer("127.0.0.1:0", JobWebhook(JobWebhookOptions()), certs.cert_file, certs.key_file,
                           limits=ServerLimits(header_timeout=3))
    server.start()
    api = rest(envtest)
    paths = []
    slow: list[socket.socket] = []
    try:
        for config in webhook_configurations(certs.ca_pem, url=f"https://127.0.0.1:{server.port}",
                                             name=f"gitopsq-{marker}",
                                             namespace_selector={"matchLabels": {"gitopsq-renewal-test": marker}}):
            path = f"/apis/admissionregistration.k8s.io/v1/{config['kind'].lower()}s"
            api.request("POST", path, body=config)
            paths.append(f"{path}/{config['metadata']['name']}")
        assert create_suspended(envtest, namespace, "before")
        first = served_serial(server.port)

        renewed = ensure_certificates(tmp_path / "certs", ["127.0.0.1"],
                                      now=dt.datetime.now(dt.UTC) + dt.timedelta(days=340))
        assert renewed.renewed and renewed.ca_pem == certs.ca_pem  # the serving certificate only: same CA
        assert server.reload_if_changed()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        for _ in range(100):  # connections that finish the handshake and never their headers
            raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            slow.append(context.wrap_socket(raw, server_hostname="localhost"))
            slow[-1].sendall(b"POST /mutate-batch-v1-job HTTP/1.1\r\n")
        for i in range(10):
            assert create_suspended(envtest, namespace, f"after-{i}")
        assert served_serial(server.port) != first
        assert served_serial(server.port) == x509.load_pem_x509_certificate(
            renewed.cert_file.read_bytes()).serial_number
        time.sleep(3.5)  # past the header deadline: the attacker's connections are closed
        closed = 0
        for sock in slow:
            sock.settimeout(1)
            try:
                closed += sock.recv(1) == b""
            except OSError:
                closed += 1
        assert closed == len(slow)
    finally:
        for sock in slow:
            sock.close()
        for path in paths:
            api.request("DELETE", path)
        server.close()
