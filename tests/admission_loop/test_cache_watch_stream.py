"""Watch events are split out of a chunked response body exactly, wherever the chunks happen to break."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from gitopsq.admission_loop.watch_cache import _events

EVENTS = [{"type": "ADDED", "object": {"metadata": {"name": f"w-{i}", "resourceVersion": str(i)}}}
          for i in range(5)]
BODY = b"".join(json.dumps(e).encode() + b"\n" for e in EVENTS)


class Body:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt: int | None = None, decode_content: bool = True) -> Iterator[bytes]:
        yield from self.chunks


@pytest.mark.parametrize("size", [pytest.param(len(BODY), id="all events in one chunk"),
                                  pytest.param(7, id="chunks that cut events mid-way"),
                                  pytest.param(1, id="one byte at a time")])
def test_events_come_out_whole_and_in_order(size: int) -> None:
    """However the body is chunked, each event is decoded once, whole, in order; blank keep-alive lines are
    skipped."""
    body = BODY.replace(b"\n", b"\n\n", 1)
    chunks = [body[i:i + size] for i in range(0, len(body), size)]
    assert list(_events(Body(chunks))) == EVENTS
