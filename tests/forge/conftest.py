"""Fixtures of the forge tests: a recording loopback HTTP server (the real Gitea comes from tests/forge_rig.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .recorder import Recorder, serve


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    """A fresh recording server on a free loopback port, shut down after the test."""
    rec = Recorder()
    server = serve(rec)
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
