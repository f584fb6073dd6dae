"""Benchmark the sync loop's validation of a one-object change (no cluster needed).

Run: .venv/bin/python benchmarks/validation_bench.py [--sizes 1000,5000] [--repeat 3]
For each repository size N (the shape of benchmarks/sync_bench.py: 1 ResourceFlavor, 10 Namespaces, the rest
ClusterQueues and LocalQueues) it validates the first revision as the controller does on start, then commits a
change to one ClusterQueue's quota and times the validation of that commit against the previous one (the
manifest pipeline and the CEL policies: `gitopsq.validation.validate_revision`), with one long-lived
`ValidationCache` as the sync loop holds it ("cached"), with a long-lived parse cache only (what the sync loop
kept before the ValidationCache: "parse cache"), and with a fresh cache each time ("cold"). Goal: the cached
one-object validation well under 1 s at 5,000 objects.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT)]

from sync_bench import CQ, build_repo, git  # noqa: E402

from gitopsq.manifests import ParseCache  # noqa: E402
from gitopsq.source import open_source  # noqa: E402
from gitopsq.validation import ValidationCache, validate_revision  # noqa: E402


def run_size(size: int, repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tag = f"v{uuid.uuid4().hex[:5]}"
        repo = Path(tmp) / "queues"
        build_repo(repo, tag, size)
        source = open_source(str(repo))
        cache, files = ValidationCache(), ParseCache()
        previous = git(repo, "rev-parse", "HEAD")
        started = time.perf_counter()
        first = validate_revision(source, previous, base=True, cache=cache)
        first_s = time.perf_counter() - started
        assert first.ok, first.report.findings[:3]
        validate_revision(source, previous, base=True, cache=files)
        cached, parsed, cold = [], [], []
        for i in range(repeat):
            (repo / "queues" / "q00000.yaml").write_text(
                CQ.format(name=f"{tag}-cq0", tag=tag, cpu=9 + i)
                + f"---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: lq0\n"
                  f"  namespace: {tag}-ns0\nspec:\n  clusterQueue: {tag}-cq0\n")
            git(repo, "commit", "-q", "-am", f"cq0: {9 + i} cpus")
            head = git(repo, "rev-parse", "HEAD")
            started = time.perf_counter()
            result = validate_revision(source, head, base=previous, cache=cache)
            cached.append(time.perf_counter() - started)
            assert result.ok, result.report.findings[:3]
            started = time.perf_counter()
            validate_revision(source, head, base=previous, cache=files)
            parsed.append(time.perf_counter() - started)
            started = time.perf_counter()
            validate_revision(source, head, base=previous, cache=ValidationCache())
            cold.append(time.perf_counter() - started)
            previous = head
        return {"first_s": first_s, "cached_s": statistics.median(cached),
                "parsed_s": statistics.median(parsed), "cold_s": statistics.median(cold)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'objects':>8} {'first revision':>15} {'1-obj change: cached':>21} {'parse cache':>12} {'cold':>8}")
    for size in (int(s) for s in args.sizes.split(",")):
        r = run_size(size, args.repeat)
        print(f"{size:>8} {r['first_s']:>14.3f}s {r['cached_s']:>20.3f}s {r['parsed_s']:>11.3f}s {r['cold_s']:>7.3f}s",
              flush=True)


if __name__ == "__main__":
    main()
