"""Impact of a pull request on current work: snapshot files, a trace replay, and an unreachable cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures_pr import DS_CPU, TemplateRepo, raise_data_science_cpu

from gitopsq.admission.engine import PENDING
from gitopsq.commands.plan import make_plan
from gitopsq.plan.render_json import plan_json
from gitopsq.plan.render_markdown import render_markdown

FIXTURES = Path(__file__).parent / "fixtures_pr"
TRACE = Path(__file__).resolve().parents[2] / "repo-template" / "traces" / "sample.yaml"
CPU = 1000


@pytest.fixture
def repo(tmp_path: Path) -> TemplateRepo:
    return TemplateRepo(tmp_path / "queues")


def shrink_data_science(repo: TemplateRepo, to: str) -> None:
    repo.branch("shrink")
    repo.replace("teams/data-science/cluster-queue.yaml", DS_CPU,
                 f'{{name: cpu, nominalQuota: "{to}", borrowingLimit: "32"}}')
    repo.commit(f"data-science: on-demand CPU 96 → {to}", "erin")


def test_a_shrink_makes_the_lender_reclaim_and_preempts_the_borrower(repo: TemplateRepo) -> None:
    """data-science lending less (96 → 72 on-demand CPUs) leaves its 70-CPU ETL job 46 CPUs of cohort room, so
    it reclaims from ml-research's borrowing sweep: the sweep is preempted (InCohortReclamation) and, tied to
    on-demand nodes, waits."""
    shrink_data_science(repo, "72")
    plan = make_plan(str(repo.root), "main", "shrink", workloads=str(FIXTURES / "shrink-snapshot.yaml"),
                     use_cache=False)
    assert plan.impact is not None
    (preempted,) = plan.impact.of_kind("preempted")
    assert (preempted.key, preempted.cluster_queue_before, preempted.reason) == (
        "ml-research/sweep", "ml-research", "InCohortReclamation")
    assert "data-science/etl" in preempted.message
    assert not preempted.readmitted and preempted.state_after == PENDING
    assert (plan.impact.admitted_before, plan.impact.admitted_after) == (3, 2)
    assert plan.impact.of_kind("loses-quota") == () and plan.impact.of_kind("admissible") == ()
    headroom = {(h.cluster_queue, h.flavor, h.resource): (h.before, h.after) for h in plan.impact.headroom}
    # Before: research's 160 on-demand CPUs are all in use (90 + 70): nobody can borrow.
    # After: 72 + 64 = 136 with only the ETL job's 70 on on-demand; data-science may borrow up to its limit of 32,
    # ml-research whatever is left beyond its own 64 (136 − 70 − 64 = 2).
    assert headroom[("data-science", "on-demand", "cpu")] == (0, 32 * CPU)
    assert headroom[("ml-research", "on-demand", "cpu")] == (0, 2 * CPU)


def test_a_respelled_quota_has_no_impact(repo: TemplateRepo) -> None:
    """Writing 96000m for 96 is no change: the same workloads keep the same quota, headroom unchanged."""
    shrink_data_science(repo, "96000m")  # the same quantity, spelled differently
    plan = make_plan(str(repo.root), "main", "shrink", workloads=str(FIXTURES / "shrink-snapshot.yaml"),
                     use_cache=False)
    assert plan.objects == ()
    assert plan.impact is not None and plan.impact.changes == () and plan.impact.headroom == ()
    assert plan.impact.admitted_before == plan.impact.admitted_after == 3


def test_a_raise_makes_a_waiting_job_admissible(repo: TemplateRepo) -> None:
    """A 130-CPU job cannot fit data-science's 96 + 32 borrowable CPUs; at 128 nominal it is admitted."""
    raise_data_science_cpu(repo)
    plan = make_plan(str(repo.root), "main", "raise-cpu", workloads=str(FIXTURES / "big-job-snapshot.yaml"),
                     use_cache=False)
    assert plan.impact is not None
    assert [(w.key, w.cluster_queue_after) for w in plan.impact.of_kind("admissible")] == [
        ("data-science/big", "data-science")]
    assert (plan.impact.admitted_before, plan.impact.admitted_after) == (0, 1)
    data = plan_json(plan)["impact"]
    assert data["admissible"][0]["workload"] == "data-science/big"


def test_deleting_a_cluster_queue_takes_quota_from_its_running_work(repo: TemplateRepo) -> None:
    """Admitted workloads of a deleted ClusterQueue lose their quota, with the reason naming the queue."""
    repo.branch("delete-cq")
    repo.remove("teams/data-science/cluster-queue.yaml")
    repo.remove("teams/data-science/local-queues.yaml")
    repo.commit("retire data-science's queue", "alice")
    repo.write("snapshot.yaml", (FIXTURES / "shrink-snapshot.yaml").read_text(encoding="utf-8").replace(
        "    submitAt: 0\n", "    submitAt: 0\n    admitted: {clusterQueue: data-science, "
                            "flavors: {main: {cpu: on-demand}}, at: -60}\n"))
    plan = make_plan(str(repo.root), "main", "delete-cq", workloads=str(repo.root / "snapshot.yaml"),
                     use_cache=False)
    assert plan.impact is not None
    (lost,) = plan.impact.of_kind("loses-quota")
    assert (lost.key, lost.cluster_queue_before, lost.message) == (
        "data-science/etl", "data-science", "ClusterQueue data-science is removed")


