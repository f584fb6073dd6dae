"""The batch/v1 Job integration: Kueue's Workload names and pod sets, and on the rig the life of labelled, unlabelled
and ownerless work (priority, failure, deletion, Finished written by another client)."""

from __future__ import annotations

from typing import Any

import pytest
from cluster_rig import (
    admitted,
    apply,
    cluster_queue,
    cond,
    create_job,
    finish_job,
    flavors_usage,
    get,
    job,
    job_manifest,
    queue_setup,
    rest,
    wait_for,
    workload_of,
)
from envtest_rig import Envtest

from gitopsq.admission_loop.integrations.base import PodSetPlacement
from gitopsq.admission_loop.integrations.batch_job import BatchJob
from gitopsq.admission_loop.job_reconciler import workload_name


@pytest.mark.parametrize(("kind", "group", "name", "uid", "expected"), [
    pytest.param("Job", "batch", "test-job", "test-job", "job-test-job-ce737", id="Kueue's own unit-test pin"),
    pytest.param("Job", "batch", "x" * 300, "u", "job-" + "x" * 243 + "-", id="long names truncated to 247"),
])
def test_workload_name_follows_kueue(kind: str, group: str, name: str, uid: str, expected: str) -> None:
    """Workload names are `<kind>-<name>` cut to 247 characters plus a 5-hex SHA-1 suffix, as Kueue makes them."""
    got = workload_name(kind, group, name, uid)
    assert got.startswith(expected) and len(got) == len(expected) + (5 if expected.endswith("-") else 0)
    assert len(got) <= 253


@pytest.mark.parametrize(("spec", "count"), [
    pytest.param({}, 1, id="defaults to one pod"),
    pytest.param({"parallelism": 4}, 4, id="parallelism without completions"),
    pytest.param({"parallelism": 4, "completions": 2}, 2, id="fewer completions than parallelism"),
    pytest.param({"parallelism": 3, "completions": 10}, 3, id="more completions than parallelism"),
])
def test_job_pod_set_count(spec: dict[str, int], count: int) -> None:
    """A Job's single pod set `main` counts min(parallelism, completions) pods."""
    pod_sets = BatchJob().pod_sets({"spec": {**spec, "template": {"spec": {"containers": []}}}})
    assert [(p["name"], p["count"]) for p in pod_sets] == [("main", count)]


def test_start_injects_and_restore_puts_the_template_back() -> None:
    """Starting merges flavor node labels into the nodeSelector and appends tolerations; restoring removes
    exactly what was added."""
    original = {"nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "a", "operator": "Exists"}]}
    job_obj: dict[str, Any] = {"spec": {"suspend": True, "template": {"spec": dict(original)}}}
    placement = PodSetPlacement("main", 1, {"zone": "z1"}, ({"key": "gpu", "operator": "Exists"},))
    patch = BatchJob().start_patch(job_obj, (placement,))
    started = patch["spec"]["template"]["spec"]
    assert patch["spec"]["suspend"] is False
    assert started["nodeSelector"] == {"disk": "ssd", "zone": "z1"}
    assert started["tolerations"] == [{"key": "a", "operator": "Exists"}, {"key": "gpu", "operator": "Exists"}]
    running = {"spec": {"suspend": True, "template": {"spec": started}}}
    restore = BatchJob().restore_patch(running, [{"template": {"spec": original}}])
    assert restore == {"spec": {"template": {"spec": {"nodeSelector": {"zone": None, "disk": "ssd"},
                                                      "tolerations": original["tolerations"]}}}}
    assert BatchJob().restore_patch({"spec": {"template": {"spec": original}}}, [{"template": {"spec": original}}]) \
        is None


BATCH_LOW = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gitopsq-test-batch-low}
value: 7
"""


@pytest.fixture
def ns(kueue_clean: Envtest) -> str:
    name = kueue_clean.new_namespace("jobs")
    apply(kueue_clean, queue_setup(name, "jobs-cq", cpu="2", priority_classes={"high": 500}, extra=BATCH_LOW))
    return name


@pytest.mark.usefixtures("admission")
def test_job_workload_carries_owner_priority_and_pod_sets(kueue_clean: Envtest, ns: str) -> None:
    """A labelled Job gets a Workload named as Kueue names it, owned by the Job, with its pod set and the
    priority of its WorkloadPriorityClass label (or of its pod template's PriorityClass)."""
    env = kueue_clean
    created = create_job(env, job_manifest(ns, "with-wpc", "queue", {"cpu": "1"}, parallelism=1,
                                           labels={"kueue.x-k8s.io/priority-class": "high"}))
    create_job(env, job_manifest(ns, "with-pc", "queue", {"cpu": "1"}, priority_class="gitopsq-test-batch-low"))
    wl = wait_for("workload", lambda: workload_of(env, ns, "with-wpc"))
    assert wl["metadata"]["name"] == workload_name("Job", "batch", "with-wpc", created["metadata"]["uid"])
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Job", "with-wpc",
                                                                                 created["metadata"]["uid"], True)
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == created["metadata"]["uid"]
    assert (wl["spec"]["priority"], wl["spec"]["priorityClassRef"]["kind"]) == (500, "WorkloadPriorityClass")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", 1)]
    other = wait_for("workload", lambda: workload_of(env, ns, "with-pc"))
    assert (other["spec"]["priority"], other["spec"]["priorityClassRef"]["kind"]) == (7, "PriorityClass")


