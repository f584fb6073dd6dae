"""The HTTPS server of the Job admission webhook: ``POST /mutate-batch-v1-job``, ``POST /validate-batch-v1-job`` and
``POST /mutate--v1-pod`` answered by gitopsq.intake.jobs.JobWebhook; renewed certificate files are picked up
without a restart.
Requests and answers are ``admission.k8s.io/v1`` AdmissionReviews. A malformed review is answered 400."""

from __future__ import annotations

import hashlib
import json
import ssl
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gitopsq import logs
from gitopsq.intake.jobs import JobWebhook
from gitopsq.webhook.certs import MUTATE_PATH, POD_MUTATE_PATH, VALIDATE_PATH

_log = logs.get("webhook")

MAX_BODY = 3 << 20


class WebhookServer:
    """HTTPS server for `JobWebhook` on ``host:port``; `reload` picks up renewed certificates."""

    def __init__(self, address: str, webhook: JobWebhook, cert_file: Path, key_file: Path) -> None:
        host, _, port = address.rpartition(":")
        self.cert_file, self.key_file = cert_file, key_file
        self._loaded = b""
        self.server: ThreadingHTTPServer | None = None
        self.reload()
        hook = webhook

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # the TLS handshake and the request must arrive within this (a stalled client)

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, status: int, payload: Mapping[str, Any] | str) -> None:
                data = (json.dumps(payload) if not isinstance(payload, str) else payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                decide = {MUTATE_PATH: hook.mutate, VALIDATE_PATH: hook.validate,
                          POD_MUTATE_PATH: hook.mutate_pod}.get(self.path.split("?")[0])
                if decide is None:
                    self._send(404, {"error": "not found"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._send(413, {"error": "body too large"})
                    return
                try:
                    review = json.loads(self.rfile.read(length))
                    answer = decide(review)
                except (ValueError, KeyError, TypeError, AttributeError) as err:
                    self._send(400, {"error": f"not an AdmissionReview: {err}"})
                    return
                _log.debug("admission review", path=self.path, allowed=answer["response"]["allowed"])
                self._send(200, answer)

        server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
        server.daemon_threads = True
        # The handshake runs in the request's thread (first read), not in accept: a client that stalls it
        # cannot hold up the others.
        server.socket = self.context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self.server = server
        self.port: int = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, name="gitopsq-webhook", daemon=True)

    def reload(self) -> None:
        """Load the certificate files again (after `ensure_certificates` renewed them); new connections use them."""
        fingerprint = self._fingerprint()
        # A new context rather than loading into the one in use: handshakes in flight keep theirs untouched.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(self.cert_file), str(self.key_file))
        self.context = context
        if self.server is not None:
            self.server.socket.context = context  # type: ignore[attr-defined]
        self._loaded = fingerprint

    def _fingerprint(self) -> bytes:
        try:
            return hashlib.sha256(self.cert_file.read_bytes() + b"\0" + self.key_file.read_bytes()).digest()
        except OSError:
            return b""

    def reload_if_changed(self) -> bool:
        """Reload when the files' contents changed (renewal, cert-manager's Secret update); True if reloaded.
        A half-written pair that does not load is skipped until the next call."""
        if self._fingerprint() in (self._loaded, b""):
            return False
        try:
            self.reload()
        except (OSError, ssl.SSLError) as err:
            _log.warning("webhook certificate not reloaded yet", error=str(err))
            return False
        _log.info("webhook certificate reloaded", cert=str(self.cert_file))
        return True

    def watch(self, stop: threading.Event, interval: float = 5.0) -> threading.Thread:
        """Reload changed certificate files every ``interval`` seconds until ``stop``, in a thread."""
        def loop() -> None:
            while not stop.wait(interval):
                self.reload_if_changed()

        thread = threading.Thread(target=loop, name="gitopsq-webhook-certs", daemon=True)
        thread.start()
        return thread

    def serving(self) -> bool:
        """Whether the HTTPS server runs (for /readyz)."""
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
