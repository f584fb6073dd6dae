"""pytest plugin: a real Gitea on loopback for the forge tests (docs/source.md "Forges").

Fixtures:
    gitea    session scope; builds/finds Gitea with scripts/gitea-prepare, starts it the first time a test asks
             for it (SQLite, throw-away work dir, an instance GPG key that signs every forge merge), creates an
             admin, a team member and a maintainer with tokens, and stops it by PID at session end.

Tests that use ``gitea`` are marked ``forge`` automatically (``-m "not forge"`` deselects them).
"""

from __future__ import annotations

import atexit
import contextlib
import getpass
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class User:
    name: str
    password: str
    email: str
    token: str


class GiteaRig:
    """A running Gitea as tests see it: its URL, its users and a raw API helper for setting up scenes."""

    def __init__(self, binary: Path, work: Path, port: int) -> None:
        self.binary = binary
        self.work = work
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.config = work / "app.ini"
        self.git_home = work / "git-home"
        self.users: dict[str, User] = {}
        self.signing_fingerprint = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.start_seconds = 0.0

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.signing_fingerprint = _make_signing_key(self.git_home / ".gnupg")
        self.config.write_text(_app_ini(self, self.binary.parent))
        log = (self.work / "gitea.out").open("wb")
        began = time.monotonic()
        self.process = subprocess.Popen([str(self.binary), "web", "--config", str(self.config),
                                         "--work-path", str(self.work)], stdout=log, stderr=subprocess.STDOUT,
                                        env=self._env(), start_new_session=True)
        deadline = began + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gitea exited ({self.process.returncode}): {self._log_tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/api/v1/version", timeout=2) as r:
                if r.status == 200:
                    self.start_seconds = time.monotonic() - began
                    return
            time.sleep(0.1)
        raise RuntimeError(f"gitea did not answer within {START_TIMEOUT:.0f} s: {self._log_tail()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self.process = None
        subprocess.run(["gpgconf", "--homedir", str(self.git_home / ".gnupg"), "--kill", "gpg-agent"],
                       capture_output=True, check=False)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GNUPG"))}
        return {**env, "GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT": "true", "GITEA_WORK_DIR": str(self.work)}

    def _log_tail(self) -> str:
        text = ""
        for name in ("gitea.out", "log/gitea.log"):
            with contextlib.suppress(OSError):
                text += (self.work / name).read_text(errors="replace")[-2000:]
        return text

    # -- users -----------------------------------------------------------------------------------------------
    def create_user(self, name: str, *, admin: bool = False) -> User:
        """A user with a password and an all-scopes token (the gitea admin CLI, as an operator would)."""
        password = secrets.token_urlsafe(12)
        email = f"{name}@forge.test"
        args = ["admin", "user", "create", "--username", name, "--password", password, "--email", email,
                "--must-change-password=false"]
        self._cli(*args, *(["--admin"] if admin else []))
        token = self._cli("admin", "user", "generate-access-token", "--username", name, "--token-name", "tests",
                          "--scopes", "all", "--raw").strip().splitlines()[-1]
        user = User(name, password, email, token)
        self.users[name] = user
        return user

    def _cli(self, *args: str) -> str:
        done = subprocess.run([str(self.binary), *args, "--config", str(self.config), "--work-path", str(self.work)],
                              capture_output=True, text=True, env=self._env(), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"gitea {' '.join(args[:3])} failed: {done.stdout}{done.stderr}")
        return done.stdout

    # -- raw API for setting scenes ---------------------------------------------------------------------------
    def api(self, user: str | None, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One call to /api/v1 as ``user`` (None: anonymous); returns status and decoded JSON (never raises on 4xx)."""
        headers = {"Accept": "application/json"}
        if user is not None:
            headers["Authorization"] = f"token {self.users[user].token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(f"{self.url}/api/v1{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw.strip() else None
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                return err.code, json.loads(raw)
            except ValueError:
                return err.code, raw.decode(errors="replace")

    def push_url(self, user: str, owner: str, repo: str) -> str:
        """An HTTP remote URL for ``owner/repo`` that authenticates as ``user`` with the user's token."""
        return f"http://{user}:{self.users[user].token}@127.0.0.1:{self.port}/{owner}/{repo}.git"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _make_signing_key(gnupg: Path) -> str:
    """A fresh, passphrase-less ed25519 signing key in Gitea's git home; returns its fingerprint."""
    if shutil.which("gpg") is None:
        raise RuntimeError("the forge rig signs merges with a GPG key: install gpg (Debian: apt-get install gnupg)")
    gnupg.mkdir(parents=True, mode=0o700)
    env = {**os.environ, "GNUPGHOME": str(gnupg)}
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Gitea Test Forge <forge@gitea.test>",
                    "ed25519", "sign", "never"], env=env, capture_output=True, check=True)
    listing = subprocess.run(["gpg", "--batch", "--with-colons", "--list-secret-keys"], env=env, capture_output=True,
                             text=True, check=True).stdout
    return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


def _app_ini(rig: GiteaRig, static_root: Path) -> str:
    w = rig.work
    return f"""APP_NAME = gitopsq test forge
RUN_MODE = prod
RUN_USER = {getpass.getuser()}
WORK_PATH = {w}
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = {rig.port}
DOMAIN = 127.0.0.1
ROOT_URL = {rig.url}/
APP_DATA_PATH = {w}/data
STATIC_ROOT_PATH = {static_root}
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false

[database]
DB_TYPE = sqlite3
PATH = {w}/data/gitea.db

[security]
INSTALL_LOCK = true
SECRET_KEY = {secrets.token_hex(24)}

[service]
DISABLE_REGISTRATION = true

[repository]
ROOT = {w}/repositories
DEFAULT_BRANCH = main

[repository.signing]
SIGNING_KEY = {rig.signing_fingerprint}
SIGNING_NAME = Gitea Test Forge
SIGNING_EMAIL = forge@gitea.test
INITIAL_COMMIT = always
MERGES = always
WIKI = never

[git]
HOME_PATH = {rig.git_home}

[webhook]
ALLOWED_HOST_LIST = loopback

[indexer]
REPO_INDEXER_ENABLED = false

[mailer]
ENABLED = false

; No runner exists here: with Actions on, the template's workflows would only queue runs whose pending commit
; statuses (e.g. "gitopsq-approvals / record (push)" on every merge) mix with the ones gitopsq sets.
[actions]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[log]
MODE = file
LEVEL = Warn
ROOT_PATH = {w}/log
"""


def prepare() -> Path:
    """The Gitea binary, built and cached by scripts/gitea-prepare when missing (quiet when cached)."""
    done = subprocess.run([str(REPO_ROOT / "scripts" / "gitea-prepare")], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/gitea-prepare failed: {done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


_started: list[GiteaRig] = []


def _stop_started() -> None:
    while _started:
        _started.pop().stop()


atexit.register(_stop_started)  # also when pytest dies before session teardown


@pytest.fixture(scope="session")
def gitea(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GiteaRig]:
    """One real Gitea for the whole session with users ``forge-admin`` (site admin), ``member`` (writes quota
    changes) and ``maintainer`` (reviews them), each with a token."""
    rig = GiteaRig(prepare(), tmp_path_factory.mktemp("gitea"), _free_port())
    _started.append(rig)
    try:
        rig.start()
        rig.create_user("forge-admin", admin=True)
        rig.create_user("member")
        rig.create_user("maintainer")
        yield rig
    finally:
        _stop_started()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "gitea" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.forge)
