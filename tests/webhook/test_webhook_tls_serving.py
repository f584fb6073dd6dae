"""The Job webhook's HTTPS server (gitopsq/webhook/server.py on gitopsq.serving) on a real socket: AdmissionReviews
answered over TLS, renewed certificate files served to the next connection, a silent TLS client closed at the
header deadline, and a graceful close that finishes the review in flight."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.serving import ServerLimits
from gitopsq.webhook.certs import MUTATE_PATH, VALIDATE_PATH, ensure_certificates
from gitopsq.webhook.server import WebhookServer

HOSTS = ["localhost", "127.0.0.1"]


def review(uid: str = "u-1") -> bytes:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns",
                                                                 "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"template": {"spec": {"containers": []}}}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "operation": "CREATE", "namespace": "ns", "kind": {"group": "batch", "kind": "Job"},
        "object": job}}).encode()


def tls_client(ca_pem: bytes | None, server_name: str | None) -> ssl.SSLContext:
    if ca_pem is None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        return context
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.check_hostname = server_name is not None
    return context


def exchange(port: int, data: bytes, *, ca_pem: bytes | None = None,
             server_name: str | None = "localhost") -> tuple[int, Mapping[str, Any], bytes]:
    """Send ``data`` over TLS; the status, the JSON answer and the certificate the server presented (DER)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            tls_client(ca_pem, server_name).wrap_socket(raw, server_hostname=server_name) as sock:
        served = sock.getpeercert(binary_form=True) or b""
        sock.sendall(data)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body), served


def post(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def der(path: Path) -> bytes:
    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(Encoding.DER)


def test_reviews_are_answered_over_tls_with_the_old_status_codes(tmp_path: Path) -> None:
    certs = ensure_certificates(tmp_path, HOSTS)
    server = WebhookServer("127.0.0.1:0", JobWebhook(JobWebhookOptions(managed_namespaces=frozenset({"ns"}))),
                           certs.cert_file, certs.key_file)
    server.start()
    try:
        status, answer, _ = exchange(server.port, post(MUTATE_PATH, review()), ca_pem=certs.ca_pem)
        assert status == 200 and answer["response"]["uid"] == "u-1" and answer["response"]["allowed"] is True
        assert answer["response"]["patchType"] == "JSONPatch"
        status, answer, _ = exchange(server.port, post(VALIDATE_PATH, review("u-2")), ca_pem=certs.ca_pem)
        assert status == 200 and answer["response"]["uid"] == "u-2"
        status, answer, _ = exchange(server.port, post(MUTATE_PATH, b"{not json"), ca_pem=certs.ca_pem)
        assert status == 400 and answer["error"].startswith("not an AdmissionReview")
        status, answer, _ = exchange(server.port, post("/elsewhere", b"{}"), ca_pem=certs.ca_pem)
        assert (status, answer) == (404, {"error": "not found"})
        huge = (f"POST {MUTATE_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {4 << 20}\r\n\r\n").encode()
        status, answer, _ = exchange(server.port, huge, ca_pem=certs.ca_pem)
        assert (status, answer) == (413, {"error": "body too large"})
    finally:
        server.close()


def test_a_renewed_certificate_is_served_to_the_next_connection(tmp_path: Path) -> None:
    certs = ensure_certificates(tmp_path, HOSTS)
    server = WebhookServer("127.0.0.1:0", JobWebhook(JobWebhookOptions()), certs.cert_file, certs.key_file)
    server.start()
    try:
        first = der(certs.cert_file)
        for name in ("localhost", None):  # with SNI, and without it (an IP address, as the API server may dial)
            assert exchange(server.port, post(MUTATE_PATH, review()), server_name=name)[2] == first
        assert server.reload_if_changed() is False
        renewed = ensure_certificates(tmp_path, HOSTS, now=dt.datetime.now(dt.UTC) + dt.timedelta(days=340))
        assert renewed.renewed and der(renewed.cert_file) != first
        assert server.reload_if_changed() is True
        for name in ("localhost", None):
            status, _, served = exchange(server.port, post(MUTATE_PATH, review()), server_name=name)
            assert (status, served) == (200, der(renewed.cert_file))
    finally:
        server.close()


def test_a_silent_tls_client_is_closed_at_the_header_deadline(tmp_path: Path) -> None:
    certs = ensure_certificates(tmp_path, HOSTS)
    server = WebhookServer("127.0.0.1:0", JobWebhook(JobWebhookOptions()), certs.cert_file, certs.key_file,
                           limits=ServerLimits(header_timeout=1.0))
    server.start()
    try:
        silent = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(20)]
        started = time.monotonic()
        for sock in silent:  # no ClientHello at all: the handshake deadline closes them
            assert sock.recv(1) == b""
        assert time.monotonic() - started < 4
        # a handshake done, then half a request
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw, \
                tls_client(None, "localhost").wrap_socket(raw, server_hostname="localhost") as sock:
            sock.sendall(f"POST {MUTATE_PATH} HTTP/1.1\r\nHost: localhost\r\n".encode())
            started = time.monotonic()
            assert sock.recv(1) == b""
            assert time.monotonic() - started < 3
        for sock in silent:
            sock.close()
    finally:
        server.close()


