"""A real Git repository of two clusters' queues (shared base, one overlay directory per cluster) for the
per-cluster controller and fleet status tests (tests/controller, tests/fleet)."""

from __future__ import annotations

import uuid
from pathlib import Path

from queue_repo import QueueRepo, cq_yaml

CLUSTERS = ("east", "west")
CONFIG = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
platformTeam: platform
teams:
  - name: platform
    paths: ["**"]
    namespaces: [{tag}-a, {tag}-b]
    maintainers: [{{name: t, email: t@example.com}}]
capacity:
  {tag}-default: {{cpu: "1000", memory: 100Ti}}
clusters:
{clusters}"""


def cluster_entry(name: str) -> str:
    return f"  - name: {name}\n    paths: [base/, clusters/{name}/]\n"


class FleetRepo(QueueRepo):
    """``base/`` (namespaces, the flavor, LocalQueues) shared by every cluster; ``clusters/<name>/`` holds that
    cluster's ClusterQueues: the same names everywhere, each cluster with its own quota."""

    def __init__(self, path: Path, tag: str, cpu: dict[str, str] | None = None) -> None:
        super().__init__(path, tag)
        for old in ("namespaces.yaml", "flavors.yaml", "queues/team-a.yaml", "queues/team-b.yaml"):
            self.remove(old)
        self.write("gitopsq.yaml", CONFIG.format(tag=tag, clusters="".join(cluster_entry(c) for c in CLUSTERS)))
        self.write("base/namespaces.yaml", "".join(
            f"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {n}\n" for n in (self.team_a, self.team_b)))
        self.write("base/flavors.yaml", f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\n"
                                        f"metadata:\n  name: {tag}-default\n")
        self.write("base/queues.yaml", self.lq(self.team_a) + self.lq(self.team_b))
        for n, cluster in enumerate(CLUSTERS):
            self.set_quota(cluster, (cpu or {}).get(cluster, str(8 * (n + 1))))

    def set_quota(self, cluster: str, cpu: str, team: str = "a") -> None:
        """Cluster ``cluster``'s ClusterQueue of team ``team`` with ``cpu`` nominal quota (the other team's keeps
        its quota, or 4 when new)."""
        path = self.path / f"clusters/{cluster}/quota-{team}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.cq(f"{self.tag}-{team}", cpu))
        other = "b" if team == "a" else "a"
        if not (self.path / f"clusters/{cluster}/quota-{other}.yaml").exists():
            (self.path / f"clusters/{cluster}/quota-{other}.yaml").write_text(self.cq(f"{self.tag}-{other}", "4"))

    def declare(self, *clusters: str) -> None:
        """gitopsq.yaml declaring exactly ``clusters``."""
        self.write("gitopsq.yaml", CONFIG.format(tag=self.tag, clusters="".join(cluster_entry(c) for c in clusters)))


def fleet_repo(path: Path, prefix: str = "f") -> FleetRepo:
    repo = FleetRepo(path, f"{prefix}{uuid.uuid4().hex[:6]}")
    repo.commit("two clusters")
    return repo


__all__ = ["CLUSTERS", "FleetRepo", "cq_yaml", "fleet_repo"]
