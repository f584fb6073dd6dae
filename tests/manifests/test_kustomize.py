"""Kustomize overlays on real Git repositories, built by the real kustomize (scripts/kustomize-prepare)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from kustomize_repo import DEV, PROD, PROD_HOLD, PROD_QUOTA, KustomizeRepo, queues

from gitopsq.api.findings import Finding
from gitopsq.kustomize import KustomizeBinary
from gitopsq.manifests import check_files, check_revision, render_documents
from gitopsq.manifests.check_report import Report
from gitopsq.manifests.kustomize_build import BuildResult
from gitopsq.manifests.kustomize_scan import scan
from gitopsq.source import open_any

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def kustomize_path() -> str:
    """The pinned kustomize build (idempotent; built from the Go module proxy on first use)."""
    done = subprocess.run([str(ROOT / "scripts" / "kustomize-prepare")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


class Recording:
    """The real kustomize, counting the builds it was asked for."""

    def __init__(self, path: str, **limits: float) -> None:
        self.real = KustomizeBinary([path], **limits)  # type: ignore[arg-type]
        self.builds = 0

    @property
    def version(self) -> str:
        return self.real.version

    def build(self, files: Mapping[str, bytes], directory: str) -> BuildResult:
        self.builds += 1
        return self.real.build(files, directory)


def check(repo: KustomizeRepo, renderer: Recording | KustomizeBinary) -> Report:
    source = open_any(str(repo.path))
    return check_revision(source, source.resolve("HEAD"), renderer=renderer)


def where(report: Report, code: str) -> list[str]:
    return [f"{f.location}" for f in report.findings if f.code == code]


def only(report: Report, code: str) -> Finding:
    found = [f for f in report.findings if f.code == code]
    assert len(found) == 1, report.findings
    return found[0]


@pytest.fixture
def repo(tmp_path: Path) -> KustomizeRepo:
    made = KustomizeRepo(tmp_path / "repo")
    made.commit("base and overlays")
    return made


def test_overlay_is_built_and_fields_point_at_base_or_patch(repo: KustomizeRepo, kustomize_path: str) -> None:
    """A valid overlay checks clean; patched fields are placed at the patch line, others at the base line, and
    nothing of the build metadata reaches the rendered manifests."""
    report = check(repo, KustomizeBinary([kustomize_path]))
    assert report.ok, report.findings
    cq = next(e for e in report.entries if e.key.name == "team-a-cq")
    assert (cq.path, cq.line) == ("base/team-a/queues.yaml", 6)
    quota = ("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota")
    assert str(cq.location(quota)) == "overlays/prod/team-a/quota.yaml:4"
    assert str(cq.location(("spec", "stopPolicy"))) == "overlays/prod/team-a/hold.yaml:6"
    assert str(cq.location(("spec", "namespaceSelector"))) == "base/team-a/queues.yaml:11"
    other = next(e for e in report.entries if e.key.name == "team-b-cq")
    assert str(other.location(quota)) == "base/team-b/queues.yaml:20"
    rendered = render_documents(report)
    assert "config.kubernetes.io/origin" not in rendered and "annotations" not in rendered
    assert 'nominalQuota: "16"' in rendered or "nominalQuota: '16'" in rendered
    assert report.files == ("overlays/prod/kustomization.yaml",)


def test_second_overlay_with_name_prefix(repo: KustomizeRepo, kustomize_path: str) -> None:
    """The dev overlay (namePrefix plus a patch) renders its own names and places the prefix at its key and the
    patched cohort at the patch."""
    repo.write("gitopsq.yaml", (repo.path / "gitopsq.yaml").read_text().replace("overlays/prod/", "overlays/dev/"))
    repo.commit("judge dev")
    report = check(repo, KustomizeBinary([kustomize_path]))
    names = sorted(e.key.name for e in report.entries if e.key.kind == "ClusterQueue")
    assert names == ["dev-team-a-cq", "dev-team-b-cq"]
    cq = next(e for e in report.entries if e.key.name == "dev-team-b-cq")
    assert str(cq.location(("spec", "cohortName"))) == "overlays/dev/team-b/cohort.yaml:6"
    prefix = DEV.splitlines().index("namePrefix: dev-") + 1
    assert str(cq.location(("metadata", "name"))) == f"overlays/dev/kustomization.yaml:{prefix}"
    assert (cq.path, cq.line) == ("base/team-b/queues.yaml", 6)


def test_finding_in_a_patched_value_points_at_the_patch(repo: KustomizeRepo, kustomize_path: str) -> None:
    """A bad quota written by a JSON 6902 patch and a bad stopPolicy written by a strategic-merge patch are each
    reported at the patch file and line."""
    repo.write("overlays/prod/team-a/quota.yaml", PROD_QUOTA.format(cpu="-1"))
    repo.commit("negative")
    report = check(repo, KustomizeBinary([kustomize_path]))
    assert where(report, "negative-quota") == ["overlays/prod/team-a/quota.yaml:4"]
    repo.write("overlays/prod/team-a/quota.yaml", PROD_QUOTA.format(cpu="16"))
    repo.write("overlays/prod/team-a/hold.yaml", PROD_HOLD.format(policy="Bogus"))
    repo.commit("bogus")
    report = check(repo, KustomizeBinary([kustomize_path]))
    assert where(report, "invalid-value") == ["overlays/prod/team-a/hold.yaml:6"]


def test_finding_in_an_unpatched_value_points_at_the_base(repo: KustomizeRepo, kustomize_path: str) -> None:
    """A bad value no patch touches is reported at the base file and line, not at rendered output."""
    repo.write("base/team-b/queues.yaml", queues("team-b", cpu="lots"))
    repo.commit("bad base")
    report = check(repo, KustomizeBinary([kustomize_path]))
    assert where(report, "invalid-quantity") == ["base/team-b/queues.yaml:20"]


def test_patch_of_another_teams_object_is_denied_naming_the_patch(repo: KustomizeRepo, kustomize_path: str) -> None:
    """A patch under team-a's paths that changes team-b's queue is refused at the patch's line; the platform
    team's inline patch of the same queue is allowed and placed inside the kustomization."""
    repo.write("overlays/prod/team-a/steal.yaml", PROD_HOLD.format(policy="Hold").replace("team-a-cq", "team-b-cq"))
    repo.write("overlays/prod/kustomization.yaml", PROD + "- path: team-a/steal.yaml\n")
    repo.commit("team-a holds team-b's queue")
    report = check(repo, KustomizeBinary([kustomize_path]))
    denied = only(report, "kustomize-patch-owner")
    assert str(denied.location) == "overlays/prod/team-a/steal.yaml:6"
    assert "patch overlays/prod/team-a/steal.yaml (team team-a) changes ClusterQueue/team-b-cq" in denied.message
    assert "base/team-b/queues.yaml:6 belongs to team team-b" in denied.message
    inline = PROD + ("- target: {kind: ClusterQueue, name: team-b-cq}\n  patch: |-\n"
                     "    - op: add\n      path: /spec/stopPolicy\n      value: HoldAndDrain\n")
    repo.write("overlays/prod/kustomization.yaml", inline)
    repo.commit("the platform team drains team-b")
    report = check(repo, KustomizeBinary([kustomize_path]))
    assert report.ok, report.findings
    cq = next(e for e in report.entries if e.key.name == "team-b-cq")
    line = inline.splitlines().index("      value: HoldAndDrain") + 1
    assert str(cq.location(("spec", "stopPolicy"))) == f"overlays/prod/kustomization.yaml:{line}"


