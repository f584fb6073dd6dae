"""Run ``kustomize build`` on hostile input: a private copy of the files, no network, bounded time, memory, output.

Containment (docs/kustomize.md "Hostile input"):

1. The files are written into a fresh private directory (mode 0700), each as a new regular file opened with
   ``O_EXCL|O_NOFOLLOW``; a path with ``..``, an absolute path or a clash is refused. Nothing else is there.
2. kustomize runs with ``--load-restrictor LoadRestrictionsRootOnly``, no plugin or Helm flags, an empty HOME,
   a PATH naming no program (so no ``git`` for remote bases) and proxies pointing at a closed port.
3. Limits: wall-clock ``timeout`` (the whole process group is killed), address space ``memory_bytes``, output
   ``output_bytes`` (the kernel stops a larger write), and only the first 64 KiB of its error text is read.
4. The error text is returned with the private directory removed from paths, so it names repository paths.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from gitopsq.manifests.kustomize_build import BuildResult

PINNED_VERSION: Final = "v5.8.1"
_STDERR_LIMIT: Final = 64 * 1024


def find_command() -> list[str] | None:
    """``$GITOPSQ_KUSTOMIZE``, else the pinned build (scripts/kustomize-prepare), else kustomize or kubectl."""
    explicit = os.environ.get("GITOPSQ_KUSTOMIZE")
    if explicit:
        return [explicit]
    root = Path(os.environ.get("GITOPSQ_KUSTOMIZE_DIR") or Path.home() / ".cache/gitopsq/kustomize")
    pinned = root / PINNED_VERSION / "kustomize"
    if pinned.is_file() and os.access(pinned, os.X_OK):
        return [str(pinned)]
    found = shutil.which("kustomize")
    if found:
        return [found]
    kubectl = shutil.which("kubectl")
    return [kubectl, "kustomize"] if kubectl else None


def default_renderer() -> KustomizeBinary | None:
    """One renderer per command for the process (so its version is asked once), or None without kustomize."""
    command = find_command()
    return _binary(tuple(command)) if command else None


@functools.lru_cache(maxsize=8)
def _binary(command: tuple[str, ...]) -> KustomizeBinary:
    return KustomizeBinary(command)


class KustomizeBinary:
    """The `KustomizeRenderer` port over a kustomize (or ``kubectl kustomize``) command."""

    def __init__(self, command: Sequence[str], *, timeout: float = 60.0, memory_bytes: int = 2 << 30,
                 output_bytes: int = 32 << 20) -> None:
        self.command = list(command)
        self.timeout, self.memory_bytes, self.output_bytes = timeout, memory_bytes, output_bytes
        self._version: str | None = None

    @property
    def version(self) -> str:
        """What the command reports (part of every render's cache key)."""
        if self._version is None:
            args = [*self.command, "version"] if len(self.command) == 1 else [self.command[0], "version", "--client"]
            try:
                done = subprocess.run(args, capture_output=True, timeout=30, check=False,
                                      env=_env(Path("/nonexistent")))
                self._version = " ".join(done.stdout.decode(errors="replace").split())[:200] or "unknown"
            except (OSError, subprocess.TimeoutExpired):
                self._version = "unknown"
        return self._version

    def build(self, files: Mapping[str, bytes], directory: str) -> BuildResult:
        try:
            return self._build(files, directory)
        except OSError as failure:  # no space or no temporary directory: the machine's fault, tried again later
            return BuildResult(None, f"cannot prepare the build: {failure.strerror or failure}", transient=True)

    def _build(self, files: Mapping[str, bytes], directory: str) -> BuildResult:
        with tempfile.TemporaryDirectory(prefix="gitopsq-kustomize-") as scratch:
            base = Path(scratch)
            repo, home = base / "repo", base / "home"
            repo.mkdir(mode=0o700)
            home.mkdir(mode=0o700)
            problem = _materialise(repo, files)
            if problem:
                return BuildResult(None, problem)
            target = str(repo / directory) if directory else str(repo)
            args = [*self.command, target] if len(self.command) > 1 else [*self.command, "build", target]
            args += ["--load-restrictor", "LoadRestrictionsRootOnly"]
            return self._run(args, base, repo, home)

    def _run(self, args: list[str], base: Path, repo: Path, home: Path) -> BuildResult:
        out_path, err_path = base / "out", base / "err"
        limiter = shutil.which("prlimit")
        if limiter:  # limits set before kustomize starts (no preexec_fn: the controller runs threads)
            args = [limiter, f"--as={self.memory_bytes}", f"--fsize={self.output_bytes}", "--core=0", "--", *args]
        with out_path.open("wb") as out, err_path.open("wb") as err:
            try:
                child = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=repo,
                                         env=_env(home), start_new_session=True)
            except OSError as failure:
                return BuildResult(None, f"cannot start {args[0]}: {failure.strerror}")
            if not limiter:  # a moment later, but before kustomize has read its input
                resource.prlimit(child.pid, resource.RLIMIT_AS, (self.memory_bytes, self.memory_bytes))
                resource.prlimit(child.pid, resource.RLIMIT_FSIZE, (self.output_bytes, self.output_bytes))
            try:
                code = child.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                return BuildResult(None, f"kustomize took longer than {self.timeout:g} s", transient=True)
        if code == -signal.SIGXFSZ or out_path.stat().st_size >= self.output_bytes:
            return BuildResult(None, f"kustomize's output exceeds {self.output_bytes:,} bytes", transient=True)
        if code != 0:
            with err_path.open("rb") as err_file:
                text = err_file.read(_STDERR_LIMIT).decode("utf-8", errors="replace")
            return BuildResult(None, _clean(text, repo, code))
        return BuildResult(out_path.read_bytes())


def _env(home: Path) -> dict[str, str]:
    closed = "http://127.0.0.1:9"
    return {"PATH": "/nonexistent", "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "KUBECONFIG": "/dev/null", "HTTP_PROXY": closed, "HTTPS_PROXY": closed, "ALL_PROXY": closed,
            "http_proxy": closed, "https_proxy": closed, "NO_PROXY": "", "GIT_TERMINAL_PROMPT": "0",
            "GOMEMLIMIT": "1GiB", "LANG": "C.UTF-8"}


def _materialise(repo: Path, files: Mapping[str, bytes]) -> str | None:
    for path, data in files.items():
        parts = path.split("/")
        if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
            return f"refused to write {path!r}: not a plain repository path"
        target = repo.joinpath(*parts)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as failure:
            return f"refused to write {path!r}: {failure.strerror}"
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    return None


def _clean(text: str, repo: Path, code: int) -> str:
    """kustomize's message with the private directory taken out of its paths, on one line, bounded."""
    for prefix in (str(repo) + "/", str(repo.resolve()) + "/", str(repo), str(repo.resolve())):
        text = text.replace(prefix, "")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("# Warning")]
    message = " ".join(line.removeprefix("Error: ") for line in lines) or f"exit status {code}"
    return message if len(message) <= 800 else message[:797] + "..."
