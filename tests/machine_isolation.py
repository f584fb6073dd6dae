"""The suite never leans on the machine it runs on: before any test module is imported, HOME, the XDG folders and
git's global configuration point at an empty directory made for this run, git's system configuration is ignored,
and every git identity, ssh agent and GnuPG home in the environment is dropped. A test that needs an identity
sets one itself, so a developer's ``~/.gitconfig`` can never make a test pass that fails on a new machine.

What the rigs build once per machine (Kubernetes, Kueue, Gitea, kustomize, helm; Go's module and build caches)
stays shared through explicit paths, fixed here from the real HOME before it is replaced, so an isolated run
reuses them instead of building again.

xdist's workers inherit the controller's environment, so the machine is read once per run; each worker then gets
a HOME of its own inside the run's, so caches kept under HOME (repository caches, webhook certificates) are never
written by two workers at once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

MARK = "GITOPSQ_TEST_HOME"  # set once the environment is isolated; its value is the run's HOME
BUILD_CACHES = {  # variable → folder under the real ~/.cache/gitopsq (the defaults of the prepare scripts)
    "GITOPSQ_ENVTEST_DIR": "envtest",
    "GITOPSQ_KUEUE_DIR": "kueue",
    "GITOPSQ_GITEA_DIR": "gitea",
    "GITOPSQ_KUSTOMIZE_DIR": "kustomize",
    "GITOPSQ_HELM_DIR": "helm",
}
GO_CACHES = ("GOPATH", "GOMODCACHE", "GOCACHE")  # Go derives them from HOME when they are unset
DROPPED_PREFIXES = ("GIT_", "GNUPG", "SSH_AUTH_SOCK", "SSH_AGENT_PID", "GITOPSQ_GIT_", "GITOPSQ_FORGE_TOKEN")


def isolate(environ: os._Environ[str] | dict[str, str] = os.environ) -> Path | None:
    """Point HOME and git's configuration at a new empty directory; returns it (None when already isolated)."""
    if environ.get(MARK):
        worker = environ.get("PYTEST_XDIST_WORKER")
        if worker and environ.get("HOME") == environ[MARK]:
            _set_home(environ, Path(environ[MARK]) / worker)
        return None
    real_home = Path(environ.get("HOME") or Path.home())
    for variable, folder in BUILD_CACHES.items():
        environ.setdefault(variable, str(real_home / ".cache" / "gitopsq" / folder))
    environ.update(_go_caches(environ))
    for name in [n for n in environ if n.startswith(DROPPED_PREFIXES)]:
        del environ[name]
    home = Path(tempfile.mkdtemp(prefix="gitopsq-test-home-"))
    environ[MARK] = str(home)
    _set_home(environ, home)
    return home


def _set_home(environ: os._Environ[str] | dict[str, str], home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    environ.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),  # absent: no identity, no url rewrites, no helpers
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
    })


def remove(home: Path | None) -> None:
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


def _go_caches(environ: os._Environ[str] | dict[str, str]) -> dict[str, str]:
    """Go's cache folders as the real HOME gives them (explicit ones kept); nothing when Go is not installed."""
    go = shutil.which("go", path=environ.get("PATH"))
    if go is None:
        return {}
    done = subprocess.run([go, "env", "-json", *GO_CACHES], capture_output=True, text=True, check=False,
                          env=dict(environ), timeout=60)
    if done.returncode != 0:
        return {}
    found: dict[str, str] = json.loads(done.stdout)
    return {name: value for name, value in found.items() if value and name not in environ}
