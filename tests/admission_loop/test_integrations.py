"""The integration registry and the JobSet integration, pure: Kueue's framework names, pod sets per replicated
job, placement per pod set and its restore, the managed-parent walk, CRD discovery and the webhook's children."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.admission_loop.integration_watch import IntegrationWatch
from gitopsq.admission_loop.integrations import BY_FRAMEWORK, REGISTRY, PodSetPlacement, parse, rbac_rules, select
from gitopsq.admission_loop.integrations.ancestry import MAX_HOPS, managed_ancestor
from gitopsq.admission_loop.integrations.jobset import JobSet
from gitopsq.errors import ClusterError, UsageError
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions

QUEUE = "kueue.x-k8s.io/queue-name"
SPOT = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}


def _rjob(name: str, replicas: int | None, parallelism: int | None, completions: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c"}]}}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    rjob: dict[str, Any] = {"name": name, "template": {"spec": spec}}
    if replicas is not None:
        rjob["replicas"] = replicas
    return rjob


def _jobset(*rjobs: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "js", "namespace": "ns", "uid": "u-js", "labels": {QUEUE: "q"}},
            "spec": {"suspend": True, "replicatedJobs": list(rjobs)}}


def test_kueue_names_select_integrations_and_empty_means_batch_job() -> None:
    """``--integrations`` takes Kueue's names in any order (registry order kept); empty is batch/job only."""
    assert [i.framework for i in select([])] == ["batch/job"]
    assert [i.framework for i in parse("jobset.x-k8s.io/jobset,batch/job")] == ["batch/job", "jobset.x-k8s.io/jobset"]
    assert BY_FRAMEWORK["jobset.x-k8s.io/jobset"].crd == "jobsets.jobset.x-k8s.io"


def test_an_unknown_framework_is_a_usage_error_listing_the_known_ones() -> None:
    """A name gitopsq does not implement is refused at start with the list of the names it knows."""
    with pytest.raises(UsageError, match=r"kubeflow\.org/mpijob.*known: batch/job, jobset\.x-k8s\.io/jobset"):
        parse("batch/job,kubeflow.org/mpijob")


def test_rbac_rules_merge_per_resource() -> None:
    """Rules of several integrations on one resource (pods: list from the job kinds, more from the pod
    integration) merge into one verb set."""
    jobs = {(r.group, r.resources[0]): r.verbs for r in rbac_rules(select(["batch/job", "jobset.x-k8s.io/jobset"]))}
    assert jobs[("", "pods")] == ("list",)
    rules = {(r.group, r.resources[0]): r.verbs for r in rbac_rules(REGISTRY)}
    assert rules[("", "pods")] == ("delete", "get", "list", "patch", "watch")
    assert rules[("jobset.x-k8s.io", "jobsets")] == ("get", "list", "patch", "watch")


@pytest.mark.parametrize(("replicas", "parallelism", "completions", "count"), [
    (None, None, None, 1), (3, None, None, 3), (2, 4, None, 8), (2, 4, 2, 4), (1, 2, 5, 2)])
def test_jobset_pod_set_count_is_replicas_times_pods_per_job(replicas: int | None, parallelism: int | None,
                                                             completions: int | None, count: int) -> None:
    """A replicated job's pod set counts replicas × min(parallelism, completions), defaults 1 (Kueue's JobSet)."""
    (pod_set,) = JobSet().pod_sets(_jobset(_rjob("w", replicas, parallelism, completions)))
    assert (pod_set["name"], pod_set["count"]) == ("w", count)


def test_jobset_start_places_each_replicated_job_and_restore_undoes_it() -> None:
    """Start writes each pod set's node labels and tolerations into its own replicated job and unsuspends; once
    suspended with no active child Job, restore puts the Workload's recorded templates back."""
    integration = JobSet()
    js = _jobset(_rjob("driver", 1, 1, 1), _rjob("workers", 2, 1, 1))
    original = integration.pod_sets(js)
    patch = integration.start_patch(js, (PodSetPlacement("driver", 1, {"pool": "od"}, ()),
                                         PodSetPlacement("workers", 2, {"pool": "spot"}, (SPOT,))))
    assert patch["spec"]["suspend"] is False
    driver, workers = (r["template"]["spec"]["template"]["spec"] for r in patch["spec"]["replicatedJobs"])
    assert (driver["nodeSelector"], driver.get("tolerations")) == ({"pool": "od"}, None)
    assert (workers["nodeSelector"], workers["tolerations"]) == ({"pool": "spot"}, [SPOT])
    started = {**js, "spec": {**patch["spec"], "suspend": True},
               "status": {"replicatedJobsStatus": [{"name": "workers", "active": 1}]}}
    assert integration.restore_patch(started, original) is None, "restored while a child Job is active"
    started["status"] = {"replicatedJobsStatus": [{"name": "workers", "active": 0}]}
    restore = integration.restore_patch(started, original)
    assert restore is not None
    for rjob in restore["spec"]["replicatedJobs"]:
        spec = rjob["template"]["spec"]["template"]["spec"]
        assert "nodeSelector" not in spec and "tolerations" not in spec
    assert integration.restore_patch(js, original) is None, "nothing to restore on an untouched JobSet"


