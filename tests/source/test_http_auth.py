"""HTTPS-style token authentication against a real smart-HTTP server (git http-backend behind Basic auth)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitopsq.errors import AuthenticationError
from gitopsq.source import Credentials, open_source

from .conftest import History, HttpRemote, bare_clone


@pytest.fixture
def http_url(history: History, http_remote: HttpRemote) -> str:
    bare_clone(history.repo, http_remote.root / "queues.git")
    return http_remote.url("queues.git")


def test_token_from_environment_authenticates(http_url: str, http_remote: HttpRemote, history: History,
                                              cache_dir: Path) -> None:
    """GITOPSQ_GIT_TOKEN with GITOPSQ_GIT_USERNAME fetches from a server that requires them, shallowly."""
    env = {"GITOPSQ_GIT_TOKEN": http_remote.token, "GITOPSQ_GIT_USERNAME": http_remote.user}
    source = open_source(http_url, cache_dir=cache_dir, env=env)
    sha = source.resolve("main")
    assert sha == history.c3
    assert source.read_file(sha, "platform/flavors.yaml") == b"kind: ResourceFlavor\n"


def test_token_file_authenticates_and_secret_stays_out_of_the_cache(http_url: str, http_remote: HttpRemote,
                                                                    tmp_path: Path, cache_dir: Path) -> None:
    """GITOPSQ_GIT_TOKEN_FILE is read (trailing newline dropped) and the token is written nowhere in the cache."""
    token_file = tmp_path / "token"
    token_file.write_text(http_remote.token + "\n")
    env = {"GITOPSQ_GIT_TOKEN_FILE": str(token_file), "GITOPSQ_GIT_USERNAME": http_remote.user}
    source = open_source(http_url, cache_dir=cache_dir, env=env)
    source.resolve("v1.0")
    for path in cache_dir.rglob("*"):
        if path.is_file():
            assert http_remote.token.encode() not in path.read_bytes(), path


def test_token_in_url_is_used_but_never_stored(http_remote: HttpRemote, http_url: str, history: History,
                                               cache_dir: Path) -> None:
    """user:token@ in the URL authenticates, while the cache key, the stored remote URL and display omit it."""
    url = http_url.replace("http://", f"http://{http_remote.user}:{http_remote.token}@")
    source = open_source(url, cache_dir=cache_dir, env={})
    assert source.resolve("main") == history.c3
    assert http_remote.token not in source.display
    assert http_remote.token.encode() not in (source.path / "config").read_bytes()


AUTH_FAILURES = [
    pytest.param({"GITOPSQ_GIT_TOKEN": "wrong-token", "GITOPSQ_GIT_USERNAME": "ci"}, "refused", id="wrong-token"),
    pytest.param({"GITOPSQ_GIT_TOKEN": "s3cr3t-token-value", "GITOPSQ_GIT_USERNAME": "mallory"}, "refused",
                 id="right-token-wrong-user"),
    pytest.param({}, "GITOPSQ_GIT_TOKEN", id="no-credentials-configured"),
]


@pytest.mark.parametrize(("env", "says"), AUTH_FAILURES)
def test_authentication_failure_is_one_clean_line(http_url: str, cache_dir: Path, env: dict[str, str],
                                                  says: str) -> None:
    """A refused or missing token is an AuthenticationError (exit 3), one line, without the token in it."""
    with pytest.raises(AuthenticationError) as caught:
        open_source(http_url, cache_dir=cache_dir, env=env).resolve("main")
    message = str(caught.value)
    assert says in message and http_url in message
    assert "\n" not in message and "wrong-token" not in message and "s3cr3t" not in message
    assert caught.value.exit_code == 3


def test_credentials_repr_hides_the_token() -> None:
    """The Credentials value never shows its token in repr (so it cannot reach a log by accident)."""
    creds = Credentials.from_environment({"GITOPSQ_GIT_TOKEN": "hidden-value"})
    assert "hidden-value" not in repr(creds)
    assert creds.username == "git" and creds.secrets() == ("hidden-value",)


def test_user_in_url_is_sent_with_the_environment_token(http_remote: HttpRemote, http_url: str, history: History,
                                                        cache_dir: Path) -> None:
    """A user name in the URL (no password) is used with GITOPSQ_GIT_TOKEN instead of GITOPSQ_GIT_USERNAME."""
    url = http_url.replace("http://", f"http://{http_remote.user}@")
    source = open_source(url, cache_dir=cache_dir, env={"GITOPSQ_GIT_TOKEN": http_remote.token})
    assert source.resolve("main") == history.c3
