"""gitopsq's CRDs on the real API server: install, Established, kubectl's view, schema and CEL rejections."""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

import pytest
from envtest_rig import Envtest
from kubernetes import client

from gitopsq.cluster.crds import CrdAction, CrdClient, bundled_crds, install_crds, wait_established
from gitopsq.cluster.kube import ClusterInvalid, api_errors

pytestmark = pytest.mark.envtest

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"


def _create(env: Envtest, plural: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    body = {"apiVersion": f"{GROUP}/{VERSION}", **body}
    with env.api_client() as api, api_errors(obj=f"{body['kind']}/{body['metadata']['name']}"):
        custom = client.CustomObjectsApi(api)
        if namespace is None:
            created: dict[str, Any] = custom.create_cluster_custom_object(GROUP, VERSION, plural, body)
        else:
            created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)
    return created


def _cq(spec: dict[str, Any], name: str = "team-a") -> dict[str, Any]:
    return {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _group(*resources: dict[str, Any], covered: tuple[str, ...] = ("cpu",)) -> list[dict[str, Any]]:
    return [{"coveredResources": list(covered), "flavors": [{"name": "default", "resources": list(resources)}]}]


def test_bundled_crds_are_established_and_report_their_actions(kueue_crds: Envtest) -> None:
    """After install every bundled CRD is Established, and a second install changes nothing."""
    with kueue_crds.api_client() as api:
        again = install_crds(api)
        live = {c.metadata.name: c for c in client.ApiextensionsV1Api(api).list_custom_resource_definition().items}
    assert {o.name: o.action for o in again.outcomes} == {c["metadata"]["name"]: CrdAction.UNCHANGED
                                                          for c in bundled_crds()}  # fmt: skip
    for outcome in again.outcomes:
        conditions = {c.type: c.status for c in live[outcome.name].status.conditions}
        assert conditions["Established"] == "True"
        assert conditions["NamesAccepted"] == "True"
    fields = live["clusterqueues.kueue.x-k8s.io"].metadata.managed_fields
    assert {f.manager for f in fields if not f.subresource} == {"gitopsq"}


def _kubectl_apply(env: Envtest, manifest: str) -> None:
    env.kubectl("apply", "--server-side", "--field-manager", "test", "-f", "-", stdin=manifest)


SAMPLE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: shared}
spec: {parentName: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: shared
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 8, lendingLimit: 2}
      - {name: memory, nominalQuota: 32Gi, borrowingLimit: 8Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: NS}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: job-1, namespace: NS}
spec:
  queueName: main
  podSets:
  - count: 2
    template: {spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]}}