SERVE = """
import sys, time
from pathlib import Path
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.serving import ServerLimits
from gitopsq.webhook.server import WebhookServer
server = WebhookServer("127.0.0.1:0", JobWebhook(JobWebhookOptions()), Path(sys.argv[1]), Path(sys.argv[2]),
                       limits=ServerLimits(header_timeout=60))
server.start()
print(server.port, flush=True)
time.sleep(120)
"""


def resident(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) << 10
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def test_a_tls_connection_held_open_costs_little_memory(tmp_path: Path) -> None:
    """300 connections past their handshake, waiting for headers, as a slow-header attack holds them, cost the
    server process little memory. The server runs alone with MALLOC_PERTURB_ set, so that every buffer it
    allocates is written to and counted, as on a heap that has been in use for a while."""
    certs = ensure_certificates(tmp_path, HOSTS)
    env = {**os.environ, "MALLOC_PERTURB_": "85"}
    served = subprocess.Popen([sys.executable, "-c", SERVE, str(certs.cert_file), str(certs.key_file)],
                              stdout=subprocess.PIPE, env=env, text=True)
    held: list[ssl.SSLSocket] = []
    try:
        assert served.stdout is not None
        port = int(served.stdout.readline())
        before = resident(served.pid)
        for _ in range(300):
            raw = socket.create_connection(("127.0.0.1", port), timeout=5)
            held.append(tls_client(None, "localhost").wrap_socket(raw, server_hostname="localhost"))
            held[-1].sendall(b"POST /mutate-batch-v1-job HTTP/1.1\r\n")
        time.sleep(1.0)
        grown = resident(served.pid) - before
        assert grown < 30 << 20, f"300 waiting TLS connections took {grown >> 20} MiB"
    finally:
        for sock in held:
            sock.close()
        served.kill()
        served.wait(10)


def test_close_finishes_the_review_in_flight_and_refuses_new_connections(tmp_path: Path) -> None:
    certs = ensure_certificates(tmp_path, HOSTS)

    class SlowWebhook(JobWebhook):
        def mutate(self, review: Mapping[str, Any]) -> dict[str, Any]:
            time.sleep(1.0)
            return super().mutate(review)

    server = WebhookServer("127.0.0.1:0", SlowWebhook(JobWebhookOptions()), certs.cert_file, certs.key_file)
    server.start()
    answers: list[int] = []
    client = threading.Thread(target=lambda: answers.append(exchange(server.port, post(MUTATE_PATH, review()))[0]))
    client.start()
    time.sleep(0.4)
    started = time.monotonic()
    server.close()
    client.join(10)
    assert answers == [200]
    assert time.monotonic() - started < 3
    assert not server.serving()
    try:
        socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
        raise AssertionError("the closed server still accepts connections")
    except ConnectionRefusedError:
        pass
