"""The pure rules behind the live loop's Kueue lifecycle (no rig): partial admission counts, the batch/v1 stop
patches, deactivation and maximum execution time, and waitForPodsReady's conditions, timeouts and backoff."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from gitopsq.admission.workload import shape_of
from gitopsq.admission_loop.integrations.base import PodSetPlacement
from gitopsq.admission_loop.integrations.batch_job import STOPPING, BatchJob
from gitopsq.admission_loop.lifecycle import lifecycle, max_execution_seconds
from gitopsq.admission_loop.live_workload import read_workload
from gitopsq.admission_loop.options import RequeuingStrategy, WaitForPodsReady
from gitopsq.admission_loop.partial import admitted_counts, min_count, with_counts
from gitopsq.admission_loop.pods_ready import (
    RECOVERED,
    STARTED,
    WAIT_FOR_RECOVERY,
    WAIT_FOR_START,
    backoff_seconds,
    queue_view,
    timeouts,
    wanted_condition,
)
from gitopsq.admission_loop.workload_status import iso

T0 = 1_800_000_000.0


def _wl(*, count: int = 4, min_pods: int | None = None, admitted_at: float | None = None,
        spec: dict[str, Any] | None = None, conditions: list[dict[str, Any]] | None = None,
        status: dict[str, Any] | None = None) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "main", "count": count, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}}]}}}
    if min_pods is not None:
        pod_set["minCount"] = min_pods
    conds = list(conditions or [])
    body: dict[str, Any] = {"conditions": conds, **(status or {})}
    if admitted_at is not None:
        at = iso(admitted_at)
        conds += [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": at},
                  {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": at}]
        body["admission"] = {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "f", "nvidia.com/gpu": "f"}, "count": count}]}
    return {"metadata": {"name": "w", "namespace": "ns", "uid": str(uuid.uuid4()), "generation": 1,
                         "creationTimestamp": iso(T0 - 100)},
            "spec": {"queueName": "q", "podSets": [pod_set], **(spec or {})}, "status": body}


def _live(raw: dict[str, Any]) -> dict[str, Any]:
    w = read_workload(raw)
    assert w is not None
    return {w.key: w}


def test_admitted_counts_recovers_the_reduced_size_from_the_reserved_usage() -> None:
    """The engine's reservation of 2 of 4 pods (4 GPUs, 2 CPUs) reads back as count 2; the full size as None."""
    w = read_workload(_wl(count=4, min_pods=1))
    assert w is not None
    shape = shape_of(w.pod_sets)
    assert admitted_counts(shape, {("f", "cpu"): 2000, ("f", "nvidia.com/gpu"): 4000}) == {"main": 2}
    assert admitted_counts(shape, {("f", "cpu"): 4000, ("f", "nvidia.com/gpu"): 8000}) is None
    reduced = with_counts(w.pod_sets, {"main": 2})
    assert reduced[0].count == 2 and reduced is with_counts(w.pod_sets, {"main": 2}), "one tuple per size"
    assert with_counts(w.pod_sets, {"main": 4}) is w.pod_sets


def test_an_admitted_workload_counts_its_admitted_pods_not_its_full_size() -> None:
    """A Workload admitted at 2 of its 4 pods is read with 2 pods, so usage and later passes count 2."""
    raw = _wl(count=4, min_pods=1, admitted_at=T0)
    raw["status"]["admission"]["podSetAssignments"][0]["count"] = 2
    w = read_workload(raw)
    assert w is not None and w.pod_sets[0].count == 2


@pytest.mark.parametrize(("value", "count", "expected"), [
    ("1", 4, 1), ("3", 4, 3), ("4", 4, None), ("0", 4, None), ("x", 4, None), (None, 4, None)])
def test_min_parallelism_is_taken_only_when_kueue_would_accept_it(value: str | None, count: int,
                                                                   expected: int | None) -> None:
    """`job-min-parallelism` becomes minCount only for 0 < value < the pod count (Kueue's webhook range)."""
    assert min_count({} if value is None else {"kueue.x-k8s.io/job-min-parallelism": value}, count) == expected