@pytest.mark.parametrize(("extra", "code", "text"), [
    ("- github.com/example/queues//base?ref=v1\n", "kustomize-remote", "remote resource"),
    ("- https://example.com/queues.yaml\n", "kustomize-remote", "remote resource"),
    ("- ../../../../etc\n", "kustomize-outside", "outside the repository"),
])
def test_remote_and_escaping_resources_are_refused_unbuilt(repo: KustomizeRepo, kustomize_path: str, extra: str,
                                                           code: str, text: str) -> None:
    """A remote or escaping resource is an error at its kustomization line, and kustomize never runs."""
    lines = PROD.splitlines(keepends=True)
    repo.write("overlays/prod/kustomization.yaml", "".join([*lines[:2], extra, *lines[2:]]))
    repo.commit("remote")
    renderer = Recording(kustomize_path)
    report = check(repo, renderer)
    finding = only(report, code)
    assert str(finding.location) == "overlays/prod/kustomization.yaml:3" and text in finding.message
    assert renderer.builds == 0 and not report.ok


@pytest.mark.parametrize(("extra", "key"), [
    ("helmCharts:\n- name: kueue\n  repo: https://charts.example.com\n  version: 0.1.0\n", "helmCharts"),
    ("generators:\n- exec-generator.yaml\n", "generators"),
    ("transformers:\n- |-\n  apiVersion: example.com/v1\n  kind: Exec\n  metadata:\n    name: x\n"
     "    annotations:\n      config.kubernetes.io/function: |\n        exec:\n          path: /bin/sh\n",
     "transformers"),
])
def test_helm_and_plugins_are_refused_unbuilt(repo: KustomizeRepo, kustomize_path: str, extra: str, key: str) -> None:
    """helmCharts and generator/transformer plugins (which could run programs) are refused at their line."""
    repo.write("overlays/prod/exec-generator.yaml", "apiVersion: x/v1\nkind: G\nmetadata: {name: g}\n")
    repo.write("overlays/prod/kustomization.yaml", PROD + extra)
    repo.commit(key)
    renderer = Recording(kustomize_path)
    report = check(repo, renderer)
    finding = only(report, "kustomize-refused")
    assert str(finding.location) == f"overlays/prod/kustomization.yaml:{len(PROD.splitlines()) + 1}"
    assert finding.message.startswith(f"{key}: ")
    assert renderer.builds == 0


