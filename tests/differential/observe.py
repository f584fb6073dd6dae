"""Reading upstream Kueue's decisions back from the API: conditions → states, events and the contract's `final`.

A Workload is polled, not watched: a scenario has a handful of them, and a poll every 50 ms both catches every
change the driver must react to (an eviction it has to complete) and gives each change the simulated instant
being settled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes.utils import parse_quantity

# Pending reasons/messages that Kueue replaces by itself within a cycle or two (not a settled answer).
TRANSIENT_REASONS = frozenset({"WaitingForPreemptedWorkloads", "Pending"})
TRANSIENT_MESSAGES = ("Workload no longer fits after processing another workload",
                      "Workload has overlapping preemption targets with another workload")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            found: dict[str, Any] = c
            return found
    return None


def is_true(obj: dict[str, Any], kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


def key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def state(obj: dict[str, Any]) -> str:
    """Admitted | QuotaReserved | Pending | Finished, as `gitopsq simulate` names them."""
    if is_true(obj, "Finished"):
        return "Finished"
    if is_true(obj, "QuotaReserved"):
        return "Admitted" if is_true(obj, "Admitted") else "QuotaReserved"
    return "Pending"


def flavors(obj: dict[str, Any]) -> dict[str, dict[str, str]]:
    admission = (obj.get("status") or {}).get("admission") or {}
    return {ps["name"]: dict(sorted((ps.get("flavors") or {}).items()))
            for ps in admission.get("podSetAssignments") or []}


def cluster_queue(obj: dict[str, Any]) -> str:
    return str(((obj.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def needs_eviction_completed(obj: dict[str, Any]) -> bool:
    """Kueue marked it Evicted and still counts its quota: the job controller's turn to stop it."""
    return is_true(obj, "Evicted") and is_true(obj, "QuotaReserved") and not is_true(obj, "Finished")


def settled_pending(obj: dict[str, Any]) -> bool:
    """A pending workload whose QuotaReserved=False condition is a reason Kueue keeps, not a passing one."""
    c = condition(obj, "QuotaReserved")
    if c is None or c.get("status") != "False":
        return False
    return c.get("reason") not in TRANSIENT_REASONS and not str(c.get("message", "")).startswith(TRANSIENT_MESSAGES)


def normal_message(message: str) -> str:
    """Kueue joins per-pod-set reasons with "; " in map order, which varies from cycle to cycle: sort them."""
    return "; ".join(sorted(message.split("; ")))


def signature(obj: dict[str, Any]) -> tuple[Any, ...]:
    """What a Workload's status says, apart from why it is pending: a StrictFIFO head that Kueue retries every
    cycle can alternate reasons and messages for ever (flavor scan progress resumes at another flavor)."""
    return (state(obj), cluster_queue(obj), tuple(sorted((k, tuple(v.items())) for k, v in flavors(obj).items())),
            condition(obj, "QuotaReserved") is not None, is_true(obj, "Evicted"), is_true(obj, "Preempted"))


def message(obj: dict[str, Any]) -> str:
    """The pending reason and message, as one string (empty when not pending)."""
    c = condition(obj, "QuotaReserved") or {}
    if c.get("status") != "False":
        return ""
    return f"{c.get('reason', '')}: {normal_message(str(c.get('message', '')))}"


def alternating(runs: list[str]) -> set[str]:
    """The values Kueue keeps cycling through, given the sequence of distinct consecutive values it showed
    (empty when it settled on one: a value that came back after another is the sign of a cycle)."""
    for i, value in enumerate(runs):
        if value in runs[i + 1:]:
            return set(runs[i:])
    return set()


def final_workload(obj: dict[str, Any], messages_seen: set[str] | None = None) -> dict[str, Any]:
    """The contract's `final` entry; ``messagesSeen`` lists "reason: message" pairs when Kueue kept changing
    them while nothing else changed."""
    s = state(obj)
    out: dict[str, Any] = {"state": s}
    if s in ("Admitted", "QuotaReserved"):
        out["clusterQueue"] = cluster_queue(obj)
        out["flavors"] = flavors(obj)
    elif s == "Pending":
        c = condition(obj, "QuotaReserved")
        if c is not None and c.get("status") == "False":
            out["reason"] = c.get("reason", "")
            out["message"] = c.get("message", "")
            if messages_seen and len(messages_seen) > 1:
                out["messagesSeen"] = sorted(messages_seen)
    return out


def _amount(value: str) -> str:
    q = parse_quantity(value)
    return str(int(q)) if q == q.to_integral_value() else f"{int(q * 1000)}m"


def final_cluster_queue(cq: dict[str, Any]) -> dict[str, Any]:
    status = cq.get("status") or {}
    usage: dict[str, dict[str, str]] = {}
    for fl in status.get("flavorsReservation") or []:
        for r in fl.get("resources") or []:
            if parse_quantity(r.get("total", "0")) != 0:
                usage.setdefault(fl["name"], {})[r["name"]] = _amount(r["total"])
    return {"usage": usage, "pending": int(status.get("pendingWorkloads") or 0),
            "admitted": int(status.get("admittedWorkloads") or 0)}


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    workload: str
    type: str
    cluster_queue: str = ""
    flavors: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    reason: str = ""
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"time": float(self.time), "workload": self.workload, "type": self.type}
        if self.cluster_queue:
            out["clusterQueue"] = self.cluster_queue
        if self.flavors:
            out["flavors"] = {ps: dict(per) for ps, per in self.flavors}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        return out


def frozen_flavors(obj: dict[str, Any]) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    return tuple((ps, tuple(per.items())) for ps, per in sorted(flavors(obj).items()))


def transitions(before: dict[str, Any] | None, after: dict[str, Any], now: float) -> list[Event]:
    """The contract's events implied by one workload changing from ``before`` to ``after``."""
    k, events = key(after), []
    was = state(before) if before is not None else "Pending"
    is_ = state(after)
    if is_ != was and is_ in ("QuotaReserved", "Admitted") and was == "Pending":
        events.append(Event(now, k, "QuotaReserved", cluster_queue(after), frozen_flavors(after)))
    if is_ == "Admitted" and was != "Admitted":
        events.append(Event(now, k, "Admitted", cluster_queue(after), frozen_flavors(after)))
    if is_ == "Finished" and was != "Finished":
        events.append(Event(now, k, "Finished", cluster_queue(after)))
    return events


def summary(events: list[Event], queues: dict[str, Any]) -> dict[str, Any]:
    return {
        "admitted": sum(1 for e in events if e.type == "Admitted"),
        "preempted": sum(1 for e in events if e.type == "Preempted"),
        "finished": sum(1 for e in events if e.type == "Finished"),
        "meanWaitSeconds": dict.fromkeys(sorted(queues), 0.0),
        "utilisation": dict.fromkeys(sorted(queues), 0.0),
    }
