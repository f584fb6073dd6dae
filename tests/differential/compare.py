"""Settled outcomes of one scenario, from the oracle's or the simulator's JSON, and what differs between them.

Compared per workload: the final state (Admitted / QuotaReserved / Pending / Finished), for a placed workload
its ClusterQueue and flavors, for a pending one its reason and message, and for every workload the set of
reasons it was preempted with (empty: never preempted). Event times, counts and utilisation are not compared:
Kueue's come from a real clock. Messages are compared with their "; "-joined pod set parts sorted: Kueue lists
pod sets in map order, which varies between cycles; and a message Kueue kept alternating while everything else
stood still (`messagesSeen`, a StrictFIFO head under flavor scan progress) is not compared, nor its reason.

One deliberate difference is recognised (docs/admission.md, "Deliberate differences"): a workload waiting behind
a head Kueue pops again in every cycle has no `QuotaReserved` condition on Kueue (Kueue never evaluates it), while
gitopsq gives it a reason. Its reason and message are not compared when Kueue shows none and Kueue shows such a
head in the same ClusterQueue: on StrictFIFO, any other pending workload with a reason (the head it evaluated);
on BestEffortFIFO, another pending workload skipped after its nomination (`RETRIED_HEAD_MESSAGES`: Kueue requeues
it at once, so it is the head again next cycle; random 190069). Everything else about the workload (state,
queue, preemptions) is still compared.

With ``counts=False`` the amounts in "N more needed" are not compared: they are what was free when Kueue last
evaluated the workload, and when that was depends on timing (the same scenario on the same Kueue gives "1 more
needed" with debug logging on and "2 more needed" without: an admission in between). The bounded CI run
compares that way; the on-demand run and the fixed scenarios compare counts too.

A second one is a Kueue bug gitopsq does not copy (Kueue issue #3710): a BestEffortFIFO head whose flavor scans
keep stopping before their last flavor is requeued at once for ever, alternating between flavors, and blocks the
workloads behind it. gitopsq parks such a head after one pass over its flavors, so the queue moves on. When Kueue
shows such a head (a BestEffortFIFO workload whose reason kept alternating, at the end or within an instant
before it was admitted: the oracle's `alternatedAt`), nothing in that ClusterQueue's cohort tree is compared:
what follows there depends on the bug (`kueue_3710_trees`).

A third is a deliberate gitopsq difference: a workload is preempted at most once per instant, where Kueue can
cycle (A preempts B, B preempts A ...) until some race ends it. A tree where Kueue preempted one workload twice
at one instant is not compared (`preemption_cycle_trees`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Outcome:
    state: str
    cluster_queue: str
    flavors: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    reason: str
    message: str
    preempted: frozenset[str]
    message_unsettled: bool = False  # Kueue kept alternating reasons/messages: neither is compared
    queue: str = ""  # the ClusterQueue it is placed in or waits in ("" when it has none)
    alternated: bool = False  # its pending reason alternated within some instant, even if it settled later


@dataclass(frozen=True, slots=True)
class Difference:
    workload: str
    field: str
    kueue: Any
    gitopsq: Any

    def __str__(self) -> str:
        return f"{self.workload} {self.field}: Kueue {self.kueue!r}, gitopsq {self.gitopsq!r}"


def outcomes(result: dict[str, Any]) -> dict[str, Outcome]:
    preempted: dict[str, set[str]] = {}
    for e in result.get("events", []):
        if e["type"] == "Preempted":
            preempted.setdefault(e["workload"], set()).add(e.get("reason", ""))
    out = {}
    for k, w in result["final"]["workloads"].items():
        flavors = tuple((ps, tuple(sorted(per.items()))) for ps, per in sorted((w.get("flavors") or {}).items()))
        placed = w["state"] in ("Admitted", "QuotaReserved")
        out[k] = Outcome(w["state"], w.get("clusterQueue", "") if placed else "", flavors if placed else (),
                         w.get("reason", ""), "; ".join(sorted(w.get("message", "").split("; "))),
                         frozenset(preempted.get(k, ())), len(w.get("messagesSeen", ())) > 1,
                         w.get("clusterQueue", ""), bool(w.get("alternatedAt")))
    return out


_MORE_NEEDED = re.compile(r"\b[0-9]+(?:\.[0-9]+)?(?:[KMGTPE]i?|[kmunEPTGM])? more needed")


def mask_counts(message: str) -> str:
    """``message`` with every "<amount> more needed" made "N more needed"."""
    return _MORE_NEEDED.sub("N more needed", message)


def queues_by_strategy(scenario: dict[str, Any] | None, strategy: str) -> frozenset[str]:
    """The ClusterQueues of a scenario with queueing ``strategy`` (any supported API version; Kueue's default is
    BestEffortFIFO)."""
    if not scenario:
        return frozenset()
    return frozenset(o["metadata"]["name"] for o in scenario.get("objects", [])
                     if o.get("kind") == "ClusterQueue"
                     and (o.get("spec") or {}).get("queueingStrategy", "BestEffortFIFO") == strategy)


def strict_fifo_queues(scenario: dict[str, Any] | None) -> frozenset[str]:
    """The ClusterQueues of a scenario that queue StrictFIFO (any supported API version)."""
    return queues_by_strategy(scenario, "StrictFIFO")


# The messages of a head Kueue skipped after nominating it (scheduler.go `processEntry` → `markSkipped`): requeued
# with RequeueReasonFailedAfterNomination, which cluster_queue.go `RequeueIfNotPresent` puts straight back into a
# BestEffortFIFO heap, so the same head is popped again in every cycle and nothing behind it is (random 190069:
# job-0 skipped in each of 549 logged cycles, job-2 behind it never popped).
RETRIED_HEAD_MESSAGES = frozenset({"Workload no longer fits after processing another workload",
                                   "Workload has overlapping preemption targets with another workload"})


def _unevaluated_followers(want: dict[str, Outcome], got: dict[str, Outcome], strict: frozenset[str],
                           best_effort: frozenset[str]) -> set[str]:
    """Workloads Kueue left without a condition behind a head it pops every cycle, pending in gitopsq too: an
    evaluated StrictFIFO head, or a BestEffortFIFO head skipped after nomination (`RETRIED_HEAD_MESSAGES`).
    Kueue's JSON names no queue for a pending workload, so the queue is the one gitopsq has it waiting in (the
    LocalQueue fixes it)."""
    def queue(k: str) -> str:
        return got[k].queue if k in got and got[k].state == "Pending" else ""

    heads = {queue(k) for k, o in want.items() if o.state == "Pending" and o.reason and queue(k) in strict}
    heads |= {queue(k) for k, o in want.items()
              if o.state == "Pending" and o.message in RETRIED_HEAD_MESSAGES and queue(k) in best_effort}
    return {k for k, a in want.items()
            if a.state == "Pending" and not a.reason and not a.message and queue(k) in heads}


@dataclass(frozen=True, slots=True)
class _Layout:
    queue_of: dict[str, str]  # workload key -> ClusterQueue (through its LocalQueue)
    root_of: dict[str, str]  # ClusterQueue -> root of its cohort tree (itself without a cohort)
    best_effort: frozenset[str]


def _layout(scenario: dict[str, Any]) -> _Layout:
    objects = scenario.get("objects", [])
    parent = {o["metadata"]["name"]: (o.get("spec") or {}).get("parentName") or (o.get("spec") or {}).get("parent")
              for o in objects if o.get("kind") == "Cohort"}
    lqs = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): (o.get("spec") or {}).get("clusterQueue", "")
           for o in objects if o.get("kind") == "LocalQueue"}
    root_of, best_effort = {}, set()
    for o in objects:
        if o.get("kind") != "ClusterQueue":
            continue
        spec, name = o.get("spec") or {}, o["metadata"]["name"]
        node, seen = spec.get("cohortName") or spec.get("cohort"), set()
        while node and parent.get(node) and node not in seen:
            seen.add(node)
            node = parent[node]
        root_of[name] = f"cohort/{node}" if node else f"cq/{name}"
        if spec.get("queueingStrategy", "BestEffortFIFO") == "BestEffortFIFO":
            best_effort.add(name)
    queue_of = {}
    for w in scenario.get("workloads", []):
        ns = w.get("namespace", "default")
        queue_of[f"{ns}/{w['name']}"] = lqs.get((ns, w.get("queue", "")), "")
    return _Layout(queue_of, root_of, frozenset(best_effort))


def workload_trees(scenario: dict[str, Any]) -> dict[str, str]:
    """Workload key -> the root of its ClusterQueue's cohort tree (the unit `preemption_cycle_trees` skips)."""
    layout = _layout(scenario)
    return {k: layout.root_of.get(q, "") for k, q in layout.queue_of.items()}