def test_broken_kustomizations_are_clear_findings(repo: KustomizeRepo, kustomize_path: str) -> None:
    """A missing file and a symbolic link are refused at their line; kustomize's own error (a patch whose target
    does not exist) becomes a finding at that patch's entry, never a traceback."""
    repo.write("overlays/prod/kustomization.yaml", PROD + "- path: team-a/missing.yaml\n")
    repo.commit("missing")
    report = check(repo, KustomizeBinary([kustomize_path]))
    assert where(report, "kustomize-missing") == [f"overlays/prod/kustomization.yaml:{len(PROD.splitlines()) + 1}"]
    (repo.path / "overlays/prod/team-a/missing.yaml").symlink_to("/etc/passwd")
    repo.commit("symlink")
    report = check(repo, KustomizeBinary([kustomize_path]))
    assert "symbolic links are not followed" in only(report, "kustomize-missing").message
    (repo.path / "overlays/prod/team-a/missing.yaml").unlink()
    repo.write("overlays/prod/team-a/missing.yaml", PROD_HOLD.format(policy="Hold").replace("team-a-cq", "ghost"))
    repo.commit("ghost")
    report = check(repo, KustomizeBinary([kustomize_path]))
    failed = only(report, "kustomize-failed")
    assert str(failed.location) == f"overlays/prod/kustomization.yaml:{len(PROD.splitlines()) + 1}"
    assert "ghost" in failed.message and "/tmp" not in failed.message and not report.ok


def test_output_limit_and_cache(repo: KustomizeRepo, kustomize_path: str) -> None:
    """An output past the limit is refused (the kernel stops the write); an unchanged overlay is built once per
    process however often its revision is checked."""
    repo.write("base/flavors.yaml", (repo.path / "base/flavors.yaml").read_text() + "# not built before\n")
    repo.commit("new bytes, so no earlier build is reused")
    small = Recording(kustomize_path, output_bytes=200)
    report = check(repo, small)
    assert "output exceeds 200 bytes" in only(report, "kustomize-failed").message
    renderer = Recording(kustomize_path, timeout=30.0)
    repo.write("README.md", "unrelated\n")
    repo.commit("touch another file")
    first = check(repo, renderer)
    builds = renderer.builds
    assert builds == 3  # the overlay, then once without each of its two patches
    again = check(repo, renderer)
    assert renderer.builds == builds and again.entries == first.entries


