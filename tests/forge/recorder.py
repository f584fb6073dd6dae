"""A loopback HTTP server that records every request and answers from a script the test writes.

Used for the GitHub and GitLab clients (recorded-protocol tests: the answers are shaped as those forges'
documented REST APIs, they are not the forges) and as the receiver of notifications.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Answer = tuple[int, Any] | tuple[int, Any, dict[str, str]]
Handler = Callable[[Request], Answer]


@dataclass
class Recorder:
    """Routes are ``(METHOD, path)`` → handler; unknown routes answer 404 as the forges do."""

    routes: dict[tuple[str, str], Handler] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    delay: float = 0.0
    url: str = ""

    def route(self, method: str, path: str, answer: Handler | Answer) -> None:
        self.routes[(method, path)] = answer if callable(answer) else (lambda _r, a=answer: a)

    def script(self, method: str, path: str, *answers: Answer) -> None:
        """Answer the same route with each of ``answers`` in turn (the last one repeats)."""
        left = list(answers)
        self.route(method, path, lambda _r: left.pop(0) if len(left) > 1 else left[0])

    def seen(self, method: str | None = None) -> list[Request]:
        return [r for r in self.requests if method is None or r.method == method]


def serve(recorder: Recorder) -> ThreadingHTTPServer:
    class _Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            req = Request(self.command, parts.path, dict(urllib.parse.parse_qsl(parts.query)),
                          {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
            recorder.requests.append(req)
            if recorder.delay:
                time.sleep(recorder.delay)
            handler = recorder.routes.get((req.method, req.path))
            answer: Answer = handler(req) if handler else (404, {"message": "Not Found"})
            status, body = answer[0], answer[1]
            headers = answer[2] if len(answer) > 2 else {}  # type: ignore[misc]
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any  # noqa: N815 - http.server's naming

        def log_message(self, *_: Any) -> None:  # keep pytest output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
