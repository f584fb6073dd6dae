"""Getting the rig's two binaries onto the machine: etcd from Debian, kube-apiserver built from the Go proxy.

Both are cached under ``${GITOPSQ_ENVTEST_DIR:-~/.cache/gitopsq/envtest}/<kubernetes version>/`` so a second
``prepare`` (or the next CI run on the same machine) costs a few milliseconds.
"""

from __future__ import annotations

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
    etcd = _find_etcd()
    if not _is_executable(apiserver) or etcd is None:
        return None
    return Binaries(kube_apiserver=apiserver, etcd=etcd, kubernetes_version=version)


def prepare(log: bool = True) -> Binaries:
    """Install etcd and build kube-apiserver unless both are cached; idempotent."""
    etcd = _find_etcd() or _install_etcd(log)
    version = kubernetes_version()
    apiserver = version_dir(version) / "kube-apiserver"
    if not _is_executable(apiserver):
        _build_apiserver(version, apiserver, log)
    return Binaries(kube_apiserver=apiserver, etcd=etcd, kubernetes_version=version)


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


def _build_apiserver(version: str, target: Path, log: bool) -> None:
    if shutil.which("go") is None:
        raise PrepareError("kube-apiserver is not cached and no Go toolchain is on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    _say(log, f"building kube-apiserver {version} from the Go module proxy (first time: about 6-8 min)")
    argv = [
        "go", "build", "-trimpath", "-buildvcs=false",
        "-ldflags", _version_ldflags(version),
        "-o", str(partial), "k8s.io/kubernetes/cmd/kube-apiserver",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, cwd=HACK_DIR, env=go_environment(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise PrepareError(f"go build kube-apiserver failed:\n{done.stderr.strip()[-2000:]}")
    partial.replace(target)  # atomic: a half-written binary is never mistaken for a cached one
    seconds = round(time.monotonic() - started, 1)
    info = {"version": version, "buildSeconds": seconds, "go": _go_version()}
    (target.parent / "build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    _say(log, f"built kube-apiserver {version} in {seconds}s -> {target}")


def _go_version() -> str:
    done = subprocess.run(["go", "version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()
