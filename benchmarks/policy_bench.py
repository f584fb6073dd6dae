"""Policy engine throughput on a generated 5,000-object repository. Run: .venv/bin/python benchmarks/policy_bench.py

Prints, for each installed CEL backend:
Times are CPU seconds of this process (the machine is shared; wall time is printed too).
1. policy evaluations per second: the built-in library on every object of the repository as a first revision
   (one evaluation = one policy on one matching object, variables and validations included; goal ≥ 20,000/s
   on cel-expr-python). cel-python is measured on a --sample of the objects, since it is the slow reference.
2. a full policy check with change-awareness: compile the library, diff the 5,000-object base against a
   pull request that edits one team's ClusterQueue and two LocalQueues and adds one, then evaluate (goal ≤ 5 s
   on cel-python).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from gitopsq.policy import SourcedObject, available_backends, build_policy_input, evaluate, load_policies
from gitopsq.policy.evaluate import clear_program_cache, matches

KEYS = {"platform": "1" * 40}


def team_key(index: int) -> str:
    return f"{index:040X}"


def generate(teams: int, queues_per_team: int) -> tuple[dict[str, Any], list[SourcedObject]]:
    """A gitopsq.yaml and its objects: per team two ClusterQueues and many LocalQueues, plus platform objects."""
    config: dict[str, Any] = {
        "apiVersion": "gitopsq.dev/v1alpha1", "kind": "RepositoryConfig", "include": ["platform/", "teams/"],
        "platformTeam": "platform", "signing": {"mode": "required"},
        "capacity": {f: {"cpu": "100000", "memory": "1000Ti"} for f in ("on-demand", "spot", "reserved")},
        "trustZones": [{"name": "research", "teams": [f"team-{i}" for i in range(teams)], "cohorts": ["research"]}],
        "teams": [{"name": "platform", "paths": ["platform/**"],
                   "maintainers": [{"name": "Pat", "email": "pat@example.com", "signingKeys": [KEYS["platform"]]}]}],
    }
    objects = [SourcedObject("platform/flavors.yaml", {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
                                                       "metadata": {"name": f}}, i + 1)
               for i, f in enumerate(config["capacity"])]
    objects.append(SourcedObject("platform/cohorts.yaml", {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort",
                                                           "metadata": {"name": "research"}, "spec": {}}))
    for t in range(teams):
        name = f"team-{t}"
        config["teams"].append({"name": name, "paths": [f"teams/{name}/**"], "namespaces": [name, f"{name}-dev"],
                                "cohorts": ["research"], "maintainers": [
                                    {"name": name, "email": f"{name}@example.com", "signingKeys": [team_key(t + 1)]}]})
        for q in range(2):
            objects.append(SourcedObject(f"teams/{name}/cluster-queues.yaml", cluster_queue(f"{name}-cq-{q}", name),
                                         q * 40 + 1))
        for q in range(queues_per_team):
            objects.append(SourcedObject(f"teams/{name}/queues-{q // 20}.yaml", {
                "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                "metadata": {"name": f"q-{q}", "namespace": name if q % 2 else f"{name}-dev"},
                "spec": {"clusterQueue": f"{name}-cq-{q % 2}"}}, (q % 20) * 6 + 1))
    return config, objects


def cluster_queue(name: str, team: str, cpu: str = "10") -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
        "cohort": "research",
        "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                    "values": [team, f"{team}-dev"]}]},
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
            {"name": f, "resources": [{"name": "cpu", "nominalQuota": cpu, "borrowingLimit": "5"},
                                      {"name": "memory", "nominalQuota": "64Gi", "lendingLimit": "32Gi"}]}
            for f in ("on-demand", "spot", "reserved")]}]}}


def pull_request(objects: list[SourcedObject]) -> list[SourcedObject]:
    """team-7 raises one ClusterQueue, renames the queue of two LocalQueues, and adds a LocalQueue."""
    head = []
    edited = 0
    for item in objects:
        changed = item
        if item.key.name == "team-7-cq-0":
            changed = SourcedObject(item.path, cluster_queue("team-7-cq-0", "team-7", cpu="12"), item.line)
        elif item.key.namespace == "team-7" and item.key.kind == "LocalQueue" and edited < 2:
            changed = SourcedObject(item.path, {**item.object, "spec": {"clusterQueue": "team-7-cq-0"}}, item.line)
            edited += 1
        head.append(changed)
    head.append(SourcedObject("teams/team-7/queues-new.yaml", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
        "metadata": {"name": "fresh", "namespace": "team-7"}, "spec": {"clusterQueue": "team-7-cq-1"}}))
    return head


def throughput(backend: str, config: dict[str, Any], objects: list[SourcedObject], commit: dict[str, Any]) -> None:
    policies = load_policies(builtin=True, backend=backend)
    pi = build_policy_input([], objects, config, None, commit=commit, first_revision=True)
    evaluations = sum(1 for c in pi.changes for p in policies if matches(p, c))
    start, cpu = time.perf_counter(), time.process_time()
    verdicts = evaluate(policies, pi, backend)
    elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    denied = sum(1 for v in verdicts if v.denies)
    print(f"{backend:16} evaluations per CPU second: {evaluations / used:9,.0f}  ({evaluations:,} evaluations over "
          f"{len(pi.changes):,} objects: {used:.2f} s CPU, {elapsed:.2f} s wall; {denied} denials)")


def full_check(backend: str, config: dict[str, Any], base: list[SourcedObject], commit: dict[str, Any]) -> None:
    clear_program_cache()  # measure compilation too, as a fresh `gitopsq check` would
    head = pull_request(base)
    cpu = time.process_time()
    start = time.perf_counter()
    policies = load_policies(builtin=True, backend=backend)
    compiled = time.perf_counter()
    pi = build_policy_input(base, head, config, config, commit=commit,
                            touched_paths={"teams/team-7/cluster-queues.yaml", "teams/team-7/queues-0.yaml",
                                           "teams/team-7/queues-new.yaml"})
    built = time.perf_counter()
    verdicts = evaluate(policies, pi, backend)
    done = time.perf_counter()
    print(f"{backend:16} full check of a {len(head):,}-object revision: {done - start:.2f} s wall, "
          f"{time.process_time() - cpu:.2f} s CPU "
          f"(compile {compiled - start:.2f} s, diff+context {built - compiled:.2f} s, evaluate {done - built:.2f} s; "
          f"{len(pi.changes)} changes, {len(verdicts)} verdicts, {sum(v.denies for v in verdicts)} denials)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=50)
    parser.add_argument("--queues-per-team", type=int, default=98)
    parser.add_argument("--sample", type=int, default=500, help="objects evaluated on cel-python for throughput")
    args = parser.parse_args()
    config, objects = generate(args.teams, args.queues_per_team)
    commit = {"sha": "b3nch", "author": {"email": "team-7@example.com"},
              "signature": {"state": "good", "kind": "gpg", "fingerprint": team_key(8)}}
    platform = {"sha": "b3nch", "author": {"email": "pat@example.com"},
                "signature": {"state": "good", "kind": "gpg", "fingerprint": KEYS["platform"]}}
    print(f"repository: {len(objects):,} objects, {args.teams} teams")
    for backend in available_backends():
        sample = objects if backend == "cel-expr-python" else objects[: args.sample]
        throughput(backend, config, sample, platform)
    for backend in available_backends():
        full_check(backend, config, objects, commit)


if __name__ == "__main__":
    main()
