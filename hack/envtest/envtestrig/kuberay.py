"""The KubeRay operator (``github.com/ray-project/kuberay/ray-operator``) on the full rig: built by ``prepare``
from hack/kuberay's module (pinned release, Go module proxy), cached under ``<cache>/kuberay/<version>/kuberay``;
its CRDs (RayCluster, RayJob, RayService) read from that module's copy in the Go module cache.

The operator runs without its webhooks (it serves them only when ``ENABLE_WEBHOOKS=true``; Kueue's rules are
gitopsq's job webhook's business), without leader election or metrics, on the rig's kubeconfig. It creates the
RayCluster of a RayJob, the head and worker pods (KWOK runs them on fake nodes) and the submitter Job; with no
real Ray inside those pods its dashboard calls fail, so a RayJob stays ``Running`` until it is suspended or
deleted (docs/envtest.md, "KubeRay")."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from envtestrig.build import PrepareError, _run_go_build, _say, cache_root, go_environment

KUBERAY_DIR = Path(__file__).resolve().parent.parent.parent / "kuberay"  # hack/kuberay: the operator's go.mod
MODULE = "github.com/ray-project/kuberay/ray-operator"
CRDS = ("rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io")


def kuberay_version() -> str:
    """The ray-operator release pinned in hack/kuberay/go.mod."""
    text = (KUBERAY_DIR / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(MODULE)}\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise PrepareError(f"hack/kuberay/go.mod does not require {MODULE}")
    return match.group(1)


def kuberay_path() -> Path:
    return cache_root() / "kuberay" / kuberay_version() / "kuberay"


def kuberay_crds() -> list[Path]:
    """The Ray CRD files of the pinned release, from the Go module cache (downloaded again if it was cleaned);
    never copied into this repository."""
    def find() -> list[Path]:
        done = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=False,
                              env=go_environment())
        root = Path(done.stdout.strip()) / "github.com" / "ray-project" / "kuberay" / \
            f"ray-operator@{kuberay_version()}" / "config" / "crd" / "bases"
        return sorted(root.glob("ray.io_*.yaml"))

    found = find()
    if not found:
        subprocess.run(["go", "mod", "download", f"{MODULE}@{kuberay_version()}"], cwd=KUBERAY_DIR,
                       capture_output=True, text=True, check=False, env=go_environment())
        found = find()
    if not found:
        raise PrepareError(f"no Ray CRDs in the Go module cache for {MODULE}@{kuberay_version()}")
    return found


def build_kuberay(log: bool) -> None:
    """``go build`` the operator's main package from hack/kuberay (about 3 CPU-minutes from an empty build
    cache, see docs/envtest.md)."""
    target = kuberay_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    version = kuberay_version()
    _say(log, f"building the KubeRay operator {version} from the Go module proxy (first time: a few minutes)")
    argv = ["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", str(partial), MODULE]
    try:
        seconds = _run_go_build(argv, KUBERAY_DIR, "kuberay")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    info = {"version": version, "buildSeconds": seconds}
    (target.parent / "kuberay.build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    _say(log, f"built the KubeRay operator {version} in {seconds}s -> {target}")


def install_kuberay(rig: object) -> None:
    """Install the Ray CRDs and start the KubeRay operator on ``rig`` (an envtestrig.rig.Rig)."""
    from envtestrig.processes import free_port
    from envtestrig.rig import Rig

    assert isinstance(rig, Rig) and rig._binaries is not None and rig._binaries.kuberay is not None
    kubectl = [str(rig._binaries.kubectl), f"--kubeconfig={rig.kubeconfig}"]
    from envtestrig.operators import apply_crds

    apply_crds(kubectl, kuberay_crds(), CRDS)
    port = free_port()
    argv = [str(rig._binaries.kuberay), f"--kubeconfig={rig.kubeconfig}", "--enable-leader-election=false",
            "--metrics-addr=0", f"--health-probe-bind-address=127.0.0.1:{port}", "--qps=100", "--burst=200",
            "--log-stdout-encoder=console"]
    env = {k: v for k, v in os.environ.items() if k != "ENABLE_WEBHOOKS"}
    env["KUBE_FEATURE_WatchListClient"] = "false"  # the rig's etcd has no watch progress requests
    pid = rig._spawn(argv, "kuberay.log", env)
    rig._replace_state(kuberay_pid=pid, kuberay_port=port)
    rig._wait_http(f"http://127.0.0.1:{port}/healthz", pid=pid, log_name="kuberay.log", context=None)