def kueue_3710_trees(kueue: dict[str, Any], scenario: dict[str, Any] | None) -> set[str]:
    """Cohort trees in which Kueue shows a BestEffortFIFO head spinning over its flavors (issue #3710)."""
    if not scenario:
        return set()
    layout, want = _layout(scenario), outcomes(kueue)
    # A BestEffortFIFO workload whose reason kept alternating is being retried cycle after cycle: it is its
    # queue's head every cycle, so nothing behind it is evaluated again, whatever reason it last showed. One that
    # alternated at some instant and was admitted later spun until then (`alternatedAt`): its scans never started
    # over, so the flavors it got depend on where the spin stood when quota came free, and it took the quota before
    # the workloads Kueue had parked came back with the requeue batch (random 110056, 140866).
    spinning = {layout.queue_of.get(k, "") for k, o in want.items()
                if (o.state == "Pending" and o.message_unsettled) or o.alternated}
    return {layout.root_of[q] for q in spinning & layout.best_effort if q in layout.root_of}


def preemption_cycle_trees(kueue: dict[str, Any], scenario: dict[str, Any] | None) -> set[str]:
    """Cohort trees in which Kueue preempted one workload more than once at the same instant: a preemption cycle
    (A's admission preempts B, B's preempts A, ...). gitopsq's deliberate difference (docs/admission.md): a
    workload is preempted at most once per instant, so such a tree ends where Kueue's race happened to stop."""
    if not scenario:
        return set()
    layout = _layout(scenario)
    seen: dict[tuple[str, float], int] = {}
    for e in kueue.get("events", []):
        if e["type"] == "Preempted":
            key = (e["workload"], float(e["time"]))
            seen[key] = seen.get(key, 0) + 1
    return {layout.root_of[layout.queue_of[w]] for (w, _), n in seen.items()
            if n > 1 and layout.queue_of.get(w) in layout.root_of}


