"""A fleet end to end on two real clusters at once (two kube-apiserver + etcd rigs): one repository declaring
clusters east and west, one `gitopsq controller --cluster` per rig, one change merged that touches both clusters'
overlays differently, and `gitopsq status` across both kubeconfigs (docs/fleet.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controller_process import Controller, killed_at_end, wait_for
from envtest_rig import Envtest
from fleet_repo import FleetRepo, fleet_repo
from queue_repo import NS, cpu_of, cq_live, get

from gitopsq.cluster.apply import KubeRest

ROOT = Path(__file__).resolve().parents[2]
WAIT = 180.0  # seconds; only bounds a failure (two rigs and two controllers share 2 loaded cores)

WORKLOAD = """apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  queueName: main
  podSets:
  - count: 1
    template: {{spec: {{containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "100"}}}}}}]}}}}
"""


@pytest.fixture(scope="module")
def west_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Envtest]:
    """A second rig of its own (etcd + kube-apiserver on free ports) beside the session's, with the CRDs."""
    from envtestrig import Rig, prepare

    from gitopsq.cluster.crds import install_crds

    binaries = prepare(log=True)
    rig = Rig.start(binaries, tmp_path_factory.mktemp("envtest-west"))
    try:
        env = Envtest(rig, str(binaries.kubectl))
        with env.api_client() as api:
            install_crds(api)
        yield env
    finally:
        rig.stop()


def applied(env: Envtest, repo: FleetRepo) -> str | None:
    source = get(env, f"/apis/gitopsq.dev/v1alpha1/namespaces/{NS}/gitsources/{repo.tag}")
    return None if source is None else (source.get("status") or {}).get("lastAppliedRevision")


