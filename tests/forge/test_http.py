"""The shared HTTP helper: retries, backoff, errors and tokens (against a recording loopback server)."""

from __future__ import annotations

import socket

import pytest

from gitopsq.errors import UsageError
from gitopsq.forge.http import Backoff, ForgeError, Http, Secret, load_token

from .recorder import Recorder

TOKEN = "tok-very-secret-123"


def _http(url: str, attempts: int = 4, waits: list[float] | None = None) -> Http:
    return Http("github", url, secret_headers={"Authorization": Secret(f"Bearer {TOKEN}")}, timeout=2.0,
                backoff=Backoff(attempts=attempts, base=0.25, cap=2.0),
                sleep=(waits.append if waits is not None else lambda _s: None))


def test_retries_5xx_then_succeeds_with_exponential_waits(recorder: Recorder) -> None:
    """Two 502s then a 200: the call returns the 200's body after waiting 0.25 s then 0.5 s."""
    recorder.script("GET", "/x", (502, {"message": "bad gateway"}), (503, {}), (200, {"ok": True}))
    waits: list[float] = []
    assert _http(recorder.url, waits=waits).json("GET", "/x") == {"ok": True}
    assert len(recorder.seen("GET")) == 3
    assert waits == [0.25, 0.5]


def test_429_waits_as_retry_after_says(recorder: Recorder) -> None:
    """A 429 with Retry-After: 1 waits one second (capped by the backoff) before trying again."""
    recorder.script("POST", "/x", (429, {"message": "slow down"}, {"Retry-After": "1"}), (201, {"id": 1}))
    waits: list[float] = []
    assert _http(recorder.url, waits=waits).json("POST", "/x", {"a": 1}) == {"id": 1}
    assert waits == [1.0]


def test_4xx_is_not_retried_and_names_the_forge_message(recorder: Recorder) -> None:
    """A 422 fails at once with the forge's own message, the status and the path; the token is nowhere in it."""
    recorder.route("POST", "/x", (422, {"message": "approve your own pull is not allowed"}))
    with pytest.raises(ForgeError) as err:
        _http(recorder.url).json("POST", "/x", {})
    assert len(recorder.seen()) == 1
    assert err.value.status == 422 and err.value.path == "/x"
    assert "approve your own pull is not allowed" in str(err.value)
    assert TOKEN not in str(err.value) and TOKEN not in repr(err.value)


def test_persistent_5xx_gives_up_after_the_attempts(recorder: Recorder) -> None:
    """A forge that keeps answering 500 is tried `attempts` times, then ForgeError carries the last status."""
    recorder.route("GET", "/x", (500, {"message": "boom"}))
    with pytest.raises(ForgeError, match="after 3 attempts") as err:
        _http(recorder.url, attempts=3).json("GET", "/x")
    assert err.value.status == 500 and len(recorder.seen()) == 3


def test_unreachable_forge_is_a_forge_error() -> None:
    """Nothing listening on the port: ForgeError with no status, after the retries, never a raw URLError."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ForgeError, match="unreachable") as err:
        _http(f"http://127.0.0.1:{port}", attempts=2).json("GET", "/x")
    assert err.value.status is None


def test_token_is_sent_but_never_printed(recorder: Recorder) -> None:
    """The Authorization header reaches the server while the Secret's repr and str hide it."""
    recorder.route("GET", "/x", (200, []))
    http = _http(recorder.url)
    http.json("GET", "/x")
    assert recorder.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in repr(http) and TOKEN not in str(Secret(TOKEN))


def test_pages_follow_until_a_short_page(recorder: Recorder) -> None:
    """A list endpoint is read page after page until a page has fewer items than asked for."""
    recorder.route("GET", "/items", lambda r: (200, list(range(2)) if r.query["page"] != "3" else [9]))
    items = _http(recorder.url).pages("/items", size_param="per_page", size=2)
    assert items == [0, 1, 0, 1, 9]
    assert [r.query["per_page"] for r in recorder.requests] == ["2", "2", "2"]


def test_load_token_from_file_or_env(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The token comes from the file first, else the environment; missing or empty is a usage error."""
    f = tmp_path / "token"
    f.write_text("  abc\n")
    assert load_token(str(f), "GQ_TOKEN").reveal() == "abc"
    monkeypatch.setenv("GQ_TOKEN", "from-env")
    assert load_token(None, "GQ_TOKEN").reveal() == "from-env"
    monkeypatch.delenv("GQ_TOKEN")
    with pytest.raises(UsageError, match=r"--token-file or \$GQ_TOKEN"):
        load_token(None, "GQ_TOKEN")
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(UsageError, match="is empty"):
        load_token(str(tmp_path / "empty"))


def test_a_redirect_does_not_carry_the_token(recorder: Recorder) -> None:
    """A 302 is followed, but the token is sent only to the URL gitopsq was configured with."""
    recorder.route("GET", "/old", (302, {}, {"Location": f"{recorder.url}/new"}))
    recorder.route("GET", "/new", (200, {"ok": 1}))
    assert _http(recorder.url).json("GET", "/old") == {"ok": 1}
    first, second = recorder.requests
    assert first.headers["authorization"] == f"Bearer {TOKEN}" and "authorization" not in second.headers