def differences(kueue: dict[str, Any], gitopsq: dict[str, Any], *, messages: bool = True,
                scenario: dict[str, Any] | None = None, counts: bool = True) -> list[Difference]:
    """Every field in which the simulator's settled outcome differs from Kueue's (with ``scenario``, modulo the
    deliberate differences described above)."""
    want, got = outcomes(kueue), outcomes(gitopsq)
    followers = _unevaluated_followers(want, got, strict_fifo_queues(scenario),
                                       queues_by_strategy(scenario, "BestEffortFIFO"))
    skipped_trees = kueue_3710_trees(kueue, scenario) | preemption_cycle_trees(kueue, scenario)
    layout = _layout(scenario) if skipped_trees and scenario else None
    diffs = []
    for k in sorted(set(want) | set(got)):
        if layout is not None and layout.root_of.get(layout.queue_of.get(k, "")) in skipped_trees:
            continue
        a, b = want.get(k), got.get(k)
        if a is None or b is None:
            diffs.append(Difference(k, "presence", a is not None, b is not None))
            continue
        compare_message = messages and not (a.message_unsettled or b.message_unsettled)
        fields = ["state", "cluster_queue", "flavors", "preempted"]
        if k in followers:
            compare_message = False
        elif not (a.message_unsettled or b.message_unsettled):
            fields.append("reason")
        if compare_message:
            fields.append("message")
        for name in fields:
            x, y = getattr(a, name), getattr(b, name)
            if name == "message" and not counts:
                x, y = mask_counts(x), mask_counts(y)
            if x != y:
                diffs.append(Difference(k, name, sorted(x) if isinstance(x, frozenset) else x,
                                        sorted(y) if isinstance(y, frozenset) else y))
    return diffs


