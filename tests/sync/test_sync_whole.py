"""All or nothing per revision on the real API server: dry-run refusals write nothing, a write that keeps failing
is rolled back to the last good revision, a transient one is retried from fresh state (docs/sync.md)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from envtest_rig import Envtest
from prometheus_client import CollectorRegistry
from queue_repo import NS, QueueRepo, cpu_of, cq_live, get

from gitopsq.cluster.apply import KubeRest
from gitopsq.cluster.kube import ClusterUnavailable
from gitopsq.cluster.status import SourceRef
from gitopsq.metrics import SyncMetrics
from gitopsq.source import open_source
from gitopsq.sync.syncer import APPLY_ATTEMPTS, Syncer

pytestmark = pytest.mark.envtest


@pytest.fixture
def repo(tmp_path: Path) -> QueueRepo:
    r = QueueRepo(tmp_path / "queues", f"w{uuid.uuid4().hex[:6]}")
    r.commit("template")
    return r


class Records:
    """An audit sink that keeps what it is given (the trail's own tests cover writing it to Git)."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def record(self, record: Any) -> None:
        self.items.append(getattr(record, "data", record))


def make_syncer(env: Envtest, repo: QueueRepo, rest: KubeRest | None = None, audit: Any = None) -> Syncer:
    return Syncer(open_source(str(repo.path)), rest or KubeRest(env.api_client()), SourceRef(NS, repo.tag),
                  url=str(repo.path), audit=audit)


def source_status(env: Envtest, repo: QueueRepo) -> dict[str, Any]:
    obj = get(env, f"/apis/gitopsq.dev/v1alpha1/namespaces/{NS}/gitsources/{repo.tag}")
    assert obj is not None
    return dict(obj["status"])


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def lq_live(env: Envtest, ns: str, name: str = "main") -> dict[str, Any] | None:
    return get(env, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/{name}")


@contextlib.contextmanager
def deny_policy(env: Envtest, name: str, resource: str, expression: str, probe: str, *,
                on_write_only: bool = False) -> Iterator[None]:
    """A ValidatingAdmissionPolicy (enforced by the API server itself) refusing ``resource`` objects for which
    ``expression`` is false; waits until the server enforces it, by sending ``probe`` until it is refused (as a
    server dry run, or as a real create, undone should it slip through, when the policy spares dry runs)."""
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{
                           "apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["*"], "resources": [resource],
                           "operations": ["CREATE", "UPDATE"]}]},
                       "validations": [{"expression": expression, "message": f"refused by policy {name}"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}
    env.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [policy, binding]}))
    try:
        deadline = time.monotonic() + 30
        send = ["create", "-f", "-"] if on_write_only else ["apply", "--dry-run=server", "-f", "-"]
        while env.kubectl(*send, stdin=probe, check=False).returncode == 0:
            if on_write_only:
                env.kubectl("delete", "-f", "-", stdin=probe, check=False)
            assert time.monotonic() < deadline, "the admission policy never took effect"
            time.sleep(0.3)
        yield
    finally:
        env.kubectl("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", name,
                    "--ignore-not-found")


def test_an_object_the_server_refuses_leaves_every_other_object_unchanged(kueue_clean: Envtest,
                                                                          repo: QueueRepo) -> None:
    """A revision changing one queue and adding one the API server's admission refuses writes nothing: the
    changed queue keeps its resourceVersion, the status says DryRunFailed naming the object, its file and line
    and the server's reason, and the apply exits 1."""
    rig = kueue_clean
    syncer = make_syncer(rig, repo, audit=(records := Records()))
    assert syncer.sync().outcome == "applied"
    before = cq_live(rig, repo.team_a)
    refused = f"{repo.tag}-refused"
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="16") + repo.lq(repo.team_a))
    repo.write("queues/z-refused.yaml", repo.cq(refused))
    sha = repo.commit("a change and an object the server refuses")
    with deny_policy(rig, f"{repo.tag}-deny", "clusterqueues", f"object.metadata.name != '{refused}'",
                     repo.cq(refused)):
        result = syncer.sync()
    assert result.outcome == "refused" and result.exit_code == 1, result.to_json()
    assert [str(f.key) for f in result.refusals] == [f"ClusterQueue/{refused}"]
    after = cq_live(rig, repo.team_a)
    assert after is not None and before is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"] and cpu_of(after) == "8"
    assert cq_live(rig, refused) is None
    status = source_status(rig, repo)
    assert conditions(status) == {"Ready": ("False", "DryRunFailed"), "Stalled": ("True", "DryRunFailed")}
    message = status["conditions"][0]["message"]
    assert f"ClusterQueue/{refused} (queues/z-refused.yaml:1)" in message and "refused by policy" in message
    assert status["lastAttemptedRevision"] == sha and status["lastAppliedRevision"] != sha
    assert status["lastRejection"]["findings"][0]["path"] == "queues/z-refused.yaml"
    report = result.to_json()
    assert report["refused"][0]["line"] == 1 and report["refused"][0]["path"] == "queues/z-refused.yaml"
    assert [e["reason"] for e in syncer.store.events()].count("DryRunFailed") == 1
    assert [r["result"] for r in records.items if r["type"] == "sync.attempt"][-1] == "failed"


