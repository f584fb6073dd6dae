"""Getting the rig's two binaries onto the machine: etcd from Debian, kube-apiserver built from the Go proxy.

Both are cached under ``${GITOPSQ_ENVTEST_DIR:-~/.cache/gitopsq/envtest}/<kubernetes version>/`` so a second
``prepare`` (or the next CI run on the same machine) costs a few milliseconds.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HACK_DIR = Path(__file__).resolve().parent.parent  # hack/envtest, which holds go.mod
APT_ETCD_PACKAGE = "etcd-server"


class PrepareError(RuntimeError):
    """A binary could not be found, installed or built."""


@dataclass(frozen=True, slots=True)
class Binaries:
    """Where the rig's executables are."""

    kube_apiserver: Path
    etcd: Path
    kubernetes_version: str
    kubectl: Path


def kubernetes_version() -> str:
    """The k8s.io/kubernetes release pinned in hack/envtest/go.mod (the one source of truth)."""
    text = (HACK_DIR / "go.mod").read_text()
    match = re.search(r"^\s*k8s\.io/kubernetes\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise PrepareError("hack/envtest/go.mod does not require k8s.io/kubernetes")
    return match.group(1)


def cache_root() -> Path:
    configured = os.environ.get("GITOPSQ_ENVTEST_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "gitopsq" / "envtest"


def version_dir(version: str | None = None) -> Path:
    return cache_root() / (version or kubernetes_version())


def find_binaries() -> Binaries | None:
    """The cached binaries, or None when ``prepare`` still has work to do."""
    version = kubernetes_version()
    apiserver = version_dir(version) / "kube-apiserver"
    etcd, kubectl = _find_etcd(), _find_kubectl(version)
    if not _is_executable(apiserver) or etcd is None or kubectl is None:
        return None
    return Binaries(kube_apiserver=apiserver, etcd=etcd, kubernetes_version=version, kubectl=kubectl)


def prepare(log: bool = True) -> Binaries:
    """Install etcd and build kube-apiserver (and kubectl, if none is installed) unless cached; idempotent.

    Concurrent callers (pytest-xdist workers, two checkouts) wait on one lock file instead of building twice.
    """
    cache_root().mkdir(parents=True, exist_ok=True)
    with (cache_root() / ".prepare.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _prepare_locked(log)


def _prepare_locked(log: bool) -> Binaries:
    etcd = _find_etcd() or _install_etcd(log)
    version = kubernetes_version()
    apiserver = version_dir(version) / "kube-apiserver"
    if not _is_executable(apiserver):
        _build(version, "kube-apiserver", apiserver, log)
    kubectl = _find_kubectl(version)
    if kubectl is None:
        kubectl = version_dir(version) / "kubectl"
        _build(version, "kubectl", kubectl, log)
    return Binaries(kube_apiserver=apiserver, etcd=etcd, kubernetes_version=version, kubectl=kubectl)


def _find_kubectl(version: str) -> Path | None:
    """kubectl from PATH (any recent one talks to the rig), else the one prepare built into the cache."""
    found = shutil.which("kubectl")
    if found:
        return Path(found)
    cached = version_dir(version) / "kubectl"
    return cached if _is_executable(cached) else None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _find_etcd() -> Path | None:
    override = os.environ.get("GITOPSQ_ENVTEST_ETCD")
    if override:
        return Path(override) if _is_executable(Path(override)) else None
    found = shutil.which("etcd")
    return Path(found) if found else None


def _say(log: bool, message: str) -> None:
    if log:
        sys.stderr.write(f"envtest: {message}\n")


def _install_etcd(log: bool) -> Path:
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise PrepareError(f"etcd not found; install Debian's {APT_ETCD_PACKAGE} package or set GITOPSQ_ENVTEST_ETCD")
    _say(log, f"installing etcd (apt-get install {APT_ETCD_PACKAGE})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", APT_ETCD_PACKAGE],
    ):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PrepareError(f"{' '.join(argv)} failed: {done.stderr.strip()[-400:]}")
    found = _find_etcd()
    if found is None:
        raise PrepareError(f"{APT_ETCD_PACKAGE} installed but no etcd on PATH")
    return found


def go_environment() -> dict[str, str]:
    """Go settings for the build; GOEXPERIMENT=nojsonv2 keeps the OpenAPI endpoint working on Go >= 1.27."""
    env = {**os.environ, "CGO_ENABLED": "0"}
    probe = subprocess.run(
        ["go", "env", "GOEXPERIMENT"],
        env={**env, "GOEXPERIMENT": "nojsonv2"},
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode == 0:
        env["GOEXPERIMENT"] = "nojsonv2"
    return env


def _version_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
        ]
    return " ".join(flags)


BUILD_MINUTES = {"kube-apiserver": "5-7", "kubectl": "1-3"}  # measured on 2 cores, see docs/envtest.md


def _build(version: str, command: str, target: Path, log: bool) -> None:
    if shutil.which("go") is None:
        raise PrepareError(f"{command} is not cached and no Go toolchain is on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    minutes = BUILD_MINUTES[command]
    _say(log, f"building {command} {version} from the Go module proxy (first time: about {minutes} min)")
    argv = [
        "go", "build", "-trimpath", "-buildvcs=false",
        "-ldflags", _version_ldflags(version),
        "-o", str(partial), f"k8s.io/kubernetes/cmd/{command}",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, cwd=HACK_DIR, env=go_environment(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise PrepareError(f"go build {command} failed:\n{done.stderr.strip()[-2000:]}")
    partial.replace(target)  # atomic: a half-written binary is never mistaken for a cached one
    seconds = round(time.monotonic() - started, 1)
    info = {"version": version, "buildSeconds": seconds, "go": _go_version()}
    (target.parent / f"{command}.build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    _say(log, f"built {command} {version} in {seconds}s -> {target}")


def _go_version() -> str:
    done = subprocess.run(["go", "version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()
