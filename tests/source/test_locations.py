"""REPO arguments: what is local and what is remote, and credentials never surviving into names or messages."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from pygit2.enums import CredentialType

from gitopsq.errors import SourceError
from gitopsq.source.credentials import Credentials, CredentialsMissing, CredentialsRefused, GitCallbacks
from gitopsq.source.failures import translate
from gitopsq.source.locations import parse_location, redact

LOCATIONS = [
    pytest.param("./queues", False, "local", "queues", id="relative-path"),
    pytest.param("/srv/queues.git", False, "local", "/srv/queues.git", id="absolute-path"),
    pytest.param("https://git.example.com/org/q.git", True, "https", "https://git.example.com/org/q.git",
                 id="https-url"),
    pytest.param("https://ci:tok3n@git.example.com:8443/org/q.git", True, "https",
                 "https://git.example.com:8443/org/q.git", id="https-credentials-stripped"),
    pytest.param("ssh://git@git.example.com/org/q.git", True, "ssh", "ssh://git@git.example.com/org/q.git",
                 id="ssh-url-keeps-user"),
    pytest.param("git@github.com:org/q.git", True, "ssh", "git@github.com:org/q.git", id="scp-like-ssh"),
    pytest.param("git://127.0.0.1:9418/q.git", True, "git", "git://127.0.0.1:9418/q.git", id="git-protocol"),
    pytest.param("file:///srv/q.git", True, "file", "file:///srv/q.git", id="file-url-is-remote"),
]


@pytest.mark.parametrize(("repo", "remote", "scheme", "display"), LOCATIONS)
def test_locations_are_classified(repo: str, remote: bool, scheme: str, display: str) -> None:
    """A REPO string is a local path or a remote URL of a known scheme, displayed without secrets."""
    location = parse_location(repo)
    assert (location.is_remote, location.scheme, location.display) == (remote, scheme, display)


def test_url_credentials_are_kept_apart_and_do_not_change_the_cache_key() -> None:
    """user:token@ is lifted out of the URL; the cache key is the same as for the bare URL."""
    with_token = parse_location("https://ci:tok3n@git.example.com/org/q.git")
    plain = parse_location("https://git.example.com/org/q.git")
    assert (with_token.username, with_token.password) == ("ci", "tok3n")
    assert "tok3n" not in repr(with_token)
    assert with_token.cache_key == plain.cache_key and len(plain.cache_key) == 64


@pytest.mark.parametrize("repo", ["ftp://example.com/q.git", "  "], ids=["unsupported-scheme", "empty"])
def test_bad_locations_are_source_errors(repo: str) -> None:
    """An unsupported scheme or an empty REPO is a one-line SourceError."""
    with pytest.raises(SourceError):
        parse_location(repo)


def test_redact_scrubs_userinfo_secrets_and_newlines() -> None:
    """redact removes URL user-info, replaces given secret values and folds the text onto one line."""
    text = "failed https://bob:pw@h/x.git\nwith token abc123"
    assert redact(text, ["abc123"]) == "failed https://h/x.git with token [redacted]"


def test_libgit2_messages_are_scrubbed_of_the_token() -> None:
    """A libgit2 error that happens to echo the token is translated with the token replaced."""
    error = translate(pygit2.GitError("request to https://x:tok@host failed: tok"), action="fetch",
                      repo="https://host/r.git", secrets=["tok"])
    assert "tok" not in str(error).replace("[redacted]", "")


def test_callbacks_present_each_credential_once(tmp_path: Path) -> None:
    """Credentials are offered once per kind; a second request (a refusal) aborts instead of looping."""
    key = tmp_path / "id_ed25519"
    key.write_text("not really a key")
    callbacks = GitCallbacks(Credentials(token="t", ssh_key_file=key), timeout_seconds=5)
    assert isinstance(callbacks.credentials("https://h", None, CredentialType.USERPASS_PLAINTEXT), pygit2.UserPass)
    with pytest.raises(CredentialsRefused):
        callbacks.credentials("https://h", None, CredentialType.USERPASS_PLAINTEXT)
    keypair = callbacks.credentials("ssh://git@h/r", "git", CredentialType.SSH_KEY)
    assert isinstance(keypair, pygit2.Keypair)
    assert keypair.credential_tuple[0] == "git" and keypair.credential_tuple[2] == key


@pytest.mark.parametrize(("allowed", "hint"), [
    (CredentialType.USERPASS_PLAINTEXT, "GITOPSQ_GIT_TOKEN"),
    (CredentialType.SSH_KEY, "GITOPSQ_SSH_KEY_FILE"),
], ids=["https-without-token", "ssh-without-key"])
def test_missing_credentials_name_the_variable_to_set(allowed: CredentialType, hint: str) -> None:
    """A remote asking for a credential we lack gets an error naming the environment variable to set."""
    with pytest.raises(CredentialsMissing) as caught:
        GitCallbacks(Credentials(), timeout_seconds=5).credentials("x", None, allowed)
    assert hint in translate(caught.value, action="fetch", repo="r").reason


def test_unreadable_token_file_is_a_source_error(tmp_path: Path) -> None:
    """A GITOPSQ_GIT_TOKEN_FILE that cannot be read fails clearly, naming the file but no secret."""
    with pytest.raises(SourceError, match="GITOPSQ_GIT_TOKEN_FILE"):
        Credentials.from_environment({"GITOPSQ_GIT_TOKEN_FILE": str(tmp_path / "absent")})
