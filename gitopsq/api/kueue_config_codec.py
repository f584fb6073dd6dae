"""Kueue's configuration kinds ⇄ model objects: Topology, ProvisioningRequestConfig, MultiKueueConfig and
MultiKueueCluster (their specs; `codec` reads the envelope and dispatches here).

v1beta1 MultiKueueCluster ``spec.kubeConfig`` / ``spec.clusterProfileRef`` become v1beta2
``spec.clusterSource.kubeConfig`` / ``spec.clusterSource.clusterProfileRef``; the other kinds have the same shape
in both versions (v1beta2 MultiKueueConfig adds ``quotaManagement``).
"""

from __future__ import annotations

from typing import Any

from gitopsq.api import model as m
from gitopsq.api.reader import FieldPath, Reader
from gitopsq.api.shared_fields import drop_none
from gitopsq.errors import Location


def decode_topology(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None) -> m.Topology:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("levels",))
    if "levels" not in spec:
        r.error((*path, "levels"), "missing-field", "spec.levels is required")
    levels = []
    for i, item in enumerate(r.sequence(spec.get("levels"), (*path, "levels"))):
        p = (*path, "levels", i)
        level = r.mapping(item, p, allowed=("nodeLabel",))
        levels.append(r.string(level.get("nodeLabel"), (*p, "nodeLabel"), required=True))
    return m.Topology(meta=meta, levels=tuple(levels), source=source)


def decode_provisioning_request_config(r: Reader, meta: m.ObjectMeta, raw: Any,
                                       source: Location | None) -> m.ProvisioningRequestConfig:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("provisioningClassName", "parameters", "managedResources",
                                         "retryStrategy", "podSetUpdates", "podSetMergePolicy"))
    rp = (*path, "retryStrategy")
    retry = r.mapping(spec.get("retryStrategy"), rp,
                      allowed=("backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"))
    defaults = m.RetryStrategy()
    strategy = m.RetryStrategy(
        backoff_limit_count=_int32(r, retry.get("backoffLimitCount"), (*rp, "backoffLimitCount"),
                                   defaults.backoff_limit_count),
        backoff_base_seconds=_int32(r, retry.get("backoffBaseSeconds"), (*rp, "backoffBaseSeconds"),
                                    defaults.backoff_base_seconds),
        backoff_max_seconds=_int32(r, retry.get("backoffMaxSeconds"), (*rp, "backoffMaxSeconds"),
                                   defaults.backoff_max_seconds))
    up = (*path, "podSetUpdates")
    updates = r.mapping(spec.get("podSetUpdates"), up, allowed=("nodeSelector",))
    selectors = []
    for i, item in enumerate(r.sequence(updates.get("nodeSelector"), (*up, "nodeSelector"))):
        p = (*up, "nodeSelector", i)
        entry = r.mapping(item, p, allowed=("key", "valueFromProvisioningClassDetail"))
        selectors.append((r.string(entry.get("key"), (*p, "key"), required=True),
                          r.string(entry.get("valueFromProvisioningClassDetail"),
                                   (*p, "valueFromProvisioningClassDetail"), required=True)))
    return m.ProvisioningRequestConfig(
        meta=meta,
        provisioning_class_name=r.string(spec.get("provisioningClassName"), (*path, "provisioningClassName"),
                                         required=True),
        parameters=r.string_map(spec.get("parameters"), (*path, "parameters")),
        managed_resources=r.string_list(spec.get("managedResources"), (*path, "managedResources")),
        retry_strategy=strategy, pod_set_updates=tuple(selectors),
        pod_set_merge_policy=r.string(spec.get("podSetMergePolicy"), (*path, "podSetMergePolicy"),
                                      choices=("IdenticalPodTemplates",
                                               "IdenticalWorkloadSchedulingRequirements")) or None,
        source=source)


def _int32(r: Reader, value: Any, path: FieldPath, default: int) -> int:
    found = r.integer(value, path, default=default, minimum=-(2 ** 31), maximum=2 ** 31 - 1)
    return default if found is None else found


