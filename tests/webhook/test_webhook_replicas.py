"""The Job webhook as `gitopsq controller` serves it: on every replica (leader or not), with one CA shared through
the certificate Secret, the caBundle written into the named configurations, part of /readyz, and certificate
files reloaded when they change."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_rig import rest
from controller_process import Controller, free_port, killed_at_end, wait_for
from cryptography import x509
from envtest_rig import Envtest
from webhook_rig import JOB_POLICY, post_review

from gitopsq.webhook.certs import MUTATE_PATH, ensure_certificates, webhook_configurations

pytestmark = pytest.mark.envtest


def review(name: str) -> bytes:
    job = {"metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "main"}},
           "spec": {"suspend": False}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": name, "operation": "CREATE", "object": job}}).encode()


def mutate(port: int, ca_pem: bytes) -> dict[str, Any] | None:
    """POST an AdmissionReview over HTTPS, trusting only ``ca_pem``; None while the server is not there."""
    # check_hostname off: the names are the Service's (checked separately); the CA is still verified
    return post_review(port, MUTATE_PATH, review("probe"), ca_pem, check_hostname=False)


def status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0


@pytest.fixture
def objects(kueue_clean: Envtest) -> Iterator[tuple[str, str]]:
    """An empty certificate Secret (as the chart creates it) and both webhook configurations with no caBundle,
    matching no namespace so they never stand in the rig's way; yields (namespace, name)."""
    name = f"hook-{uuid.uuid4().hex[:6]}"
    namespace = kueue_clean.new_namespace("hooks")
    api = rest(kueue_clean)
    api.request("POST", f"/api/v1/namespaces/{namespace}/secrets",
                body={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque"})
    paths = []
    for config in webhook_configurations(b"", service=(namespace, name, 443), name=name,
                                         namespace_selector={"matchLabels": {"never": name}}):
        for hook in config["webhooks"]:
            del hook["clientConfig"]["caBundle"]
        plural = config["kind"].lower() + "s"
        api.request("POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", body=config)
        paths.append(f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")
    yield namespace, name
    for path in paths:
        api.request("DELETE", path)


@pytest.fixture
def started(kueue_clean: Envtest) -> Iterator[list[Controller]]:
    with killed_at_end() as processes:
        yield processes


def replica(env: Envtest, tmp: Path, namespace: str, name: str, identity: str) -> tuple[Controller, int]:
    port = free_port()
    proc = Controller(env, tmp, identity, "--admission-only", "--leader-elect", "--namespace", namespace,
                      "--lease-name", name, "--identity", identity, "--lease-duration", "4s", "--renew-deadline",
                      "3s", "--retry-period", "1s", "--webhook-addr", f"127.0.0.1:{port}",
                      "--webhook-cert-dir", str(tmp / identity / "certs"), "--webhook-cert-secret", name,
                      "--webhook-service", f"{namespace}/{name}", "--webhook-configuration", name)
    return proc, port


def test_every_replica_serves_the_webhook_with_the_shared_ca(kueue_clean: Envtest, tmp_path: Path,
                                                             objects: tuple[str, str],
                                                             started: list[Controller]) -> None:
    """Two replicas (one leads): both answer AdmissionReviews with a certificate of the one CA kept in the
    Secret, both are ready, and both configurations carry that CA as caBundle."""
    namespace, name = objects
    pairs = [replica(kueue_clean, tmp_path, namespace, name, f"r{i}") for i in (1, 2)]
    started += [p for p, _ in pairs]
    api = rest(kueue_clean)

    def stored_ca() -> bytes | None:
        data = api.request("GET", f"/api/v1/namespaces/{namespace}/secrets/{name}").get("data") or {}
        return base64.b64decode(data["ca.crt"]) if data.get("ca.crt") else None

    ca = wait_for(stored_ca, message="the CA in the Secret")
    for proc, port in pairs:
        answer = wait_for(lambda port=port: mutate(port, ca), message=f"webhook of {proc.log.name}")
        assert answer["response"]["allowed"] is True and answer["response"]["patchType"] == "JSONPatch"
        wait_for(lambda proc=proc: status(proc.health, "/readyz") == 200, message="ready")
    for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        def bundle(plural: str = plural) -> bytes:
            hook = api.request("GET", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")["webhooks"][0]
            return base64.b64decode(hook["clientConfig"].get("caBundle") or "")
        wait_for(lambda: ca in bundle(), message=f"caBundle of {plural}")
    served = x509.load_pem_x509_certificate(ssl.get_server_certificate(("127.0.0.1", pairs[0][1])).encode())
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{name}.{namespace}.svc" in names.get_values_for_type(x509.DNSName)
    leader = api.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
    assert leader["spec"]["holderIdentity"] in ("r1", "r2")
    roles = {proc.log.stem: proc.scrape() for proc, _ in pairs}
    follower = "r2" if leader["spec"]["holderIdentity"] == "r1" else "r1"
    assert 'replica_role="leader"' in roles[leader["spec"]["holderIdentity"]]
    assert 'kueue_build_info{git_version=' in roles[follower] and 'replica_role="follower"' in roles[follower]
    assert 'replica_role="leader"' not in roles[follower]
    for proc, _ in pairs:
        assert proc.stop() == 0


def test_changed_certificate_files_are_served_without_a_restart(kueue_clean: Envtest, tmp_path: Path,
                                                                started: list[Controller]) -> None:
    """With certificates provided in --webhook-cert-dir (cert-manager's mounted Secret), replacing the files
    makes the server present the new certificate within seconds."""
    certs = tmp_path / "mounted"
    first = ensure_certificates(certs, ["localhost"])
    port = free_port()
    proc = Controller(kueue_clean, tmp_path, "mounted", "--admission-only", "--webhook-addr", f"127.0.0.1:{port}",
                      "--webhook-cert-dir", str(certs))
    started.append(proc)
    wait_for(lambda: mutate(port, first.ca_pem), message="webhook with the first certificate")
    other = ensure_certificates(tmp_path / "other", ["localhost"])
    for file in ("tls.key", "tls.crt"):
        (certs / file).write_bytes((tmp_path / "other" / file).read_bytes())
    wait_for(lambda: mutate(port, other.ca_pem), timeout=60, message="webhook with the new certificate")
    assert mutate(port, first.ca_pem) is None
    served = ssl.get_server_certificate(("127.0.0.1", port))
    assert x509.load_pem_x509_certificate(served.encode()) == \
        x509.load_pem_x509_certificate(other.cert_file.read_bytes())
    assert proc.stop() == 0


def validate(port: int, ca_pem: bytes, parallelism: int) -> dict[str, Any] | None:
    job = {"metadata": {"name": "p", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "main"}},
           "spec": {"parallelism": parallelism}}
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "u", "operation": "CREATE", "namespace": "default", "object": job}})
    return post_review(port, "/validate-batch-v1-job", body.encode(), ca_pem)


