"""Benchmark the GitOps sync on the real API server: commit to applied, and a no-change reconcile's CPU.

Run: .venv/bin/python benchmarks/sync_bench.py [--sizes 100,1000,5000] [--kubeconfig PATH]
Without --kubeconfig it starts its own envtest rig (scripts/envtest prepare must have built the binaries) and
installs the CRDs. For each repository size N (1 ResourceFlavor, 10 Namespaces, the rest ClusterQueues and
LocalQueues half and half) it measures, with one long-lived Syncer as the controller holds it:
1. full apply: first sync of the revision into an empty cluster (fetch, validate, plan, apply, status);
2. one-object change: a commit changing one ClusterQueue's quota; "fetch→applied" is the time from the fetch
   finishing to the status written (goal ≤ 1 s);
3. no-change reconcile: the same revision polled again, CPU of this process (goal ≤ 100 ms), median of 5, both
   as the controller's usual poll (Git only: the revision is the applied one) and with the periodic drift check
   (LIST every kind, compare, correct nothing);
4. the dry run's cost: the dry-run phase of the full apply timed alone, and a second full apply of a repository
   of the same size with the dry-run phase switched off (`SyncOptions.dry_run_first=False`, for this
   measurement only) to compare wall times;
5. all or nothing at scale: a revision changing one quota and adding a LocalQueue in a namespace that does not
   exist is refused by the dry run; the benchmark asserts every live object kept its resourceVersion.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "hack" / "envtest")]

from gitopsq.cluster.apply import KubeRest  # noqa: E402
from gitopsq.cluster.kube import load_api_client  # noqa: E402
from gitopsq.cluster.status import SourceRef  # noqa: E402
from gitopsq.source import open_source  # noqa: E402
from gitopsq.sync.syncer import Syncer  # noqa: E402
from gitopsq.sync.values import SyncOptions  # noqa: E402

CONFIG = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [base.yaml, queues/]
platformTeam: platform
teams:
  - name: platform
    paths: ["**"]
    namespaces: [{namespaces}, {tag}-missing]
    maintainers: [{{name: b, email: b@x}}]
capacity:
  {tag}-default: {{cpu: "1000000", memory: 1000Pi}}
"""
CQ = """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: {name}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: {tag}-default
      resources:
      - {{name: cpu, nominalQuota: "{cpu}"}}
      - {{name: memory, nominalQuota: 64Gi}}
"""
LQ = """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: {name}
  namespace: {ns}
spec:
  clusterQueue: {cq}
"""


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def build_repo(path: Path, tag: str, size: int) -> None:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    namespaces = ", ".join(f"{tag}-ns{i}" for i in range(10))
    (path / "gitopsq.yaml").write_text(CONFIG.format(tag=tag, namespaces=namespaces))
    (path / "base.yaml").write_text(
        f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: {tag}-default\n"
        + "".join(f"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {tag}-ns{i}\n" for i in range(10)))
    pairs = (size - 11) // 2
    (path / "queues").mkdir()
    for i in range(pairs):
        (path / "queues" / f"q{i:05d}.yaml").write_text(
            CQ.format(name=f"{tag}-cq{i}", tag=tag, cpu=8)
            + LQ.format(name=f"lq{i}", ns=f"{tag}-ns{i % 10}", cq=f"{tag}-cq{i}"))
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")


def live_versions(api_client: Any, tag: str) -> dict[str, str]:
    """name -> resourceVersion of every ClusterQueue and LocalQueue this benchmark's source applied."""
    rest = KubeRest(api_client)
    out = {}
    for path in ("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", "/apis/kueue.x-k8s.io/v1beta2/localqueues"):
        for item in rest.list_all(path, selector=f"gitopsq.dev/source=gitopsq-system.{tag}"):
            meta = item["metadata"]
            out[f"{path}/{meta.get('namespace', '')}/{meta['name']}"] = meta["resourceVersion"]
    return out


def refused_revision(api_client: Any, syncer: Syncer, repo: Path, tag: str) -> float:
    """Commit one quota change plus a LocalQueue in a namespace that does not exist; the sync must be refused
    by the dry run and leave every live object as it was. Returns the refused sync's wall time."""
    before = live_versions(api_client, tag)
    path = repo / "queues" / "q00001.yaml"
    path.write_text(path.read_text().replace('nominalQuota: "8"', 'nominalQuota: "10"'))
    (repo / "queues" / "zz-refused.yaml").write_text(LQ.format(name="refused", ns=f"{tag}-missing", cq=f"{tag}-cq0"))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a change and an object the API server refuses")
    started = time.perf_counter()
    result = syncer.sync(SyncOptions(rev="main", prune=True))
    wall = time.perf_counter() - started
    assert result.outcome == "refused" and len(result.refusals) == 1, result.to_json()
    after = live_versions(api_client, tag)
    assert after == before, "a refused revision changed live objects"
    return wall


