"""The Job admission webhook, served over HTTPS by the controller (certificates: gitopsq/webhook_certs.py).

- ``POST /mutate-batch-v1-job``: a Job labelled ``kueue.x-k8s.io/queue-name`` is created suspended, so no pod
  starts before the admission loop admits it (Kueue's ``ApplyDefaultForSuspend``).
- ``POST /validate-batch-v1-job``: in the namespaces the repository marks as managed, a Job without a queue
  label is refused; every Job created or updated is judged by the CEL policies that match kind ``Job``
  (gitopsq.policy, the same engine as ``gitopsq check``); a Deny verdict refuses it, a Warn verdict is
  returned as an admission warning.
Requests and answers are ``admission.k8s.io/v1`` AdmissionReviews. A malformed review is answered 400.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gitopsq import logs
from gitopsq.cluster.admission.live_workload import QUEUE_LABEL
from gitopsq.webhook_certs import MUTATE_PATH, VALIDATE_PATH


def _log() -> Any:
    """Looked up at use, so that the configuration `logs.configure` sets later applies."""
    return logs.get("webhook")


MAX_BODY = 3 << 20


@dataclass(frozen=True, slots=True)
class JobWebhookOptions:
    managed_namespaces: frozenset[str] = frozenset()  # Jobs here must carry a queue label
    policies: Sequence[Any] = field(default_factory=tuple)  # gitopsq.policy.Policy objects


def _answer(uid: str, allowed: bool, *, message: str = "", patch: list[dict[str, Any]] | None = None,
            warnings: Sequence[str] = ()) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": message}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class JobWebhook:
    """Decides AdmissionReviews for batch/v1 Jobs (no I/O: the server below feeds it)."""

    def __init__(self, options: JobWebhookOptions | None = None) -> None:
        self.options = options or JobWebhookOptions()

    def mutate(self, review: Mapping[str, Any]) -> dict[str, Any]:
        request = review["request"]
        job = request.get("object") or {}
        labels = (job.get("metadata") or {}).get("labels") or {}
        if request.get("operation") == "CREATE" and labels.get(QUEUE_LABEL) and \
                (job.get("spec") or {}).get("suspend") is not True:
            return _answer(request["uid"], True, patch=[{"op": "add", "path": "/spec/suspend", "value": True}])
        return _answer(request["uid"], True)

    def validate(self, review: Mapping[str, Any]) -> dict[str, Any]:
        request = review["request"]
        job = request.get("object") or {}
        meta = job.get("metadata") or {}
        namespace = request.get("namespace") or meta.get("namespace") or ""
        labels = meta.get("labels") or {}
        if request.get("operation") == "CREATE" and namespace in self.options.managed_namespaces \
                and not labels.get(QUEUE_LABEL):
            return _answer(request["uid"], False, message=(
                f"namespace {namespace} is managed by gitopsq: Jobs there need the label {QUEUE_LABEL} "
                "naming a LocalQueue"))
        denied, warnings = self._policies(request, job)
        if denied:
            return _answer(request["uid"], False, message="; ".join(denied), warnings=warnings)
        return _answer(request["uid"], True, warnings=warnings)

    def _policies(self, request: Mapping[str, Any], job: Mapping[str, Any]) -> tuple[list[str], list[str]]:
        if not self.options.policies:
            return [], []
        from gitopsq.policy import Change, ObjectKey, Operation, PolicyInput, evaluate

        obj = {"apiVersion": "batch/v1", "kind": "Job", **job}
        old = request.get("oldObject")
        operation = Operation.UPDATE if request.get("operation") == "UPDATE" else Operation.CREATE
        key = ObjectKey.of(obj)
        change = Change(operation=operation, path=f"cluster/{key.namespace}/jobs/{key.name}", key=key, object=obj,
                        old_object={"apiVersion": "batch/v1", "kind": "Job", **old} if old else None)
        verdicts = evaluate(self.options.policies, PolicyInput(changes=(change,), desired={}, repo={}))
        denied = [f"{v.policy}: {v.message}" for v in verdicts if not v.allowed and v.severity.value == "Deny"]
        warnings = [f"{v.policy}: {v.message}" for v in verdicts if not v.allowed and v.severity.value == "Warn"]
        return denied, warnings


class PolicyFollower:
    """Keeps `JobWebhook` judging Jobs by the policies of the revision the GitSource says is applied: every
    ``interval`` it reads the GitSource status (``path``), and when ``lastAppliedRevision`` moved it fetches the
    branch (so the commit is in the mirror) and loads that commit's policies. Runs on every replica, so
    followers follow the leader's sync."""

    def __init__(self, rest: Any, path: str, source: Any, branch: str, hook: JobWebhook, *,
                 load: Any) -> None:
        self.rest, self.path, self.source, self.branch, self.hook, self.load = rest, path, source, branch, hook, load
        self.loaded: str | None = None

    def refresh(self) -> None:
        from dataclasses import replace

        from gitopsq.errors import GitopsqError

        try:
            applied = (self.rest.request("GET", self.path, retry=False).get("status") or {}).get("lastAppliedRevision")
            if applied and applied != self.loaded:
                self.source.resolve(self.branch)
                policies = tuple(self.load(applied))
                self.hook.options = replace(self.hook.options, policies=policies)
                self.loaded = applied
                _log().info("job webhook policies", revision=applied, policies=[p.name for p in policies])
        except GitopsqError as err:
            _log().debug("job webhook policies not refreshed", error=str(err))

    def start(self, stop: threading.Event, interval: float) -> threading.Thread:
        def loop() -> None:
            self.refresh()
            while not stop.wait(interval):
                self.refresh()

        thread = threading.Thread(target=loop, name="gitopsq-job-policies", daemon=True)
        thread.start()
        return thread


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
                decide = {MUTATE_PATH: hook.mutate, VALIDATE_PATH: hook.validate}.get(self.path.split("?")[0])
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
                _log().debug("admission review", path=self.path, allowed=answer["response"]["allowed"])
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
        import hashlib

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
            _log().warning("webhook certificate not reloaded yet", error=str(err))
            return False
        _log().info("webhook certificate reloaded", cert=str(self.cert_file))
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
