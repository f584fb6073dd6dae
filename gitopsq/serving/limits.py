"""The limits every gitopsq HTTP listener enforces (flags ``--http-*`` of `gitopsq controller`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """``header_timeout``: seconds from accepting a connection (or from the end of its previous answer) until the
    request line and every header have arrived, the TLS handshake included; a client that trickles bytes is
    closed all the same. ``body_timeout``: seconds to receive the whole body once the headers are in.
    ``max_connections``: open connections per listener; past it a new connection gets 503 and is closed.
    ``workers``: threads that run the routes' handlers (the protocol itself runs on one event loop thread).
    ``shutdown_grace``: seconds that requests in flight get to finish on `close`."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 1000
    workers: int = 8
    max_header_bytes: int = 8190
    shutdown_grace: float = 5.0

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "shutdown_grace"):
            if not getattr(self, name) > 0:
                raise ValueError(f"HTTP {name.replace('_', ' ')} must be positive, not {getattr(self, name)}")
        for name in ("max_connections", "workers", "max_header_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"HTTP {name.replace('_', ' ')} must be at least 1, not {getattr(self, name)}")