def full_apply_without_dry_run(api_client: Any, size: int) -> float:
    """Wall time of a first sync of a fresh repository of ``size`` objects with the dry-run phase off."""
    tag = f"n{uuid.uuid4().hex[:5]}"
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "queues"
        build_repo(repo, tag, size)
        syncer = Syncer(open_source(str(repo)), KubeRest(api_client), SourceRef("gitopsq-system", tag),
                        url=str(repo))
        started = time.perf_counter()
        result = syncer.sync(SyncOptions(rev="main", prune=True, dry_run_first=False))
        assert result.outcome == "applied", result.to_json()
        return time.perf_counter() - started


def run_size(api_client: Any, size: int, *, compare: bool = True) -> dict[str, float]:
    tag = f"b{uuid.uuid4().hex[:5]}"
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "queues"
        build_repo(repo, tag, size)
        syncer = Syncer(open_source(str(repo)), KubeRest(api_client), SourceRef("gitopsq-system", tag),
                        url=str(repo))
        started = time.perf_counter()
        full = syncer.sync(SyncOptions(rev="main", prune=True))
        full_wall = time.perf_counter() - started
        assert full.outcome == "applied", full.to_json()

        path = repo / "queues" / "q00000.yaml"
        path.write_text(path.read_text().replace('nominalQuota: "8"', 'nominalQuota: "9"'))
        git(repo, "commit", "-qam", "one quota")
        started = time.perf_counter()
        one = syncer.sync(SyncOptions(rev="main", prune=True))
        one_wall = time.perf_counter() - started
        assert one.outcome == "applied" and len(one.plan.applies) == 1, one.to_json()
        t = one.timings

        poll, drift = [], []
        for _ in range(5):
            before = time.process_time()
            same = syncer.sync(SyncOptions(rev="main", prune=True, drift_check=False))
            poll.append(time.process_time() - before)
            assert same.outcome == "unchanged", same.to_json()
            before = time.process_time()
            same = syncer.sync(SyncOptions(rev="main", prune=True))
            drift.append(time.process_time() - before)
            assert same.outcome == "unchanged", same.to_json()
        refused_s = refused_revision(api_client, syncer, repo, tag)
        without_s = full_apply_without_dry_run(api_client, size) if compare else float("nan")
        return {"full_s": full_wall, "full_apply_s": full.timings["apply"] - full.timings["plan"],
                "dry_run_s": full.timings["dryRun"], "full_without_dry_run_s": without_s, "refused_s": refused_s,
                "one_total_s": one_wall, "one_fetch_to_applied_s": t["status"] - t["fetch"],
                "one_validate_s": t["validate"] - t["fetch"], "one_plan_s": t["plan"] - t["validate"],
                "noop_cpu_ms": statistics.median(poll) * 1000, "drift_cpu_ms": statistics.median(drift) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--no-compare", action="store_true",
                        help="skip the second full apply without the dry-run phase")
    args = parser.parse_args()
    rig = None
    kubeconfig = args.kubeconfig
    if kubeconfig is None:
        from envtestrig import Rig, prepare

        rig = Rig.start(prepare(log=False), Path(tempfile.mkdtemp(prefix="sync-bench-")))
        kubeconfig = str(rig.kubeconfig)
    try:
        api_client = load_api_client(kubeconfig)
        from gitopsq.cluster.crds import install_crds

        install_crds(api_client)
        print(f"{'objects':>8} {'full apply':>11} {'1-obj total':>12} {'fetch→applied':>14} {'(validate':>10} "
              f"{'plan)':>7} {'no-change CPU':>14} {'drift-check CPU':>16}")
        for size in (int(s) for s in args.sizes.split(",")):
            r = run_size(api_client, size, compare=not args.no_compare)
            print(f"{size:>8} {r['full_s']:>10.2f}s {r['one_total_s']:>11.3f}s {r['one_fetch_to_applied_s']:>13.3f}s "
                  f"{r['one_validate_s']:>9.3f}s {r['one_plan_s']:>6.3f}s {r['noop_cpu_ms']:>11.1f} ms "
                  f"{r['drift_cpu_ms']:>13.1f} ms", flush=True)
            print(f"{'':>8} dry-run phase of the full apply {r['dry_run_s']:.2f}s; full apply without it "
                  f"{r['full_without_dry_run_s']:.2f}s (with it {r['full_s']:.2f}s); refused revision "
                  f"{r['refused_s']:.2f}s, every live object unchanged", flush=True)
    finally:
        if rig is not None:
            rig.stop()


if __name__ == "__main__":
    main()
