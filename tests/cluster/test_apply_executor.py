"""The executor's write guard: a replica that is no longer the leader writes nothing more."""

from __future__ import annotations

import pytest
from envtest_rig import Envtest

from gitopsq.cluster.apply import NOT_LEADER, Executor, KubeRest
from gitopsq.reconcile.inventory import Inventory, InventoryEntry
from gitopsq.reconcile.pairing import build_plan, key_of_document

pytestmark = pytest.mark.envtest


def test_executor_stops_writing_when_leadership_is_lost(kueue_clean: Envtest) -> None:
    """Once may_write turns False mid-plan, the remaining applies fail as not written and prunes are held."""
    docs = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f"guard-{i}"},
             "spec": {}} for i in range(3)]
    gone = key_of_document({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "old"}})
    plan = build_plan("rev", docs, {gone: {"metadata": {"name": "old"}}},
                      Inventory.of([InventoryEntry(gone, "v1beta2")]), allow_empty=True)
    answers = iter([True, False, False])
    executor = Executor(KubeRest(kueue_clean.api_client()), concurrency=1, may_write=lambda: next(answers, False))
    done = executor.execute(plan)
    assert [k.name for k in done.applied] == ["guard-0"]
    assert [(f.key.name, f.reason) for f in done.failed] == [("guard-1", NOT_LEADER), ("guard-2", NOT_LEADER)]
    assert done.not_attempted == (gone,) and not done.ok