"""


@pytest.mark.parametrize(
    ("args", "header", "row"),
    [
        pytest.param(["get", "cq"], ["NAME", "COHORT", "PENDING WORKLOADS"], ["team-a", "shared"], id="cq"),
        pytest.param(["get", "clusterqueues", "-o", "wide"],
                     ["NAME", "COHORT", "STRATEGY", "PENDING WORKLOADS", "ADMITTED WORKLOADS"],
                     ["team-a", "shared", "BestEffortFIFO"], id="clusterqueues-wide"),
        pytest.param(["get", "lq", "-n", "NS"], ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS"],
                     ["main", "team-a"], id="lq"),
        pytest.param(["get", "queues", "-n", "NS"], ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS",
                                                      "ADMITTED WORKLOADS"], ["main", "team-a"], id="queues"),
        pytest.param(["get", "workloads", "-n", "NS"], ["NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"],
                     ["job-1", "main"], id="workloads"),
        pytest.param(["get", "wl", "-n", "NS"], ["NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"],
                     ["job-1", "main"], id="wl"),
        pytest.param(["get", "rf"], ["NAME", "AGE"], ["default"], id="rf"),
        pytest.param(["get", "wpc"], ["NAME", "VALUE"], ["high", "1000"], id="wpc"),
        pytest.param(["get", "cohorts"], ["NAME", "PARENT", "AGE"], ["shared", "org"], id="cohorts"),
    ],
)  # fmt: skip
def test_kubectl_get_shows_kueue_columns(kueue_clean: Envtest, args: list[str], header: list[str],
                                         row: list[str]) -> None:  # fmt: skip
    """The real kubectl, by plural or short name, prints Kueue's column headers and the objects' values."""
    namespace = kueue_clean.new_namespace("kubectl")
    _kubectl_apply(kueue_clean, SAMPLE.replace("NS", namespace))
    lines = kueue_clean.kubectl(*[namespace if a == "NS" else a for a in args]).stdout.splitlines()
    columns = [c for c in lines[0].split("  ") if c]
    assert [c.strip() for c in columns] == header
    assert lines[1].split()[: len(row)] == row


def test_workload_shows_reservation_and_admission_from_status(kueue_clean: Envtest) -> None:
    """Status written through the status subresource appears in the RESERVED IN and ADMITTED columns."""
    namespace = kueue_clean.new_namespace("status")
    _kubectl_apply(kueue_clean, SAMPLE.replace("NS", namespace))
    status = {"status": {
        "admission": {"clusterQueue": "team-a",
                      "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"},
                                             "resourceUsage": {"cpu": "2"}, "count": 2}]},
        "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted",
                        "message": "The workload is admitted", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }}  # fmt: skip
    with kueue_clean.api_client() as api:
        client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "workloads", "job-1", status
        )
    line = kueue_clean.kubectl("get", "kwl", "-n", namespace, "--no-headers").stdout.split()
    assert line[:4] == ["job-1", "main", "team-a", "True"]


PLURALS = {"ClusterQueue": "clusterqueues", "Cohort": "cohorts", "ResourceFlavor": "resourceflavors",
           "WorkloadPriorityClass": "workloadpriorityclasses"}  # fmt: skip


def test_gitsource_columns_show_readiness_and_revision(kueue_clean: Envtest) -> None:
    """`kubectl get gitsources` shows the Ready condition and the last applied revision from status."""
    namespace = kueue_clean.new_namespace("gs")
    source = {"apiVersion": "gitopsq.dev/v1alpha1", "kind": "GitSource", "metadata": {"name": "queues"},
              "spec": {"url": "https://git.example/queues.git", "ref": "main"}}  # fmt: skip
    status = {"status": {
        "lastAppliedRevision": "main@sha1:0123abc",
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                        "message": "Applied revision main@sha1:0123abc", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }}  # fmt: skip
    with kueue_clean.api_client() as api:
        custom = client.CustomObjectsApi(api)
        where = ("gitopsq.dev", "v1alpha1", namespace, "gitsources")
        custom.create_namespaced_custom_object(*where, source)
        custom.patch_namespaced_custom_object_status(*where, "queues", status)
    lines = kueue_clean.kubectl("get", "gs", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert lines[0].split()[:4] == ["NAME", "READY", "REVISION", "STATUS"]
    assert lines[1].split()[:4] == ["queues", "True", "main@sha1:0123abc", "Applied"]


REJECTED = [
    pytest.param(_cq({"resourceGroups": _group({"name": "cpu", "nominalQuota": "-1"})}),
                 "nominalQuota must not be negative", id="negative-nominal-quota"),
    pytest.param(_cq({"cohortName": "c", "resourceGroups": _group({"name": "cpu", "nominalQuota": 4,
                                                                  "borrowingLimit": "-2"})}),
                 "borrowingLimit must not be negative", id="negative-borrowing-limit"),
    pytest.param(_cq({"resourceGroups": _group({"name": "cpu", "nominalQuota": 4, "lendingLimit": 1})}),
                 "lendingLimit must not be set when the ClusterQueue has no cohort", id="lending-limit-without-cohort"),
    pytest.param(_cq({"resourceGroups": _group({"name": "cpu", "nominalQuota": 4, "borrowingLimit": 1})}),
                 "borrowingLimit must not be set when the ClusterQueue has no cohort",
                 id="borrowing-limit-without-cohort"),
    pytest.param(_cq({"cohortName": "c", "resourceGroups": _group({"name": "cpu", "nominalQuota": "1",
                                                                  "lendingLimit": "1500m"})}),
                 "lendingLimit must not exceed nominalQuota", id="lending-limit-above-nominal"),
    pytest.param(_cq({"resourceGroups": _group({"name": "cpu", "nominalQuota": 1}, covered=("cpu", "memory"))}),
                 "every flavor must list as many resources as coveredResources", id="flavor-misses-a-resource"),
    pytest.param(_cq({"resourceGroups": _group({"name": "gpu", "nominalQuota": 1})}),
                 "a flavor may only give quota for the group's coveredResources", id="flavor-quota-for-uncovered"),
    pytest.param(_cq({"resourceGroups": _group({"name": "cpu", "nominalQuota": "lots"})}),
                 "should match", id="quota-not-a-quantity"),
    pytest.param(_cq({"queueingStrategy": "LIFO"}), "Unsupported value", id="unknown-queueing-strategy"),
    pytest.param(_cq({"cohortName": "c", "preemption": {"reclaimWithinCohort": "Never",
                                                        "borrowWithinCohort": {"policy": "LowerPriority"}}}),
                 "borrowWithinCohort needs reclaimWithinCohort other than Never",
                 id="borrow-preemption-without-reclaim"),
    pytest.param({"kind": "Cohort", "metadata": {"name": "root"},
                  "spec": {"resourceGroups": _group({"name": "cpu", "nominalQuota": 4, "lendingLimit": 1})}},
                 "lendingLimit must not be set on a cohort without a parent", id="cohort-lending-limit-without-parent"),
    pytest.param({"kind": "ResourceFlavor", "metadata": {"name": "tainted"},
                  "spec": {"nodeTaints": [{"key": "k", "effect": "Sometimes"}]}},
                 "Unsupported value", id="flavor-taint-effect"),
    pytest.param({"kind": "WorkloadPriorityClass", "metadata": {"name": "no-value"}}, "Required value",
                 id="priority-class-without-value"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "message"), REJECTED)
def test_invalid_cluster_scoped_objects_are_rejected(kueue_clean: Envtest, body: dict[str, Any], message: str) -> None:
    """The API server refuses what Kueue's webhook would refuse, and gitopsq sees ClusterInvalid with the reason."""
    plural = PLURALS[body["kind"]]
    with pytest.raises(ClusterInvalid) as refused:
        _create(kueue_clean, plural, body)
    assert refused.value.status == 422
    assert message in str(refused.value) + " ".join(refused.value.causes)


