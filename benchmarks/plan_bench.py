"""Benchmark `gitopsq plan` between two revisions of a 5,000-object repository that differ in 20 objects.

The repository is check_bench's generated one (1,000 files: flavors, namespaces, 400 ClusterQueues in 20
cohorts, LocalQueues); head raises the CPU quota of 20 ClusterQueues. Prints, in seconds (wall and CPU):
  plan-cold        no parse cache anywhere (a fresh CI runner): both revisions parsed, diff, quota, policies
  plan-warm        the parse cache on disk from an earlier run (a self-hosted runner)
  impact-snapshot  plan-warm plus impact over N current workloads from a snapshot file (half admitted)
and the plan's size in objects, quota rows and Markdown characters.
Targets (issue 8): plan ≤ 2 s without impact; with impact over 10,000 workloads ≤ 10 s.

Usage: .venv/bin/python benchmarks/plan_bench.py [--files 1000] [--workloads 10000] [--changed 20]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pygit2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_bench import commit_all, generate

from gitopsq.plan.pr_plan import PrPlan


def change_quotas(root: Path, count: int) -> list[str]:
    """Raise the first flavor's CPU quota of ``count`` ClusterQueues (one per team file)."""
    changed = []
    for file in sorted((root / "queues").glob("team-*.yaml"))[:count]:
        file.write_text(file.read_text().replace('nominalQuota: "32"', 'nominalQuota: "40"', 1))
        changed.append(file.name)
    return changed


def snapshot(root: Path, workloads: int, path: Path) -> None:
    """Current workloads in the scenario format: per ClusterQueue, small admitted jobs within nominal quota and
    bigger pending ones (6 CPUs: some fit by borrowing), spread over the LocalQueues that point to it."""
    cq_flavor: dict[str, str] = {}
    lqs: list[tuple[str, str, str]] = []  # namespace, name, ClusterQueue
    for file in sorted((root / "queues").glob("*.yaml")):
        text = file.read_text()
        for m in re.finditer(r"name: (cq-\d+)\nspec:\n  cohortName: \S+\n(?:.*\n)*?        - name: (flavor-\d+)", text):
            cq_flavor[m.group(1)] = m.group(2)
        for m in re.finditer(r"name: (lq-\d+)\n  namespace: (ns-\d+)\nspec:\n  clusterQueue: (cq-\d+)", text):
            lqs.append((m.group(2), m.group(1), m.group(3)))
    per_cq: dict[str, int] = {}
    items = []
    for i in range(workloads):
        ns, lq, cq = lqs[i % len(lqs)]
        n = per_cq.get(cq, 0)
        per_cq[cq] = n + 1
        admitted = n < 24  # 24 × 1 CPU stays within the 32 nominal
        item: dict[str, object] = {"name": f"w-{i}", "namespace": ns, "queue": lq, "priority": i % 3 * 100,
                                   "submitAt": -i,
                                   "podSets": [{"name": "main", "count": 1,
                                                "requests": {"cpu": "1" if admitted else "6", "memory": "1Gi"}}]}
        if admitted:
            item["admitted"] = {"clusterQueue": cq, "at": -i,
                                "flavors": {"main": {"cpu": cq_flavor[cq], "memory": cq_flavor[cq]}}}
        items.append(item)
    path.write_text(json.dumps({"workloads": items}))  # JSON is the scenario format too, and parses fastest


def timed(label: str, repo: Path, head: str, workloads: str | None = None) -> tuple[PrPlan, float]:
    from gitopsq.commands import check
    from gitopsq.commands.plan import make_plan
    from gitopsq.manifests import DEFAULT_CACHE

    DEFAULT_CACHE.clear()
    check._IN_MEMORY.clear()
    start, cpu = time.perf_counter(), time.process_time()
    plan = make_plan(str(repo), "main", head, workloads=workloads)
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    print(f"{label:16s} {wall:6.3f} s  (CPU {used:.3f} s)")
    return plan, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--changed", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gitopsq-plan-bench-"))
    os.environ["GITOPSQ_CACHE_DIR"] = str(work / "cache")
    repo_dir = work / "repo"
    try:
        from gitopsq.plan.render_markdown import render_markdown

        objects = generate(repo_dir, args.files)
        repo = pygit2.init_repository(str(repo_dir), initial_head="main")
        commit_all(repo, "generated")
        base = repo.head.target
        repo.branches.local.create("head", repo[base].peel(pygit2.Commit))
        repo.checkout("refs/heads/head")
        change_quotas(repo_dir, args.changed)
        commit_all(repo, f"raise {args.changed} quotas")
        snap = work / "snapshot.yaml"
        snapshot(repo_dir, args.workloads, snap)
        print(f"repository: {objects} objects in {args.files} files; head changes {args.changed} ClusterQueues; "
              f"{os.cpu_count()} cores")
        plan, cold = timed("plan-cold", repo_dir, "head")
        plan, warm = timed("plan-warm", repo_dir, "head")
        with_impact, impact = timed("impact-snapshot", repo_dir, "head", workloads=str(snap))
        md = render_markdown(plan)
        print(f"plan: {len(plan.objects)} objects changed, {sum(len(q.rows) for q in plan.quota)} quota rows, "
              f"{len(plan.cohorts)} cohorts, {len(plan.policies.verdicts)} verdicts, exit {plan.exit_code}; "
              f"Markdown {len(md)} characters")
        imp = with_impact.impact
        assert imp is not None
        print(f"impact: {imp.workloads} workloads, holding quota {imp.admitted_before} → {imp.admitted_after}, "
              f"{len(imp.of_kind('admissible'))} become admissible, {len(imp.headroom)} headroom changes")
        load = os.getloadavg()[0]
        print(f"targets (wall): plan ≤ 2 s: cold {'met' if cold <= 2 else 'MISSED'} ({cold:.2f}), warm "
              f"{'met' if warm <= 2 else 'MISSED'} ({warm:.2f}); impact over {args.workloads} workloads ≤ 10 s "
              f"{'met' if impact <= 10 else 'MISSED'} (load average {load:.1f} on {os.cpu_count()} cores)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
