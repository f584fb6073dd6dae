"""A real Git repository of queue definitions for the rig's sync and controller tests, and small readers of the
live objects they produce (shared by tests/sync, tests/controller and tests/cluster)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

from envtest_rig import Envtest

from gitopsq.cluster.apply import KubeRest
from gitopsq.cluster.kube import ClusterNotFound

NS = "gitopsq-system"
CONFIG = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [namespaces.yaml, flavors.yaml, queues/, many/]
platformTeam: platform
teams:
  - name: platform
    paths: ["**"]
    namespaces: [{tag}-a, {tag}-b, {tag}-later]
    maintainers: [{{name: t, email: t@example.com}}]
capacity:
  {tag}-default: {{cpu: "1000", memory: 100Ti}}
"""


def cq_yaml(name: str, cpu: str = "8", extra: str = "") -> str:
    return f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: {name}{extra}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - name: cpu
        nominalQuota: "{cpu}"
      - name: memory
        nominalQuota: 32Gi
"""


class QueueRepo:
    """A real Git repository of queue definitions, written and committed with the git CLI."""

    def __init__(self, path: Path, tag: str) -> None:
        self.path = path
        self.tag = tag
        self.team_a, self.team_b = f"{tag}-a", f"{tag}-b"
        path.mkdir(parents=True)
        self._git("init", "-q", "-b", "main")
        self.write("gitopsq.yaml", CONFIG.format(tag=tag))
        self.write("namespaces.yaml", "".join(
            f"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {n}\n" for n in (self.team_a, self.team_b)))
        self.write("flavors.yaml", f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\n"
                                   f"metadata:\n  name: {tag}-default\n")
        self.write("queues/team-a.yaml", self.cq(self.team_a) + self.lq(self.team_a))
        self.write("queues/team-b.yaml", self.cq(self.team_b) + self.lq(self.team_b))

    def cq(self, name: str, cpu: str = "8", extra: str = "") -> str:
        return cq_yaml(name, cpu, extra).replace("name: default", f"name: {self.tag}-default")

    @staticmethod
    def lq(ns: str) -> str:
        return (f"---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: main\n"
                f"  namespace: {ns}\nspec:\n  clusterQueue: {ns}\n")

    def _git(self, *args: str, author: tuple[str, str] = ("t", "t@example.com")) -> str:
        env = {"GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1], "GIT_COMMITTER_NAME": author[0],
               "GIT_COMMITTER_EMAIL": author[1], "PATH": "/usr/bin:/bin"}
        done = subprocess.run(["git", *args], cwd=self.path, env=env, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    def write(self, rel: str, text: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def remove(self, rel: str) -> None:
        (self.path / rel).unlink()

    def commit(self, message: str = "change", author: tuple[str, str] = ("t", "t@example.com")) -> str:
        self._git("add", "-A")
        self._git("commit", "-q", "--allow-empty", "-m", message, author=author)
        return self._git("rev-parse", "HEAD")


def get(env: Envtest, path: str) -> dict[str, Any] | None:
    try:
        answer: dict[str, Any] = KubeRest(env.api_client()).request("GET", path)
    except ClusterNotFound:
        return None
    return answer


def cq_live(env: Envtest, name: str) -> dict[str, Any] | None:
    return get(env, f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{name}")


def cpu_of(obj: dict[str, Any] | None) -> str:
    assert obj is not None
    return str(obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"])


def template_repo(path: Path, prefix: str) -> QueueRepo:
    """A queue repository at ``path`` with the template committed; its tag is ``prefix`` plus a random suffix."""
    repo = QueueRepo(path, f"{prefix}{uuid.uuid4().hex[:6]}")
    repo.commit("template")
    return repo
