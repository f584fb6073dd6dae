"""Kueue's test peers for gitopsq, built with Go from the Go module proxy (never from release pages).

Three binaries, cached in ``${GITOPSQ_KUEUE_DIR:-~/.cache/gitopsq/kueue}/<kueue version>/``:

- ``minimalkueue`` and ``runner``: Kueue's scheduler benchmark (test/performance/scheduler/ of the module);
- ``oraclekueue``: ./oraclekueue beside this file, minimalkueue's wiring plus fair sharing and feature gates,
  the oracle of tests/differential.

Each gets a ``<name>.build-info.json`` (version, seconds, peak memory of the build, Go version). Kueue's own CRDs
are read from the module cache (``crd_dir``), never copied into the repository. Standard library only.

Usage: python -m kueuebuild [prepare|paths|crds|runner-env]   (scripts/kueue-build wraps it)
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HACK_DIR = Path(__file__).resolve().parent  # holds go.mod
MODULE = "sigs.k8s.io/kueue"
PACKAGES = {
    "minimalkueue": f"{MODULE}/test/performance/scheduler/minimalkueue",
    "runner": f"{MODULE}/test/performance/scheduler/runner",
    "oraclekueue": "./oraclekueue",
}


class KueueBuildError(RuntimeError):
    """A Kueue binary could not be built, or the module could not be fetched."""


@dataclass(frozen=True, slots=True)
class KueueBinaries:
    version: str
    minimalkueue: Path
    runner: Path
    oraclekueue: Path
    crd_dir: Path


def kueue_version() -> str:
    """The sigs.k8s.io/kueue release required by hack/kueue/go.mod (the one source of truth)."""
    match = re.search(r"^\s*(?:require\s+)?sigs\.k8s\.io/kueue\s+(v\S+)", (HACK_DIR / "go.mod").read_text(), re.M)
    if match is None:
        raise KueueBuildError("hack/kueue/go.mod does not require sigs.k8s.io/kueue")
    return match.group(1)


def cache_dir(version: str | None = None) -> Path:
    configured = os.environ.get("GITOPSQ_KUEUE_DIR")
    root = Path(configured) if configured else Path.home() / ".cache" / "gitopsq" / "kueue"
    return root / (version or kueue_version())


def module_dir(version: str | None = None) -> Path:
    """Where the Go module cache holds Kueue's source (downloaded from the proxy when missing)."""
    version = version or kueue_version()
    done = subprocess.run(["go", "mod", "download", "-json", f"{MODULE}@{version}"], cwd=HACK_DIR,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise KueueBuildError(f"go mod download {MODULE}@{version} failed: {done.stderr.strip()[-600:]}")
    return Path(json.loads(done.stdout)["Dir"])


def crd_dir(version: str | None = None) -> Path:
    """Kueue's CRD manifests (v1beta1 + v1beta2) inside the module cache."""
    path = module_dir(version) / "config" / "components" / "crd" / "bases"
    if not path.is_dir():
        raise KueueBuildError(f"no CRDs at {path}")
    return path


def runner_env(version: str | None = None) -> dict[str, str]:
    """Environment the benchmark ``runner`` needs: Kueue's test/util package panics at start-up unless it finds
    the Kueue source tree, from PROJECT_DIR (it takes the *parent* of the value) or a Makefile above the working
    directory. Point it at the module cache copy."""
    return {"PROJECT_DIR": str(module_dir(version) / "Makefile")}


def find(names: tuple[str, ...] = tuple(PACKAGES)) -> KueueBinaries | None:
    """The cached binaries (paths of all three; ``names`` must exist), or None when ``prepare`` still has work."""
    version = kueue_version()
    paths = {name: cache_dir(version) / name for name in PACKAGES}
    if not all(paths[n].is_file() and os.access(paths[n], os.X_OK) for n in names):
        return None
    return KueueBinaries(version, crd_dir=crd_dir(version), **paths)


def prepare(log: bool = True, names: tuple[str, ...] = tuple(PACKAGES)) -> KueueBinaries:
    """Build whichever of ``names`` is not cached yet; idempotent, and concurrent callers wait on one lock. The
    differential suite needs only the oracle (``names=("oraclekueue",)``); the benchmark needs all three."""
    version = kueue_version()
    target_dir = cache_dir(version)
    target_dir.mkdir(parents=True, exist_ok=True)
    with (target_dir / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in names:
            target = target_dir / name
            if not (target.is_file() and os.access(target, os.X_OK)):
                _build(version, name, PACKAGES[name], target, log)
    found = find(names)
    assert found is not None
    return found


def minimalkueue_at_rate(qps: int, burst: int, log: bool = True) -> Path:
    """minimalkueue with its client limits set to ``qps``/``burst`` instead of the 50/100 written in its main.go.

    Kueue's file is not copied into this repository: at build time the module cache's main.go is read, its two
    assignments are rewritten, and the result is handed to ``go build -overlay`` in place of the original, so the
    binary is Kueue's own code but for those two numbers (cached as ``minimalkueue-qps<Q>-burst<B>``)."""
    if (qps, burst) == (50, 100):
        return prepare(log, names=("minimalkueue",)).minimalkueue
    version = kueue_version()
    target_dir = cache_dir(version)
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"minimalkueue-qps{qps}-burst{burst}"
    with (target_dir / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file() and os.access(target, os.X_OK):
            return target
        original = module_dir(version) / "test" / "performance" / "scheduler" / "minimalkueue" / "main.go"
        source = original.read_text()
        rewritten, qps_edits = re.subn(r"(kubeConfig\.QPS\s*=\s*)50\b", rf"\g<1>{qps}", source)
        rewritten, burst_edits = re.subn(r"(kubeConfig\.Burst\s*=\s*)100\b", rf"\g<1>{burst}", rewritten)
        if (qps_edits, burst_edits) != (1, 1):
            raise KueueBuildError(f"{original}: expected one QPS = 50 and one Burst = 100 to rewrite, found "
                                  f"{qps_edits} and {burst_edits} (a new Kueue release changed its main.go)")
        patched = target_dir / f"minimalkueue-qps{qps}-burst{burst}.main.go"
        patched.write_text(rewritten)
        # Go refuses to overlay files of the module cache, so the rewritten file is overlaid as a package of this
        # module that exists only in the overlay (./ratekueue, never on disk), which imports Kueue's packages.
        overlay = target_dir / f"minimalkueue-qps{qps}-burst{burst}.overlay.json"
        overlay.write_text(json.dumps({"Replace": {str(HACK_DIR / "ratekueue" / "main.go"): str(patched)}}))
        _build(version, target.name, "./ratekueue", target, log, extra=("-overlay", str(overlay)))
    return target


def _build(version: str, name: str, package: str, target: Path, log: bool, *, extra: tuple[str, ...] = ()) -> None:
    if shutil.which("go") is None:
        raise KueueBuildError(f"{name} is not cached and no Go toolchain is on PATH")
    if log:
        sys.stderr.write(f"kueue: building {name} ({MODULE} {version}) from the Go module proxy\n")
    partial = target.with_suffix(".partial")
    argv = ["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", *extra, "-o", str(partial), package]
    env = {**os.environ, "CGO_ENABLED": "0"}
    started = time.monotonic()
    done = subprocess.run(argv, cwd=HACK_DIR, env=env, capture_output=True, text=True, check=False)
    seconds = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise KueueBuildError(f"go build {package} failed:\n{done.stderr.strip()[-2000:]}")
    partial.replace(target)  # atomic: a half-written binary is never taken for a cached one
    # ru_maxrss of waited-for descendants (go and its compile/link processes), KiB on Linux.
    peak_mib = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
    go = subprocess.run(["go", "version"], capture_output=True, text=True, check=False).stdout.strip()
    info = {"version": version, "package": package, "buildSeconds": seconds, "peakMemoryMiB": peak_mib, "go": go}
    (target.parent / f"{name}.build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    if log:
        sys.stderr.write(f"kueue: built {name} in {seconds}s (peak {peak_mib} MiB) -> {target}\n")


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "prepare"
    try:
        if command == "prepare":
            built = prepare()
            print(built.oraclekueue.parent)
        elif command == "prepare-oracle":
            built = prepare(names=("oraclekueue",))
            print(built.oraclekueue)
        elif command == "paths":
            built = prepare(log=True)
            print(json.dumps({k: str(getattr(built, k)) for k in built.__dataclass_fields__}, indent=2))
        elif command == "crds":
            print(crd_dir())
        elif command == "runner-env":
            print("\n".join(f"{k}={v}" for k, v in runner_env().items()))
        else:
            sys.stderr.write("usage: scripts/kueue-build [prepare|prepare-oracle|paths|crds|runner-env]\n")
            return 2
    except KueueBuildError as err:
        sys.stderr.write(f"kueue: {err}\n")
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
