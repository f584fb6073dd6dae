"""Fuzz the loader, quantity parser, gitopsq.yaml reader and policy evaluation at scale (issue 19).

    PYTHONPATH=. python benchmarks/fuzz.py --inputs 1000000            # all targets, round robin
    PYTHONPATH=. python benchmarks/fuzz.py --inputs 50000 --targets manifest,config --seed 7
    PYTHONPATH=. python benchmarks/fuzz.py --seconds 600              # as many inputs as fit

Inputs come from tests/fuzz/harness.py (structure-aware mutations of the repository template's documents and
the built-in policies, raw bytes, quantity-like strings); the property is the harness's: a finding naming file
and line, never a traceback, never more than MAX_SECONDS per input; the address space is capped at MAX_MB
above the start, so a memory blow-up shows as a MemoryError traceback. Prints inputs, seconds, tracebacks
(and other property failures, each with its input), the slowest input and the peak resident memory.
Exit status 1 when any input broke the property.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz import harness  # the harness lives with the tests that run it bounded


def _cap_memory(extra_mb: int) -> None:
    size_pages = int(Path("/proc/self/statm").read_text(encoding="ascii").split()[0])
    limit = size_pages * resource.getpagesize() + extra_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=10_000, help="inputs to run (default 10000)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds instead")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--targets", default=",".join(harness.TARGETS),
                        help=f"comma-separated, from {', '.join(harness.TARGETS)}")
    parser.add_argument("--show", type=int, default=5, help="failures to print in full")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    pool = harness.seeds()
    rnd = random.Random(args.seed)
    # Warm up (imports, compiled built-in policies) before the cap and the clock.
    for target in targets:
        harness.run_one(target, harness.generate(target, random.Random(0), pool))
    _cap_memory(harness.MAX_MB)
    started = time.perf_counter()
    counts = dict.fromkeys(targets, 0)
    per_target_seconds = dict.fromkeys(targets, 0.0)
    failures: list[tuple[str, bytes, str]] = []
    slowest = (0.0, "", b"")
    done = 0
    limit = args.inputs if args.seconds is None else sys.maxsize
    while done < limit:
        if args.seconds is not None and time.perf_counter() - started > args.seconds:
            break
        target = targets[done % len(targets)]
        data = harness.generate(target, rnd, pool)
        seconds, problem = harness.run_one(target, data)
        counts[target] += 1
        per_target_seconds[target] += seconds
        if seconds > slowest[0]:
            slowest = (seconds, target, data)
        if problem is not None:
            failures.append((target, data, problem))
        done += 1
        if done % 50_000 == 0:
            print(f"... {done:,} inputs, {time.perf_counter() - started:.0f} s, {len(failures)} failures",
                  flush=True)
    elapsed = time.perf_counter() - started
    tracebacks = sum(1 for _, _, p in failures if p.startswith("traceback"))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"inputs: {done:,}  seconds: {elapsed:.1f}  tracebacks: {tracebacks}  "
          f"other property failures: {len(failures) - tracebacks}  peak RSS: {peak_mb:.0f} MB")
    for target in targets:
        n = counts[target]
        mean_ms = 1000 * per_target_seconds[target] / n if n else 0.0
        print(f"  {target:9} {n:>10,} inputs  {mean_ms:7.3f} ms mean")
    print(f"slowest input: {slowest[0] * 1000:.1f} ms ({slowest[1]}): {slowest[2][:200]!r}")
    for target, data, problem in failures[: args.show]:
        print(f"--- {target}: {data[:500]!r}\n{problem}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
