"""The Kubeflow Trainer controller manager on the full rig: built from hack/trainer's module (Go module proxy),
cached under ``<cache>/trainer/<version>/``, its CRDs (TrainJob, TrainingRuntime, ClusterTrainingRuntime) read
from the Go module cache, started next to the JobSet controller (its TrainJobs run as JobSets).

Trainer v2.0.0 always runs its certificate rotator and sets up its controllers only once the rotator says its
certificates are in place: the rotator fills the Secret ``kubeflow-system/kubeflow-trainer-webhook-cert`` (made
empty here) and then waits for the files a kubelet would mount from it in the fixed directory
``/tmp/k8s-webhook-server/serving-certs``. The rig writes a certificate pair there when none is present. Its
webhooks only validate, so they are not registered with the API server (docs/envtest.md): a request never
depends on this process, and the files' contents are never used.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from envtestrig.build import PrepareError, _go_version, _run_go_build, _say, cache_root, go_environment
from envtestrig.processes import free_port

if TYPE_CHECKING:
    from envtestrig.rig import Rig

TRAINER_DIR = Path(__file__).resolve().parent.parent.parent / "trainer"  # hack/trainer: its go.mod
MODULE = "github.com/kubeflow/trainer/v2"
NAMESPACE = "kubeflow-system"  # where Trainer looks for its webhook Secret outside a pod
SECRET = "kubeflow-trainer-webhook-cert"
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")  # fixed in Trainer v2.0.0 (pkg/util/cert)
BUILD_MINUTES = 4  # measured on 2 cores, after the JobSet build (same Kubernetes libraries): docs/envtest.md
CRD_NAMES = ("trainjobs.trainer.kubeflow.org", "trainingruntimes.trainer.kubeflow.org",
             "clustertrainingruntimes.trainer.kubeflow.org")


def trainer_version() -> str:
    """The Trainer release pinned in hack/trainer/go.mod."""
    text = (TRAINER_DIR / "go.mod").read_text()
    match = re.search(r"^\s*(?:require\s+)?github\.com/kubeflow/trainer/v2\s+(v\S+)", text, re.MULTILINE)
    if match is None:
        raise PrepareError("hack/trainer/go.mod does not require github.com/kubeflow/trainer/v2")
    return match.group(1)


def trainer_path() -> Path:
    return cache_root() / "trainer" / trainer_version() / "trainer-controller-manager"


def trainer_crds() -> list[Path]:
    """The three CRD files of the pinned release from the Go module cache (downloaded again if it was cleaned)."""
    def find() -> list[Path]:
        done = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=False,
                              env=go_environment())
        root = Path(done.stdout.strip()) / "github.com" / "kubeflow" / "trainer" / f"v2@{trainer_version()}"
        return sorted((root / "manifests" / "base" / "crds").glob("trainer.kubeflow.org_*.yaml"))

    found = find()
    if not found:
        subprocess.run(["go", "mod", "download", f"{MODULE}@{trainer_version()}"], cwd=TRAINER_DIR,
                       capture_output=True, text=True, check=False, env=go_environment())
        found = find()
    if not found:
        raise PrepareError(f"no Trainer CRDs in the Go module cache for {MODULE}@{trainer_version()}")
    return found


def build_trainer(log: bool) -> Path:
    """Build the controller manager unless cached (called by build.prepare for the full profile)."""
    target = trainer_path()
    if target.is_file() and os.access(target, os.X_OK):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    version = trainer_version()
    _say(log, f"building trainer {version} from the Go module proxy (first time: about {BUILD_MINUTES} min)")
    argv = ["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", str(partial),
            f"{MODULE}/cmd/trainer-controller-manager"]
    try:
        seconds = _run_go_build(argv, TRAINER_DIR, "trainer")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    info = {"version": version, "buildSeconds": seconds, "go": _go_version()}
    (target.parent / "trainer.build-info.json").write_text(json.dumps(info, indent=2) + "\n")
    _say(log, f"built trainer {version} in {seconds}s -> {target}")
    return target


def install_crds(rig: Rig) -> None:
    """Apply the Trainer CRDs and wait until each is Established (also for tests that install them late)."""
    from envtestrig.operators import apply_crds

    assert rig._binaries is not None
    apply_crds([str(rig._binaries.kubectl), f"--kubeconfig={rig.kubeconfig}"], trainer_crds(), CRD_NAMES)


def install_trainer(rig: Rig) -> None:
    """The Trainer CRDs and controller manager on a rig whose JobSet CRD and controller already run."""
    from envtestrig.rig import RigError

    assert rig._binaries is not None and rig._binaries.trainer is not None
    install_crds(rig)
    kubectl = [str(rig._binaries.kubectl), f"--kubeconfig={rig.kubeconfig}"]
    objects = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": NAMESPACE}}]}
    done = subprocess.run([*kubectl, "apply", "--server-side", "-f", "-"], input=json.dumps(objects),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RigError(f"creating Trainer's webhook Secret failed: {done.stderr.strip()[-800:]}")
    _ensure_cert_files(rig)
    port, webhook_port = free_port(), free_port()
    argv = [str(rig._binaries.trainer), f"--kubeconfig={rig.kubeconfig}", "--leader-elect=false",
            f"--health-probe-bind-address=127.0.0.1:{port}", "--metrics-bind-address=0",
            f"--webhook-server-port={webhook_port}"]
    env = {**os.environ, "KUBE_FEATURE_WatchListClient": "false"}
    pid = rig._spawn(argv, "trainer.log", env)
    rig._replace_state(trainer_pid=pid, trainer_port=port)
    # readyz answers once the rotator's certificates are in place and the webhook server listens, which is
    # also when the controllers start
    rig._wait_http(f"http://127.0.0.1:{port}/readyz", pid=pid, log_name="trainer.log", context=None)


def _ensure_cert_files(rig: Rig) -> None:
    """A certificate pair where Trainer's rotator expects the mounted Secret; another rig's pair is as good (the
    webhook server it feeds is never called)."""
    if (CERT_DIR / "tls.crt").is_file() and (CERT_DIR / "tls.key").is_file():
        return
    CERT_DIR.mkdir(parents=True, exist_ok=True)
    for name, source in (("tls.key", "apiserver.key"), ("tls.crt", "apiserver.crt")):
        staging = CERT_DIR / f".{name}.{os.getpid()}"
        shutil.copyfile(rig.pki_dir / source, staging)
        staging.replace(CERT_DIR / name)  # atomic: a concurrent rig never reads half a file
