"""Cluster-scoped objects under a team's paths are the platform's (docs/config.md ``teamClusterScopedKinds``).

A cluster-scoped object acts on the whole cluster (an AdmissionCheck every ClusterQueue may name, a
ClusterRoleBinding to ``cluster-admin``), so a team may define one under its own paths only when the trusted
``gitopsq.yaml`` lists its kind in ``teamClusterScopedKinds`` (default: ClusterQueue and Namespace, which the
built-in policies already bound to the team). Whatever the actor: the platform keeps such objects under its own
paths. Pure: the caller passes the revision's objects, the paths the change touched and the trusted config.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.api.model import KINDS
from gitopsq.errors import Location
from gitopsq.manifests.check_report import Report
from gitopsq.manifests.config_model import RepoConfig

# Well-known kinds of the Kubernetes API and of common add-ons, by scope; gitopsq's own kinds come from KINDS.
CLUSTER_SCOPED: Final = frozenset({
    "APIService", "CertificateSigningRequest", "ClusterIssuer", "ClusterRole", "ClusterRoleBinding", "ComponentStatus",
    "CSIDriver", "CSINode", "CustomResourceDefinition", "FlowSchema", "IngressClass", "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding", "MutatingWebhookConfiguration", "Namespace", "Node", "PersistentVolume",
    "PodSecurityPolicy", "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass", "StorageClass",
    "Topology", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration",
    "VolumeAttachment", "MultiKueueCluster", "MultiKueueConfig", "ProvisioningRequestConfig",
})
NAMESPACED: Final = frozenset({
    "ConfigMap", "CronJob", "DaemonSet", "Deployment", "Endpoints", "EndpointSlice", "Event", "HorizontalPodAutoscaler",
    "Ingress", "Job", "Lease", "LimitRange", "NetworkPolicy", "PersistentVolumeClaim", "Pod", "PodDisruptionBudget",
    "PodTemplate", "ReplicaSet", "ReplicationController", "ResourceQuota", "Role", "RoleBinding", "Secret", "Service",
    "ServiceAccount", "StatefulSet",
})


def cluster_scoped(kind: str, namespace: str) -> bool:
    """Whether an object of ``kind`` is cluster-scoped. A kind gitopsq does not know is taken as cluster-scoped
    unless the object names a namespace (fail closed: no namespace means it would act on the whole cluster)."""
    if kind in KINDS:
        return not KINDS[kind][1]
    if kind in CLUSTER_SCOPED:
        return True
    if kind in NAMESPACED:
        return False
    return not namespace


def cluster_scoped_findings(report: Report, trust: RepoConfig, touched: Iterable[str] | None) -> list[Finding]:
    """An error for each cluster-scoped object under a non-platform team's path whose kind ``trust`` does not
    opt in, among the objects of files the change touched (``touched`` None: every file, a first revision)."""
    wanted = None if touched is None else frozenset(touched)
    out: list[Finding] = []
    objects = [(e.path, e.line, e.key.kind, e.key.namespace, e.key.name) for e in report.entries]
    objects += [(p.path, p.line, p.kind, p.namespace, p.name) for p in report.passthrough]
    for path, line, kind, namespace, name in objects:
        if wanted is not None and path not in wanted:
            continue
        if kind in trust.team_cluster_kinds or not cluster_scoped(kind, namespace):
            continue
        owner = trust.owner_of(path)
        if owner is None or owner == trust.platform_team:
            continue  # no owner: team-owns-path denies it already
        out.append(findings.error(
            "cluster-scoped-in-team-path",
            f"{kind}/{name} is cluster-scoped and {path} belongs to team {owner}: cluster-scoped objects are the "
            f"platform team's unless gitopsq.yaml lists {kind} under teamClusterScopedKinds",
            location=Location(path, line), obj=f"{kind}/{name}"))
    return out
