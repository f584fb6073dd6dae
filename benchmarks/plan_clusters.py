"""Benchmark `gitopsq plan` on a 3-cluster repository of 5,000 objects against the same objects in one cluster.

The objects are check_bench's (flavors, namespaces, 400 ClusterQueues in 20 cohorts, LocalQueues), laid out as a
fleet (docs/fleet.md): flavors and namespaces in ``base/`` (every cluster's), each ClusterQueue file and the
LocalQueues pointing to its queue under ``clusters/c<k % 3>/``. The single-cluster repository has the very same
files with ``include: [base/, clusters/]`` and no ``clusters:``. Head raises the CPU quota of 21 ClusterQueues,
7 per cluster, so every cluster of the fleet has a section in the plan (the worst case for the fleet).

Prints wall and CPU seconds of `make_fleet_plan` plus the text rendering, per layout:
  cold   no parse cache in memory or on disk (a fresh CI runner)
  warm   the parse cache on disk from the previous run (a self-hosted runner)
and the fleet/single ratio. Goal (issue 22): the 3-cluster plan within 2× the single-cluster time.

Usage: .venv/bin/python benchmarks/plan_clusters.py [--files 1000] [--changed 21] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pygit2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_bench import CLUSTER_QUEUE, FLAVOR, LOCAL_QUEUE, NAMESPACE, commit_all

CLUSTERS = ("c0", "c1", "c2")
HEAD = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
platformTeam: platform
teams:
  - name: platform
    paths: ["**"]
    maintainers: [{name: Bench, email: bench@example.com}]
"""
FLEET_CONFIG = HEAD + "clusters:\n" + "".join(f"  - name: {c}\n    paths: [base/, clusters/{c}/]\n" for c in CLUSTERS)
SINGLE_CONFIG = HEAD + "include: [base/, clusters/]\n"


def generate(root: Path, files: int, config: str) -> int:
    """The fleet's files (the same for both layouts but gitopsq.yaml); returns the number of objects."""
    (root / "base").mkdir(parents=True)
    for c in CLUSTERS:
        (root / "clusters" / c).mkdir(parents=True)
    (root / "gitopsq.yaml").write_text(config)
    flavor_files, ns_files = max(1, files // 100), max(1, files // 10)
    cq_files = (files - flavor_files - ns_files) * 45 // 100
    lq_files = files - flavor_files - ns_files - cq_files
    flavors, namespaces = flavor_files * 5, ns_files * 5
    objects = 0
    for k in range(flavor_files):
        (root / "base" / f"flavors-{k:04d}.yaml").write_text("---\n".join(FLAVOR.format(i=k * 5 + j)
                                                                          for j in range(5)))
        objects += 5
    for k in range(ns_files):
        (root / "base" / f"namespaces-{k:04d}.yaml").write_text("---\n".join(NAMESPACE.format(i=k * 5 + j)
                                                                             for j in range(5)))
        objects += 5
    lq = 0
    for k in range(cq_files):
        docs = [CLUSTER_QUEUE.format(i=k, cohort=k % 20, f0=k % flavors, f1=(k + 1) % flavors, cpu=32)]
        for _ in range(4):
            docs.append(LOCAL_QUEUE.format(i=lq, ns=lq % namespaces, cq=k))
            lq += 1
        (root / "clusters" / CLUSTERS[k % 3] / f"team-{k:04d}.yaml").write_text("---\n".join(docs))
        objects += 5
    for k in range(lq_files):
        cq = k % cq_files  # every LocalQueue of a file points to one ClusterQueue: they live in its cluster
        docs = []
        for _ in range(5):
            docs.append(LOCAL_QUEUE.format(i=lq, ns=lq % namespaces, cq=cq))
            lq += 1
        (root / "clusters" / CLUSTERS[cq % 3] / f"queues-{k:04d}.yaml").write_text("---\n".join(docs))
        objects += 5
    return objects


def change_quotas(root: Path, count: int) -> None:
    """Raise the first flavor's CPU quota of ``count`` ClusterQueues, spread evenly over the clusters."""
    per = count // len(CLUSTERS)
    for c in CLUSTERS:
        for file in sorted((root / "clusters" / c).glob("team-*.yaml"))[:per]:
            file.write_text(file.read_text().replace('nominalQuota: "32"', 'nominalQuota: "40"', 1))


def build(work: Path, name: str, files: int, config: str, changed: int) -> tuple[Path, int]:
    root = work / name
    objects = generate(root, files, config)
    repo = pygit2.init_repository(str(root), initial_head="main")
    commit_all(repo, "generated")
    repo.branches.local.create("head", repo[repo.head.target].peel(pygit2.Commit))
    repo.checkout("refs/heads/head")
    change_quotas(root, changed)
    commit_all(repo, f"raise {changed} quotas")
    return root, objects


def timed(repo: Path, *, cold: bool) -> tuple[float, float, str]:
    from gitopsq.commands import check
    from gitopsq.commands.plan import make_fleet_plan
    from gitopsq.manifests import DEFAULT_CACHE
    from gitopsq.plan.render_fleet import fleet_text

    DEFAULT_CACHE.clear()
    check._IN_MEMORY.clear()
    if cold:
        shutil.rmtree(os.environ["GITOPSQ_CACHE_DIR"], ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    plan = make_fleet_plan(str(repo), "main", "head")
    fleet_text(plan)
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    summary = ", ".join(f"{p.cluster or '(one cluster)'}: {len(p.plan.objects)} changed"
                        for p in plan.plans) + f"; exit {plan.exit_code}"
    return wall, used, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--changed", type=int, default=21)
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is reported")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gitopsq-plan-clusters-"))
    os.environ["GITOPSQ_CACHE_DIR"] = str(work / "cache")
    try:
        single, objects = build(work, "single", args.files, SINGLE_CONFIG, args.changed)
        fleet, _ = build(work, "fleet", args.files, FLEET_CONFIG, args.changed)
        print(f"repository: {objects} objects in {args.files} files; head changes {args.changed} ClusterQueues; "
              f"{os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        best: dict[tuple[str, str], tuple[float, float]] = {}
        for _ in range(args.repeat):
            for label, repo in (("single", single), ("3-cluster", fleet)):
                for mode in ("cold", "warm"):
                    wall, cpu, summary = timed(repo, cold=mode == "cold")
                    key = (label, mode)
                    best[key] = min(best.get(key, (wall, cpu)), (wall, cpu))
                    if _ == 0 and mode == "cold":
                        print(f"  {label}: {summary}")
        for mode in ("cold", "warm"):
            (sw, sc), (fw, fc) = best[("single", mode)], best[("3-cluster", mode)]
            print(f"plan-{mode:4s}  single {sw:6.3f} s (CPU {sc:.3f})   3-cluster {fw:6.3f} s (CPU {fc:.3f})   "
                  f"ratio {fw / sw:.2f}× wall, {fc / sc:.2f}× CPU")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
