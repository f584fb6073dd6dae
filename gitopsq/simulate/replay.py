"""Trace replay on a simulated clock over the admission engine (shared/interfaces.md §4).

The clock jumps from instant to instant. At each instant, in this order: workloads finish (quota released at
admitted time + runtime), admission checks answer, new workloads are submitted (equal ``submitAt`` keep list
order), and then the engine settles the instant (admissions, preemptions — completed at once — and reasons).
Events at the horizon are still processed; nothing after it is. Without a horizon the run ends when no more
instant is scheduled. Everything is deterministic: the same scenario gives the same bytes.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from gitopsq.admission.engine import FINISHED, Engine
from gitopsq.admission.quota import FlavorResource
from gitopsq.admission.state import Event
from gitopsq.admission.topology import build_topology
from gitopsq.simulate.result import QueueFinal, Result, WorkloadFinal
from gitopsq.simulate.scenario import CheckPlan, Scenario, TraceWorkload

FINISH, CHECK, SUBMIT = 0, 1, 2  # order of work within one instant


@dataclass(slots=True)
class _Run:
    """Per-workload bookkeeping of the replay: generation (to drop stale timers) and when it was queued."""

    trace: TraceWorkload
    generation: int = 0
    queued_at: float = 0.0
    retried: bool = False


class Simulation:
    def __init__(self, scenario: Scenario, *, memoize: bool = True) -> None:
        self.scenario = scenario
        self.engine = Engine(build_topology(scenario.objects, scenario.settings), memoize=memoize)
        self.runs: dict[str, _Run] = {}
        self.timers: list[tuple[float, int, int, str, int, str]] = []  # time, kind, seq, key, generation, check
        self._seq = 0
        self.events: list[Event] = []
        self.waits: dict[str, list[float]] = {name: [] for name in self.engine.topology.queues}
        self.integral: dict[str, dict[FlavorResource, float]] = {name: {} for name in self.engine.topology.queues}
        self.timeline: list[tuple[float, dict[str, dict[FlavorResource, int]]]] = []
        self._last_usage: dict[str, dict[FlavorResource, int]] = {}
        self._last_time = 0.0

    def _timer(self, time: float, kind: int, key: str, generation: int = 0, check: str = "") -> None:
        self._seq += 1
        heapq.heappush(self.timers, (time, kind, self._seq, key, generation, check))

    def _plan(self, run: _Run, check: str) -> CheckPlan:
        plan = run.trace.checks.get(check) or self.scenario.check_defaults.get(check) or CheckPlan("Ready")
        if plan.state == "Retry" and run.retried:
            return CheckPlan("Ready", plan.after)
        return plan

    def _observe(self, events: list[Event]) -> None:
        """Turn engine events into timers (checks, finishes) and wait statistics."""
        for e in events:
            run = self.runs[e.workload]
            if e.type == "QuotaReserved":
                self.waits[e.cluster_queue].append(e.time - run.queued_at)
                run.generation += 1
                w = self.engine.state.workloads[e.workload]
                for check in sorted(w.checks):
                    plan = self._plan(run, check)
                    self._timer(e.time + plan.after, CHECK, e.workload, run.generation, check)
            elif e.type == "Admitted" and run.trace.runtime is not None:
                self._timer(e.time + run.trace.runtime, FINISH, e.workload, run.generation)
            elif e.type == "Requeued":
                run.generation += 1
                run.queued_at = e.time
        self.events.extend(events)

    def _account(self, now: float) -> None:
        """Integrate usage up to ``now`` and record the new usage when it changed."""
        span = now - self._last_time
        if span > 0:
            for cq, usage in self._last_usage.items():
                acc = self.integral[cq]
                for fr, val in usage.items():
                    acc[fr] = acc.get(fr, 0.0) + val * span
        self._last_time = now

    def _snapshot(self, now: float) -> None:
        tree = self.engine.state.tree
        current = {cq: {fr: v for fr, v in tree.queues[cq].usage.items() if v} for cq in self.integral}
        if current != self._last_usage:
            self.timeline.append((now, current))
            self._last_usage = current

    def run(self) -> Result:
        sc, engine = self.scenario, self.engine
        initial = []
        for t in sc.workloads:
            self.runs[t.key] = _Run(t, queued_at=t.submit_at)
            if t.admitted is not None:
                engine.submit(key=t.key, namespace=t.namespace, queue=t.queue,
                              priority=engine.priority_of(t.priority, t.priority_class), created=t.submit_at,
                              pod_sets=t.pod_sets)
                engine.restore(t.key, cluster_queue=t.admitted.cluster_queue, flavors=t.admitted.flavors,
                               at=t.admitted.at)
                initial.append(t)
            else:
                self._timer(t.submit_at, SUBMIT, t.key)
        for t in initial:
            if t.runtime is not None:
                self._timer(t.admitted.at + t.runtime if t.admitted else 0.0, FINISH, t.key, 0)
        start = min([0.0, *(t[0] for t in self.timers)])
        self._last_time = start
        self._snapshot(start)
        horizon = sc.horizon
        end = start
        first = True
        while self.timers or first:
            now = self.timers[0][0] if self.timers else start
            if horizon is not None and now > horizon:
                break
            first = False
            self._account(now)
            while self.timers and self.timers[0][0] == now:
                _, kind, _, key, generation, check = heapq.heappop(self.timers)
                if self._fire(kind, key, generation, check, now) and self.timers and self.timers[0][0] == now:
                    # Kueue sees each finish as its own event and runs a cycle before the instant's next one.
                    engine.step(now)
                    self._observe(engine.take_events())
            engine.schedule(now)
            self._observe(engine.take_events())
            self._snapshot(now)
            end = now
        if horizon is not None:
            end = max(end, horizon)
        self._account(end)
        return self._result(end, start)

    def _fire(self, kind: int, key: str, generation: int, check: str, now: float) -> bool:
        """Apply one timer; True when a workload finished."""
        engine, run = self.engine, self.runs[key]
        finished = False
        if kind == SUBMIT:
            t = run.trace
            engine.submit(key=key, namespace=t.namespace, queue=t.queue, created=t.submit_at,
                          priority=engine.priority_of(t.priority, t.priority_class), pod_sets=t.pod_sets)
        elif generation != run.generation:
            return False  # the workload was evicted since this timer was set
        elif kind == FINISH:
            engine.finish(key, now)
            finished = True
        else:
            plan = self._plan(run, check)
            if plan.state == "Retry":
                run.retried = True
            engine.set_check(key, check, plan.state, now)
        self._observe(engine.take_events())
        return finished

    def _result(self, end: float, start: float) -> Result:
        engine = self.engine
        topo = engine.topology
        workloads = {}
        for key, run in self.runs.items():
            if key not in engine.state.workloads:
                workloads[key] = WorkloadFinal("Pending", reason="NotYetSubmitted",
                                               message=f"submitted at t={run.trace.submit_at:g}s, after the horizon")
                continue
            v = engine.view(key)
            workloads[key] = WorkloadFinal(v.state, v.cluster_queue if v.state != FINISHED else "", v.flavors,
                                           v.reason, v.message)
        queues = {}
        utilisation = {}
        duration = end - start
        for name, spec in topo.queues.items():
            pending, admitted = engine.counts(name)
            queues[name] = QueueFinal(dict(engine.usage(name)), pending, admitted)
            shares = [self.integral[name].get(fr, 0.0) / (lim.nominal * duration)
                      for fr, lim in sorted(spec.limits.items()) if lim.nominal > 0 and duration > 0]
            utilisation[name] = sum(shares) / len(shares) if shares else 0.0
        return Result(scenario=self.scenario.name, events=tuple(self.events), workloads=workloads, queues=queues,
                      waits={k: tuple(v) for k, v in self.waits.items()}, utilisation=utilisation, end=end,
                      timeline=tuple(self.timeline))


def simulate(scenario: Scenario, *, memoize: bool = True) -> Result:
    """Replay ``scenario`` and return its `Result` (``memoize``: the engine's option, `Engine`)."""
    return Simulation(scenario, memoize=memoize).run()


def _describe(w: WorkloadFinal | None) -> str:
    if w is None:
        return "not in the scenario"
    where = f" in {w.cluster_queue}" if w.cluster_queue else ""
    why = f" ({w.reason}: {w.message})" if w.reason else ""
    return f"{w.state}{where}{why}"


def _flavors_match(expected: object, actual: dict[str, dict[str, str]]) -> bool:
    if not isinstance(expected, dict):
        return False
    for ps, per_res in expected.items():
        if not isinstance(per_res, dict) or any(actual.get(str(ps), {}).get(str(r)) != f
                                                for r, f in per_res.items()):
            return False
    return True


def failed_expectations(scenario: Scenario, result: Result) -> list[str]:
    """Every ``expect`` entry the result contradicts, as ``file:line: what was expected, what happened``."""
    failures = []
    states = {"admitted": "Admitted", "quotaReserved": "QuotaReserved", "pending": "Pending", "finished": "Finished"}
    for exp in scenario.expectations:
        where = f"{scenario.file}:{exp.line}" if exp.line else scenario.file
        actual = result.workloads.get(exp.workload)
        problem = ""
        if exp.kind == "preempted":
            reasons = [e.reason for e in result.events if e.workload == exp.workload and e.type == "Preempted"]
            wanted = exp.fields.get("reason")
            if not reasons or (wanted is not None and wanted not in reasons):
                problem = (f"expected {exp.workload} to be preempted" + (f" with reason {wanted}" if wanted else "")
                           + (f", but its preemption reasons were {', '.join(reasons)}" if reasons
                              else ", but it was never preempted"))
        elif actual is None or actual.state != states[exp.kind]:
            problem = f"expected {exp.workload} to be {states[exp.kind]}, but it is {_describe(actual)}"
        else:
            flavors = {ps: dict(per) for ps, per in actual.flavors}
            for name, value in exp.fields.items():
                got: object = {"clusterQueue": actual.cluster_queue, "reason": actual.reason,
                               "message": actual.message}.get(name, flavors)
                ok = _flavors_match(value, flavors) if name == "flavors" else got == value
                if not ok:
                    problem = f"expected {exp.workload} {name} {value!r}, but it is {_describe(actual)}"
                    break
        if problem:
            failures.append(f"{where}: {problem}")
    return failures
