"""`HttpServer`: routes (gitopsq.serving.routes) served on one address by aiohttp's HTTP/1.1 protocol.

Why aiohttp's protocol on an event loop rather than a thread per connection: a connection that is slow to send
its headers costs a few kilobytes and no thread, and a deadline (``header_timeout``) closes it however it trickles.
The handlers are plain functions run by a small pool of threads, so a decision that calls the API server never
holds up the protocol. Bodies are read by the route's limit, never by the Content-Length the client announces:
a negative or non-numeric one is a malformed request (400), a larger one is refused before reading (413), a
missing or smaller one reads only that many bytes and the rest is parsed as the next request. The library's own
messages (a malformed request, a client gone) become one structured line at debug level, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
import traceback
from asyncio import sslproto
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestHandler, _ErrInfo

from gitopsq.serving.limits import ServerLimits
from gitopsq.serving.routes import ErrorReply, Reply, Request, Route, text_error

_log = structlog.get_logger("http", component="http")
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
         b"Content-Length: 21\r\nConnection: close\r\n\r\ntoo many connections\n")


class _OneLine(logging.Handler):
    """aiohttp's log records as one structlog line, the exception's type and text instead of its traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        _log.debug("http protocol", message=record.getMessage(),
                   error=f"{type(error).__name__}: {error}" if error is not None else None)


# asyncio gives every TLS connection a read buffer of this size, zero-filled at once: 256 KiB by default, so
# 1000 connections (say, slow ones waiting for their header deadline) held 250 MiB. A TLS record carries at most
# 16 KiB, so 32 KiB costs no extra reads.
sslproto.SSLProtocol.max_size = 32 * 1024

_protocol_log = logging.getLogger("gitopsq.serving.protocol")
_protocol_log.propagate = False  # never reaches logging's last-resort handler (stderr, with tracebacks)
_protocol_log.addHandler(_OneLine())
_protocol_log.setLevel(logging.DEBUG)


