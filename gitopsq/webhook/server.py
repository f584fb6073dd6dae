"""The HTTPS server of the Job admission webhook: ``POST /mutate-batch-v1-job``, ``POST /validate-batch-v1-job`` and
``POST /mutate--v1-pod`` answered by gitopsq.intake.jobs.JobWebhook; renewed certificate files are picked up
without a restart.
Requests and answers are ``admission.k8s.io/v1`` AdmissionReviews. A malformed review is answered 400."""

from __future__ import annotations

import hashlib
import json
import ssl
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gitopsq import logs
from gitopsq.intake.jobs import JobWebhook
from gitopsq.serving import HttpServer, Reply, Request, Route, ServerLimits
from gitopsq.serving.routes import json_error
from gitopsq.webhook.certs import MUTATE_PATH, POD_MUTATE_PATH, VALIDATE_PATH

_log = logs.get("webhook")

MAX_BODY = 3 << 20


def _review_route(path: str, decide: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> Route:
    def handle(request: Request) -> Reply:
        try:
            answer = decide(json.loads(request.body))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            return Reply.json(400, {"error": f"not an AdmissionReview: {err}"})
        _log.debug("admission review", path=path, allowed=answer["response"]["allowed"])
        return Reply.json(200, answer)

    return Route("POST", path, handle, max_body=MAX_BODY)


class WebhookServer:
    """HTTPS server for `JobWebhook` on ``host:port``; `reload` picks up renewed certificates."""

    def __init__(self, address: str, webhook: JobWebhook, cert_file: Path, key_file: Path, *,
                 limits: ServerLimits | None = None) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self._loaded = b""
        self.reload()
        # The listener's context only picks, per handshake, the context of the moment: a renewed certificate
        # serves the next connection without touching the listener or the handshakes in flight.
        serving = self._new_context()
        serving.sni_callback = self._current
        routes = [_review_route(MUTATE_PATH, webhook.mutate), _review_route(VALIDATE_PATH, webhook.validate),
                  _review_route(POD_MUTATE_PATH, webhook.mutate_pod)]
        self.server = HttpServer(address, routes, limits=limits, tls=serving, name="webhook", error_reply=json_error)
        self.port: int = self.server.port

    def _current(self, connection: ssl.SSLObject, _server_name: str | None, _context: ssl.SSLContext) -> None:
        connection.context = self.context

    def _new_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(self.cert_file), str(self.key_file))
        return context

    def reload(self) -> None:
        """Load the certificate files again (after `ensure_certificates` renewed them); new connections use them."""
        fingerprint = self._fingerprint()
        # A new context rather than loading into the one in use: handshakes in flight keep theirs untouched.
        self.context = self._new_context()
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
        return self.server.serving()

    def start(self) -> None:
        self.server.start()

    def close(self) -> None:
        self.server.close()
