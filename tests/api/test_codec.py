"""The codec: every kind decodes, encodes to v1beta2 and decodes back equal; v1beta1 converts; unknown fields
are located findings."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.api import model as m
from gitopsq.api.codec import decode, encode
from gitopsq.manifests.yamldoc import load_yaml

V2 = "kueue.x-k8s.io/v1beta2"
V1 = "kueue.x-k8s.io/v1beta1"

QUOTAS = {"resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
    {"name": "a100", "resources": [{"name": "cpu", "nominalQuota": "96", "borrowingLimit": "8"},
                                   {"name": "nvidia.com/gpu", "nominalQuota": 8, "lendingLimit": "2"}]}]}]}


def docs(version: str) -> dict[str, dict[str, Any]]:
    """One rich manifest per kind, written in ``version`` where the kind is Kueue's."""
    return {
        "ResourceFlavor": {"apiVersion": version, "kind": "ResourceFlavor", "metadata": {
            "name": "spot", "labels": {"tier": "cheap"}, "annotations": {"example.com/owner": "platform"}},
            "spec": {"nodeLabels": {"pool": "spot"}, "nodeTaints": [{"key": "spot", "value": "true",
                                                                     "effect": "NoSchedule"}],
                     "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
                     "topologyName": "default"}},
        "ClusterQueue": {"apiVersion": version, "kind": "ClusterQueue", "metadata": {"name": "team-a"}, "spec": {
            "cohortName": "research", **QUOTAS,
            "namespaceSelector": {"matchLabels": {"team": "a"}, "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "dev"]}]},
            "queueingStrategy": "StrictFIFO",
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                           "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}},
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
                                  "preference": "PreemptionOverBorrowing"},
            "fairSharing": {"weight": "2"},
            "admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["a100"]}]},
            "stopPolicy": "Hold"}},
        "Cohort": {"apiVersion": version, "kind": "Cohort", "metadata": {"name": "research"},
                   "spec": {"parentName": "org", **QUOTAS, "fairSharing": {"weight": "500m"}}},
        "LocalQueue": {"apiVersion": version, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "team-a"},
                       "spec": {"clusterQueue": "team-a", "stopPolicy": "HoldAndDrain",
                                "fairSharing": {"weight": "3"}}},
        "WorkloadPriorityClass": {"apiVersion": version, "kind": "WorkloadPriorityClass",
                                  "metadata": {"name": "high"}, "value": 1000, "description": "urgent"},
        "AdmissionCheck": {"apiVersion": version, "kind": "AdmissionCheck", "metadata": {"name": "prov"},
                           "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request", "parameters": {
                               "apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "cfg"}}},
        "Workload": {"apiVersion": version, "kind": "Workload", "metadata": {"name": "job-1", "namespace": "team-a"},
                     "spec": {"queueName": "q", "priority": 10, "active": False,
                              "maximumExecutionTimeSeconds": 600,
                              "podSets": [{"name": "main", "count": 3, "template": {"spec": {"containers": [
                                  {"name": "c", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]}}}]}},
        "Namespace": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"t": "a"}}},
        "PriorityClass": {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": "system"}, "value": 100000, "globalDefault": False,
                          "description": "core", "preemptionPolicy": "Never"},
    }


def decoded(doc: dict[str, Any]) -> m.AnyObject:
    result = decode(doc, file="f.yaml", line=1)
    assert [f for f in result.findings if f.is_error] == [], result.findings
    assert result.obj is not None
    return result.obj


@pytest.mark.parametrize("version", [V2, V1])
@pytest.mark.parametrize("kind", list(docs(V2)))
def test_decode_encode_decode_is_lossless(kind: str, version: str) -> None:
    """decode → encode (v1beta2) → decode gives an equal object for every kind, from either API version."""
    doc = docs(version)[kind]
    if version == V1 and kind == "ClusterQueue":
        doc["spec"]["cohort"] = doc["spec"].pop("cohortName")
    first = decoded(doc)
    encoded = encode(first)
    assert encoded["apiVersion"] in (V2, "v1", "scheduling.k8s.io/v1")
    assert decoded(encoded) == first
    assert encode(decoded(encoded)) == encoded


def v1beta1_cq(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}


