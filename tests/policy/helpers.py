"""Shared test data for the policy engine tests: a trust model with four teams, commits and queues."""

from __future__ import annotations

from typing import Any

from gitopsq.policy import available_backends

BACKENDS = available_backends()

PLATFORM_KEY = "1" * 40
TEAM_A_KEY = "A" * 40
TEAM_B_KEY = "B" * 40
SERVING_KEY = "C" * 40


def repo_config(**overrides: Any) -> dict[str, Any]:
    """A gitopsq.yaml with platform, team-a, team-b (research) and serving (production)."""
    config: dict[str, Any] = {
        "apiVersion": "gitopsq.dev/v1alpha1",
        "kind": "RepositoryConfig",
        "include": ["platform/", "teams/"],
        "policyPaths": ["policies/"],
        "platformTeam": "platform",
        "teams": [
            {"name": "platform", "paths": ["platform/**", "policies/**"],
             "maintainers": [{"name": "Pat", "email": "pat@example.com", "signingKeys": [PLATFORM_KEY]}]},
            {"name": "team-a", "paths": ["teams/a/**"], "namespaces": ["team-a", "team-a-dev"],
             "cohorts": ["research"],
             "maintainers": [{"name": "Ann", "email": "ann@example.com", "signingKeys": [TEAM_A_KEY]}]},
            {"name": "team-b", "paths": ["teams/b/**"], "namespaces": ["team-b"], "cohorts": ["research"],
             "maintainers": [{"name": "Bob", "email": "bob@example.com", "signingKeys": [TEAM_B_KEY]}]},
            {"name": "serving", "paths": ["teams/serving/**"], "namespaces": ["serving"],
             "cohorts": ["production"],
             "maintainers": [{"name": "Sam", "email": "sam@example.com", "signingKeys": [SERVING_KEY]}]},
        ],
        "capacity": {"default": {"cpu": "100", "memory": "400Gi"}, "a100": {"nvidia.com/gpu": "16"}},
        "trustZones": [
            {"name": "research", "teams": ["team-a", "team-b"], "cohorts": ["research"]},
            {"name": "production", "teams": ["serving"], "cohorts": ["production"]},
        ],
        "signing": {"mode": "required"},
    }
    config.update(overrides)
    return config


def signed_commit(email: str, fingerprint: str, sha: str = "c0ffee") -> dict[str, Any]:
    return {"sha": sha, "author": {"name": email.split("@", maxsplit=1)[0], "email": email},
            "committer": {"name": email.split("@", maxsplit=1)[0], "email": email},
            "signature": {"state": "good", "kind": "gpg", "signer": email, "fingerprint": fingerprint}}


def unsigned_commit(email: str, sha: str = "deadbeef") -> dict[str, Any]:
    return {"sha": sha, "author": {"name": email.split("@", maxsplit=1)[0], "email": email},
            "committer": {"name": email.split("@", maxsplit=1)[0], "email": email}, "signature": {"state": "unsigned"}}


def cluster_queue(name: str, *, cohort: str | None = "research", namespaces: tuple[str, ...] = ("team-a",),
                  quota: dict[str, Any] | None = None, flavor: str = "default") -> dict[str, Any]:
    amounts = quota or {"cpu": "10"}
    resources = [{"name": r, "nominalQuota": q} for r, q in amounts.items()]
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}]},
        "resourceGroups": [{"coveredResources": sorted(amounts),
                            "flavors": [{"name": flavor, "resources": resources}]}],
    }
    if cohort:
        spec["cohort"] = cohort
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, namespace: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cq}}
