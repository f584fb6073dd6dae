"""Normalising live objects, recognising foreign managers, and reading managedFields."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.reconcile.field_diff import ByName
from gitopsq.reconcile.normalize import foreign_manager, normalize_live, owned_fields, strip_foreign_markers


def test_normalize_live_drops_server_fields() -> None:
    """Status, uid, resourceVersion, managedFields and kubectl's last-applied annotation are removed."""
    live = {"apiVersion": "v1", "kind": "Namespace", "status": {"phase": "Active"},
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "7", "generation": 2, "managedFields": [],
                         "creationTimestamp": "t", "labels": {"team": "a"},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}
    assert normalize_live(live) == {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": "a", "labels": {"team": "a"}}}


@pytest.mark.parametrize(("meta", "tool"), [
    pytest.param({"annotations": {"argocd.argoproj.io/tracking-id": "app:kueue.x-k8s.io/ClusterQueue:/a"}},
                 "Argo CD tracks", id="argo-annotation"),
    pytest.param({"labels": {"app.kubernetes.io/instance": "queues"}}, "Argo CD label tracking", id="argo-label"),
    pytest.param({"labels": {"kustomize.toolkit.fluxcd.io/name": "queues"}}, "Flux", id="flux-kustomize"),
    pytest.param({"labels": {"team": "a"}}, None, id="ordinary-labels"),
])
def test_foreign_manager(meta: dict[str, Any], tool: str | None) -> None:
    """Objects carrying Argo CD or Flux tracking markers are recognised as another tool's."""
    found = foreign_manager({"metadata": {"name": "x", **meta}})
    assert (found is None) if tool is None else (found is not None and found.startswith(tool))


def test_strip_foreign_markers_from_desired() -> None:
    """Tracking markers copied into Git are removed before apply and named; other metadata stays."""
    doc = {"kind": "ClusterQueue", "metadata": {"name": "a", "labels": {"team": "a", "app.kubernetes.io/instance": "x"},
                                                "annotations": {"argocd.argoproj.io/tracking-id": "t"}}}
    clean, dropped = strip_foreign_markers(doc)
    assert clean["metadata"] == {"name": "a", "labels": {"team": "a"}}
    assert dropped == ("annotation argocd.argoproj.io/tracking-id", "label app.kubernetes.io/instance")
    assert doc["metadata"]["annotations"] == {"argocd.argoproj.io/tracking-id": "t"}  # input untouched


def test_owned_fields_reads_our_apply_entry_only() -> None:
    """Only gitopsq's Apply entry counts; keyed items become by-name steps and atomic lists are leaves."""
    live = {"metadata": {"managedFields": [
        {"manager": "gitopsq", "operation": "Apply", "fieldsV1": {
            "f:metadata": {"f:labels": {"f:team": {}}},
            "f:spec": {"f:resourceGroups": {}, "f:flavors": {'k:{"name":"cpu"}': {".": {}, "f:name": {}}},
                       "f:tags": {"v:x": {}}}}},
        {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:spec": {"f:stopPolicy": {}}}},
        {"manager": "gitopsq", "operation": "Apply", "subresource": "status", "fieldsV1": {"f:status": {}}},
    ]}}
    owned = owned_fields(live)
    assert owned.owns(("metadata", "labels", "team"))
    assert owned.owns(("spec", "resourceGroups", 0, "flavors", ByName("x"), "name"))  # inside an atomic list
    assert owned.owns(("spec", "flavors", ByName("cpu"), "name"))
    assert owned.owns(("spec", "tags"))
    assert not owned.owns(("spec", "stopPolicy"))
    assert not owned.owns(("status",))
    assert not owned.owns(("metadata", "labels", "other"))
