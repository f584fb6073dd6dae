"""What a route sees and answers: plain data, so that handlers stay free of the HTTP library."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TEXT = "text/plain; charset=utf-8"
JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # without the query
    query: str
    headers: Mapping[str, str]  # names lower-case
    body: bytes


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str = TEXT
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def text(cls, status: int, text: str) -> Reply:
        return cls(status, (text + "\n").encode())

    @classmethod
    def json(cls, status: int, payload: object) -> Reply:
        return cls(status, json.dumps(payload).encode(), JSON)


Handle = Callable[[Request], Reply]


@dataclass(frozen=True, slots=True)
class Route:
    """``handle`` answers ``method`` on ``path`` (``*``: any path), in a worker thread. ``max_body``: bytes of body
    accepted; a longer one is answered 413 and never read past the limit, whatever Content-Length says."""

    method: str
    path: str
    handle: Handle
    max_body: int = 0


def text_error(status: int, message: str) -> Reply:
    """The server's own answers (404, 408, 413, 500, 503) as text."""
    return Reply.text(status, message)


def json_error(status: int, message: str) -> Reply:
    """The server's own answers as ``{"error": message}``."""
    return Reply.json(status, {"error": message})


ErrorReply = Callable[[int, str], Reply]
