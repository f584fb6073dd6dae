"""The one HTTP server behind every endpoint gitopsq serves (the Job and pod admission webhooks, the Git push
webhook, health and metrics): aiohttp's HTTP/1.1 protocol on an event loop of its own, with header and body
deadlines, a body limit per route, a bounded number of connections and a graceful shutdown (docs/controller.md)."""

from gitopsq.serving.http_server import HttpServer
from gitopsq.serving.limits import ServerLimits
from gitopsq.serving.routes import Reply, Request, Route

__all__ = ["HttpServer", "Reply", "Request", "Route", "ServerLimits"]