def test_jobs_are_judged_by_the_applied_revisions_policies(kueue_clean: Envtest, tmp_path: Path,
                                                          started: list[Controller]) -> None:
    """In the combined mode the Job webhook applies the CEL policies of the revision the sync applied: a Job over
    the repository's limit is refused with the policy's message, one within it is allowed."""
    from queue_repo import QueueRepo

    repo = QueueRepo(tmp_path / "queues", f"p{uuid.uuid4().hex[:6]}")
    config = (repo.path / "gitopsq.yaml").read_text()
    repo.write("gitopsq.yaml", config.replace("include:", "policyPaths: [policies/]\ninclude:", 1))
    repo.write("policies/jobs.yaml", JOB_POLICY)
    repo.commit("queues and a Job policy")
    port = free_port()
    proc = Controller(kueue_clean, tmp_path, "policies", "--repo", str(repo.path), "--name", repo.tag,
                      "--interval", "1s", "--webhook-addr", f"127.0.0.1:{port}",
                      "--webhook-cert-dir", str(tmp_path / "certs"))
    started.append(proc)
    ca = wait_for(lambda: (tmp_path / "certs" / "ca-bundle.crt").exists() and
                  (tmp_path / "certs" / "ca-bundle.crt").read_bytes(), message="generated certificates")

    def refused() -> str | None:
        answer = validate(port, ca, 9)
        return None if answer is None or answer["response"]["allowed"] else answer["response"]["status"]["message"]

    message = wait_for(refused, timeout=30, message="the policy to be loaded")
    assert "jobs-at-most-8-pods: a Job may run at most 8 pods in parallel" in message
    allowed = validate(port, ca, 4)
    assert allowed is not None and allowed["response"]["allowed"] is True
    assert proc.stop() == 0
