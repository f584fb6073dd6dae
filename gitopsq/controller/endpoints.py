"""The controller's HTTP endpoints on one address: ``/healthz`` (alive), ``/readyz`` (ready) and the Git push
webhook (``POST /hooks/git``, gitopsq.webhook.push), served by gitopsq.serving. Metrics and the Job admission
webhook serve on addresses of their own, by the same server."""

from __future__ import annotations

from collections.abc import Callable

from gitopsq.serving import HttpServer, Reply, Request, Route, ServerLimits
from gitopsq.webhook.push import MAX_BODY as WEBHOOK_MAX_BODY
from gitopsq.webhook.push import PATH as WEBHOOK_PATH
from gitopsq.webhook.push import GitWebhook


class HttpEndpoints:
    """``/healthz`` (alive), ``/readyz`` (API reachable recently), and the Git webhook, on one address."""

    def __init__(self, address: str, *, ready: Callable[[], bool], webhook: GitWebhook | None,
                 limits: ServerLimits | None = None) -> None:
        self.ready = ready
        self.webhook = webhook
        routes = [Route("GET", "/healthz", lambda _: Reply.text(200, "ok")), Route("GET", "/readyz", self._readyz)]
        if webhook is not None:
            routes.append(Route("POST", WEBHOOK_PATH, self._push, max_body=WEBHOOK_MAX_BODY))
        self.server = HttpServer(address, routes, limits=limits, name="http")
        self.port = self.server.port

    def _readyz(self, _: Request) -> Reply:
        ok = self.ready()
        return Reply.text(200 if ok else 503, "ok" if ok else "not ready")

    def _push(self, request: Request) -> Reply:
        assert self.webhook is not None
        answer = self.webhook.handle(request.headers, request.body)
        return Reply.text(answer.status, answer.message)

    def start(self) -> None:
        self.server.start()

    def close(self) -> None:
        self.server.close()
