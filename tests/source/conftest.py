"""Fixtures for the Git source: real repositories made with the git CLI, and real remotes on 127.0.0.1."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

GIT_ENV_BASE = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "Ann Author",
    "GIT_AUTHOR_EMAIL": "ann@example.com",
    "GIT_COMMITTER_NAME": "Carl Committer",
    "GIT_COMMITTER_EMAIL": "carl@example.com",
}


@dataclass
class GitRepo:
    """A work tree driven through the git CLI, with an isolated HOME so no user configuration leaks in."""

    path: Path
    home: Path
    env: dict[str, str] = field(default_factory=dict)

    def git(self, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> str:
        merged = {**os.environ, **GIT_ENV_BASE, "HOME": str(self.home), **self.env, **(env or {})}
        done = subprocess.run(["git", *args], cwd=self.path, env=merged, input=input, capture_output=True,
                              check=False, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {done.stderr.decode()}")
        return done.stdout.decode().strip()

    def write(self, files: dict[str, str | None]) -> None:
        """Write (or, for None, delete) files relative to the work tree."""
        for rel, content in files.items():
            target = self.path / rel
            if content is None:
                target.unlink()
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content, encoding="utf-8")

    def commit(self, message: str, files: dict[str, str | None] | None = None, *extra: str,
               env: dict[str, str] | None = None) -> str:
        if files:
            self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message, *extra, env=env)
        return self.git("rev-parse", "HEAD")


def new_repo(root: Path, name: str = "work") -> GitRepo:
    home = root / "home"
    home.mkdir(exist_ok=True)
    path = root / name
    path.mkdir()
    repo = GitRepo(path, home)
    repo.git("init", "-q", "-b", "main")
    return repo


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """An empty work tree on branch main."""
    return new_repo(tmp_path)


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


# -- a standard history shared by ref and remote tests ----------------------------------------------------------


@dataclass(frozen=True)
class History:
    """main: c1 → c2 → c3 (tags: light-tag on c1, v1.0 annotated on c2); branch feature: c2 → f1."""

    repo: GitRepo
    c1: str
    c2: str
    c3: str
    f1: str


def build_history(repo: GitRepo) -> History:
    c1 = repo.commit("first", {"platform/flavors.yaml": "kind: ResourceFlavor\n", "README.md": "hi\n"})
    repo.git("tag", "light-tag")
    c2 = repo.commit("second", {"teams/a/queues.yaml": "kind: ClusterQueue\n"})
    repo.git("tag", "-a", "v1.0", "-m", "release 1.0")
    c3 = repo.commit("third", {"teams/b/queues.yml": "kind: LocalQueue\n"})
    repo.git("checkout", "-q", "-b", "feature", c2)
    f1 = repo.commit("feature work", {"teams/a/extra.yaml": "kind: LocalQueue\n"})
    repo.git("checkout", "-q", "main")
    return History(repo, c1, c2, c3, f1)


@pytest.fixture
def history(repo: GitRepo) -> History:
    return build_history(repo)


def bare_clone(source: GitRepo, target: Path) -> Path:
    source.git("clone", "-q", "--bare", str(source.path), str(target))
    return target


# -- git daemon -------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


@dataclass(frozen=True)
class Daemon:
    base: Path
    port: int

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"


@pytest.fixture
def git_daemon(tmp_path: Path) -> Iterator[Daemon]:
    """`git daemon` serving tmp_path/served on a free 127.0.0.1 port; stopped by its own PID."""
    base = tmp_path / "served"
    base.mkdir()
    port = free_port()
    process = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={base}", "--listen=127.0.0.1",
         f"--port={port}", str(base)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        wait_for_port(port)
        yield Daemon(base, port)
    finally:
        # The daemon forks one child per connection into its own session: stop that process group only.
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


# -- git http-backend behind Basic auth -------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpRemote:
    root: Path
    port: int
    user: str
    token: str

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


def _handler(root: Path, user: str, token: str) -> type[BaseHTTPRequestHandler]:
    expected = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()
    backend = shutil.which("git") or "git"

    class GitHttpHandler(BaseHTTPRequestHandler):
        """Runs `git http-backend` as a CGI script for every request carrying the right Basic credentials."""

        def log_message(self, format: str, *args: object) -> None:
            return

        def do_GET(self) -> None:
            self._serve(b"")

        def do_POST(self) -> None:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = bytearray()
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        break
                    body += self.rfile.read(size)
                    self.rfile.readline()
                self._serve(bytes(body))
            else:
                self._serve(self.rfile.read(int(self.headers.get("Content-Length", "0"))))

        def _serve(self, body: bytes) -> None:
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path, _, query = self.path.partition("?")
            env = {
                "PATH": os.environ.get("PATH", ""),
                "GIT_PROJECT_ROOT": str(root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": user,
                "REMOTE_ADDR": "127.0.0.1",
                "GIT_CONFIG_NOSYSTEM": "1",
            }
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            done = subprocess.run([backend, "http-backend"], input=body, env=env, capture_output=True,
                                  check=False, timeout=60)
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            status = 200
            headers: list[tuple[str, str]] = []
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return GitHttpHandler


@pytest.fixture
def http_remote(tmp_path: Path) -> Iterator[HttpRemote]:
    """A smart-HTTP git server on 127.0.0.1 requiring Basic auth user `ci` with a token; serves tmp_path/http."""
    root = tmp_path / "http"
    root.mkdir()
    user, token = "ci", "s3cr3t-token-value"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(root, user, token))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield HttpRemote(root, int(server.server_address[1]), user, token)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
