"""Getting the rig's binaries onto the machine: etcd from Debian; kube-apiserver and, for the full profile,
kube-controller-manager and kube-scheduler built from the Go proxy (one ``go build`` for all, so the packages
they share compile once); KWOK and the JobSet controller built from their own small modules under hack/kwok and
hack/jobset, the Kubeflow Trainer controller manager from hack/trainer (trainer.py).

Kubernetes binaries are cached under ``${GITOPSQ_ENVTEST_DIR:-~/.cache/gitopsq/envtest}/<kubernetes version>/``
and KWOK under ``.../kwok/<kwok version>/``, so a second ``prepare`` (or the next CI run on the same machine)
costs a few milliseconds.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HACK_DIR = Path(__file__).resolve().parent.parent  # hack/envtest, which holds go.mod
KWOK_DIR = HACK_DIR.parent / "kwok"  # hack/kwok: KWOK's go.mod and gitopsq's own stages
JOBSET_DIR = HACK_DIR.parent / "jobset"  # hack/jobset: the JobSet controller's go.mod
APT_ETCD_PACKAGE = "etcd-server"
BARE_COMMANDS = ("kube-apiserver",)
FULL_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


class PrepareError(RuntimeError):
    """A binary could not be found, installed or built."""


@dataclass(frozen=True, slots=True)
class Binaries:
    """Where the rig's executables are."""

    kube_apiserver: Path
    etcd: Path
    kubernetes_version: str
    kubectl: Path
    # the full profile's binaries; None when only the bare profile was prepared
    kube_controller_manager: Path | None = None
    kube_scheduler: Path | None = None
    kwok: Path | None = None
    jobset: Path | None = None  # the JobSet controller (full profile); its CRD comes from the module cache
    trainer: Path | None = None  # the Kubeflow Trainer controller manager (full profile; trainer.py)
    kuberay: Path | None = None  # the KubeRay operator (full profile, kuberay.py); its CRDs likewise

    @property
    def full(self) -> bool:
        """True when the binaries of the full profile (controllers, scheduler, KWOK) are all here."""
        return None not in (self.kube_controller_manager, self.kube_scheduler, self.kwok)


