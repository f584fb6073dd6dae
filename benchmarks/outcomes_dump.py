"""Every outcome of the admission engine on a fixed input set, for proving that a speed-up changed none.

Writes one line per case (name, sha256 and length of its output) to OUT and every output in full to OUT.full:
`gitopsq simulate --output json` of each scenario under INPUTS/tests/scenarios (an invalid one: its error),
of the differential generator's seeds (INPUTS/tests/differential/generator.py), and the events and final views
of admission_bench's two instants. The engine is whichever ``gitopsq`` is on PYTHONPATH; the inputs always come
from INPUTS, so two engines compare on the same cases:

    PYTHONPATH=/old/checkout .venv/bin/python benchmarks/outcomes_dump.py /old/checkout old.txt
    PYTHONPATH=/new/checkout .venv/bin/python benchmarks/outcomes_dump.py /old/checkout new.txt
    cmp old.txt.full new.txt.full
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

from gitopsq.admission.engine import Engine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("inputs", help="checkout whose tests/ and benchmarks/ provide the cases")
    parser.add_argument("out")
    parser.add_argument("--seeds", type=int, default=2000, help="generator seeds 0..N-1")
    args = parser.parse_args()
    sys.path[:0] = [f"{args.inputs}/tests", f"{args.inputs}/benchmarks"]
    import admission_bench
    import yaml
    from differential.generator import generate

    from gitopsq.errors import GitopsqError
    from gitopsq.simulate.replay import simulate
    from gitopsq.simulate.result import to_json
    from gitopsq.simulate.scenario import parse_scenario

    counts = {"scenarios": 0, "invalid scenarios": 0, "seeds": 0, "benchmark instants": 0}
    out = Path(args.out)
    with out.open("w", encoding="utf-8") as digest, Path(f"{out}.full").open("w", encoding="utf-8") as full:

        def emit(name: str, text: str) -> None:
            digest.write(f"{name}\t{hashlib.sha256(text.encode()).hexdigest()}\t{len(text)}\n")
            full.write(f"== {name}\n{text}\n")

        inputs = Path(args.inputs)
        for path in sorted(str(p) for p in (inputs / "tests" / "scenarios").rglob("*.yaml")):
            text = Path(path).read_text(encoding="utf-8")
            try:
                result = to_json(simulate(parse_scenario(text, path)))
            except GitopsqError as exc:
                result = f"error: {type(exc).__name__}: {exc}"
                counts["invalid scenarios"] += 1
            emit(str(Path(path).relative_to(inputs)), result)
            counts["scenarios"] += 1
        for seed in range(args.seeds):
            scenario = yaml.safe_dump(generate(seed))
            emit(f"seed-{seed}", to_json(simulate(parse_scenario(scenario, f"random-{seed}.yaml"))))
            counts["seeds"] += 1
        _benchmark(admission_bench.build, emit)
        counts["benchmark instants"] = 2
    print(counts)
    import gitopsq.admission

    print(f"admission engine: {gitopsq.admission.ENGINE}")


def _benchmark(build: Callable[[random.Random], Engine], emit: Callable[[str, str], None]) -> None:
    """admission_bench's run: instant 0, half the running finish, instant 1; events and views after each."""
    rng = random.Random(4)
    engine = build(rng)

    def dump() -> str:
        events = [[e.time, e.workload, e.type, e.cluster_queue, [[p, dict(f)] for p, f in e.flavors], e.reason,
                   e.message] for e in engine.take_events()]
        views = {k: [v.state, v.cluster_queue, [[p, dict(f)] for p, f in v.flavors], v.reason, v.message]
                 for k in sorted(engine.state.workloads) for v in [engine.view(k)]}
        return json.dumps({"events": events, "views": views, "unsettled": engine.state.unsettled})

    engine.schedule(0.0)
    emit("bench-instant-0", dump())
    running = sorted(k for k, w in engine.state.workloads.items() if w.assignment is not None)
    for key in rng.sample(running, len(running) // 2):
        engine.finish(key, 1.0)
    engine.schedule(1.0)
    emit("bench-instant-1", dump())


if __name__ == "__main__":
    main()