@pytest.mark.parametrize(("spec", "field", "expected"), [
    ({"cohort": "research"}, "cohort_name", "research"),
    ({"admissionChecks": ["a", "b"]}, "admission_checks",
     (m.AdmissionCheckRule(name="a"), m.AdmissionCheckRule(name="b"))),
    ({"flavorFungibility": {"whenCanBorrow": "Borrow"}}, "flavor_fungibility",
     m.FlavorFungibility(when_can_borrow="MayStopSearch")),
    ({"flavorFungibility": {"whenCanPreempt": "Preempt"}}, "flavor_fungibility",
     m.FlavorFungibility(when_can_preempt="MayStopSearch")),
], ids=["cohort-to-cohortName", "admissionChecks-to-strategy", "Borrow-to-MayStopSearch",
        "Preempt-to-MayStopSearch"])
def test_v1beta1_cluster_queue_conversions(spec: dict[str, Any], field: str, expected: object) -> None:
    """Each v1beta1 ClusterQueue field converts to its v1beta2 form (shared/research/kueue.md §4)."""
    assert getattr(decoded(v1beta1_cq(spec)), field) == expected


@pytest.mark.parametrize(("source", "group", "kind"), [
    ("kueue.x-k8s.io/workloadpriorityclass", "kueue.x-k8s.io", "WorkloadPriorityClass"),
    ("scheduling.k8s.io/priorityclass", "scheduling.k8s.io", "PriorityClass"),
], ids=["workload-priority-class", "pod-priority-class"])
def test_v1beta1_workload_priority_class_becomes_a_reference(source: str, group: str, kind: str) -> None:
    """priorityClassSource + priorityClassName become priorityClassRef{group, kind, name}."""
    doc = docs(V1)["Workload"]
    doc["spec"].update({"priorityClassSource": source, "priorityClassName": "high"})
    obj = decoded(doc)
    assert isinstance(obj, m.Workload)
    assert obj.priority_class_ref == m.PriorityClassRef(group=group, kind=kind, name="high")
    assert encode(obj)["spec"]["priorityClassRef"] == {"group": group, "kind": kind, "name": "high"}


def test_v1beta1_admission_check_retry_delay_is_dropped_with_a_warning() -> None:
    """retryDelayMinutes (removed in v1beta2) is dropped and said so, not silently lost."""
    doc = docs(V1)["AdmissionCheck"]
    doc["spec"]["retryDelayMinutes"] = 5
    result = decode(doc, file="f.yaml", line=1)
    assert result.obj is not None
    assert [(f.code, f.is_error) for f in result.findings] == [("dropped-field", False)]


def test_v1beta2_rejects_v1beta1_only_fields() -> None:
    """spec.cohort is not a v1beta2 field: written under v1beta2 it is an unknown field."""
    doc = docs(V2)["ClusterQueue"]
    doc["spec"]["cohort"] = "x"
    assert "unknown-field" in [f.code for f in decode(doc).findings]


UNKNOWN_FIELDS = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq
  labelz: {a: b}
spec:
  cohortNam: research
  resourceGroups:
    - coveredResources: [cpu]
      flavors:
        - name: default
          resources:
            - name: cpu
              nominalQuota: "1"
              lendingLimitt: "1"
"""


def test_unknown_fields_are_located_findings() -> None:
    """Each unknown field is an error at its own line, with a did-you-mean suggestion when one is close."""
    doc = load_yaml("cq.yaml", UNKNOWN_FIELDS.encode()).documents[0]
    result = decode(doc.data, file="cq.yaml", line=doc.line, line_of=doc.line_of)
    unknown = [(f.location.line if f.location else None, f.message) for f in result.findings
               if f.code == "unknown-field"]
    assert [line for line, _ in unknown] == [5, 7, 15]
    assert "did you mean 'cohortName'?" in unknown[1][1]
    assert "did you mean 'lendingLimit'?" in unknown[2][1]
    assert result.obj is None


def test_status_is_ignored_with_a_warning() -> None:
    """A status block copied from the cluster is ignored with a warning, not an error."""
    doc = docs(V2)["LocalQueue"]
    doc["status"] = {"pendingWorkloads": 3}
    result = decode(doc)
    assert result.obj is not None
    assert [f.code for f in result.findings] == ["ignored-status"]


def test_repeated_admission_checks_are_refused_as_the_api_server_refuses_them() -> None:
    """admissionChecksStrategy.admissionChecks is a list keyed by name and onFlavors a set: a repeat is an error
    at its own entry (the API server answers "Duplicate value")."""
    doc = docs(V2)["ClusterQueue"]
    doc["spec"]["admissionChecksStrategy"] = {"admissionChecks": [
        {"name": "prov", "onFlavors": ["a", "b", "a"]}, {"name": "other"}, {"name": "prov"}]}
    found = [(f.code, f.message) for f in decode(doc).findings if f.is_error]
    assert found == [("duplicate-value", "flavor 'a' is listed twice"),
                     ("duplicate-value", "admission check 'prov' is listed twice")]