def test_valid_quota_shapes_are_accepted(kueue_clean: Envtest) -> None:
    """Limits inside a cohort, integer and suffixed quantities, and a lending limit equal to nominal are fine."""
    spec = {"cohortName": "c", "resourceGroups": _group(
        {"name": "cpu", "nominalQuota": "1500m", "borrowingLimit": 0, "lendingLimit": "1.5"},
        {"name": "memory", "nominalQuota": "64Gi", "lendingLimit": "64Gi"}, covered=("cpu", "memory"))}  # fmt: skip
    created = _create(kueue_clean, "clusterqueues", _cq(spec))
    assert created["spec"]["queueingStrategy"] == "BestEffortFIFO"
    cohort = {"kind": "Cohort", "metadata": {"name": "child"},
              "spec": {"parentName": "root", "resourceGroups": _group({"name": "cpu", "nominalQuota": 2,
                                                                       "lendingLimit": 1})}}  # fmt: skip
    assert _create(kueue_clean, "cohorts", cohort)["spec"]["parentName"] == "root"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"podSets": []}, "should have at least 1 items", id="no-pod-sets"),
        pytest.param({"podSets": [{"name": "main", "count": 2, "minCount": 3, "template": {}}]},
                     "minCount must not exceed count", id="min-count-above-count"),
        pytest.param({"priorityClassRef": {"group": "apps", "kind": "Deployment", "name": "x"}},
                     "priorityClassRef names", id="priority-class-ref-wrong-kind"),
    ],
)  # fmt: skip
def test_invalid_workloads_are_rejected(kueue_clean: Envtest, change: dict[str, Any], message: str) -> None:
    """Workload specs Kueue would refuse are refused by the API server too."""
    namespace = kueue_clean.new_namespace("wl")
    spec = {"queueName": "main", "podSets": [{"name": "main", "count": 1, "template": {}}], **change}
    with pytest.raises(ClusterInvalid) as refused:
        _create(kueue_clean, "workloads", {"kind": "Workload", "metadata": {"name": "w"}, "spec": spec}, namespace)
    assert message in str(refused.value) + " ".join(refused.value.causes)


@pytest.mark.parametrize(("condition", "message"), [
    pytest.param({"reason": "Preempted by a higher priority"}, "conditions[0].reason in body should match",
                 id="reason-with-spaces"),
    pytest.param({"reason": ""}, "conditions[0].reason in body should be at least 1 chars long", id="empty-reason"),
    pytest.param({"type": "Quota Reserved"}, "conditions[0].type in body should match", id="type-with-space"),
])  # fmt: skip
def test_condition_shapes_kueue_refuses_are_refused(kueue_clean: Envtest, condition: dict[str, str],
                                                    message: str) -> None:
    """Status conditions follow metav1.Condition's validation, as Kueue's CRDs do: a reason or type another
    controller writes that Kueue's API server would refuse is refused here too (tests/admission_loop/
    test_upstream_crds.py runs the loop's own writes against Kueue's CRDs)."""
    namespace = kueue_clean.new_namespace("cond")
    _kubectl_apply(kueue_clean, SAMPLE.replace("NS", namespace))
    written = {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "m",
               "lastTransitionTime": "2026-01-01T00:00:00Z", **condition}
    with kueue_clean.api_client() as api, pytest.raises(client.ApiException) as refused:
        client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "workloads", "job-1", {"status": {"conditions": [written]}})
    assert refused.value.status == 422
    assert message in str(refused.value.body)


