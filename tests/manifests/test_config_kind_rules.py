"""Kueue's configuration kinds in a revision: their own rules and their references, each finding at its file and
line (through the pure pipeline, check_files)."""

from __future__ import annotations

import pytest

from gitopsq.manifests import ParseCache, check_files

CONFIG = b"""apiVersion: gitopsq.dev/v1alpha1
kind: RepositoryConfig
include: [q/]
platformTeam: p
teams: [{name: p, paths: ["**"]}]
"""
CONFIGS = """apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: dc}
spec:
  levels: [{nodeLabel: cloud.example.com/block}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ProvisioningRequestConfig
metadata: {name: prc}
spec: {provisioningClassName: check-capacity.autoscaling.x-k8s.io}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: worker}
spec:
  clusterSource: {kubeConfig: {location: worker}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: mk}
spec: {clusters: [worker]}
"""


def found(text: str) -> list[tuple[str, int | None, str, str]]:
    report = check_files({"q/configs.yaml": CONFIGS.encode(), "q/x.yaml": text.encode()}, CONFIG,
                         cache=ParseCache())
    return [(f.code, f.location.line if f.location else None, f.severity.value, f.obj or "")
            for f in report.findings if f.location and f.location.path == "q/x.yaml"]


def check_(name: str, controller: str, params: str = "") -> str:
    return (f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {{name: {name}}}\nspec:\n"
            f"  controllerName: {controller}\n" + (f"  parameters: {params}\n" if params else ""))


def flavor(spec: str) -> str:
    return f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: f}}\nspec:\n{spec}"


def test_configuration_kinds_and_their_references_are_clean() -> None:
    text = (flavor("  nodeLabels: {pool: a}\n  topologyName: dc\n") + "---\n"
            + check_("prov", "kueue.x-k8s.io/provisioning-request",
                     "{apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: prc}") + "---\n"
            + check_("mk", "kueue.x-k8s.io/multikueue", "{apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: mk}"))
    assert found(text) == []


TOPOLOGY = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Topology\nmetadata: {name: t}\nspec:\n  levels:\n"


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param(flavor("  nodeLabels: {pool: a}\n  topologyName: dcc\n"),
                 [("unknown-topology", 6, "error", "ResourceFlavor/f")], id="flavor-names-a-missing-topology"),
    pytest.param(flavor("  topologyName: dc\n"), [("topology-needs-node-labels", 5, "error", "ResourceFlavor/f")],
                 id="topology-without-node-labels"),
    pytest.param(TOPOLOGY + "  - nodeLabel: kubernetes.io/hostname\n  - nodeLabel: rack\n",
                 [("invalid-topology", 6, "error", "Topology/t")], id="hostname-not-lowest"),
    pytest.param(TOPOLOGY + "  - nodeLabel: rack\n  - nodeLabel: rack\n",
                 [("invalid-topology", 7, "error", "Topology/t")], id="level-twice"),
    pytest.param(TOPOLOGY + "  - nodeLabel: -bad-\n", [("invalid-label", 6, "error", "Topology/t")],
                 id="level-not-a-label-key"),
    pytest.param(TOPOLOGY + "".join(f"  - nodeLabel: l{i}\n" for i in range(17)),
                 [("invalid-topology", 5, "error", "Topology/t")], id="seventeen-levels"),
    pytest.param(check_("c", "kueue.x-k8s.io/provisioning-request",
                        "{apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: mk}"),
                 [("wrong-parameters-kind", 6, "error", "AdmissionCheck/c")], id="parameters-of-another-controller"),
    pytest.param(check_("c", "kueue.x-k8s.io/provisioning-request",
                        "{apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: other}"),
                 [("unknown-parameters", 6, "error", "AdmissionCheck/c")], id="parameters-name-missing-config"),
    pytest.param(check_("c", "example.com/gate", "{apiGroup: kueue.x-k8s.io, kind: ClusterQueue, name: q}"),
                 [("wrong-parameters-kind", 6, "error", "AdmissionCheck/c")], id="parameters-of-a-kueue-kind"),
    pytest.param(check_("c", "example.com/gate", "{apiGroup: example.com, kind: GateConfig, name: g}"), [],
                 id="another-controllers-own-kind"),
    pytest.param(check_("c", "kueue.x-k8s.io/multikueue"), [("missing-parameters", 5, "warning", "AdmissionCheck/c")],
                 id="multikueue-without-parameters"),
    pytest.param("apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: m2}\n"
                 "spec:\n  clusters: [worker, elsewhere]\n",
                 [("unknown-multikueue-cluster", 5, "error", "MultiKueueConfig/m2")], id="missing-cluster"),
    pytest.param("apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueCluster\nmetadata: {name: w2}\n"
                 "spec:\n  clusterSource:\n    kubeConfig: {location: w}\n    clusterProfileRef: {name: w}\n",
                 [("invalid-value", 5, "error", "MultiKueueCluster/w2")], id="two-cluster-sources"),
    pytest.param("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ProvisioningRequestConfig\nmetadata: {name: p2}\n"
                 "spec:\n  provisioningClassName: Not_A_Name\n  managedResources: [gpu, gpu]\n",
                 [("invalid-name", 5, "error", "ProvisioningRequestConfig/p2"),
                  ("duplicate-value", 6, "error", "ProvisioningRequestConfig/p2")], id="provisioning-config"),
    pytest.param("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\nspec:\n"
                 "  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}\n",
                 [("not-simulated", 5, "warning", "ClusterQueue/q")], id="admission-fair-sharing-is-kept-but-warned"),
    pytest.param("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\nspec:\n"
                 "  queueingStrategy: StrictFIFO\n  concurrentAdmissionPolicy:\n    migration:\n"
                 "      mode: TryPreferredFlavors\n      constraints: {lastAcceptableFlavorName: spot}\n",
                 [("invalid-concurrent-admission", 4, "error", "ClusterQueue/q"),
                  ("invalid-concurrent-admission", 5, "error", "ClusterQueue/q"),
                  ("invalid-concurrent-admission", 9, "error", "ClusterQueue/q"),
                  ("not-simulated", 6, "warning", "ClusterQueue/q")], id="concurrent-admission-rules"),
    pytest.param(flavor("  nodeTaints: [{key: k, effect: NoSchedule, timeAdded: yesterday}]\n"),
                 [("invalid-value", 5, "error", "ResourceFlavor/f")], id="taint-time-not-rfc3339"),
])
def test_findings_name_file_line_object_and_reason(text: str, expected: list[tuple[str, int, str, str]]) -> None:
    assert sorted(found(text)) == sorted(expected)