def ready_reason(env: Envtest, repo: FleetRepo) -> tuple[str, str]:
    source = get(env, f"/apis/gitopsq.dev/v1alpha1/namespaces/{NS}/gitsources/{repo.tag}") or {}
    cond = next((c for c in (source.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
    return str(cond.get("status")), str(cond.get("reason"))


def quotas(env: Envtest, repo: FleetRepo) -> tuple[str, str]:
    return cpu_of(cq_live(env, f"{repo.tag}-a")), cpu_of(cq_live(env, f"{repo.tag}-b"))


def status(*kubeconfigs: Path) -> tuple[int, dict[str, Any]]:
    args = [a for k in kubeconfigs for a in ("--kubeconfig", str(k))]
    done = subprocess.run([sys.executable, "-m", "gitopsq", "status", *args, "-o", "json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.startswith("{"), done.stderr
    return done.returncode, json.loads(done.stdout)


def by_cluster(shown: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["cluster"]: c for c in shown["clusters"]}


def audit_records(audit_repo: Path) -> list[dict[str, Any]]:
    shown = subprocess.run(["git", "--git-dir", str(audit_repo), "log", "-p", "gitopsq/audit"],
                           capture_output=True, text=True, check=False).stdout
    out = []
    for line in shown.splitlines():
        if line.startswith("+{"):
            try:
                out.append(json.loads(line[1:]))
            except ValueError:
                continue
    return out


def test_two_clusters_converge_to_their_own_overlays_from_one_repository(kueue_clean: Envtest, west_rig: Envtest,
                                                                         tmp_path: Path) -> None:
    """One merged change reaches each cluster as its own overlay says; audit records, `gitopsq status` and a
    cluster dropped from gitopsq.yaml each keep the clusters apart."""
    east_rig = kueue_clean
    west_rig.delete_all()
    repo = fleet_repo(tmp_path / "queues")
    audit_repo = tmp_path / "audit.git"
    subprocess.run(["git", "init", "-q", "--bare", str(audit_repo)], check=True)
    with killed_at_end() as started:
        for name, env in (("east", east_rig), ("west", west_rig)):
            started.append(Controller(env, tmp_path, name, "--repo", str(repo.path), "--name", repo.tag,
                                      "--cluster", name, "--interval", "1s", "--drift-interval",
                                      "10m", "--audit-wal-dir", str(tmp_path / f"wal-{name}"), "--audit-repo",
                                      str(audit_repo)))
        first = repo._git("rev-parse", "HEAD")
        wait_for(lambda: applied(east_rig, repo) == first and applied(west_rig, repo) == first, WAIT, "first sync")
        assert quotas(east_rig, repo) == ("8", "4") and quotas(west_rig, repo) == ("16", "4")
        events = KubeRest(west_rig.api_client()).request(
            "GET", f"/api/v1/namespaces/{NS}/events", query=[("labelSelector", "gitopsq.dev/cluster=west")])
        assert events["items"] and {e["reportingInstance"] for e in events["items"]} == {"gitopsq/west"}
        revision_series = [line for line in started[0].scrape().splitlines()
                           if line.startswith("gitopsq_sync_applied_revision_info{")]
        assert revision_series and all('cluster="east"' in line for line in revision_series)
        assert any(f'revision="{first}"' in line for line in revision_series)

        repo._git("checkout", "-q", "-b", "resize")  # one change, both overlays, differently, merged to main
        repo.set_quota("east", "12", "a")
        repo.set_quota("west", "6", "b")
        repo.commit("east grows team a, west shrinks team b")
        repo._git("checkout", "-q", "main")
        repo._git("merge", "-q", "--no-ff", "-m", "Merge resize", "resize")
        change = repo._git("rev-parse", "HEAD")
        wait_for(lambda: applied(east_rig, repo) == change and applied(west_rig, repo) == change, WAIT,
                 "both clusters at the change")
        assert quotas(east_rig, repo) == ("12", "4")
        assert quotas(west_rig, repo) == ("16", "6")

        def attempts() -> dict[str, dict[str, Any]]:
            return {r["cluster"]: r for r in audit_records(audit_repo)
                    if r.get("type") == "sync.attempt" and r.get("revision") == change}

        named = wait_for(lambda: len(attempts()) == 2 and attempts(), WAIT, "audit records of both clusters")
        assert {c["name"]: c["action"] for c in named["east"]["changes"]} == {f"{repo.tag}-a": "updated"}
        assert {c["name"]: c["action"] for c in named["west"]["changes"]} == {f"{repo.tag}-b": "updated"}
        assert named["east"]["id"] != named["west"]["id"]

        # A Workload asking more than its queue's quota waits; an edit behind the controller's back is drift (the
        # next drift check is 10 minutes away, so it is still there when `status` looks).
        KubeRest(west_rig.api_client()).request(
            "POST", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{repo.team_a}/workloads",
            body=_yaml(WORKLOAD.format(name="waits", namespace=repo.team_a)))
        west_rig.kubectl("patch", "clusterqueue", f"{repo.tag}-a", "--type=json", "-p",
                         '[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota",'
                         '"value":"99"}]')
        code, shown = status(east_rig.kubeconfig, west_rig.kubeconfig)
        clusters = by_cluster(shown)
        assert set(clusters) == {"east", "west"} and code == 1, shown
        for name in ("east", "west"):
            assert clusters[name]["sources"][0]["appliedRevision"] == change
        assert clusters["east"]["sources"][0]["drift"] == []
        assert clusters["west"]["sources"][0]["drift"] == [{"object": f"ClusterQueue/{repo.tag}-a",
                                                            "state": "differs"}]
        pending = {(q["namespace"], q["name"]): q["pending"] for q in clusters["west"]["queues"]}
        assert pending == {(repo.team_a, "main"): 1, (repo.team_b, "main"): 0}
        # (the session's rig may hold other tests' leftover Jobs, which east's admission loop queues elsewhere)
        ours = {(q["namespace"], q["name"]): q["pending"] for q in clusters["east"]["queues"]
                if q["namespace"] in (repo.team_a, repo.team_b)}
        assert ours == {(repo.team_a, "main"): 0, (repo.team_b, "main"): 0}

        dead = tmp_path / "unreachable.kubeconfig"
        dead.write_text(east_rig.kubeconfig.read_text().replace(east_rig.api_url, "https://127.0.0.1:9"))
        code, shown = status(east_rig.kubeconfig, dead)
        assert code == 3
        assert [c["reachable"] for c in shown["clusters"]] == [True, False]
        assert shown["clusters"][0]["sources"][0]["appliedRevision"] == change

        repo.declare("east")  # west leaves gitopsq.yaml: its controller keeps the last good state
        dropped = repo.commit("west leaves the fleet")
        wait_for(lambda: applied(east_rig, repo) == dropped and ready_reason(west_rig, repo)[0] == "False", WAIT,
                 "east applies, west refuses")
        assert ready_reason(west_rig, repo) == ("False", "ValidationFailed")
        assert applied(west_rig, repo) == change
        assert quotas(west_rig, repo) == ("99", "6")  # the drift stays too: nothing was applied on west
        for process in started:
            assert process.stop() == 0


def _yaml(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)
