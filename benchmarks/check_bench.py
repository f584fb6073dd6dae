"""Benchmark `gitopsq check` on a generated repository of 5,000 objects in 1,000 files (a real Git repository).

Prints, in seconds:
  cold          first check: every file parsed (no parse cache on disk or in memory; opening and listing included)
  warm-disk     a new commit that changes one file, checked as a new process would: parse cache read from disk
  warm-memory   the same with the in-memory cache kept (the controller's case)
  cli-cold / cli-warm   the same through the real `gitopsq check` command in a subprocess (interpreter start-up
                included, for reference)
Targets (issue 2): cold ≤ 3 s, one changed file ≤ 0.3 s.

Usage: .venv/bin/python benchmarks/check_bench.py [--files 1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pygit2

CONFIG = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [queues/]
platformTeam: platform
teams:
  - name: platform
    paths: ["**"]
"""

FLAVOR = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: flavor-{i}
spec:
  nodeLabels:
    example.com/pool: pool-{i}
"""

NAMESPACE = """apiVersion: v1
kind: Namespace
metadata:
  name: ns-{i}
  labels: {{example.com/team: team-{i}}}
"""

CLUSTER_QUEUE = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq-{i}
spec:
  cohortName: cohort-{cohort}
  namespaceSelector: {{}}
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
  resourceGroups:
    - coveredResources: [cpu, memory, nvidia.com/gpu]
      flavors:
        - name: flavor-{f0}
          resources:
            - {{name: cpu, nominalQuota: "{cpu}", borrowingLimit: "8"}}
            - {{name: memory, nominalQuota: 64Gi}}
            - {{name: nvidia.com/gpu, nominalQuota: "0"}}
        - name: flavor-{f1}
          resources:
            - {{name: cpu, nominalQuota: "16"}}
            - {{name: memory, nominalQuota: 64Gi, lendingLimit: 32Gi}}
            - {{name: nvidia.com/gpu, nominalQuota: "4"}}
"""

LOCAL_QUEUE = """apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq-{i}
  namespace: ns-{ns}
spec:
  clusterQueue: cq-{cq}
"""


def generate(root: Path, files: int) -> int:
    """Write the repository's files; returns the number of objects. Scales with ``files`` (1000 → 5000)."""
    queues = root / "queues"
    queues.mkdir(parents=True)
    (root / "gitopsq.yaml").write_text(CONFIG)
    flavor_files, ns_files = max(1, files // 100), max(1, files // 10)
    cq_files = (files - flavor_files - ns_files) * 45 // 100
    lq_files = files - flavor_files - ns_files - cq_files
    objects = 0
    flavors = flavor_files * 5
    namespaces = ns_files * 5
    for k in range(flavor_files):
        (queues / f"flavors-{k:04d}.yaml").write_text("---\n".join(FLAVOR.format(i=k * 5 + j) for j in range(5)))
        objects += 5
    for k in range(ns_files):
        (queues / f"namespaces-{k:04d}.yaml").write_text("---\n".join(NAMESPACE.format(i=k * 5 + j)
                                                                      for j in range(5)))
        objects += 5
    lq = 0
    for k in range(cq_files):
        docs = [CLUSTER_QUEUE.format(i=k, cohort=k % 20, f0=k % flavors, f1=(k + 1) % flavors, cpu=32)]
        for _ in range(4):
            docs.append(LOCAL_QUEUE.format(i=lq, ns=lq % namespaces, cq=k))
            lq += 1
        (queues / f"team-{k:04d}.yaml").write_text("---\n".join(docs))
        objects += 5
    for k in range(lq_files):
        docs = []
        for _ in range(5):
            docs.append(LOCAL_QUEUE.format(i=lq, ns=lq % namespaces, cq=lq % cq_files))
            lq += 1
        (queues / f"queues-{k:04d}.yaml").write_text("---\n".join(docs))
        objects += 5
    return objects


def commit_all(repo: pygit2.Repository, message: str) -> str:
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    sig = pygit2.Signature("bench", "bench@example.com", 1_700_000_000, 0)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", sig, sig, message, tree, parents))


def timed_check(repo_dir: Path, rev: str, *, keep_memory: bool) -> tuple[float, float, int, int]:
    """Wall and CPU seconds of one in-process check (CPU time is the steadier figure on a shared machine)."""
    from gitopsq.commands import check
    from gitopsq.manifests import DEFAULT_CACHE

    if not keep_memory:
        DEFAULT_CACHE.clear()
        check._IN_MEMORY.clear()
    start, cpu = time.perf_counter(), time.process_time()
    report, _ = check.load_report(str(repo_dir), rev)
    return time.perf_counter() - start, time.process_time() - cpu, len(report.entries), len(report.errors)


def cli(repo_dir: Path, rev: str, env: dict[str, str]) -> float:
    exe = Path(sys.executable).with_name("gitopsq")
    start = time.perf_counter()
    subprocess.run([str(exe), "check", str(repo_dir), "--rev", rev], env=env, capture_output=True, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--keep", type=Path, default=None, help="generate here and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="gitopsq-bench-"))
    cache_dir = work / "cache"
    os.environ["GITOPSQ_CACHE_DIR"] = str(cache_dir)
    env = {**os.environ}
    repo_dir = work / "repo"
    try:
        objects = generate(repo_dir, args.files)
        repo = pygit2.init_repository(str(repo_dir), initial_head="main")
        first = commit_all(repo, "generated")
        print(f"repository: {objects} objects in {args.files} files ({os.cpu_count()} cores)")
        cold, cold_cpu, entries, errors = timed_check(repo_dir, first, keep_memory=False)
        print(f"cold          {cold:6.3f} s  (CPU {cold_cpu:.3f} s; {entries} objects, {errors} errors)")
        target = next((repo_dir / "queues").glob("team-*.yaml"))
        target.write_text(target.read_text().replace('nominalQuota: "32"', 'nominalQuota: "48"'))
        second = commit_all(repo, "change one file")
        warm_disk, warm_cpu, entries, errors = timed_check(repo_dir, second, keep_memory=False)
        print(f"warm-disk     {warm_disk:6.3f} s  (CPU {warm_cpu:.3f} s; {entries} objects, {errors} errors)")
        target.write_text(target.read_text().replace('nominalQuota: "48"', 'nominalQuota: "40"'))
        third = commit_all(repo, "change it again")
        warm_memory, memory_cpu, _, _ = timed_check(repo_dir, third, keep_memory=True)
        print(f"warm-memory   {warm_memory:6.3f} s  (CPU {memory_cpu:.3f} s)")
        shutil.rmtree(cache_dir, ignore_errors=True)
        print(f"cli-cold      {cli(repo_dir, first, env):6.3f} s  (process start-up included)")
        print(f"cli-warm      {cli(repo_dir, second, env):6.3f} s  (process start-up included)")
        load = os.getloadavg()[0]
        print(f"targets (wall): cold ≤ 3 s {'met' if cold <= 3 else 'MISSED'}; "
              f"one changed file ≤ 0.3 s {'met' if warm_disk <= 0.3 else 'MISSED'} "
              f"(load average {load:.1f} on {os.cpu_count()} cores)")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
