"""A real Git repository with a kustomize base and two overlays (prod, dev), shared by the kustomize tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

CONFIG = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [overlays/prod/]
platformTeam: platform
teams:
  - name: platform
    paths: ["**"]
    maintainers: [{name: Pat, email: pat@example.com}]
  - name: team-a
    paths: ["base/team-a/**", "overlays/*/team-a/**"]
    namespaces: [team-a]
    maintainers: [{name: Ann, email: ann@example.com}]
  - name: team-b
    paths: ["base/team-b/**", "overlays/*/team-b/**"]
    namespaces: [team-b]
    maintainers: [{name: Bob, email: bob@example.com}]
capacity:
  default: {cpu: "100", memory: 400Gi}
"""

FLAVORS = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default
"""


def queues(team: str, cpu: str = "4") -> str:
    return f"""apiVersion: v1
kind: Namespace
metadata:
  name: {team}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: {team}-cq
spec:
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {team}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - name: cpu
        nominalQuota: "{cpu}"
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: main
  namespace: {team}
spec:
  clusterQueue: {team}-cq
"""


BASE = """resources:
- flavors.yaml
- team-a/queues.yaml
- team-b/queues.yaml
"""

# JSON 6902: team-a's production quota (line 4 holds the value).
PROD_QUOTA = """- op: replace
  path: /spec/resourceGroups/0/flavors/0/resources/0/nominalQuota
  # production gets more
  value: "{cpu}"
"""

# Strategic merge: team-a's production queue holds new work (line 6 holds the value).
PROD_HOLD = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a-cq
spec:
  stopPolicy: {policy}
"""

PROD = """resources:
- ../../base
patches:
- path: team-a/quota.yaml
  target:
    kind: ClusterQueue
    name: team-a-cq
- path: team-a/hold.yaml
"""

DEV = """resources:
- ../../base
namePrefix: dev-
patches:
- path: team-b/cohort.yaml
"""

DEV_COHORT = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-b-cq
spec:
  cohortName: dev
"""


class KustomizeRepo:
    """The repository on disk, written and committed with the git CLI."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.write("gitopsq.yaml", CONFIG)
        self.write("base/kustomization.yaml", BASE)
        self.write("base/flavors.yaml", FLAVORS)
        self.write("base/team-a/queues.yaml", queues("team-a"))
        self.write("base/team-b/queues.yaml", queues("team-b"))
        self.write("overlays/prod/kustomization.yaml", PROD)
        self.write("overlays/prod/team-a/quota.yaml", PROD_QUOTA.format(cpu="16"))
        self.write("overlays/prod/team-a/hold.yaml", PROD_HOLD.format(policy="Hold"))
        self.write("overlays/dev/kustomization.yaml", DEV)
        self.write("overlays/dev/team-b/cohort.yaml", DEV_COHORT)

    def write(self, rel: str, text: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", "-C", str(self.path), *args], check=True, capture_output=True, text=True,
                              env={"GIT_AUTHOR_NAME": "Pat", "GIT_AUTHOR_EMAIL": "pat@example.com",
                                   "GIT_COMMITTER_NAME": "Pat", "GIT_COMMITTER_EMAIL": "pat@example.com",
                                   "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(self.path)})
        return done.stdout.strip()

    def commit(self, message: str = "change", email: str = "pat@example.com") -> str:
        self.git("add", "-A")
        self.git("-c", f"user.email={email}", "commit", "-q", "--author", f"X <{email}>", "-m", message)
        return self.git("rev-parse", "HEAD")
