"""The registry of resource kinds: REST paths, what a sync may address, and agreement with the bundled CRDs."""

from __future__ import annotations

import pytest

from gitopsq.api.model import ObjectKey
from gitopsq.cluster.apply import collection_path, object_path
from gitopsq.cluster.crds import bundled_crds
from gitopsq.cluster.kinds import (
    BY_GROUP_KIND,
    CLUSTER_QUEUE,
    JOB,
    KINDS,
    LOCAL_QUEUE,
    NAMESPACE,
    TOPOLOGY,
    WATCHED,
    Kind,
    kind_of,
)
from gitopsq.cluster.kube import ClusterNotFound


@pytest.mark.parametrize(("kind", "namespace", "path"), [
    pytest.param(NAMESPACE, "", "/api/v1/namespaces", id="core group, cluster-scoped"),
    pytest.param(CLUSTER_QUEUE, "team-a", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
                 id="a cluster-scoped kind ignores the namespace"),
    pytest.param(LOCAL_QUEUE, "team-a", "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues",
                 id="a namespaced kind in a namespace"),
    pytest.param(LOCAL_QUEUE, "", "/apis/kueue.x-k8s.io/v1beta2/localqueues", id="a namespaced kind, all namespaces"),
    pytest.param(JOB, "ns", "/apis/batch/v1/namespaces/ns/jobs", id="batch Jobs"),
])
def test_collection_paths(kind: Kind, namespace: str, path: str) -> None:
    """A kind's collection path names its group, version and plural, and its namespace only when namespaced."""
    assert kind_of(kind.group, kind.kind) is kind
    assert kind.collection_path(namespace) == path


def test_sync_paths_follow_the_manifest_version_and_refuse_unsynced_kinds() -> None:
    """The sync addresses an object at the version its manifest names; Jobs (only watched) and unknown kinds are
    ClusterNotFound."""
    key = ObjectKey(group="kueue.x-k8s.io", kind="LocalQueue", namespace="ns", name="queue")
    assert object_path(key, "v1beta1") == "/apis/kueue.x-k8s.io/v1beta1/namespaces/ns/localqueues/queue"
    for group, kind in (("batch", "Job"), ("apps", "Deployment")):
        with pytest.raises(ClusterNotFound, match=f"{group}/{kind}"):
            collection_path(group, "v1", kind)


def test_the_watch_cache_and_the_topology_read_the_kinds_in_registry_order() -> None:
    """Informers start in registry order; the topology is built from the queue kinds, without Workloads; job kinds
    (batch/v1 Jobs included) are watched through their integrations (`Cache.add`), not listed here."""
    assert WATCHED == ("namespaces", "priorityclasses", "resourceflavors", "cohorts", "clusterqueues", "localqueues",
                       "workloadpriorityclasses", "admissionchecks", "workloads")
    assert WATCHED[:-1] == TOPOLOGY
    assert len(BY_GROUP_KIND) == len(KINDS)


def test_every_bundled_crd_matches_its_registered_kind() -> None:
    """Each CRD gitopsq ships is registered with the same group, plural, scope, short names and served version."""
    for crd in bundled_crds():
        spec, names = crd["spec"], crd["spec"]["names"]
        kind = kind_of(spec["group"], names["kind"])
        assert kind is not None, names["kind"]
        assert (kind.plural, kind.namespaced, kind.short_names) == (
            names["plural"], spec["scope"] == "Namespaced", tuple(names.get("shortNames") or ()))
        assert kind.version in [v["name"] for v in spec["versions"] if v.get("served")]