def test_stop_patches_follow_kueues_order_and_wait_for_active_pods() -> None:
    """Suspending marks the Job as stopping; startTime is unset through status; the template (and a partial
    admission's parallelism) is restored, with the mark dropped, only once no pod is active."""
    job = BatchJob()
    original = [{"name": "main", "count": 4, "minCount": 1, "template": {"spec": {}}}]
    running: dict[str, Any] = {
        "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "1"}},
        "spec": {"suspend": False, "parallelism": 2, "completions": 4,
                 "template": {"spec": {"nodeSelector": {"pool": "spot"}, "tolerations": [{"key": "spot"}]}}},
        "status": {"startTime": "2026-01-01T00:00:00Z", "active": 2}}
    assert job.suspend_patch(running) == {"metadata": {"annotations": {STOPPING: "true"}}, "spec": {"suspend": True}}
    suspended = {**running, "metadata": {"annotations": {**running["metadata"]["annotations"], STOPPING: "true"}},
                 "spec": {**running["spec"], "suspend": True}}
    assert not job.is_suspended(suspended), "half-way through a stop is not suspended"
    assert job.start_time_patch(suspended) == {"status": {"startTime": None}}
    assert job.restore_patch(suspended, original) is None, "refused by the API server while pods are active"
    gone = {**suspended, "status": {"active": 0}}
    assert job.start_time_patch(gone) is None
    assert job.restore_patch(gone, original) == {
        "metadata": {"annotations": {STOPPING: None}},
        "spec": {"template": {"spec": {"nodeSelector": {"pool": None}, "tolerations": None}}, "parallelism": 4}}