def kubernetes_version() -> str:
    """The k8s.io/kubernetes release pinned in hack/envtest/go.mod (the one source of truth)."""
    text = (HACK_DIR / "go.mod").read_text()
    match = re.search(r"^\s*k8s\.io/kubernetes\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise PrepareError("hack/envtest/go.mod does not require k8s.io/kubernetes")
    return match.group(1)


def kwok_version() -> str:
    """The sigs.k8s.io/kwok release pinned in hack/kwok/go.mod."""
    text = (KWOK_DIR / "go.mod").read_text()
    match = re.search(r"^\s*(?:require\s+)?sigs\.k8s\.io/kwok\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise PrepareError("hack/kwok/go.mod does not require sigs.k8s.io/kwok")
    return match.group(1)


def kwok_path() -> Path:
    return cache_root() / "kwok" / kwok_version() / "kwok"


def jobset_version() -> str:
    """The sigs.k8s.io/jobset release pinned in hack/jobset/go.mod."""
    text = (JOBSET_DIR / "go.mod").read_text()
    match = re.search(r"^\s*(?:require\s+)?sigs\.k8s\.io/jobset\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise PrepareError("hack/jobset/go.mod does not require sigs.k8s.io/jobset")
    return match.group(1)


def jobset_path() -> Path:
    return cache_root() / "jobset" / jobset_version() / "jobset"


def jobset_crds() -> list[Path]:
    """The JobSet CRD files of the pinned release, read from the Go module cache (downloaded if it was
    cleaned since the build): never copied into this repository."""
    def find() -> list[Path]:
        done = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=False,
                              env=go_environment())
        root = Path(done.stdout.strip()) / "sigs.k8s.io" / f"jobset@{jobset_version()}" / "config" / "components"
        return sorted((root / "crd" / "bases").glob("*.yaml"))

    found = find()
    if not found:
        subprocess.run(["go", "mod", "download", f"sigs.k8s.io/jobset@{jobset_version()}"], cwd=JOBSET_DIR,
                       capture_output=True, text=True, check=False, env=go_environment())
        found = find()
    if not found:
        raise PrepareError(f"no JobSet CRDs in the Go module cache for sigs.k8s.io/jobset@{jobset_version()}")
    return found


def _kuberay_path() -> Path:
    from envtestrig.kuberay import kuberay_path  # kuberay.py imports this module

    return kuberay_path()


def cache_root() -> Path:
    configured = os.environ.get("GITOPSQ_ENVTEST_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "gitopsq" / "envtest"


def version_dir(version: str | None = None) -> Path:
    return cache_root() / (version or kubernetes_version())


def find_binaries(full: bool = False) -> Binaries | None:
    """The cached binaries, or None when ``prepare`` still has work to do (for ``full``, on the full profile)."""
    version = kubernetes_version()
    folder = version_dir(version)
    etcd, kubectl = _find_etcd(), _find_kubectl(version)
    commands = FULL_COMMANDS if full else BARE_COMMANDS
    if etcd is None or kubectl is None or not all(_is_executable(folder / c) for c in commands):
        return None
    if full and not (_is_executable(kwok_path()) and _is_executable(jobset_path())):
        return None
    if full and not (_is_executable(_trainer_path()) and _is_executable(_kuberay_path())):
        return None
    return _binaries(version, etcd, kubectl)


def _binaries(version: str, etcd: Path, kubectl: Path) -> Binaries:
    folder = version_dir(version)

    def cached(path: Path) -> Path | None:
        return path if _is_executable(path) else None

    return Binaries(
        kube_apiserver=folder / "kube-apiserver",
        etcd=etcd,
        kubernetes_version=version,
        kubectl=kubectl,
        kube_controller_manager=cached(folder / "kube-controller-manager"),
        kube_scheduler=cached(folder / "kube-scheduler"),
        kwok=cached(kwok_path()),
        jobset=cached(jobset_path()),
        trainer=cached(_trainer_path()),
        kuberay=cached(_kuberay_path()),
    )


def _trainer_path() -> Path:
    from envtestrig.trainer import trainer_path  # trainer.py imports this module

    return trainer_path()


def prepare(log: bool = True, full: bool = False) -> Binaries:
    """Install etcd and build kube-apiserver (and kubectl, if none is installed) unless cached; idempotent.

    ``full`` also builds kube-controller-manager, kube-scheduler and KWOK (``scripts/envtest prepare`` and so
    ``scripts/test`` always do). Concurrent callers (pytest-xdist workers, two checkouts) wait on one lock file
    instead of building twice.
    """
    cache_root().mkdir(parents=True, exist_ok=True)
    with (cache_root() / ".prepare.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _prepare_locked(log, full)


def _prepare_locked(log: bool, full: bool) -> Binaries:
    etcd = _find_etcd() or _install_etcd(log)
    version = kubernetes_version()
    folder = version_dir(version)
    wanted = list(FULL_COMMANDS if full else BARE_COMMANDS)
    if _find_kubectl(version) is None:
        wanted.append("kubectl")
    missing = [c for c in wanted if not _is_executable(folder / c)]
    if missing:
        _build_kubernetes(version, missing, folder, log)
    if full and not _is_executable(kwok_path()):
        _build_kwok(log)
    if full and not _is_executable(jobset_path()):
        _build_jobset(log)
    if full and not _is_executable(_trainer_path()):
        from envtestrig.trainer import build_trainer

        build_trainer(log)
    if full and not _is_executable(_kuberay_path()):
        from envtestrig.kuberay import build_kuberay

        build_kuberay(log)
    kubectl = _find_kubectl(version)
    assert kubectl is not None  # built above when none was on PATH
    return _binaries(version, etcd, kubectl)


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


# measured on 2 cores, see docs/envtest.md; the first of several in one `go build` pays for the shared packages
BUILD_MINUTES = {"kube-apiserver": 6, "kube-controller-manager": 3, "kube-scheduler": 1, "kubectl": 2, "kwok": 2,
                 "jobset": 4}


def _run_go_build(argv: list[str], cwd: Path, what: str) -> float:
    if shutil.which("go") is None:
        raise PrepareError(f"{what} is not cached and no Go toolchain is on PATH")
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=go_environment(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PrepareError(f"go build {what} failed:\n{done.stderr.strip()[-2000:]}")
    return round(time.monotonic() - started, 1)


def _build_kubernetes(version: str, commands: list[str], folder: Path, log: bool) -> None:
    """One ``go build`` for every missing command: the packages they share are compiled once."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=folder))
    minutes = sum(BUILD_MINUTES[c] for c in commands)
    _say(log, f"building {', '.join(commands)} {version} from the Go module proxy (first time: up to {minutes} min)")
    argv = [
        "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", _version_ldflags(version),
        "-o", f"{staging}/", *(f"k8s.io/kubernetes/cmd/{c}" for c in commands),
    ]  # fmt: skip
    try:
        seconds = _run_go_build(argv, HACK_DIR, ", ".join(commands))
        for command in commands:
            (staging / command).replace(folder / command)  # atomic: a half-written binary is never cached
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    info = {"version": version, "buildSeconds": seconds, "builtTogether": commands, "go": _go_version()}
    for command in commands:
        (folder / f"{command}.build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    _say(log, f"built {', '.join(commands)} {version} in {seconds}s -> {folder}")


def _build_kwok(log: bool) -> None:
    target = kwok_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    version = kwok_version()
    _say(log, f"building kwok {version} from the Go module proxy (first time: about {BUILD_MINUTES['kwok']} min)")
    argv = ["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", str(partial)]
    argv.append("sigs.k8s.io/kwok/cmd/kwok")
    try:
        seconds = _run_go_build(argv, KWOK_DIR, "kwok")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    info = {"version": version, "buildSeconds": seconds, "go": _go_version()}
    (target.parent / "kwok.build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    _say(log, f"built kwok {version} in {seconds}s -> {target}")


def _build_jobset(log: bool) -> None:
    """The JobSet controller (``sigs.k8s.io/jobset``'s main package) from hack/jobset's module."""
    target = jobset_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    version = jobset_version()
    _say(log, f"building jobset {version} from the Go module proxy (first time: about {BUILD_MINUTES['jobset']} min)")
    argv = ["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", str(partial)]
    argv.append("sigs.k8s.io/jobset")
    try:
        seconds = _run_go_build(argv, JOBSET_DIR, "jobset")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    info = {"version": version, "buildSeconds": seconds, "go": _go_version()}
    (target.parent / "jobset.build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    _say(log, f"built jobset {version} in {seconds}s -> {target}")


def _go_version() -> str:
    done = subprocess.run(["go", "version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()
