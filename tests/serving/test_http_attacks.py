"""The controller's health and push-webhook endpoints (gitopsq.controller.endpoints on gitopsq.serving) against
hostile clients on a real socket: bodies whatever their Content-Length says, malformed requests, slow headers,
too many connections, clients that go away, and a delivery sent again."""

from __future__ import annotations

import contextlib
import gc
import json
import socket
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitopsq.controller.endpoints import HttpEndpoints
from gitopsq.serving import ServerLimits
from gitopsq.webhook.push import GitWebhook, sign

SECRET = b"s3cret"
SENT = 64 << 20  # what a hostile client tries to push: 64 times the push webhook's limit


@contextlib.contextmanager
def endpoints(limits: ServerLimits | None = None, ready_delay: float = 0.0) -> Iterator[tuple[HttpEndpoints,
                                                                                              list[str]]]:
    syncs: list[str] = []

    def ready() -> bool:
        time.sleep(ready_delay)
        return True

    server = HttpEndpoints("127.0.0.1:0", ready=ready, webhook=GitWebhook(SECRET, syncs.append, branch="main"),
                           limits=limits)
    server.start()
    try:
        yield server, syncs
    finally:
        server.close()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def answer_of(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the server sends until it closes (or ``timeout``)."""
    sock.settimeout(timeout)
    got = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            got += chunk
    return got


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1."), answer[:200]
    return int(answer.split(b" ", 2)[1])


def closed(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds (whatever it sends first)."""
    sock.settimeout(within)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (TimeoutError, BlockingIOError):
        return False
    except OSError:
        return True
    return False


def peak_rss_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak resident size


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) << 10
    raise AssertionError("no VmHWM in /proc/self/status")


def push(port: int, head: bytes, sent: list[int]) -> None:
    """Send ``head`` then up to `SENT` bytes of body, counting into ``sent`` until the server stops taking them."""
    chunk = b"x" * (1 << 20)
    with connect(port) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        try:
            sock.sendall(head)
            while sent[0] < SENT:
                sock.sendall(chunk)
                sent[0] += len(chunk)
            sock.shutdown(socket.SHUT_WR)
            sent.append(status_of(answer_of(sock)))
        except OSError:
            sent.append(-1)  # the server closed on us: its answer may be lost in the reset


@pytest.mark.parametrize(("length", "expected"), [
    ("-1", {400}), ("abc", {400}), (None, {401, 400}), ("10", {401, 400}), (str(100 << 20), {413})],
    ids=["negative", "not-a-number", "missing", "too-small", "too-large"])
