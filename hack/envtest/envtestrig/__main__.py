"""`scripts/envtest prepare|up|down|env|status`: one long-lived rig per machine, kept in a state directory."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from envtestrig.build import PrepareError, cache_root, prepare
from envtestrig.rig import Rig, RigError

USAGE = """usage: scripts/envtest COMMAND
  prepare   install etcd, build kube-apiserver, kube-controller-manager, kube-scheduler, kwok, the JobSet
            controller and the KubeRay operator unless
            cached (idempotent); prepare --bare builds only what the bare profile needs
  up        start a bare rig: etcd + kube-apiserver (prepares first); a running rig is left as it is
  up --full start the full rig: + kube-controller-manager, kube-scheduler, kwok (which plays every Node
            annotated kwok.x-k8s.io/node=fake), the JobSet CRD and controller, the Kubeflow Trainer CRDs and
            controller manager, and the Ray CRDs and the KubeRay operator (see docs/envtest.md)
  env       print shell exports for the running rig: eval "$(scripts/envtest env)"
  status    say whether the rig runs (exit 0) or not (exit 1)
  down      stop the rig's processes by their recorded PIDs and delete its state
"""


def state_dir() -> Path:
    configured = os.environ.get("GITOPSQ_ENVTEST_STATE")
    return Path(configured) if configured else cache_root() / "run"


def _loaded() -> Rig | None:
    try:
        return Rig.load(state_dir())
    except RigError:
        return None


def _env_lines(rig: Rig) -> str:
    return (
        f"export KUBECONFIG={shlex.quote(str(rig.kubeconfig))}\nexport GITOPSQ_ENVTEST_API={shlex.quote(rig.api_url)}\n"
    )


ALLOWED = {("prepare",), ("prepare", "--bare"), ("up",), ("up", "--full"), ("down",), ("env",), ("status",)}


def main(argv: list[str]) -> int:
    if tuple(argv) not in ALLOWED:
        sys.stderr.write(USAGE)
        return 2
    verb = argv[0]
    try:
        if verb == "prepare":
            binaries = prepare(full="--bare" not in argv)
            print(f"kube-apiserver {binaries.kubernetes_version}: {binaries.kube_apiserver}")
            for name, path in (
                ("kube-controller-manager", binaries.kube_controller_manager),
                ("kube-scheduler", binaries.kube_scheduler),
                ("kwok", binaries.kwok),
                ("jobset", binaries.jobset),
                ("trainer", binaries.trainer),
            ):
                if path is not None:
                    print(f"{name}: {path}")
            print(f"etcd: {binaries.etcd}")
            print(f"kubectl: {binaries.kubectl}")
            return 0
        rig = _loaded()
        if verb == "up":
            full = "--full" in argv
            if rig is not None and all(rig.running().values()) and rig.full == full:
                print(f"envtest: already running ({rig.state.profile}) at {rig.api_url}")
                return 0
            if rig is not None:
                rig.stop()  # a rig of the other profile, or one with a process gone: start afresh
            shutil.rmtree(state_dir(), ignore_errors=True)
            rig = Rig.start(prepare(full=full), state_dir(), full=full)
            print(f"envtest: {rig.state.profile} rig ready, kube-apiserver at {rig.api_url}")
            print('envtest: run  eval "$(scripts/envtest env)"  to point kubectl at it')
            return 0
        if rig is None:
            sys.stderr.write("envtest: no rig is running (scripts/envtest up)\n")
            return 1
        if verb == "env":
            sys.stdout.write(_env_lines(rig))
            return 0
        if verb == "status":
            running = rig.running()
            pids = rig.pids()
            print(f"profile: {rig.state.profile}")
            for name, alive in running.items():
                print(f"{name}: {'running' if alive else 'stopped'} (pid {pids[name]})")
            print(f"api: {rig.api_url}\nkubeconfig: {rig.kubeconfig}")
            return 0 if all(running.values()) else 1
        rig.stop()
        shutil.rmtree(state_dir(), ignore_errors=True)
        print("envtest: stopped")
        return 0
    except (PrepareError, RigError) as err:
        sys.stderr.write(f"envtest: {err}\n")
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