def test_an_object_in_a_namespace_nobody_creates_refuses_the_revision(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """A LocalQueue in a namespace that neither exists nor is in the revision is refused by the dry run, so not
    even the revision's other (new) objects are written; once the namespace exists the revision applies."""
    rig = kueue_clean
    missing = f"{repo.tag}-later"
    repo.write("queues/extra.yaml", repo.lq(missing).replace(f"clusterQueue: {missing}",
                                                             f"clusterQueue: {repo.team_a}"))
    repo.commit("queue in a namespace nobody created")
    syncer = make_syncer(rig, repo)
    result = syncer.sync()
    assert result.outcome == "refused" and result.exit_code == 1
    assert [(f.key.namespace, f.operation) for f in result.refusals] == [(missing, "apply")]
    assert cq_live(rig, repo.team_a) is None and cq_live(rig, repo.team_b) is None
    # refused in the first, whole dry run: not even the revision's new Namespaces were created
    assert get(rig, f"/api/v1/namespaces/{repo.team_a}") is None
    assert "nothing written;" in (result.error or "")
    rig.kubectl("create", "namespace", missing)
    again = syncer.sync()
    assert again.outcome == "applied" and lq_live(rig, missing) is not None and cq_live(rig, repo.team_a)


def test_a_write_refused_after_the_dry_run_is_rolled_back(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """A LocalQueue the server lets through in the dry run but refuses when written (after the ClusterQueues
    were): the apply is retried from fresh state, then the last good revision is put back — the changed queue
    back to its quota, the new one deleted — with status RolledBack, an Event, an audit record and a metric."""
    rig = kueue_clean
    metrics = SyncMetrics(CollectorRegistry())
    syncer = make_syncer(rig, repo, audit=(records := Records()))
    first = syncer.sync()
    assert first.outcome == "applied"
    extra = f"{repo.tag}-extra"
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="16") + repo.lq(repo.team_a))
    repo.write("queues/extra.yaml", repo.cq(extra) + repo.lq(repo.team_b).replace("name: main", "name: doomed"))
    sha = repo.commit("more quota, a new queue and a LocalQueue the server refuses on write")
    probe = repo.lq(repo.team_b).replace("name: main", "name: doomed")
    with deny_policy(rig, f"{repo.tag}-late", "localqueues",
                     "request.dryRun == true || object.metadata.name != 'doomed'", probe, on_write_only=True):
        result = syncer.sync()
    assert result.outcome == "rolled-back" and result.exit_code == 3, result.to_json()
    assert result.attempts == APPLY_ATTEMPTS and result.rolled_back_to == first.revision
    assert cpu_of(cq_live(rig, repo.team_a)) == "8"  # changed, then put back
    assert cq_live(rig, extra) is None  # created, then deleted
    assert lq_live(rig, repo.team_b, "doomed") is None
    status = source_status(rig, repo)
    assert conditions(status)["Ready"] == ("False", "RolledBack")
    assert status["lastAppliedRevision"] == first.revision and status["lastAttemptedRevision"] == sha
    assert "refused by policy" in status["conditions"][0]["message"]
    assert f"rolled back to revision {first.revision}" in status["conditions"][0]["message"]
    assert "RolledBack" in [e["reason"] for e in syncer.store.events()]
    assert [r["result"] for r in records.items if r["type"] == "sync.attempt"][-1] == "failed"
    metrics.observe(result)
    assert metrics.registry.get_sample_value("gitopsq_sync_rollbacks_total") == 1.0
    assert metrics.registry.get_sample_value("gitopsq_sync_total", {"outcome": "rolled-back"}) == 1.0