def test_start_runs_only_the_admitted_pods_of_a_partial_admission() -> None:
    """A Job asking for partial admission starts with parallelism = the admitted count; others keep theirs."""
    job = BatchJob()
    spec = {"suspend": True, "parallelism": 4, "completions": 4, "template": {"spec": {}}}
    placement = (PodSetPlacement("main", 2, {"pool": "a"}, ()),)
    partial = {"metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "1"}}, "spec": spec}
    assert job.start_patch(partial, placement)["spec"]["parallelism"] == 2
    assert "parallelism" not in job.start_patch({"spec": spec}, (PodSetPlacement("main", 4, {}, ()),))["spec"]


@pytest.mark.parametrize(("status", "ready"), [
    ({"ready": 3, "succeeded": 1}, True), ({"ready": 3}, False),
    ({"ready": 2, "uncountedTerminatedPods": {"succeeded": ["a", "b"]}}, True)])
def test_job_pods_ready_counts_ready_and_succeeded_pods(status: dict[str, Any], ready: bool) -> None:
    """A 4-pod Job is ready when ready + succeeded (counted or not yet) pods reach 4."""
    assert BatchJob().pods_ready({"spec": {"parallelism": 4, "completions": 4}, "status": status}) is ready


def test_max_exec_label_and_deactivation_steps() -> None:
    """The label gives the maximum; past it the Workload is marked, and once inactive it is evicted with the
    cause; a user's own spec.active=false is evicted as Deactivated."""
    assert max_execution_seconds({"kueue.x-k8s.io/max-exec-time-seconds": "30"}) == 30
    assert max_execution_seconds({"kueue.x-k8s.io/max-exec-time-seconds": "-3"}) is None
    limited = _wl(admitted_at=T0, spec={"maximumExecutionTimeSeconds": 10},
                  status={"accumulatedPastExecutionTimeSeconds": 4})
    assert not lifecycle(_live(limited), T0 + 5.9).deactivate
    mark = lifecycle(_live(limited), T0 + 6).deactivate["ns/w"]
    assert (mark.reason, mark.event) == ("MaximumExecutionTimeExceeded", "The maximum execution time (10s) exceeded")
    marked = _wl(admitted_at=T0, spec={"active": False}, conditions=[
        {"type": "DeactivationTarget", "status": "True", "reason": "MaximumExecutionTimeExceeded"}])
    eviction = lifecycle(_live(marked), T0).evict["ns/w"]
    assert (eviction.reason, eviction.message) == ("DeactivatedDueToMaximumExecutionTimeExceeded",
                                                   "The workload is deactivated due to exceeding the maximum "
                                                   "execution time")
    user = lifecycle(_live(_wl(admitted_at=T0, spec={"active": False})), T0).evict["ns/w"]
    assert (user.reason, user.message) == ("Deactivated", "The workload is deactivated")


CONFIG = WaitForPodsReady(enable=True, timeout=30, recovery_timeout=10, requeuing_strategy=RequeuingStrategy(
    backoff_limit_count=2, backoff_base_seconds=60, backoff_max_seconds=200))


def test_pods_ready_condition_transitions() -> None:
    """WaitForStart until ready, Started when ready, WaitForRecovery when lost, Recovered when ready again."""
    assert wanted_condition(_wl(), False) == WAIT_FOR_START
    assert wanted_condition(_wl(), True) == STARTED
    started = _wl(conditions=[{"type": "PodsReady", "status": "True", "reason": "Started", "message": STARTED[2]}])
    assert wanted_condition(started, False) == WAIT_FOR_RECOVERY
    lost = _wl(conditions=[{"type": "PodsReady", "status": "False", "reason": "WaitForRecovery"}])
    assert wanted_condition(lost, True) == RECOVERED
    assert wanted_condition(lost, False) == WAIT_FOR_RECOVERY


def test_backoff_doubles_up_to_its_maximum() -> None:
    """The n-th requeue waits base·2^(n−1) seconds, capped at the maximum."""
    assert [backoff_seconds(n, CONFIG) for n in (1, 2, 3, 4)] == [60, 120, 200, 200]


def test_timeouts_evict_with_backoff_then_deactivate_past_the_limit() -> None:
    """Not ready 30 s after admission: evicted with count+1 and requeueAt; at the limit: deactivated instead;
    a ready or not-yet-late Workload is left alone, and nothing happens with the feature off."""
    waiting = _wl(admitted_at=T0, conditions=[{"type": "PodsReady", "status": "False", "reason": "WaitForStart"}])
    assert not timeouts(_live(waiting), T0 + 29, CONFIG).evict
    assert not timeouts(_live(waiting), T0 + 60, WaitForPodsReady()).evict
    eviction = timeouts(_live(waiting), T0 + 30, CONFIG).evict["ns/w"]
    assert (eviction.reason, eviction.message) == ("PodsReadyTimeout", "Exceeded the PodsReady timeout ns/w")
    assert eviction.requeue_state == {"count": 1, "requeueAt": iso(T0 + 90)}
    again = _wl(admitted_at=T0, status={"requeueState": {"count": 2}})
    late = timeouts(_live(again), T0 + 30, CONFIG)
    assert not late.evict and late.deactivate["ns/w"].reason == "RequeuingLimitExceeded"
    ready = _wl(admitted_at=T0, conditions=[{"type": "PodsReady", "status": "True", "reason": "Started"}])
    assert not timeouts(_live(ready), T0 + 100, CONFIG).evict
    recovering = _wl(admitted_at=T0, conditions=[{"type": "PodsReady", "status": "False", "reason": "WaitForRecovery",
                                                  "lastTransitionTime": iso(T0 + 50)}])
    assert not timeouts(_live(recovering), T0 + 59, CONFIG).evict
    assert timeouts(_live(recovering), T0 + 60, CONFIG).evict


def test_backing_off_workloads_stay_out_until_requeue_at() -> None:
    """A Workload evicted for not getting ready is hidden from the engine until requeueAt, then due for requeue;
    once requeued it queues by its eviction time."""
    evicted = {"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout", "lastTransitionTime": iso(T0)}
    backing = _wl(conditions=[evicted, {"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout"}],
                  status={"requeueState": {"count": 1, "requeueAt": iso(T0 + 60)}})
    seen, due = queue_view(_live(backing), T0 + 59, CONFIG)
    assert not seen and not due
    seen, due = queue_view(_live(backing), T0 + 60, CONFIG)
    assert not seen and [w.key for w in due] == ["ns/w"]
    requeued = _wl(conditions=[evicted, {"type": "Requeued", "status": "True", "reason": "BackoffFinished"}])
    seen, _ = queue_view(_live(requeued), T0 + 61, CONFIG)
    assert seen["ns/w"].created == T0, "ordered by eviction time"


CONFIG_YAML = """apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [platform/]
platformTeam: platform
teams:
  - name: platform
    paths: ["platform/**"]
admission:
  waitForPodsReady:
{body}"""


def test_wait_for_pods_ready_is_read_from_gitopsq_yaml_as_kueue_configures_it() -> None:
    """`admission.waitForPodsReady` takes Kueue's fields and Go durations, and becomes the loop's setting."""
    from gitopsq.admission_loop.options import wait_for_pods_ready
    from gitopsq.manifests.config import parse_config

    body = ("    timeout: 5m\n    recoveryTimeout: 90s\n    blockAdmission: true\n    requeuingStrategy:\n"
            "      timestamp: Creation\n      backoffLimitCount: 3\n      backoffBaseSeconds: 10\n"
            "      backoffMaxSeconds: 600\n")
    result = parse_config(CONFIG_YAML.format(body=body).encode())
    assert result.ok, [str(f) for f in result.findings]
    assert result.config is not None
    loop = wait_for_pods_ready(result.config.admission.wait_for_pods_ready)
    assert loop == WaitForPodsReady(enable=True, timeout=300, recovery_timeout=90, block_admission=True,
                                    requeuing_strategy=RequeuingStrategy(timestamp="Creation", backoff_limit_count=3,
                                                                         backoff_base_seconds=10,
                                                                         backoff_max_seconds=600))
    assert not wait_for_pods_ready(parse_config(CONFIG_YAML.format(body="    enable: false\n").encode())
                                   .config.admission.wait_for_pods_ready).enable  # type: ignore[union-attr]


@pytest.mark.parametrize(("body", "message"), [
    ("    timeout: 5 minutes\n", "must be a duration"),
    ("    requeuingStrategy: {timestamp: Latest}\n", "must be one of Eviction, Creation"),
    ("    requeuingStrategy: {backoffLimit: 3}\n", "unknown field"),
])
def test_bad_wait_for_pods_ready_settings_are_findings_with_their_line(body: str, message: str) -> None:
    """A wrong duration, value or field in `waitForPodsReady` is an error naming gitopsq.yaml, its line and why."""
    from gitopsq.manifests.config import parse_config

    result = parse_config(CONFIG_YAML.format(body=body).encode())
    errors = [f for f in result.findings if f.is_error]
    assert len(errors) == 1 and message in errors[0].message, [str(f) for f in result.findings]
    assert errors[0].location is not None
    assert (errors[0].location.path, errors[0].location.line) == ("gitopsq.yaml", 10)


def test_block_admission_turns_admissions_into_waiting_reasons() -> None:
    """With blockAdmission and an admitted Workload not PodsReady, the pass's admissions become
    WaitingForPodsReady reasons; once every admitted Workload is ready they go through."""
    from gitopsq.admission_loop.decisions import Admission, Decisions
    from gitopsq.admission_loop.pods_ready import block_admissions

    config = WaitForPodsReady(enable=True, block_admission=True)
    gang = read_workload(_wl(admitted_at=T0))
    waiting_raw = _wl()
    waiting_raw["metadata"]["name"] = "next"
    waiting = read_workload(waiting_raw)
    assert gang is not None and waiting is not None
    live = {gang.key: gang, waiting.key: waiting}
    decisions = Decisions(admit={waiting.key: Admission("cq", {}, ())})
    assert block_admissions(decisions, live, config)
    assert not decisions.admit and decisions.pending[waiting.key].reason == "WaitingForPodsReady"
    ready_raw = _wl(admitted_at=T0, conditions=[{"type": "PodsReady", "status": "True", "reason": "Started"}])
    ready = read_workload(ready_raw)
    assert ready is not None
    decisions = Decisions(admit={waiting.key: Admission("cq", {}, ())})
    assert not block_admissions(decisions, {ready.key: ready, waiting.key: waiting}, config)
    assert waiting.key in decisions.admit
