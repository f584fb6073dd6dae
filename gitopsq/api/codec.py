"""Wire dicts ⇄ model objects: the only module that knows the shape of Kueue manifests.

`decode` accepts ``kueue.x-k8s.io/v1beta1`` and ``v1beta2`` (plus ``v1`` Namespace and
``scheduling.k8s.io/v1`` PriorityClass) and normalises to v1beta2 (shared/research/kueue.md §4):

1. ClusterQueue ``spec.cohort`` → ``cohortName``;
2. ClusterQueue ``spec.admissionChecks: [name]`` → ``admissionChecksStrategy.admissionChecks: [{name}]``;
3. flavorFungibility ``Borrow`` / ``Preempt`` → ``MayStopSearch``;
4. Workload ``priorityClassSource`` + ``priorityClassName`` → ``priorityClassRef``;
5. AdmissionCheck ``retryDelayMinutes`` (removed in v1beta2) is dropped with a warning;
6. MultiKueueCluster ``spec.kubeConfig`` / ``clusterProfileRef`` → ``spec.clusterSource.*``.

Unknown fields are reported as errors (a misspelt field would otherwise silently do nothing); ``status`` and
server-populated metadata are ignored with a warning. `encode` prints v1beta2.

This module reads the envelope (apiVersion, kind, metadata) and dispatches on the kind: the quota kinds' specs are
in `queue_codec`, Kueue's configuration kinds' in `kueue_config_codec`, the Workload's in `workload_codec`, fields
they share in `shared_fields`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gitopsq.api import kueue_config_codec as kc
from gitopsq.api import model as m
from gitopsq.api import queue_codec as q
from gitopsq.api.findings import Finding
from gitopsq.api.reader import FieldPath, LineOf, Reader, as_mapping
from gitopsq.api.shared_fields import drop_none
from gitopsq.api.workload_codec import decode_workload, encode_workload_spec
from gitopsq.errors import Location

SUPPORTED_VERSIONS: Final[Mapping[str, frozenset[str]]] = {
    "ResourceFlavor": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "ClusterQueue": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "Cohort": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "LocalQueue": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "WorkloadPriorityClass": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "AdmissionCheck": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "Topology": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "ProvisioningRequestConfig": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "MultiKueueConfig": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "MultiKueueCluster": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "Workload": frozenset({m.KUEUE_V1BETA1, m.KUEUE_V1BETA2}),
    "Namespace": frozenset({"v1"}),
    "PriorityClass": frozenset({"scheduling.k8s.io/v1"}),
}
ENCODE_VERSION: Final[Mapping[str, str]] = {kind: (m.KUEUE_V1BETA2 if m.KUEUE_V1BETA2 in versions else
                                                   next(iter(versions)))
                                            for kind, versions in SUPPORTED_VERSIONS.items()}

_META_FIELDS = ("name", "namespace", "labels", "annotations")
_SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
                "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers", "ownerReferences",
                "generateName")


@dataclass(frozen=True, slots=True)
class Decoded:
    """The result of decoding one document: the object (None if it could not be built) and the findings."""

    obj: m.AnyObject | None
    findings: tuple[Finding, ...]
    api_version: str = ""


def describe(doc: Mapping[str, Any]) -> str:
    """A short object name for messages, from whatever the document holds ("ClusterQueue/team-a")."""
    kind = doc.get("kind") if isinstance(doc.get("kind"), str) else "object"
    meta = as_mapping(doc.get("metadata"))
    name = meta.get("name") if isinstance(meta.get("name"), str) else "<unnamed>"
    ns = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    return f"{kind}/{ns}/{name}" if ns else f"{kind}/{name}"


def decode(doc: Any, *, file: str | None = None, line: int | None = None, line_of: LineOf | None = None,
           allow_status: bool = False) -> Decoded:
    """Decode one manifest document into a model object, normalised to v1beta2.

    ``line_of`` maps a field path (``("spec", "resourceGroups", 0)``) to its 1-based line, so findings point at
    the field; without it every finding carries the document's line.
    """
    if not isinstance(doc, Mapping):
        r = Reader(file=file, doc_line=line, obj="document", line_of=line_of)
        r.error((), "wrong-type", "a manifest must be a mapping with apiVersion, kind and metadata")
        return Decoded(None, tuple(r.findings))
    r = Reader(file=file, doc_line=line, obj=describe(doc), line_of=line_of)
    api_version = r.string(doc.get("apiVersion"), ("apiVersion",), required=True)
    kind = r.string(doc.get("kind"), ("kind",), required=True)
    if not api_version or not kind:
        return Decoded(None, tuple(r.findings), api_version)
    versions = SUPPORTED_VERSIONS.get(kind)
    if versions is None:
        r.error(("kind",), "unknown-kind", f"unknown kind {kind!r} (supported: {', '.join(SUPPORTED_VERSIONS)})")
        return Decoded(None, tuple(r.findings), api_version)
    if api_version not in versions:
        r.error(("apiVersion",), "unknown-version",
                f"{kind} is not served in {api_version!r} (use {' or '.join(sorted(versions))})")
        return Decoded(None, tuple(r.findings), api_version)
    v1beta1 = api_version == m.KUEUE_V1BETA1
    top_fields = {"apiVersion", "kind", "metadata", "spec"}
    if kind == "WorkloadPriorityClass":
        top_fields = {"apiVersion", "kind", "metadata", "value", "description"}
    elif kind == "PriorityClass":
        top_fields = {"apiVersion", "kind", "metadata", "value", "description", "globalDefault", "preemptionPolicy"}
    r.mapping(doc, (), allowed=top_fields, ignored=("status",))
    if "status" in doc and not allow_status:
        r.warn(("status",), "ignored-status", "status is written by the controller; the repository's copy is ignored")
    meta = _meta(r, doc.get("metadata"), namespaced=m.KINDS[kind][1])
    if meta is None:
        return Decoded(None, tuple(r.findings), api_version)
    source = Location(file, line) if file is not None else None
    spec = doc.get("spec")
    obj: m.AnyObject | None
    if kind == "ResourceFlavor":
        obj = q.decode_resource_flavor(r, meta, spec, source)
    elif kind == "ClusterQueue":
        obj = q.decode_cluster_queue(r, meta, spec, source, v1beta1=v1beta1)
    elif kind == "Cohort":
        obj = q.decode_cohort(r, meta, spec, source)
    elif kind == "LocalQueue":
        obj = q.decode_local_queue(r, meta, spec, source)
    elif kind == "WorkloadPriorityClass":
        obj = m.WorkloadPriorityClass(meta=meta, value=r.integer(doc.get("value"), ("value",), required=True,
                                                                  default=0) or 0,
                                      description=r.string(doc.get("description"), ("description",)),
                                      source=source)
    elif kind == "AdmissionCheck":
        obj = q.decode_admission_check(r, meta, spec, source)
    elif kind == "Topology":
        obj = kc.decode_topology(r, meta, spec, source)
    elif kind == "ProvisioningRequestConfig":
        obj = kc.decode_provisioning_request_config(r, meta, spec, source)
    elif kind == "MultiKueueConfig":
        obj = kc.decode_multikueue_config(r, meta, spec, source, v1beta1=v1beta1)
    elif kind == "MultiKueueCluster":
        obj = kc.decode_multikueue_cluster(r, meta, spec, source, v1beta1=v1beta1)
    elif kind == "Namespace":
        r.mapping(spec, ("spec",), allowed=("finalizers",))
        obj = m.Namespace(meta=meta, source=source)
    elif kind == "PriorityClass":
        obj = m.PriorityClass(
            meta=meta, value=r.integer(doc.get("value"), ("value",), required=True, default=0) or 0,
            global_default=r.boolean(doc.get("globalDefault"), ("globalDefault",), default=False),
            description=r.string(doc.get("description"), ("description",)),
            preemption_policy=r.string(doc.get("preemptionPolicy"), ("preemptionPolicy",),
                                       default="PreemptLowerPriority",
                                       choices=("PreemptLowerPriority", "Never")),
            source=source)
    else:  # Workload
        obj = decode_workload(r, meta, spec, source, v1beta1=v1beta1)
    has_errors = any(f.is_error for f in r.findings)
    return Decoded(None if has_errors else obj, tuple(r.findings), api_version)


# --- metadata ---------------------------------------------------------------------------------------------------


def _meta(r: Reader, raw: Any, *, namespaced: bool) -> m.ObjectMeta | None:
    path: FieldPath = ("metadata",)
    if raw is None:
        r.error(path, "missing-field", "metadata.name is required")
        return None
    data = r.mapping(raw, path, allowed=_META_FIELDS, ignored=_SERVER_META)
    name = r.string(data.get("name"), (*path, "name"), required=True)
    namespace = r.optional_string(data.get("namespace"), (*path, "namespace"))
    if namespaced and not namespace:
        r.error((*path, "namespace"), "wrong-scope", "metadata.namespace is required: this kind is namespaced")
    if not namespaced and namespace:
        r.error((*path, "namespace"), "wrong-scope",
                f"metadata.namespace {namespace!r} must not be set: this kind is cluster-scoped")
        namespace = None
    if not name:
        return None
    return m.ObjectMeta(name=name, namespace=namespace,
                        labels=r.string_map(data.get("labels"), (*path, "labels")),
                        annotations=r.string_map(data.get("annotations"), (*path, "annotations")))


def encode(obj: m.AnyObject) -> dict[str, Any]:
    """Print a model object as a v1beta2 (or core) manifest; defaults are written out explicitly."""
    doc: dict[str, Any] = {"apiVersion": ENCODE_VERSION[obj.KIND], "kind": obj.KIND,
                           "metadata": _encode_meta(obj.meta)}
    if isinstance(obj, m.ResourceFlavor):
        doc["spec"] = q.encode_resource_flavor_spec(obj)
    elif isinstance(obj, m.ClusterQueue):
        doc["spec"] = q.encode_cluster_queue_spec(obj)
    elif isinstance(obj, m.Cohort):
        doc["spec"] = q.encode_cohort_spec(obj)
    elif isinstance(obj, m.LocalQueue):
        doc["spec"] = q.encode_local_queue_spec(obj)
    elif isinstance(obj, m.WorkloadPriorityClass):
        doc["value"] = obj.value
        if obj.description:
            doc["description"] = obj.description
    elif isinstance(obj, m.AdmissionCheck):
        doc["spec"] = q.encode_admission_check_spec(obj)
    elif isinstance(obj, m.Topology):
        doc["spec"] = kc.encode_topology_spec(obj)
    elif isinstance(obj, m.ProvisioningRequestConfig):
        doc["spec"] = kc.encode_provisioning_request_config_spec(obj)
    elif isinstance(obj, m.MultiKueueConfig):
        doc["spec"] = kc.encode_multikueue_config_spec(obj)
    elif isinstance(obj, m.MultiKueueCluster):
        doc["spec"] = kc.encode_multikueue_cluster_spec(obj)
    elif isinstance(obj, m.PriorityClass):
        doc["value"] = obj.value
        doc["globalDefault"] = obj.global_default
        if obj.description:
            doc["description"] = obj.description
        doc["preemptionPolicy"] = obj.preemption_policy
    elif isinstance(obj, m.Workload):
        doc["spec"] = encode_workload_spec(obj)
    return doc


def _encode_meta(meta: m.ObjectMeta) -> dict[str, Any]:
    return drop_none({"name": meta.name, "namespace": meta.namespace, "labels": dict(meta.labels) or None,
                      "annotations": dict(meta.annotations) or None})