def _loop_error(_: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's unhandled errors (a TLS handshake cut short, a reset while writing): one line, no traceback."""
    error = context.get("exception")
    _log.debug("http connection error", message=context.get("message"),
               error=f"{type(error).__name__}: {error}" if error is not None else None)


class _Protocol(RequestHandler):
    """aiohttp's protocol, less what a malformed request costs it. Its parse error holds, through its traceback,
    the frame that parsed the chunk read (up to 256 KiB) and, through that frame, the error again: a cycle, which
    the controller's frozen heap (controller/heap.py) keeps for minutes; and every further chunk of the same
    request made one more. Here the first error's frames are cleared and the rest of the stream is dropped
    unparsed until the 400 is written and the connection closed."""

    _failed = False

    def data_received(self, data: bytes) -> None:
        if self._failed:
            return
        super().data_received(data)
        for message, _ in self._messages:
            if isinstance(message, _ErrInfo):
                self._failed = True
                if message.exc.__traceback__ is not None:
                    traceback.clear_frames(message.exc.__traceback__)
                    message.exc.__traceback__ = None


class _Refused(asyncio.Protocol):
    """The answer past ``max_connections``: 503, then the connection is closed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(_BUSY)
        transport.close()


class _BodyTooLargeError(Exception):
    pass


class HttpServer:
    """Serves ``routes`` on ``host:port`` (``:8080``: all interfaces; port 0: a free one, see `port`), over TLS
    when ``tls`` is given. `start` runs it in a thread of its own; `close` stops accepting, lets the requests in
    flight finish within ``limits.shutdown_grace`` and closes every connection."""

    def __init__(self, address: str, routes: Sequence[Route], *, limits: ServerLimits | None = None,
                 tls: ssl.SSLContext | None = None, name: str = "http", error_reply: ErrorReply = text_error) -> None:
        host, _, port = address.rpartition(":")
        self.limits = limits or ServerLimits()
        self._tls, self._name, self._error = tls, name, error_reply
        self._exact = {(r.method, r.path): r for r in routes if r.path != "*"}
        self._any = {r.method: r for r in routes if r.path == "*"}
        # Bound here, in the caller's thread: a port in use is the caller's OSError, as with any server.
        self._sock = socket.create_server((host.strip("[]") or "0.0.0.0", int(port)),
                                          backlog=min(self.limits.max_connections, 4096))
        self.port: int = self._sock.getsockname()[1]
        self.refused = 0  # connections answered 503 past max_connections
        self._pool = ThreadPoolExecutor(self.limits.workers, thread_name_prefix=f"gitopsq-{name}-handler")
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(_loop_error)
        self._thread = threading.Thread(target=self._run, name=f"gitopsq-{name}", daemon=True)
        self._up = threading.Event()
        self._failed: Exception | None = None
        self._closed = False
        self._web: web.Server | None = None
        self._server: asyncio.Server | None = None

    @property
    def server_port(self) -> int:
        """The port, as `http.server` and wsgiref name it."""
        return self.port

    def start(self) -> None:
        self._thread.start()
        if not self._up.wait(30):
            raise OSError(f"the {self._name} server did not start")
        if self._failed is not None:
            raise OSError(f"the {self._name} server did not start: {self._failed}") from self._failed

    def serving(self) -> bool:
        return self._thread.is_alive() and not self._closed

    def connections(self) -> int:
        """Connections open now (for tests and the attack benchmark)."""
        return len(self._web.connections) if self._web is not None else 0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            done = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            try:
                done.result(self.limits.shutdown_grace + 5)
            except (TimeoutError, RuntimeError):
                _log.warning("http server did not stop in time", server=self._name)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        else:
            self._sock.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    shutdown = close  # the name wsgiref's server gave it (metrics callers)

    # -- the event loop's thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._open())
        except (OSError, ValueError, RuntimeError) as err:  # given to `start`, in the caller's thread
            self._failed = err
            self._sock.close()
            self._loop.close()
            return
        finally:
            self._up.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _open(self) -> None:
        limits = self.limits
        self._web = web.Server(self._dispatch, handler_cancellation=False, **self._protocol_args)
        self._server = await self._loop.create_server(
            self._protocol, sock=self._sock, ssl=self._tls,
            ssl_handshake_timeout=limits.header_timeout if self._tls is not None else None,
            backlog=min(limits.max_connections, 4096))

    @property
    def _protocol_args(self) -> dict[str, Any]:
        limits = self.limits
        return {
            # From the accepted connection (or the end of the previous answer) to the last header: a total
            # deadline, not one per read, so a client that trickles a byte at a time is closed all the same.
            "keepalive_timeout": limits.header_timeout,
            "lingering_time": 0,  # an unread body closes the connection rather than being drained
            "logger": _protocol_log, "access_log": None,
            "max_line_size": limits.max_header_bytes, "max_field_size": limits.max_header_bytes, "max_headers": 100}

    def _protocol(self) -> asyncio.BaseProtocol:
        assert self._web is not None
        if len(self._web.connections) >= self.limits.max_connections:
            self.refused += 1
            return _Refused()
        return _Protocol(self._web, loop=self._loop, **self._protocol_args)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()  # no new connections
        if self._web is not None:
            for connection in self._web.connections:
                connection.close()  # idle ones now, the others once their answer is written
            await self._web.shutdown(self.limits.shutdown_grace)

    def _route(self, method: str, path: str) -> Route | None:
        return self._exact.get((method, path)) or self._any.get(method)

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        route = self._route(request.method, request.path)
        if route is None:
            return self._answer(self._error(404, "not found"), close=not request.content.at_eof())
        try:
            body = await self._body(request, route.max_body)
        except _BodyTooLargeError:
            return self._answer(self._error(413, "body too large"), close=True)
        except TimeoutError:
            return self._answer(self._error(408, "body not received in time"), close=True)
        seen = Request(request.method, request.path, request.query_string,
                       {k.lower(): v for k, v in request.headers.items()}, body)
        try:
            reply = await self._loop.run_in_executor(self._pool, route.handle, seen)
        except Exception as err:  # a handler's bug: the client gets 500, the log one line
            _log.error("http handler failed", server=self._name, path=request.path,
                       error=f"{type(err).__name__}: {err}")
            return self._answer(self._error(500, "internal error"), close=True)
        return self._answer(reply, close=False)

    async def _body(self, request: web.BaseRequest, limit: int) -> bytes:
        announced = request.content_length
        if announced is not None and announced > limit:
            raise _BodyTooLargeError
        got = bytearray()
        async with asyncio.timeout(self.limits.body_timeout):
            while not request.content.at_eof():
                chunk = await request.content.readany()
                if not chunk:
                    break
                got += chunk
                if len(got) > limit:
                    raise _BodyTooLargeError
        return bytes(got)

    @staticmethod
    def _answer(reply: Reply, *, close: bool) -> web.StreamResponse:
        response = web.Response(status=reply.status, body=reply.body,
                                headers={"Content-Type": reply.content_type, **dict(reply.headers)})
        if close:
            response.force_close()
        return response