def test_jobset_ready_and_finished_follow_its_status() -> None:
    """PodsReady when ready + succeeded child Jobs reach the replicas; Completed / Failed conditions end it."""
    integration = JobSet()
    js = _jobset(_rjob("driver", 1, 1, 1), _rjob("workers", 2, 1, 1))
    js["status"] = {"replicatedJobsStatus": [{"name": "driver", "ready": 1}, {"name": "workers", "ready": 1}]}
    assert not integration.pods_ready(js)
    js["status"]["replicatedJobsStatus"][1]["succeeded"] = 1
    assert integration.pods_ready(js)
    assert integration.finished(js) is None
    js["status"]["conditions"] = [{"type": "Failed", "status": "True", "message": "driver failed"}]
    assert integration.finished(js) == ("Failed", "driver failed")


def _owned(name: str, uid: str, owner: dict[str, Any] | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                    "controller": True}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta}


def test_a_jobsets_job_has_a_managed_ancestor_only_when_the_jobset_is_queued() -> None:
    """A Job controlled by a labelled JobSet is a managed child; by an unlabelled one, or by a JobSet of the same
    name but another UID, it is not."""
    parent = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "js", "namespace": "ns", "uid": "u-js", "labels": {QUEUE: "q"}}}
    child = _owned("js-w-0", "u-job", parent, {QUEUE: "q"})
    store = {("jobset.x-k8s.io", "JobSet", "js"): parent}

    def lookup(group: str, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        return store.get((group, kind, name))

    assert managed_ancestor(child, lookup, QUEUE) is parent
    store[("jobset.x-k8s.io", "JobSet", "js")] = {**parent, "metadata": {**parent["metadata"], "labels": {}}}
    assert managed_ancestor(child, lookup, QUEUE) is None
    store[("jobset.x-k8s.io", "JobSet", "js")] = {**parent, "metadata": {**parent["metadata"], "uid": "other"}}
    assert managed_ancestor(child, lookup, QUEUE) is None


def test_the_ancestor_walk_stops_at_the_hop_limit_and_on_cycles() -> None:
    """A managed ancestor more than MAX_HOPS owners up is not found; an ownership cycle ends the walk."""
    chain = [{"apiVersion": "x.dev/v1", "kind": "K", "metadata": {"name": "n0", "namespace": "ns", "uid": "0",
                                                                   "labels": {QUEUE: "q"}}}]
    for i in range(1, MAX_HOPS + 2):
        chain.append({**_owned(f"n{i}", str(i), chain[-1]), "apiVersion": "x.dev/v1", "kind": "K"})
    by_name = {c["metadata"]["name"]: c for c in chain}

    def lookup(group: str, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        return by_name.get(name)

    assert managed_ancestor(chain[MAX_HOPS], lookup, QUEUE) is chain[0]
    assert managed_ancestor(chain[MAX_HOPS + 1], lookup, QUEUE) is None
    a = _owned("a", "ua", None)
    b = _owned("b", "ub", {"apiVersion": "batch/v1", "kind": "Job", "metadata": a["metadata"]})
    a["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "b", "uid": "ub",
                                         "controller": True}]
    cycle = {"a": a, "b": b}
    assert managed_ancestor(a, lambda g, k, n, name: cycle.get(name), QUEUE) is None


class _Discovery:
    def __init__(self) -> None:
        self.served: set[str] = set()

    def request(self, method: str, path: str, **_: Any) -> Any:
        if path != "/apis/jobset.x-k8s.io/v1alpha2" or "jobsets" not in self.served:
            raise ClusterError("the server could not find the requested resource", status=404)
        return {"resources": [{"name": "jobsets"}]}


class _Cache:
    def __init__(self) -> None:
        self.watched: list[str] = []

    def add(self, kind: Any) -> bool:
        self.watched.append(kind.plural)
        return True

    def synced(self, name: str) -> bool:
        return name in self.watched


def test_an_uninstalled_crd_is_reported_skipped_and_picked_up_later() -> None:
    """batch/job is watched at once; JobSet is reported (state False, a reason naming its CRD) and not watched
    until discovery serves it, looked for again only after ``every`` seconds."""
    client, cache, now, reports = _Discovery(), _Cache(), [0.0], []
    watch = IntegrationWatch(client, cache, select(["batch/job", "jobset.x-k8s.io/jobset"]), every=10.0,
                             clock=lambda: now[0], report=lambda f, on: reports.append((f, on)))
    watch.refresh(force=True)
    assert cache.watched == ["jobs"] and [i.framework for i in watch.ready()] == ["batch/job"]
    assert "jobsets.jobset.x-k8s.io is not installed" in watch.absent["jobset.x-k8s.io/jobset"]
    client.served.add("jobsets")
    now[0] = 5.0
    watch.refresh()
    assert cache.watched == ["jobs"], "looked again before `every` passed"
    now[0] = 10.0
    watch.refresh()
    assert cache.watched == ["jobs", "jobsets"] and not watch.absent
    assert reports == [("batch/job", True), ("jobset.x-k8s.io/jobset", False), ("jobset.x-k8s.io/jobset", True)]


def _review(job: dict[str, Any], namespace: str = "team") -> dict[str, Any]:
    return {"request": {"uid": "r1", "operation": "CREATE", "namespace": namespace, "object": job,
                        "kind": {"group": "batch", "version": "v1", "kind": "Job"}}}


def test_the_webhook_leaves_a_queued_jobsets_jobs_alone() -> None:
    """A labelled Job controlled by a JobSet is not suspended, nor refused in a managed namespace without a queue
    label; a labelled JobSet itself is created suspended."""
    hook = JobWebhook(JobWebhookOptions(managed_namespaces=frozenset({"team"})))
    parent = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "js", "uid": "u-js"}}
    labelled = _owned("js-w-0", "u1", parent, {QUEUE: "q"})
    assert "patch" not in hook.mutate(_review(labelled))["response"]
    assert hook.validate(_review(_owned("js-w-1", "u2", parent)))["response"]["allowed"]
    assert not hook.validate(_review(_owned("plain", "u3", None)))["response"]["allowed"]
    js = {"metadata": {"name": "js", "labels": {QUEUE: "q"}}, "spec": {"replicatedJobs": []}}
    review = {"request": {"uid": "r2", "operation": "CREATE", "namespace": "team", "object": js,
                          "kind": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"}}}
    assert hook.mutate(review)["response"]["patchType"] == "JSONPatch"


def test_the_writing_a_new_integration_page_cites_only_names_that_exist() -> None:
    """Every member, file and test docs/admission-loop.md's "Writing a new integration" names exists: the
    integration members on JobSet, the paths in the repository."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "admission-loop.md").read_text()
    section = text.split("## Writing a new integration", 1)[1].split("\n## ", 1)[0]
    names = set(re.findall(r"`([a-z_]+)`", section))
    members = {"framework", "kind", "group", "version", "resource", "crd", "rules", "webhook", "kind_info",
               "collection_path", "pod_sets", "is_suspended", "active_pods", "pod_selector", "pods_ready",
               "finished", "start_patch", "suspend_patch", "start_time_patch", "restore_patch"}
    assert members <= names, members - names
    for member in members:
        assert hasattr(JobSet(), member), member
    paths = set(re.findall(r"`((?:gitopsq|tests|charts|docs|integrations|templates)/[\w./-]+)`", section))
    prefixes = {"integrations/": "gitopsq/admission_loop/integrations/", "templates/": "charts/gitopsq/templates/"}
    assert paths
    for path in paths:
        full = next((full + path[len(short):] for short, full in prefixes.items() if path.startswith(short)), path)
        assert (root / full.rstrip("/")).exists(), path


def test_controller_refuses_an_unknown_integration_at_start(capsys: pytest.CaptureFixture[str]) -> None:
    """``gitopsq controller --integrations`` with a name gitopsq does not implement exits with the usage code
    and names the known frameworks, before touching any cluster."""
    from gitopsq.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["controller", "--admission-only", "--integrations", "batch/job,kubeflow.org/mpijob",
              "--kubeconfig", "/nonexistent/kubeconfig"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "unknown framework(s) kubeflow.org/mpijob; known: batch/job, jobset.x-k8s.io/jobset" in err