def decode_multikueue_config(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None, *,
                             v1beta1: bool) -> m.MultiKueueConfig:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("clusters",) if v1beta1 else ("clusters", "quotaManagement"))
    if "clusters" not in spec:
        r.error((*path, "clusters"), "missing-field", "spec.clusters is required")
    return m.MultiKueueConfig(
        meta=meta, clusters=r.string_list(spec.get("clusters"), (*path, "clusters")),
        quota_management=r.string(spec.get("quotaManagement"), (*path, "quotaManagement"),
                                  choices=("Manual", "Automated")) or None,
        source=source)


def decode_multikueue_cluster(r: Reader, meta: m.ObjectMeta, raw: Any, source: Location | None, *,
                              v1beta1: bool) -> m.MultiKueueCluster:
    path: FieldPath = ("spec",)
    spec = r.mapping(raw, path, allowed=("kubeConfig", "clusterProfileRef") if v1beta1 else ("clusterSource",))
    if not v1beta1:
        path = (*path, "clusterSource")
        if "clusterSource" not in spec:
            r.error(path, "missing-field", "spec.clusterSource is required")
        spec = r.mapping(spec.get("clusterSource"), path, allowed=("kubeConfig", "clusterProfileRef"))
    kp = (*path, "kubeConfig")
    kube = r.mapping(spec.get("kubeConfig"), kp, allowed=("location", "locationType"))
    location = r.string(kube.get("location"), (*kp, "location"), required=True) if "kubeConfig" in spec else None
    location_type = r.string(kube.get("locationType"), (*kp, "locationType"), default="Secret",
                             choices=("Secret", "Path"))
    pp = (*path, "clusterProfileRef")
    profile = r.mapping(spec.get("clusterProfileRef"), pp, allowed=("name",))
    profile_name = r.string(profile.get("name"), (*pp, "name"), required=True) if "clusterProfileRef" in spec \
        else None
    if ("kubeConfig" in spec) == ("clusterProfileRef" in spec):
        r.error(path, "invalid-value", f"{'.'.join(str(p) for p in path)} needs exactly one of kubeConfig and "
                "clusterProfileRef")
    return m.MultiKueueCluster(meta=meta, kubeconfig_location=location, kubeconfig_location_type=location_type,
                               cluster_profile=profile_name, source=source)


# --- encode -----------------------------------------------------------------------------------------------------


def encode_topology_spec(obj: m.Topology) -> dict[str, Any]:
    return {"levels": [{"nodeLabel": level} for level in obj.levels]}


def encode_provisioning_request_config_spec(obj: m.ProvisioningRequestConfig) -> dict[str, Any]:
    retry = obj.retry_strategy
    return drop_none({
        "provisioningClassName": obj.provisioning_class_name,
        "parameters": dict(obj.parameters) or None,
        "managedResources": list(obj.managed_resources) or None,
        "retryStrategy": {"backoffLimitCount": retry.backoff_limit_count,
                          "backoffBaseSeconds": retry.backoff_base_seconds,
                          "backoffMaxSeconds": retry.backoff_max_seconds},
        "podSetUpdates": {"nodeSelector": [{"key": key, "valueFromProvisioningClassDetail": value}
                                           for key, value in obj.pod_set_updates]} if obj.pod_set_updates else None,
        "podSetMergePolicy": obj.pod_set_merge_policy,
    })


def encode_multikueue_config_spec(obj: m.MultiKueueConfig) -> dict[str, Any]:
    return drop_none({"clusters": list(obj.clusters), "quotaManagement": obj.quota_management})


def encode_multikueue_cluster_spec(obj: m.MultiKueueCluster) -> dict[str, Any]:
    source: dict[str, Any] = {}
    if obj.kubeconfig_location is not None:
        source["kubeConfig"] = {"location": obj.kubeconfig_location, "locationType": obj.kubeconfig_location_type}
    if obj.cluster_profile is not None:
        source["clusterProfileRef"] = {"name": obj.cluster_profile}
    return {"clusterSource": source}