@pytest.mark.usefixtures("admission")
def test_unlabelled_job_is_ignored(kueue_clean: Envtest, ns: str) -> None:
    """A Job without a queue label gets no Workload and is never suspended."""
    env = kueue_clean
    create_job(env, job_manifest(ns, "plain", None, {"cpu": "1"}, suspend=False))
    create_job(env, job_manifest(ns, "marker", "queue", {"cpu": "1"}))
    wait_for("the labelled job's workload", lambda: workload_of(env, ns, "marker"))
    assert workload_of(env, ns, "plain") is None
    assert job(env, ns, "plain")["spec"]["suspend"] is False


@pytest.mark.usefixtures("admission")
def test_failed_job_finishes_workload_and_deleted_job_removes_it(kueue_clean: Envtest, ns: str) -> None:
    """A failed Job marks its Workload Finished with reason Failed and frees the quota; deleting a Job deletes
    its Workload."""
    env = kueue_clean
    create_job(env, job_manifest(ns, "doomed", "queue", {"cpu": "2"}))
    wait_for("doomed admitted", lambda: admitted(env, ns, "doomed"))
    finish_job(env, ns, "doomed", failed=True)
    finished = wait_for("finished", lambda: (c := cond(workload_of(env, ns, "doomed"), "Finished")) and c)
    assert (finished["status"], finished["reason"]) == ("True", "Failed")
    create_job(env, job_manifest(ns, "next", "queue", {"cpu": "2"}))
    wait_for("next admitted in the freed quota", lambda: admitted(env, ns, "next"))
    rest(env).request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/next",
                      query=[("propagationPolicy", "Background")])
    wait_for("workload deleted with its job", lambda: workload_of(env, ns, "next") is None)


@pytest.mark.usefixtures("admission")
def test_direct_workload_admitted_and_released_when_finished_by_anyone(kueue_clean: Envtest, ns: str) -> None:
    """A Workload created directly (no Job) is admitted; when another client marks it Finished its quota is
    released and the next one is admitted."""
    env = kueue_clean
    api = rest(env)
    base = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"
    for name in ("direct-1", "direct-2"):
        api.request("POST", base, body={
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": name},
            "spec": {"queueName": "queue", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                                                          "resources": {"requests": {"cpu": "2"}}}]}}}]}})

    def state(name: str) -> str:
        c = cond(get(env, f"{base}/{name}"), "Admitted")
        return c["status"] if c else ""

    wait_for("direct-1 admitted", lambda: state("direct-1") == "True")
    assert state("direct-2") != "True"
    wl = get(env, f"{base}/direct-1")
    conditions = wl["status"]["conditions"] + [{"type": "Finished", "status": "True", "reason": "Succeeded",
                                                "message": "done elsewhere",
                                                "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    api.request("PATCH", f"{base}/direct-1/status", body={"status": {"conditions": conditions}},
                content_type="application/merge-patch+json")
    wait_for("direct-2 admitted", lambda: state("direct-2") == "True")
    wait_for("usage is the second workload only",
             lambda: flavors_usage(cluster_queue(env, "jobs-cq")).get(("default-flavor", "cpu")) == "2")


@pytest.mark.usefixtures("admission")
def test_running_labelled_job_without_admission_is_suspended(kueue_clean: Envtest, ns: str) -> None:
    """A labelled Job that starts unsuspended (no webhook) and does not fit is suspended by the loop; when
    quota frees up it is admitted and started again."""
    env = kueue_clean
    create_job(env, job_manifest(ns, "holder", "queue", {"cpu": "2"}))
    wait_for("holder admitted", lambda: admitted(env, ns, "holder"))
    create_job(env, job_manifest(ns, "eager", "queue", {"cpu": "2"}, suspend=False))
    wait_for("eager suspended", lambda: job(env, ns, "eager")["spec"]["suspend"] is True)
    assert not admitted(env, ns, "eager")
    finish_job(env, ns, "holder")
    wait_for("eager started once admitted", lambda: job(env, ns, "eager")["spec"]["suspend"] is False)
    assert admitted(env, ns, "eager")