def test_a_body_is_never_read_past_the_limit_whatever_its_content_length(length: str | None,
                                                                          expected: set[int]) -> None:
    """The body pushed after the headers is read at most to the push webhook's 1 MiB: the server answers (or
    closes) while the client is still sending, and the process's peak memory does not grow by the body."""
    head = b"POST /hooks/git HTTP/1.1\r\nHost: gitopsq\r\nX-Hub-Signature-256: sha256=00\r\n"
    if length is not None:
        head += f"Content-Length: {length}\r\n".encode()
    head += b"\r\n"
    with endpoints() as (server, syncs):
        peak_rss_reset()
        before = peak_rss()
        sent = [0]
        pusher = threading.Thread(target=push, args=(server.port, head, sent))
        pusher.start()
        pusher.join(30)
        assert not pusher.is_alive(), "the server kept reading the body"
        grown = peak_rss() - before
        assert sent[0] < SENT // 2, f"the server took {sent[0] >> 20} MiB of a body it should refuse"
        assert grown < 24 << 20, f"peak memory grew by {grown >> 20} MiB"
        status = sent[-1]
        if status != -1:
            assert status in expected
        assert syncs == []
        # and the server still answers
        with connect(server.port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: gitopsq\r\nConnection: close\r\n\r\n")
            assert status_of(answer_of(sock)) == 200


def left_behind() -> int:
    """Tracebacks and frames alive in this process: what an error caught and kept holds on to."""
    return sum(isinstance(o, (types.TracebackType, types.FrameType)) for o in gc.get_objects())


def test_malformed_bodies_leave_nothing_behind_for_the_cycle_collector() -> None:
    """The controller keeps its cycle collector off the heap (controller/heap.py): what a flood of malformed
    requests leaves must be freed by reference counting alone, not wait there for a full collection (each
    error's frames held the last 256 KiB read)."""
    head = b"POST /hooks/git HTTP/1.1\r\nHost: gitopsq\r\nContent-Length: -1\r\n\r\n"
    with endpoints() as (server, _):
        gc.collect()
        gc.disable()
        try:
            before = left_behind()
            pushers = [threading.Thread(target=push, args=(server.port, head, [SENT - (8 << 20)]))
                       for _ in range(40)]
            for t in pushers:
                t.start()
            for t in pushers:
                t.join(30)
            time.sleep(0.5)
            kept = left_behind() - before
        finally:
            gc.enable()
        assert kept < 20, f"40 malformed requests left {kept} tracebacks and frames for the cycle collector"


@pytest.mark.parametrize(("request_bytes", "expected"), [
    (b"POST /hooks/git HTTP/1.1\r\nHost: g\r\nContent-Length: abc\r\n\r\n", 400),
    (b"POST /hooks/git HTTP/1.1\r\nHost: g\r\nContent-Length: -1\r\n\r\n", 400),
    (b"POST /hooks/git HTTP/1.1\r\nHost: g\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400),
    (b"POST /hooks/git HTTP/1.1\r\nHost: g\r\nContent-Length: 2000000\r\n\r\n", 413),
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /healthz HTTP/1.1\r\nHost: g\r\nX-Long: " + b"a" * 20000 + b"\r\n\r\n", 400),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64, 400),  # a TLS hello on the plain port
], ids=["content-length-abc", "content-length-negative", "content-length-twice", "content-length-over-limit",
        "request-line", "header-too-long", "tls-on-plain-port"])
def test_malformed_requests_are_answered_not_traced(request_bytes: bytes, expected: int,
                                                    capfd: pytest.CaptureFixture[str]) -> None:
    with endpoints() as (server, syncs):
        with connect(server.port) as sock:
            sock.sendall(request_bytes)
            answer = answer_of(sock)
        assert status_of(answer) == expected
        assert syncs == []
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
    assert "Error" not in err


def test_slow_headers_are_closed_at_the_header_deadline_without_a_thread_each() -> None:
    """Half-sent requests, silent or trickling a byte at a time, are closed once the header deadline passes,
    and holding them open costs no thread."""
    limits = ServerLimits(header_timeout=1.5)
    with endpoints(limits) as (server, _):
        threads = threading.active_count()
        socks = [connect(server.port) for _ in range(100)]
        for sock in socks:
            sock.sendall(b"POST /hooks/git HTTP/1.1\r\nHost: gitopsq\r\n")
        trickling = socks[:20]
        started = time.monotonic()
        for _ in range(5):  # a byte every 0.5 s: each read arrives well within any per-read timeout
            time.sleep(0.5)
            for sock in trickling:
                with contextlib.suppress(OSError):
                    sock.sendall(b"X")
        assert threading.active_count() <= threads + limits.workers
        assert all(closed(sock, max(0.1, 4.0 - (time.monotonic() - started))) for sock in socks)
        for sock in socks:
            sock.close()
        assert time.monotonic() - started < 6


def test_connections_past_the_limit_are_refused_without_new_threads() -> None:
    limits = ServerLimits(max_connections=20, header_timeout=30)
    with endpoints(limits) as (server, _):
        threads = threading.active_count()
        held = [connect(server.port) for _ in range(20)]
        for sock in held:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # half a request: the connection stays open
        time.sleep(0.2)
        extra = [connect(server.port) for _ in range(30)]
        refused = []
        for sock in extra:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: gitopsq\r\n\r\n")
            refused.append(status_of(answer_of(sock, 5)))
            sock.close()
        assert refused == [503] * 30
        assert server.server.refused == 30
        assert threading.active_count() <= threads + limits.workers
        for sock in held:
            sock.close()
        deadline = time.monotonic() + 5
        while server.server.connections() and time.monotonic() < deadline:
            time.sleep(0.05)
        with connect(server.port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: gitopsq\r\nConnection: close\r\n\r\n")
            assert status_of(answer_of(sock)) == 200


def test_a_client_that_goes_away_logs_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    """Clients that reset the connection before the answer is written, or in the middle of a body."""
    with endpoints(ready_delay=0.3) as (server, _):
        for request in (b"GET /readyz HTTP/1.1\r\nHost: gitopsq\r\n\r\n",
                        b"POST /hooks/git HTTP/1.1\r\nHost: gitopsq\r\nContent-Length: 1000\r\n\r\n" + b"{" * 10):
            for _ in range(5):
                sock = connect(server.port)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.sendall(request)
                time.sleep(0.05)
                sock.close()  # linger 0: a reset, as a client killed mid-request
        time.sleep(0.6)  # the readiness answers are written after the clients left
        with connect(server.port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: gitopsq\r\nConnection: close\r\n\r\n")
            assert status_of(answer_of(sock)) == 200
    out, err = capfd.readouterr()
    for word in ("Traceback", "BrokenPipe", "ConnectionReset", "Error"):
        assert word not in err
    assert "Traceback" not in out


def delivery(body: bytes, headers: dict[str, str]) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (f"POST /hooks/git HTTP/1.1\r\nHost: gitopsq\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n{head}\r\n").encode() + body


@pytest.mark.parametrize("id_header", ["X-GitHub-Delivery", "X-Gitea-Delivery", "X-Gitlab-Event-UUID"])
def test_a_delivery_sent_again_triggers_one_sync(id_header: str) -> None:
    body = json.dumps({"ref": "refs/heads/main"}).encode()
    signed = {"X-GitHub-Event": "push", "X-Hub-Signature-256": sign(SECRET, body)}
    if id_header == "X-Gitlab-Event-UUID":
        signed = {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": SECRET.decode()}
    with endpoints() as (server, syncs):
        def send(headers: dict[str, str]) -> int:
            with connect(server.port) as sock:
                sock.sendall(delivery(body, headers))
                return status_of(answer_of(sock))

        # an unauthenticated copy first: it must not spend the id
        assert send({**signed, "X-Hub-Signature-256": "sha256=00", "X-Gitlab-Token": "wrong",
                     id_header: "d-1"}) == 401
        answers = [send({**signed, id_header: "d-1"}) for _ in range(3)]
        assert answers == [202, 200, 200]
        assert len(syncs) == 1
        assert send({**signed, id_header: "d-2"}) == 202  # another delivery still syncs
        assert send(signed) == 202  # and one without an id is never taken for a copy
        assert len(syncs) == 3
