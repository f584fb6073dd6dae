"""Processes by PID: free loopback ports, who listens where, and stopping only what is really ours."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

STOP_TIMEOUT_SECONDS = 15.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


def listens_on(pid: int, port: int) -> bool:
    """True when ``pid`` holds a listening TCP socket on ``port`` (read from /proc, no extra tools)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if str(fd.readlink()) in inodes:
                    return True
    return False


def stop_pid(pid: int, marker: str, timeout: float = STOP_TIMEOUT_SECONDS) -> bool:
    """SIGTERM then SIGKILL ``pid``, but only if its command line still contains ``marker`` (not a reused PID)."""
    if pid <= 0 or not alive(pid) or marker not in cmdline(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not alive(pid):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    while alive(pid):
        _reap(pid)
        time.sleep(0.05)
    return True


def _reap(pid: int) -> None:
    # not our child when an earlier `scripts/envtest up` started it: init reaps it then
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