def test_plan_and_check_name_the_patch(repo: KustomizeRepo, kustomize_path: str) -> None:
    """`gitopsq plan` shows a changed quota at the patch line, and `gitopsq check` names the patch of a bad value."""
    base = repo.git("rev-parse", "HEAD")
    repo.write("overlays/prod/team-a/quota.yaml", PROD_QUOTA.format(cpu="32"))
    head = repo.commit("more for team-a")
    env = {**os.environ, "GITOPSQ_KUSTOMIZE": kustomize_path, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "gitopsq", "plan", str(repo.path), "--base", base,
                           "--head", head], capture_output=True, text=True, env=env, check=False, cwd=repo.path)
    assert "overlays/prod/team-a/quota.yaml:4" in done.stdout, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if "nominalQuota" in x)
    assert "16" in line and "32" in line and line.rstrip().endswith("(overlays/prod/team-a/quota.yaml:4)")
    repo.write("overlays/prod/team-a/quota.yaml", PROD_QUOTA.format(cpu="-3"))
    repo.commit("negative")
    done = subprocess.run([sys.executable, "-m", "gitopsq", "check", str(repo.path)], capture_output=True,
                          text=True, env=env, check=False, cwd=repo.path)
    assert done.returncode == 1
    assert "overlays/prod/team-a/quota.yaml:4" in done.stdout + done.stderr


CONFIG_ALL = b"apiVersion: gitopsq.dev/v1alpha1\nkind: RepositoryConfig\ninclude: [o/]\nplatformTeam: p\n" \
    b"teams: [{name: p, paths: ['**'], maintainers: [{name: P, email: p@example.com}]}]\n"


def test_scan_keeps_local_dotted_paths_and_bounds_patches() -> None:
    """A local directory with a dot in its name is not mistaken for a remote host; more than 64 patches are
    refused at the first one past the limit."""
    files = {"o/kustomization.yaml": b"resources: [my.dir.io/q.yaml]\n", "o/my.dir.io/q.yaml": b"kind: X\n"}
    chain = scan("o", files, files.__getitem__)
    assert not chain.findings and chain.files == ("o/kustomization.yaml", "o/my.dir.io/q.yaml")
    many = "patches:\n" + "".join(f"- path: p{i}.yaml\n" for i in range(70))
    files = {"o/kustomization.yaml": many.encode(), **{f"o/p{i}.yaml": b"kind: X\n" for i in range(70)}}
    refused = scan("o", files, files.__getitem__)
    assert [(f.code, str(f.location)) for f in refused.findings] == [("kustomize-too-large",
                                                                      "o/kustomization.yaml:66")]


@pytest.mark.parametrize("text", [b"", b"- a\n- b\n", b"resources: 7\n", b"resources: [[1]]\n", b"\xff\xfe",
                                  b"a: &x [*x]\n", b"patches: [{path: 3}, {patch: 4}, 5]\n",
                                  b"resources: [.]\n", b"components: [../o]\n", b"bases: ['']\n"])
def test_odd_kustomizations_never_raise(text: bytes, kustomize_path: str) -> None:
    """A broken kustomization (empty, a list, wrong types, not UTF-8, a bomb, a cycle) is an error naming the
    kustomization file, from the scan or from kustomize itself, never an exception."""
    files = {"o/kustomization.yaml": text}
    report = check_files(files, CONFIG_ALL, renderer=KustomizeBinary([kustomize_path]))
    assert report.errors and {f.location.path for f in report.errors if f.location} == {"o/kustomization.yaml"}


def test_kubectl_kustomize_fallback_places_fields_the_same(repo: KustomizeRepo) -> None:
    """`kubectl kustomize` (kubectl's embedded kustomize v5.5) renders the overlay with the same placements."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is part of the development machine's tools"
    renderer = KustomizeBinary([kubectl, "kustomize"])
    assert "Kustomize Version" in renderer.version
    report = check(repo, renderer)
    assert report.ok, report.findings
    cq = next(e for e in report.entries if e.key.name == "team-a-cq")
    quota = ("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota")
    assert str(cq.location(quota)) == "overlays/prod/team-a/quota.yaml:4"
    assert str(cq.location(("spec", "stopPolicy"))) == "overlays/prod/team-a/hold.yaml:6"
