"""The controller's HTTP endpoints on one address: ``/healthz`` (alive), ``/readyz`` (ready) and the Git push
webhook (``POST /hooks/git``, gitopsq.webhook.push). Metrics and the Job admission webhook serve elsewhere."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gitopsq.webhook.push import PATH as WEBHOOK_PATH
from gitopsq.webhook.push import GitWebhook


class HttpEndpoints:
    """``/healthz`` (alive), ``/readyz`` (API reachable recently), and the Git webhook, on one address."""

    def __init__(self, address: str, *, ready: Callable[[], bool], webhook: GitWebhook | None) -> None:
        host, _, port = address.rpartition(":")
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep stdout for structured logs
                return

            def _answer(self, status: int, text: str) -> None:
                data = (text + "\n").encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/healthz":
                    self._answer(200, "ok")
                elif self.path == "/readyz":
                    ok = endpoints.ready()
                    self._answer(200 if ok else 503, "ok" if ok else "not ready")
                else:
                    self._answer(404, "not found")

            def do_POST(self) -> None:
                if self.path != WEBHOOK_PATH or endpoints.webhook is None:
                    self._answer(404, "not found")
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > (1 << 20):
                    self._answer(413, "body too large")
                    return
                body = self.rfile.read(length)
                answer = endpoints.webhook.handle({k.lower(): v for k, v in self.headers.items()}, body)
                self._answer(answer.status, answer.message)

        self.ready = ready
        self.webhook = webhook
        self.server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="gitopsq-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
