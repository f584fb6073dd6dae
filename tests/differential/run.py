"""On-demand differential run: thousands of random scenarios through Kueue and gitopsq (scripts/differential).

    scripts/differential --cases 5000 --seed 7 [--out DIR] [--stop-after K] [--no-messages]
    scripts/differential --scenario FILE.yaml [--scenario …]     # Kueue's events and the differences, per file

Prints one line per divergent case and a summary (cases, divergences, seconds per case). Each divergent case
is written to ``DIR/random-<seed>.yaml`` with Kueue's outcome as `expect`, ready to be checked and copied to
tests/scenarios/divergences/. Exit code: 0 no divergence, 1 divergences, 3 the oracle failed.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests")]

from differential.compare import (  # noqa: E402
    differences,
    kueue_3710_trees,
    other_scan_phase,
    preemption_cycle_trees,
    simulate,
)
from differential.divergence import divergence_scenario, write  # noqa: E402
from differential.eviction_timing import other_eviction_timing  # noqa: E402
from differential.generator import generate  # noqa: E402
from differential.oracle import KueueOracle, OracleError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/differential", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=int(time.strftime("%Y%m%d")) * 10_000)
    parser.add_argument("--out", type=Path, default=None, help="where divergent scenarios are written")
    parser.add_argument("--stop-after", type=int, default=0, help="stop after this many divergent cases")
    parser.add_argument("--no-messages", action="store_true", help="ignore pending messages (reasons only)")
    parser.add_argument("--scenario", type=Path, action="append", default=[],
                        help="replay this scenario file on Kueue and print its events and the differences")
    parser.add_argument("--recheck", type=Path, default=None,
                        help="compare the current engine with Kueue outcomes saved by earlier runs in this directory")
    args = parser.parse_args(argv)
    if args.recheck:
        return recheck(args.recheck, messages=not args.no_messages)
    if args.scenario:
        return explain(args.scenario, messages=not args.no_messages, out=args.out)
    out = args.out or Path(tempfile.gettempdir()) / "gitopsq-differential" / str(args.seed)
    work = Path(tempfile.mkdtemp(prefix="gitopsq-differential-"))
    started = time.monotonic()
    oracle = KueueOracle.start(work)
    ready = time.monotonic()
    divergent: list[int] = []
    failures = 0
    ambiguous: list[int] = []
    amounts: list[int] = []
    scan_reset: list[int] = []
    eviction_timing: list[int] = []
    exempted: list[int] = []
    fields: Counter[str] = Counter()
    try:
        for i in range(args.cases):
            seed = args.seed + i
            scenario = generate(seed)
            try:
                kueue = oracle.run(scenario)
            except OracleError as err:
                print(f"seed {seed}: oracle failed: {err}", flush=True)
                failures += 1
                if failures > max(3, args.cases // 20):
                    return 3
                continue
            try:
                ours = simulate(scenario)
            except Exception as err:  # a crash of the engine is a divergence too
                ours = {"events": [], "final": {"workloads": {}}}
                fields["crash"] += 1
                print(f"seed {seed}: gitopsq simulate crashed: {err!r}"[:400], flush=True)
            diff = functools.partial(_diff, ours=ours, scenario=scenario, messages=not args.no_messages)
            if kueue_3710_trees(kueue, scenario) or preemption_cycle_trees(kueue, scenario):
                exempted.append(seed)  # a tree not compared: Kueue #3710 or a Kueue preemption cycle
            if other_scan_phase(kueue, scenario, diff(kueue), messages=not args.no_messages):
                scan_reset.append(seed)  # Kueue's race on an alternating flavor scan, counted apart
                print(f"seed {seed}: as Kueue with the other phase of an alternating flavor scan (a Kueue race)",
                      flush=True)
                continue
            if timing := other_eviction_timing(kueue, scenario, diff(kueue), messages=not args.no_messages):
                eviction_timing.append(seed)  # when the rig completed Kueue's evictions decided it, counted apart
                print(f"seed {seed}: as Kueue with {timing} (eviction timing)", flush=True)
                continue

            if not diff(kueue):
                continue
            runs = [kueue]
            for _ in range(2):  # an outcome Kueue does not repeat is timing, not a divergence (test_against_kueue)
                try:
                    runs.append(oracle.run(scenario))
                except OracleError:
                    break
                if not diff(runs[-1]):
                    break
            if not diff(runs[-1]):
                ambiguous.append(seed)
                print(f"seed {seed}: matches Kueue run {len(runs)} of {len(runs)} (Kueue settled it more than one way)",
                      flush=True)
                continue
            if not any(not diff(r, counts=False) for r in runs):
                divergent.append(seed)
            else:
                amounts.append(seed)
            diffs = diff(kueue)
            fields.update(d.field for d in diffs)
            path = write(out / f"random-{seed}.yaml", divergence_scenario(scenario, kueue, diffs))
            # Kueue's full outcome beside it, so engine changes can be rechecked without Kueue (--recheck).
            (out / f"random-{seed}.kueue.json").write_text(json.dumps({"scenario": scenario, "kueue": kueue}),
                                                           encoding="utf-8")
            kind = "difference(s)" if seed in divergent else "difference(s) in 'N more needed' amounts only"
            print(f"seed {seed}: {len(diffs)} {kind} -> {path}\n  " + "\n  ".join(map(str, diffs)), flush=True)
            if args.stop_after and len(divergent) >= args.stop_after:
                break
            if (i + 1) % 25 == 0:
                print(f"... {i + 1} cases, {len(divergent)} divergent", flush=True)
    finally:
        oracle.close()
    done = i + 1
    elapsed = time.monotonic() - ready
    print(f"compared {done} random scenarios (seeds {args.seed}..{args.seed + done - 1}): "
          f"{len(divergent)} divergent, {len(amounts)} differing in amounts only, {len(scan_reset)} as Kueue with the "
          f"other phase of an alternating flavor scan, {len(eviction_timing)} as Kueue with another eviction timing, "
          f"{len(ambiguous)} settled more than one way by Kueue, "
          f"{len(exempted)} with a tree not "
          f"compared (Kueue #3710 or a preemption cycle), {failures} oracle failures; "
          f"fields {dict(fields)}; "
          f"rig+build {ready - started:.1f}s, "
          f"{elapsed:.0f}s comparing ({elapsed / max(done, 1):.2f}s per case)")
    return 1 if divergent else 0


def _diff(kueue: dict[str, Any], *, ours: dict[str, Any], scenario: dict[str, Any], messages: bool,
          counts: bool = True) -> list[Any]:
    return differences(kueue, ours, messages=messages, scenario=scenario, counts=counts)


def recheck(directory: Path, *, messages: bool) -> int:
    """Saved Kueue outcomes (``*.kueue.json``) against the engine as it is now: which still differ."""
    still = amounts = 0
    saved = sorted(directory.glob("*.kueue.json"))
    for path in saved:
        data = json.loads(path.read_text(encoding="utf-8"))
        ours = simulate(data["scenario"])
        diffs = differences(data["kueue"], ours, messages=messages, scenario=data["scenario"])
        if not diffs:
            continue
        if other_scan_phase(data["kueue"], data["scenario"], diffs, messages=messages):
            print(f"{path.name}: as Kueue with the other phase of an alternating flavor scan (a Kueue race)",
                  flush=True)
            continue
        if timing := other_eviction_timing(data["kueue"], data["scenario"], diffs, messages=messages):
            print(f"{path.name}: as Kueue with {timing} (eviction timing)", flush=True)
            continue
        if differences(data["kueue"], ours, messages=messages, scenario=data["scenario"], counts=False):
            still += 1
            print(f"{path.name}: {len(diffs)} difference(s)\n  " + "\n  ".join(map(str, diffs)), flush=True)
        else:
            amounts += 1
            print(f"{path.name}: 'N more needed' amounts only", flush=True)
    print(f"rechecked {len(saved)} saved Kueue outcomes: {still} still differ, {amounts} in amounts only")
    return 1 if still else 0


def explain(paths: list[Path], *, messages: bool, out: Path | None = None) -> int:
    """Each scenario file on Kueue: its events as Kueue produced them, then every difference from gitopsq."""
    import yaml

    oracle = KueueOracle.start(Path(tempfile.mkdtemp(prefix="gitopsq-differential-")))
    differing = 0
    try:
        for path in paths:
            scenario = yaml.safe_load(path.read_text(encoding="utf-8"))
            kueue, ours = oracle.run(scenario), simulate(scenario)
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
                (out / f"{path.stem}.kueue.json").write_text(json.dumps({"scenario": scenario, "kueue": kueue}),
                                                             encoding="utf-8")
            print(f"== {path}")
            for e in kueue.get("events", []):
                where = f" {e.get('clusterQueue', '')} {e.get('flavors', '')}" if e.get("clusterQueue") else ""
                print(f"  kueue {e['time']:>7.1f} {e['workload']} {e['type']}{where} {e.get('reason', '')}")
            for key, w in sorted(kueue["final"]["workloads"].items()):
                if w["state"] == "Pending":
                    seen = f" (alternating: {w['messagesSeen']})" if w.get("messagesSeen") else ""
                    print(f"  kueue final {key} {w.get('reason', '')}: {w.get('message', '')}{seen}")
            diffs = differences(kueue, ours, messages=messages, scenario=scenario)
            differing += bool(diffs)
            print("  " + ("\n  ".join(map(str, diffs)) if diffs else "no differences"), flush=True)
    finally:
        oracle.close()
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