def test_a_transient_write_failure_is_retried_from_fresh_state(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """A write failing once (a webhook timing out past the retry budget) is retried: live state is read again,
    the plan rebuilt, and the second attempt completes the revision."""
    rig = kueue_clean
    failures = []

    class FlakyRest(KubeRest):
        def request(self, method: str, path: str, **kw: Any) -> Any:
            dry = ("dryRun", "All") in list(kw.get("query") or ())
            if method == "PATCH" and "localqueues" in path and not dry and not failures:
                failures.append(path)
                raise ClusterUnavailable("context deadline exceeded calling webhook")
            return super().request(method, path, **kw)

    result = make_syncer(rig, repo, FlakyRest(rig.api_client())).sync()
    assert result.outcome == "applied" and result.attempts == 2, result.to_json()
    assert len(failures) == 1 and lq_live(rig, repo.team_a) is not None and lq_live(rig, repo.team_b) is not None


def test_the_apply_step_reports_progress(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """The dry run, the namespaces staged before it and the apply each show on the syncer's progress line with
    their total, every object counted and the line closed (what `gitopsq apply` shows on a terminal)."""
    steps: list[list[Any]] = []

    class Recording:
        def start(self, label: str, total: int | None = None) -> None:
            steps.append([label, total, 0, False])

        def advance(self, count: int = 1) -> None:
            steps[-1][2] += count

        def done(self) -> None:
            steps[-1][3] = True

    syncer = make_syncer(kueue_clean, repo)
    syncer.progress = Recording()
    result = syncer.sync()
    assert result.outcome == "applied" and result.revision is not None
    short = result.revision[:12]
    # the first dry run cannot check the two LocalQueues (their namespaces do not exist yet): they wait for them
    assert steps == [[f"dry run of {short}", 7, 7, True], ["creating namespaces", 2, 2, True],
                     ["dry run in the new namespaces", 2, 2, True], [f"applying {short}", 5, 5, True]]


def test_a_refusal_inside_a_new_namespace_leaves_only_that_namespace(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """A LocalQueue in a Namespace the same revision creates is dry-run after that Namespace is created (as
    Flux does); when the server refuses it, only the new, empty Namespace was written, and it is in the
    inventory so that a later revision can prune it."""
    rig = kueue_clean
    syncer = make_syncer(rig, repo)
    assert syncer.sync().outcome == "applied"
    fresh = f"{repo.tag}-later"  # a namespace the repository's team may use
    repo.write("namespaces.yaml", (repo.path / "namespaces.yaml").read_text()
               + f"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {fresh}\n")
    queue = repo.lq(fresh).replace(f"clusterQueue: {fresh}", f"clusterQueue: {repo.team_a}")
    repo.write("queues/later.yaml", queue.replace("name: main", "name: refused"))
    repo.commit("a new namespace and a queue in it the server refuses")
    with deny_policy(rig, f"{repo.tag}-ns", "localqueues", "object.metadata.name != 'refused'",
                     repo.lq(repo.team_a).replace("name: main", "name: refused")):
        result = syncer.sync()
    assert result.outcome == "refused", result.to_json()
    assert [str(f.key) for f in result.refusals] == [f"LocalQueue/{fresh}/refused"]
    assert get(rig, f"/api/v1/namespaces/{fresh}") is not None and lq_live(rig, fresh, "refused") is None
    assert f"except the new Namespaces {fresh}" in (result.error or "")
    entries = {e["id"] for e in source_status(rig, repo)["inventory"]["entries"]}
    assert f"_{fresh}__Namespace" in entries


def test_a_first_sync_that_keeps_failing_removes_what_it_created(kueue_clean: Envtest, repo: QueueRepo) -> None:
    """With no last good revision to go back to, a rollback deletes the objects the failed attempts created: the
    cluster ends without the revision's queues, and the GitSource has no applied revision."""
    rig = kueue_clean

    class FailingRest(KubeRest):
        def request(self, method: str, path: str, **kw: Any) -> Any:
            dry = ("dryRun", "All") in list(kw.get("query") or ())
            if method == "PATCH" and "localqueues" in path and not dry:
                raise ClusterUnavailable("context deadline exceeded calling webhook")
            return super().request(method, path, **kw)

    result = make_syncer(rig, repo, FailingRest(rig.api_client())).sync()
    assert result.outcome == "rolled-back" and result.rolled_back_to is None, result.to_json()
    assert cq_live(rig, repo.team_a) is None and cq_live(rig, repo.team_b) is None
    assert result.rollback is not None and len(result.rollback.pruned) >= 3  # 2 ClusterQueues and the flavor
    status = source_status(rig, repo)
    assert "lastAppliedRevision" not in status and conditions(status)["Ready"] == ("False", "RolledBack")
    assert "rolled back to revision none" in status["conditions"][0]["message"]
