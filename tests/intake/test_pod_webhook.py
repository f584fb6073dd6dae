"""The pod webhook's decisions (gitopsq/intake/pods.py through JobWebhook.mutate_pod) and the configuration entry
it is registered with: queued pods gated and marked as Kueue's pod webhook marks them, everything else let by."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from gitopsq.admission_loop.integrations import select, webhook_kinds
from gitopsq.intake.jobs import JobWebhook, JobWebhookOptions
from gitopsq.manifests.pod_marks import FINALIZER, GATE, MANAGED_LABEL, ROLE_HASH, role_hash
from gitopsq.webhook.certs import POD_MUTATE_PATH, webhook_configurations


def _pod(labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team", **({"labels": labels} if labels is not None else {}),
                         **meta},
            "spec": {"containers": [{"name": "c", "image": "img:1", "resources": {"requests": {"cpu": "1"}}}]}}


def _apply(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add`` operations (the only ones the webhook sends) applied to a copy of ``doc``."""
    out = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] == "add", op
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        node: Any = out
        for key in parents:
            node = node[key]
        if last == "-":
            node.append(op["value"])
        else:
            node[last] = op["value"]
    return out


def _mutated(pod: dict[str, Any], operation: str = "CREATE",
             owners: frozenset[tuple[str, str]] = frozenset({("batch", "Job")})) -> dict[str, Any]:
    review = {"request": {"uid": "u1", "operation": operation, "object": pod,
                          "kind": {"group": "", "version": "v1", "kind": "Pod"}}}
    answer = JobWebhook(JobWebhookOptions(owner_kinds=owners)).mutate_pod(review)["response"]
    assert answer["allowed"] is True
    if "patch" not in answer:
        return pod
    patch = json.loads(base64.b64decode(answer["patch"]))
    return _apply(pod, patch)


def test_a_queued_pod_is_gated_labelled_finalized_and_given_its_role_hash() -> None:
    """A Pod with a queue label comes out with the managed label, Kueue's finalizer, the admission gate and the
    role hash of its spec; its own labels, gates and finalizers are kept."""
    pod = _pod({"kueue.x-k8s.io/queue-name": "queue", "app": "x"}, finalizers=["mine"])
    pod["spec"]["schedulingGates"] = [{"name": "other"}]
    out = _mutated(pod)
    assert out["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "queue", "app": "x", MANAGED_LABEL: "true"}
    assert out["metadata"]["finalizers"] == ["mine", FINALIZER]
    assert out["spec"]["schedulingGates"] == [{"name": "other"}, {"name": GATE}]
    assert out["metadata"]["annotations"] == {ROLE_HASH: role_hash(pod["spec"])}


@pytest.mark.parametrize("pod", [
    pytest.param(_pod(), id="no labels"),
    pytest.param(_pod({"app": "x"}), id="no queue label"),
    pytest.param(_pod({"kueue.x-k8s.io/queue-name": "queue"}, ownerReferences=[
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "1", "controller": True}]),
        id="a managed Job's pod"),
])
def test_pods_that_are_not_queued_or_belong_to_a_managed_job_are_left_alone(pod: dict[str, Any]) -> None:
    """An unlabelled pod, or one whose controller is a job kind a running integration queues, is not patched."""
    assert _mutated(pod) == pod


def test_an_update_or_an_already_marked_pod_is_not_patched() -> None:
    """Only CREATE is mutated, and a pod that already carries every mark gets no patch."""
    pod = _pod({"kueue.x-k8s.io/queue-name": "queue"})
    assert _mutated(pod, operation="UPDATE") == pod
    once = _mutated(pod)
    review = {"request": {"uid": "u2", "operation": "CREATE", "object": once}}
    assert "patch" not in JobWebhook().mutate_pod(review)["response"]


def test_role_hash_ignores_names_but_not_resources() -> None:
    """Two pods differing only in container name share a role; another resource request is another role."""
    spec = _pod()["spec"]
    renamed = {"containers": [{**spec["containers"][0], "name": "other"}]}
    bigger = {"containers": [{**spec["containers"][0], "resources": {"requests": {"cpu": "2"}}}]}
    assert role_hash(spec) == role_hash(renamed) != role_hash(bigger)
    assert len(role_hash(spec)) == 8


def test_pods_get_a_mutating_entry_of_their_own_and_are_never_validated() -> None:
    """With the pod integration, the mutating configuration has a second entry for pods on /mutate--v1-pod with an
    object selector on the queue label (no other pod reaches gitopsq); the validating one has no pod rule."""
    configs = {c["kind"]: c for c in webhook_configurations(b"ca", url="https://x",
                                                            kinds=webhook_kinds(select(["batch/job", "pod"])))}
    jobs, pods = configs["MutatingWebhookConfiguration"]["webhooks"]
    assert [r["resources"] for r in jobs["rules"]] == [["jobs"]]
    assert pods["clientConfig"]["url"] == f"https://x{POD_MUTATE_PATH}"
    assert pods["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    assert pods["objectSelector"] == {"matchExpressions": [{"key": "kueue.x-k8s.io/queue-name",
                                                            "operator": "Exists"}]}
    (validating,) = configs["ValidatingWebhookConfiguration"]["webhooks"]
    assert all("pods" not in r["resources"] for r in validating["rules"])
