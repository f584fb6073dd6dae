"""gitopsq.validation.ValidationCache: the same verdicts as an uncached validation, policies recompiled only when
their files change, reports kept by commit within a bound, object documents shared across revisions."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitopsq.source import open_source
from gitopsq.validation import ValidationCache, validate_revision

CONFIG = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [queues/]
policyPaths: [policies/]
platformTeam: platform
teams:
  - name: platform
    paths: ["**"]
    namespaces: [team]
    maintainers: [{name: b, email: b@x}]
"""
FLAVOR = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default\n"
CQ = """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: {name}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {{name: cpu, nominalQuota: "{cpu}"}}
"""
POLICY = """apiVersion: gitopsq.dev/v1alpha1
kind: Policy
metadata: {{name: cpu-cap}}
spec:
  severity: Deny
  match: {{kinds: [ClusterQueue]}}
  validations:
    - expression: >-
        object.spec.resourceGroups.all(g, g.flavors.all(f, f.resources.all(r,
          quantity(r.nominalQuota).isLessThan(quantity('{cap}')))))
      message: "nominal quota must stay below {cap}"
"""


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self.git("init", "-q", "-b", "main")
        self.write("gitopsq.yaml", CONFIG)
        self.write("queues/flavor.yaml", FLAVOR)

    def git(self, *args: str) -> str:
        env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@x", "PATH": "/usr/bin:/bin"}
        return subprocess.run(["git", *args], cwd=self.path, env=env, check=True, capture_output=True,
                              text=True).stdout.strip()

    def write(self, rel: str, text: str) -> None:
        (self.path / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.path / rel).write_text(text)

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    r = Repo(tmp_path / "queues")
    for i in range(20):
        r.write(f"queues/q{i}.yaml", CQ.format(name=f"cq{i}", cpu=4))
    r.write("policies/cap.yaml", POLICY.format(cap=10))
    r.commit("base")
    return r


def codes(validation: object) -> list[str]:
    return sorted(f"{f.code}:{f.message}" for f in validation.report.findings)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("cpu", "denied"), [pytest.param(8, False, id="within-the-cap"),
                                              pytest.param(12, True, id="over-the-cap")])
def test_cached_validation_gives_the_uncached_verdicts(repo: Repo, cpu: int, denied: bool) -> None:
    """With a long-lived cache, a one-object change gets exactly the findings an uncached validation gives."""
    cache = ValidationCache()
    base = repo.git("rev-parse", "HEAD")
    source = open_source(str(repo.path))
    validate_revision(source, base, base=True, cache=cache)
    repo.write("queues/q3.yaml", CQ.format(name="cq3", cpu=cpu))
    head = repo.commit("cq3")
    cached = validate_revision(source, head, base=base, cache=cache)
    uncached = validate_revision(source, head, base=base)
    assert codes(cached) == codes(uncached)
    assert (not cached.ok) is denied
    assert any("cpu-cap" in c for c in codes(cached)) is denied


def test_policies_are_compiled_once_per_contents(repo: Repo) -> None:
    """Revisions with the same policy files reuse one compiled set; a changed policy file is compiled anew and
    its new rule judges the changes that follow (not the change that adds it: rules come from the base)."""
    cache = ValidationCache()
    source = open_source(str(repo.path))
    first = repo.git("rev-parse", "HEAD")
    validate_revision(source, first, base=True, cache=cache)
    repo.write("queues/q1.yaml", CQ.format(name="cq1", cpu=6))
    second = repo.commit("cq1: 6")
    assert validate_revision(source, second, base=first, cache=cache).ok
    assert len(cache.policies) == 1
    repo.write("policies/cap.yaml", POLICY.format(cap=5))
    repo.write("queues/q2.yaml", CQ.format(name="cq2", cpu=6))
    third = repo.commit("cap: 5, cq2: 6")
    assert validate_revision(source, third, base=second, cache=cache).ok  # compiled (to refuse a broken one)
    assert len(cache.policies) == 2
    repo.write("queues/q3.yaml", CQ.format(name="cq3", cpu=6))
    fourth = repo.commit("cq3: 6")
    tightened = validate_revision(source, fourth, base=third, cache=cache)
    assert len(cache.policies) == 2
    assert any("nominal quota must stay below 5" in c for c in codes(tightened))


def test_reports_are_kept_by_commit_within_the_bound(repo: Repo) -> None:
    """The base of a validation is the previous head's report (not checked again); at most max_reports stay."""
    cache = ValidationCache(max_reports=2)
    source = open_source(str(repo.path))
    shas = [repo.git("rev-parse", "HEAD")]
    validate_revision(source, shas[0], base=True, cache=cache)
    for i in range(3):
        repo.write("queues/q0.yaml", CQ.format(name="cq0", cpu=5 + i))
        shas.append(repo.commit(f"cq0: {5 + i}"))
        before = cache.reports.get(shas[-2])
        validate_revision(source, shas[-1], base=shas[-2], cache=cache)
        assert before is not None and cache.reports[shas[-2]] is before
    assert list(cache.reports) == shas[-2:]


def test_unchanged_objects_share_their_policy_documents(repo: Repo) -> None:
    """An object in a file the change did not touch is encoded for the policies once, not per revision."""
    cache = ValidationCache()
    source = open_source(str(repo.path))
    base = repo.git("rev-parse", "HEAD")
    validate_revision(source, base, base=True, cache=cache)
    documents = {pair[1].object["metadata"]["name"]: pair[1] for pair in cache.sourced.values()}  # type: ignore[index]
    repo.write("queues/q7.yaml", CQ.format(name="cq7", cpu=9))
    validate_revision(source, repo.commit("cq7"), base=base, cache=cache)
    after = {pair[1].object["metadata"]["name"]: pair[1] for pair in cache.sourced.values()}  # type: ignore[index]
    assert after["cq2"] is documents["cq2"]
    assert after["cq7"] is not documents["cq7"]
