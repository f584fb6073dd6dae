"""The Job webhook walks a job's whole chain of controller owners, read from the API server (Kueue's
FindAncestorJobManagedByKueue in its webhooks): a job with a managed ancestor is not suspended nor refused."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cluster_rig import create_job, job_manifest
from envtest_rig import Envtest

from gitopsq.admission_loop.integrations.batch_job import BatchJob
from gitopsq.cluster.apply import KubeRest
from gitopsq.controller.job_webhook import ancestor_walk
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions

pytestmark = pytest.mark.envtest


def _owned_by(job: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    job["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner["metadata"]["name"],
                                           "uid": owner["metadata"]["uid"], "controller": True}]
    return job


def _review(job: dict[str, Any]) -> dict[str, Any]:
    return {"request": {"uid": "1", "operation": "CREATE", "namespace": job["metadata"]["namespace"],
                        "kind": {"group": "batch", "version": "v1", "kind": "Job"}, "object": job}}


def test_grandchild_of_a_queued_job_is_left_alone(envtest: Envtest) -> None:
    """A queued Job's child (unlabelled) owns a labelled grandchild: the webhook, walking the chain through the API,
    neither suspends the grandchild nor refuses an unlabelled one in a managed namespace; without a managed ancestor
    (an unlabelled root, or an owner that does not exist) the labelled job is suspended."""
    ns = envtest.new_namespace("ancestry")
    with envtest.api_client() as api:
        rest = KubeRest(api)
        walk = ancestor_walk(rest, (BatchJob(),))
        root = create_job(envtest, job_manifest(ns, "root", "queue", {"cpu": "1"}))
        middle = create_job(envtest, _owned_by(job_manifest(ns, "middle", None, {"cpu": "1"}), root))
        leaf = _owned_by(job_manifest(ns, "leaf", "queue", {"cpu": "1"}, suspend=False), middle)
        assert walk(leaf)
        hook = JobWebhook(JobWebhookOptions(managed_namespaces=frozenset({ns}), owner_kinds=frozenset(),
                                            managed_ancestor=walk))
        assert "patch" not in hook.mutate(_review(leaf))["response"]
        unlabelled = _owned_by(job_manifest(ns, "leaf2", None, {"cpu": "1"}), middle)
        assert hook.validate(_review(unlabelled))["response"]["allowed"] is True

        plain = create_job(envtest, job_manifest(ns, "plain", None, {"cpu": "1"}))
        orphan = _owned_by(job_manifest(ns, "orphan", "queue", {"cpu": "1"}, suspend=False), plain)
        assert not walk(orphan)
        patch = json.loads(base64.b64decode(hook.mutate(_review(orphan))["response"]["patch"]))
        assert patch == [{"op": "add", "path": "/spec/suspend", "value": True}]
        gone = _owned_by(job_manifest(ns, "gone", "queue", {"cpu": "1"}), {"metadata": {"name": "nope", "uid": "x"}})
        assert not walk(gone)
