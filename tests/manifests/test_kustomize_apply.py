"""A kustomize overlay applied to the real API server (envtest rig), and `spec.paths` selecting by overlay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from envtest_rig import Envtest
from kustomize_repo import PROD, KustomizeRepo
from queue_repo import cpu_of, cq_live

from gitopsq.kustomize import KustomizeBinary
from gitopsq.manifests import check_revision
from gitopsq.source import open_any
from gitopsq.sync.revision_validation import from_report, within_paths

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kustomize_path() -> str:
    done = subprocess.run([str(ROOT / "scripts" / "kustomize-prepare")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def apply(env: Envtest, repo: KustomizeRepo, kustomize_path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitopsq", "apply", str(repo.path), "--name", "overlay",
                           "--kubeconfig", str(env.kubeconfig)], cwd=ROOT, capture_output=True, text=True,
                          check=False, timeout=180,
                          env={**os.environ, "GITOPSQ_KUSTOMIZE": kustomize_path, "PYTHONPATH": str(ROOT)})


def test_overlay_applied_then_broken_overlay_keeps_last_good(kueue_clean: Envtest, tmp_path: Path,
                                                             kustomize_path: str) -> None:
    """`gitopsq apply` writes the overlay's rendered objects (patched values, no build annotations); a revision
    whose overlay kustomize cannot build exits 1 naming the kustomization line and changes nothing."""
    repo = KustomizeRepo(tmp_path / "repo")
    repo.commit("overlays")
    done = apply(kueue_clean, repo, kustomize_path)
    assert done.returncode == 0, done.stdout + done.stderr
    live = cq_live(kueue_clean, "team-a-cq")
    assert live is not None and cpu_of(live) == "16" and live["spec"]["stopPolicy"] == "Hold"
    assert "config.kubernetes.io/origin" not in str(live["metadata"].get("annotations", {}))
    assert cpu_of(cq_live(kueue_clean, "team-b-cq")) == "4"
    repo.write("overlays/prod/kustomization.yaml", PROD + "- path: team-a/missing.yaml\n")
    repo.commit("a patch that is not there")
    broken = apply(kueue_clean, repo, kustomize_path)
    assert broken.returncode == 1
    assert f"overlays/prod/kustomization.yaml:{len(PROD.splitlines()) + 1}" in broken.stdout + broken.stderr
    assert cpu_of(cq_live(kueue_clean, "team-a-cq")) == "16"


def test_spec_paths_select_objects_by_their_overlay(tmp_path: Path, kustomize_path: str) -> None:
    """A GitSource's `spec.paths` naming the overlay directory keeps every object built from it, although
    each object's home is a base file outside that directory; naming the base keeps none of them."""
    repo = KustomizeRepo(tmp_path / "repo")
    repo.commit("overlays")
    source = open_any(str(repo.path))
    report = check_revision(source, source.resolve("HEAD"), renderer=KustomizeBinary([kustomize_path]))
    validated = from_report(report)
    assert len(within_paths(validated, ("overlays/prod",)).documents) == len(validated.documents) == 7
    assert within_paths(validated, ("base/",)).documents == ()