SCAN_PROGRESS_RESET = {"FlavorFungibilityPreserveScanProgress": False}


def with_scan_progress_reset(scenario: dict[str, Any]) -> dict[str, Any]:
    """The scenario with Kueue's FlavorFungibilityPreserveScanProgress off: every attempt scans from the first
    flavor (used by `other_scan_phase`)."""
    settings = dict(scenario.get("settings") or {})
    settings["featureGates"] = {**(settings.get("featureGates") or {}), **SCAN_PROGRESS_RESET}
    return {**scenario, "settings": settings}


def other_scan_phase(kueue: dict[str, Any], scenario: dict[str, Any], diffs: list[Difference], *,
                     messages: bool = True, counts: bool = True) -> bool:
    """Whether Kueue's outcome is gitopsq's with the other phase of a flavor scan Kueue kept alternating.

    A head Kueue pops again every cycle (a StrictFIFO head, or any head with flavors left to try) while nothing
    changes alternates between scans: resumed after the flavor where the last one stopped, then from the first
    flavor again, and so on, one cycle every few milliseconds. When capacity is released later, the scan it
    happens to be in decides its flavors: a race (seen on random 120081: two runs one way, one the other).
    gitopsq's instant ends in one phase. So a Kueue outcome is accepted, counted apart, when the oracle saw a
    workload alternate (`alternatedAt`), every difference lies in that workload's cohort tree, and gitopsq
    reproduces it exactly in the other phase: with the scan restarted from the first flavor
    (`with_scan_progress_reset`), or with the alternation stopped one attempt later (`_one_scan_later`)."""
    alternated = [k for k, o in outcomes(kueue).items() if o.alternated]
    if not diffs or not alternated:
        return False
    tree_of = workload_trees(scenario)
    trees = {tree_of.get(k, "") for k in alternated}
    if any(tree_of.get(d.workload, "") not in trees for d in diffs):
        return False
    for other in (lambda: simulate(with_scan_progress_reset(scenario)), lambda: _one_scan_later(scenario)):
        if not differences(kueue, other(), messages=messages, scenario=scenario, counts=counts):
            return True
    return False


def _one_scan_later(scenario: dict[str, Any]) -> dict[str, Any]:
    """gitopsq's outcome with every alternating head stopped one attempt later than the engine stops it, i.e.
    in the other phase of a two-scan alternation (the engine's bound, cycle.scan_retries, raised by one)."""
    from gitopsq.admission import cycle

    bound = cycle.scan_retries
    cycle.scan_retries = lambda spec: bound(spec) + 1  # type: ignore[assignment]
    try:
        return simulate(scenario)
    finally:
        cycle.scan_retries = bound  # type: ignore[assignment]


def simulate(scenario: dict[str, Any]) -> dict[str, Any]:
    """`gitopsq simulate SCENARIO --output json` as a user runs it (exit 0 or 1 both print the object)."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(scenario, f, sort_keys=False)
        path = f.name
    try:
        from click.testing import CliRunner

        from gitopsq.cli import cli

        result = CliRunner().invoke(cli, ["simulate", path, "--output", "json"])
        if result.exit_code not in (0, 1) or not result.stdout.strip():
            raise AssertionError(f"gitopsq simulate failed ({result.exit_code}): {result.stdout}{result.stderr}")
        parsed: dict[str, Any] = json.loads(result.stdout)
        return parsed
    finally:
        Path(path).unlink(missing_ok=True)


def simulate_cli(path: Path) -> dict[str, Any]:
    """The same through a subprocess (for the on-demand script, which keeps the engine out of its process)."""
    done = subprocess.run([sys.executable, "-m", "gitopsq", "simulate", str(path), "--output", "json"],
                          capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode not in (0, 1) or not done.stdout.strip():
        raise AssertionError(f"gitopsq simulate failed ({done.returncode}): {done.stderr}")
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed
