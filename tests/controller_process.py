"""`gitopsq controller` as a real subprocess on the rig (`ControllerProcess` under leader election against a
`QueueRepo`, `Controller` in a chosen mode without it), and polling helpers (shared by tests/controller,
tests/webhook and tests/cluster)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cluster_rig
from envtest_rig import Envtest
from queue_repo import NS, QueueRepo, get

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ControllerProcess:
    """One `gitopsq controller` subprocess; its JSON log lines are read from a file."""

    def __init__(self, env: Envtest, repo: QueueRepo, tmp: Path, identity: str, *extra: str) -> None:
        self.identity = identity
        self.port = free_port()
        self.log = tmp / f"{identity}.log"
        args = ["controller", "--repo", str(repo.path), "--branch", "main", "--kubeconfig", str(env.kubeconfig),
                "--health-addr", f"127.0.0.1:{self.port}", "--metrics-addr", "", "--name", repo.tag,
                "--lease-name", f"lease-{repo.tag}", "--identity", identity, "--lease-duration", "15s",
                "--renew-deadline", "10s", "--retry-period", "1s", "--log-format", "json", *extra]
        # The Lease times are the defaults: a renewal starved of CPU for a few seconds on a loaded machine must
        # not hand the Lease over; hand-over in these tests is by release (SIGTERM), never by expiry.
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "gitopsq", *args], cwd=ROOT, stdout=out,
                                         stderr=subprocess.STDOUT)

    def events(self) -> list[dict[str, Any]]:
        lines = self.log.read_text(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def sync_passes(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("event") == "sync pass"]

    def http(self, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> int:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=body, headers=headers or {},
                                         method="POST" if body is not None else "GET")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as err:
            return int(err.code)
        except (urllib.error.URLError, ConnectionError):
            return 0

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


def wait_for(what: Callable[[], Any], timeout: float = 60.0, message: str = "") -> Any:
    """Poll until ``what`` is truthy; the timeout only bounds a failure (generous: CI machines may be loaded)."""
    return cluster_rig.wait_for(message or str(what), what, timeout)


def applied_revision(env: Envtest, repo: QueueRepo) -> str | None:
    source = get(env, f"/apis/gitopsq.dev/v1alpha1/namespaces/{NS}/gitsources/{repo.tag}")
    return None if source is None else (source.get("status") or {}).get("lastAppliedRevision")


class Controller:
    """One `gitopsq controller` subprocess with its own health and metrics ports; log lines go to a file."""

    def __init__(self, env: Envtest, tmp: Path, name: str, *args: str) -> None:
        self.health, self.metrics = free_port(), free_port()
        self.log = tmp / f"{name}.log"
        argv = ["controller", "--kubeconfig", str(env.kubeconfig), "--health-addr", f"127.0.0.1:{self.health}",
                "--metrics-addr", f"127.0.0.1:{self.metrics}", "--no-leader-elect", "--log-format", "json", *args]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "gitopsq", *argv], cwd=ROOT, stdout=out,
                                         stderr=subprocess.STDOUT)

    def events(self) -> list[str]:
        return [json.loads(line).get("event", "") for line in self.log.read_text(errors="replace").splitlines()
                if line.startswith("{")]

    def scrape(self) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=30) as answer:
                return str(answer.read().decode())
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


@contextmanager
def killed_at_end() -> Iterator[list[Any]]:
    """A list to put started controller processes in; each one still running is killed (SIGKILL) at the end."""
    processes: list[Any] = []
    try:
        yield processes
    finally:
        for process in processes:
            process.stop(signal.SIGKILL)