def test_a_trace_compares_waits_per_queue(repo: TemplateRepo) -> None:
    """Replaying the template's working day with ml-research's a100 GPUs cut from 24 to 8 makes its training
    runs wait longer (mean and p95), and leaves data-science's waits alone."""
    repo.branch("gpus")
    repo.replace("teams/ml-research/cluster-queue.yaml", 'nvidia.com/gpu, nominalQuota: "24"',
                 'nvidia.com/gpu, nominalQuota: "8"')
    repo.commit("fewer GPUs", "carol")
    plan = make_plan(str(repo.root), "main", "gpus", trace=str(TRACE), use_cache=False)
    assert plan.trace is not None and plan.trace.scenario == "working-day"
    waits = {w.cluster_queue: w for w in plan.trace.waits}
    ml = waits["ml-research"]
    assert ml.mean_after > ml.mean_before and ml.p95_after >= ml.p95_before
    ds = waits["data-science"]
    assert (ds.mean_before, ds.admissions_before) == (ds.mean_after, ds.admissions_after)
    assert "| ml-research |" in render_markdown(plan)


def test_an_unreachable_cluster_gives_a_plan_without_impact(repo: TemplateRepo, tmp_path: Path) -> None:
    """A kubeconfig pointing at a closed port: the plan is still made, says the cluster is unreachable, and
    exits as the head's validity says (0 here)."""
    raise_data_science_cpu(repo)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("""apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""", encoding="utf-8")
    plan = make_plan(str(repo.root), "main", "raise-cpu", kubeconfig=str(kubeconfig), use_cache=False)
    assert plan.impact is None and plan.exit_code == 0
    (note,) = plan.impact_notes
    assert "unreachable" in note and str(kubeconfig) in note
    assert "unreachable" in render_markdown(plan)


def test_a_broken_snapshot_names_the_line(repo: TemplateRepo, tmp_path: Path) -> None:
    """A snapshot entry without its queue is refused (exit 1 class) with the snapshot's file and line."""
    from gitopsq.errors import ScenarioError

    raise_data_science_cpu(repo)
    broken = tmp_path / "snapshot.yaml"
    broken.write_text("workloads:\n  - name: lost\n    namespace: data-science\n"
                      "    podSets: [{name: main, count: 1, requests: {cpu: '1'}}]\n", encoding="utf-8")
    with pytest.raises(ScenarioError) as failed:
        make_plan(str(repo.root), "main", "raise-cpu", workloads=str(broken), use_cache=False)
    assert failed.value.exit_code == 1
    assert f"{broken}:2" in str(failed.value) and "queue" in str(failed.value)


def test_repointing_a_local_queue_moves_its_waiting_work(repo: TemplateRepo) -> None:
    """data-science's `analysis` LocalQueue pointed at ml-research's ClusterQueue: its waiting 130-CPU job now
    waits there instead — for another reason, since ml-research only admits its own namespaces."""
    repo.branch("repoint")
    repo.replace("teams/data-science/local-queues.yaml", "clusterQueue: data-science", "clusterQueue: ml-research")
    repo.commit("analysis goes to ml-research", "erin")
    plan = make_plan(str(repo.root), "main", "repoint", workloads=str(FIXTURES / "big-job-snapshot.yaml"),
                     use_cache=False)
    assert plan.impact is not None
    (moved,) = plan.impact.of_kind("pending-changed")
    assert (moved.key, moved.cluster_queue_before, moved.cluster_queue_after) == (
        "data-science/big", "data-science", "ml-research")
    assert "namespace" in moved.message.lower()


GATE = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ProvisioningRequestConfig
metadata: {name: capacity}
spec: {provisioningClassName: check-capacity.autoscaling.x-k8s.io}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: capacity}
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters: {apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: capacity}
"""
SMALL_JOB = """workloads:
  - name: small
    namespace: data-science
    queue: analysis
    priorityClass: standard
    podSets: [{name: main, count: 4, requests: {cpu: "1"}}]
"""


def test_a_cluster_queue_gaining_an_admission_check_holds_new_work_at_its_checks(repo: TemplateRepo,
                                                                                  tmp_path: Path) -> None:
    """A provisioning check added to data-science: the plan lists the new ProvisioningRequestConfig and
    AdmissionCheck, and a job admitted at once under base now only reserves quota and waits for the check."""
    repo.branch("gate")
    repo.write("platform/admission-checks.yaml", GATE)
    repo.replace("teams/data-science/cluster-queue.yaml", "  cohortName: research\n",
                 "  cohortName: research\n  admissionChecksStrategy: {admissionChecks: [{name: capacity}]}\n")
    repo.commit("data-science: capacity check before admission", "alice")
    snapshot = tmp_path / "small.yaml"
    snapshot.write_text(SMALL_JOB)
    plan = make_plan(str(repo.root), "main", "gate", workloads=str(snapshot), use_cache=False)
    assert {str(c.key) for c in plan.objects} >= {"ProvisioningRequestConfig/capacity", "AdmissionCheck/capacity",
                                                  "ClusterQueue/data-science"}
    assert plan.impact is not None
    (gated,) = plan.impact.of_kind("checks-changed")
    assert (gated.key, gated.cluster_queue_after, gated.reason) == ("data-science/small", "data-science",
                                                                    "AdmissionCheck")
    assert gated.message.startswith("Admitted → QuotaReserved")
    assert plan_json(plan)["impact"]["checksChanged"][0]["workload"] == "data-science/small"
    assert "waiting for admission checks" in render_markdown(plan)