def test_local_queue_cluster_queue_is_immutable(kueue_clean: Envtest) -> None:
    """A LocalQueue cannot be re-pointed at another ClusterQueue, as in Kueue."""
    namespace = kueue_clean.new_namespace("lq")
    _create(kueue_clean, "localqueues", {"kind": "LocalQueue", "metadata": {"name": "q"},
                                         "spec": {"clusterQueue": "a"}}, namespace)  # fmt: skip
    with kueue_clean.api_client() as api, pytest.raises(ClusterInvalid) as refused, api_errors():
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            GROUP, VERSION, namespace, "localqueues", "q", {"spec": {"clusterQueue": "b"}}
        )
    assert "clusterQueue is immutable" in str(refused.value)


FREE_FORM = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _foreign_crd(group: str, plural: str, kind: str, versions: list[str], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": labels},
        "spec": {
            "group": group, "scope": "Cluster",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [{"name": v, "served": True, "storage": i == 0, "schema": {"openAPIV3Schema": FREE_FORM}}
                         for i, v in enumerate(versions)],
        },
    }  # fmt: skip


@pytest.mark.parametrize(
    ("versions", "usable"),
    [pytest.param(["v1beta2", "v1beta1"], True, id="upstream-kueue-serving-v1beta2"),
     pytest.param(["v1beta1"], False, id="old-upstream-kueue-v1beta1-only")],
)  # fmt: skip
def test_foreign_crd_is_detected_and_left_alone(envtest: Envtest, versions: list[str], usable: bool) -> None:
    """A same-named CRD installed by someone else (as by Kueue's own manifests) is kept byte for byte."""
    # names gitopsq does not ship (it ships every Kueue kind), so the session's own CRDs are untouched by this test
    plural, kind = ("foreignprobes", "ForeignProbe") if usable else ("oldforeignprobes", "OldForeignProbe")
    upstream = _foreign_crd("kueue.x-k8s.io", plural, kind, versions, {"app.kubernetes.io/name": "kueue"})
    ours = copy.deepcopy(upstream)
    ours["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gitopsq"}
    ours["spec"]["versions"] = [{**ours["spec"]["versions"][0], "name": "v1beta2", "storage": True}]
    with envtest.api_client() as api:
        crd_api = client.ApiextensionsV1Api(api)
        crd_api.create_custom_resource_definition(upstream)
        try:
            wait_established(CrdClient(api), [upstream["metadata"]["name"]])
            before = crd_api.read_custom_resource_definition(upstream["metadata"]["name"])
            report = install_crds(api, crds=[ours])
            after = crd_api.read_custom_resource_definition(upstream["metadata"]["name"])
        finally:
            crd_api.delete_custom_resource_definition(upstream["metadata"]["name"])
    (outcome,) = report.outcomes
    assert (outcome.action, outcome.usable) == (CrdAction.FOREIGN_KEPT, usable)
    assert after.metadata.resource_version == before.metadata.resource_version
    assert after.metadata.labels == {"app.kubernetes.io/name": "kueue"}


def test_install_crds_command_dry_run_creates_nothing(envtest: Envtest) -> None:
    """`gitopsq install-crds --dry-run` reports what it would create, through server-side dry run only."""
    crd = _foreign_crd("dryrun.gitopsq.dev", "probes", "Probe", ["v1"], {"app.kubernetes.io/managed-by": "gitopsq"})
    with envtest.api_client() as api:
        report = install_crds(api, crds=[crd], dry_run=True)
        names = [c.metadata.name for c in client.ApiextensionsV1Api(api).list_custom_resource_definition().items]
    assert [(o.action, o.dry_run) for o in report.outcomes] == [(CrdAction.CREATED, True)]
    assert "probes.dryrun.gitopsq.dev" not in names
    done = subprocess.run(
        [sys.executable, "-m", "gitopsq", "install-crds", "--dry-run", "--kubeconfig", str(envtest.kubeconfig)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "customresourcedefinition/clusterqueues.kueue.x-k8s.io" in done.stdout
    assert "(server dry run)" in done.stdout


def test_dry_run_reports_a_pending_update_without_making_it(kueue_crds: Envtest) -> None:
    """A changed bundled CRD under --dry-run is reported as updated while the live CRD stays as it was."""
    (changed,) = [c for c in bundled_crds() if c["metadata"]["name"] == "workloadpriorityclasses.kueue.x-k8s.io"]
    changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "edited for a dry run"
    with kueue_crds.api_client() as api:
        before = client.ApiextensionsV1Api(api).read_custom_resource_definition(changed["metadata"]["name"])
        (dry,) = install_crds(api, crds=[changed], dry_run=True).outcomes
        (same,) = install_crds(api, crds=[c for c in bundled_crds() if c["metadata"]["name"] == dry.name],
                               dry_run=True).outcomes  # fmt: skip
        after = client.ApiextensionsV1Api(api).read_custom_resource_definition(changed["metadata"]["name"])
    assert (dry.action, same.action) == (CrdAction.UPDATED, CrdAction.UNCHANGED)
    assert after.metadata.resource_version == before.metadata.resource_version
