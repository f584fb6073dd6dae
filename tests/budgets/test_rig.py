"""The compiled queues of a Budget are what a real API server with Kueue's CRDs accepts (server-side apply on the
envtest rig: CRD schemas and CEL validation rules), and what it stores reads back labelled with the Budget."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from gitopsq.api.codec import encode
from gitopsq.manifests import load_file

pytestmark = pytest.mark.envtest

BUDGET = """apiVersion: gitopsq.dev/v1alpha1
kind: Budget
metadata: {name: rig-budget-gpu}
spec:
  team: rig
  namespaces: [rig-budget-a, rig-budget-b]
  queueName: gpu
  cohort: rig-pool
  fairShareWeight: "2"
  flavors:
    - {name: a100, committed: {nvidia.com/gpu: 4, cpu: "32", memory: 256Gi}, burst: {nvidia.com/gpu: 8}}
    - {name: spot, committed: {}, burst: {cpu: "32", memory: 128Gi}}
"""


def test_compiled_queues_are_accepted_and_lead_back_to_the_budget(kueue_clean: Any) -> None:
    """kube-apiserver accepts the compiled ClusterQueue and LocalQueues, and `kubectl get cq -l gitopsq.dev/budget`
    finds the ClusterQueue by the Budget's name."""
    rig = kueue_clean
    result = load_file("teams/rig/budget.yaml", BUDGET.encode())
    assert not [f for f in result.findings if f.is_error], result.findings
    docs = [encode(e.obj) for e in result.entries]
    for namespace in ("rig-budget-a", "rig-budget-b"):
        rig.kubectl("create", "namespace", namespace, check=False)
    try:
        rig.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))
        selector = "gitopsq.dev/budget=rig-budget-gpu"
        found = json.loads(rig.kubectl("get", "clusterqueues", "-l", selector, "-o", "json").stdout)
        (cq,) = found["items"]
        assert cq["metadata"]["name"] == "rig-budget-gpu"
        assert cq["spec"]["flavorFungibility"]["whenCanBorrow"] == "TryNextFlavor"
        lqs = json.loads(rig.kubectl("get", "localqueues", "-A", "-l", selector, "-o", "json").stdout)
        assert sorted(i["metadata"]["namespace"] for i in lqs["items"]) == ["rig-budget-a", "rig-budget-b"]
    finally:
        rig.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=yaml.safe_dump_all(docs), check=False)
        rig.kubectl("delete", "namespace", "rig-budget-a", "rig-budget-b", "--wait=false", check=False)
