"""`gitopsq plan` on real Git repositories built from repo-template: diff, quota table, verdicts, approvals."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runs import run
from fixtures_pr import DS_CPU, TemplateRepo, raise_data_science_cpu

from gitopsq.admission.quota import Limits
from gitopsq.commands.plan import make_plan
from gitopsq.plan.pr_plan import PrPlan
from gitopsq.plan.render_json import plan_json

CPU = 1000  # milli-units per CPU
GI = 1024**3 * 1000  # milli-units per Gi


@pytest.fixture
def repo(tmp_path: Path) -> TemplateRepo:
    return TemplateRepo(tmp_path / "queues")


def plan_of(repo: TemplateRepo, head: str, base: str = "main") -> PrPlan:
    return make_plan(str(repo.root), base, head, use_cache=False)


def test_raising_a_quota_is_one_field_one_row_and_more_cohort_capacity(repo: TemplateRepo) -> None:
    """Raising data-science's on-demand CPU is one field change, one changed quota row and +32 CPU for the cohort."""
    raise_data_science_cpu(repo)
    plan = plan_of(repo, "raise-cpu")
    assert [(c.status, c.name, c.path) for c in plan.objects] == [
        ("changed", "ClusterQueue/data-science", "teams/data-science/cluster-queue.yaml")]
    assert [(f.where, f.op, f.old, f.new) for f in plan.objects[0].fields] == [
        ("spec.resourceGroups[0].flavors[on-demand].resources[cpu].nominalQuota", "changed", "96", "128")]
    (queue,) = plan.quota
    assert (queue.kind, queue.name, queue.status, queue.cohort_before, queue.cohort_after) == (
        "ClusterQueue", "data-science", "changed", "research", "research")
    changed = [r for r in queue.rows if r.changed]
    assert [(r.flavor, r.resource, r.before, r.after, r.nominal_delta) for r in changed] == [
        ("on-demand", "cpu", Limits(96 * CPU, 32 * CPU), Limits(128 * CPU, 32 * CPU), 32 * CPU)]
    assert len(queue.rows) == 4  # every flavor-resource of the queue, for context
    (cohort,) = plan.cohorts
    cells = {(c.flavor, c.resource): (c.before, c.after) for c in cohort.cells if c.delta}
    # research = data-science (96) + ml-research (64) on-demand CPU, neither with a lending limit there.
    assert (cohort.name, cells) == ("research", {("on-demand", "cpu"): (160 * CPU, 192 * CPU)})
    assert plan.policies.denied == () and plan.errors == () and plan.exit_code == 0
    assert [(a.team, a.maintainers) for a in plan.approvals] == [("data-science", ("Erin Okafor <erin@example.com>",))]
    assert plan.history == "ancestor" and plan.notes == ()


def test_reformatting_and_quantity_spelling_are_not_changes(repo: TemplateRepo) -> None:
    """Reordering keys, switching to block style and writing 96000m for 96 leaves the plan without object changes."""
    repo.branch("noise")
    repo.replace("teams/data-science/cluster-queue.yaml", DS_CPU,
                 '{borrowingLimit: "32", nominalQuota: 96000m, name: cpu}')
    repo.replace("teams/data-science/cluster-queue.yaml", "# data-science's quota", "# Data Science quota")
    repo.commit("reformat", "erin")
    plan = plan_of(repo, "noise")
    assert plan.objects == () and plan.quota == () and plan.cohorts == ()
    assert [a.team for a in plan.approvals] == ["data-science"]  # the file changed all the same


def test_moving_a_local_queue_to_another_team_is_denied_and_needs_both_teams(repo: TemplateRepo) -> None:
    """A LocalQueue moved from ml-research's file into data-science's path is `moved`, needs both teams'
    approval, and the built-in policy refuses a LocalQueue in a namespace its path's team does not own."""
    repo.branch("move-lq")
    text = (repo.root / "teams/ml-research/local-queues.yaml").read_text(encoding="utf-8")
    docs = text.split("---\n")
    dev = next(d for d in docs if "name: dev" in d)
    repo.write("teams/ml-research/local-queues.yaml", "---\n".join(d for d in docs if d is not dev))
    repo.write("teams/data-science/dev-queue.yaml", dev.replace("clusterQueue: ml-research",
                                                                "clusterQueue: data-science"))
    repo.commit("move the dev queue to data-science", "erin")
    plan = plan_of(repo, "move-lq")
    (moved,) = plan.objects
    assert (moved.status, moved.name, moved.old_path, moved.path) == (
        "moved", "LocalQueue/ml-research-dev/dev", "teams/ml-research/local-queues.yaml",
        "teams/data-science/dev-queue.yaml")
    assert [(f.where, f.old, f.new) for f in moved.fields] == [("spec.clusterQueue", "ml-research", "data-science")]
    assert [a.team for a in plan.approvals] == ["data-science", "ml-research"]
    assert plan.quota == ()  # a LocalQueue holds no quota
    assert plan.policies.denied and plan.exit_code == 1
    assert all(v.obj == "LocalQueue/ml-research-dev/dev" for v in plan.policies.denied)


def test_deleting_a_cluster_queue_removes_its_rows_and_needs_the_platform_team(repo: TemplateRepo) -> None:
    """Deleting data-science's ClusterQueue and LocalQueues lists them removed, shrinks the research cohort by
    its quota, and a team member alone is denied by clusterqueue-delete-needs-platform."""
    repo.branch("delete-cq")
    repo.remove("teams/data-science/cluster-queue.yaml")
    repo.remove("teams/data-science/local-queues.yaml")
    repo.commit("retire data-science's queue", "erin")
    plan = plan_of(repo, "delete-cq")
    assert {c.status for c in plan.objects} == {"removed"}
    assert "ClusterQueue/data-science" in [c.name for c in plan.objects]
    (queue,) = plan.quota
    assert (queue.name, queue.status) == ("data-science", "removed")
    assert all(r.after is None and r.before is not None for r in queue.rows)
    (cohort,) = plan.cohorts
    assert cohort.members_before == ("data-science", "ml-research") and cohort.members_after == ("ml-research",)
    cells = {(c.flavor, c.resource): c.delta for c in cohort.cells if c.delta}
    assert cells == {("on-demand", "cpu"): -96 * CPU, ("on-demand", "memory"): -384 * GI,
                     ("spot", "cpu"): -64 * CPU, ("spot", "memory"): -256 * GI}
    assert "clusterqueue-delete-needs-platform" in {v.policy for v in plan.policies.denied}
    assert plan.exit_code == 1


def test_joining_another_cohort_crosses_a_trust_zone(repo: TemplateRepo) -> None:
    """serving's ClusterQueue joining the research cohort changes its cohort column and research's members and
    capacity, and cohort-in-trust-zone denies it (serving is in the production zone)."""
    repo.branch("join")
    repo.replace("teams/serving/cluster-queue.yaml", "cohortName: production", "cohortName: research")
    repo.commit("serving joins research", "farid")
    plan = plan_of(repo, "join")
    (queue,) = plan.quota
    assert (queue.name, queue.cohort_before, queue.cohort_after) == ("serving", "production", "research")
    assert not any(r.changed for r in queue.rows)
    research = next(c for c in plan.cohorts if c.name == "research")
    assert research.members_after == ("data-science", "ml-research", "serving")
    # serving lends nothing of its a100 GPUs (lendingLimit 0) but all of its on-demand CPU.
    deltas = {(c.flavor, c.resource): c.delta for c in research.cells if c.delta}
    assert deltas[("on-demand", "cpu")] == 128 * CPU and ("a100", "nvidia.com/gpu") not in deltas
    assert {v.policy for v in plan.policies.denied} == {"cohort-in-trust-zone"}
    assert plan.exit_code == 1


def test_a_flavor_change_needs_the_platform_team_even_for_a_team_author(repo: TemplateRepo) -> None:
    """A changed ResourceFlavor is a global object: the platform team and its maintainers must approve."""
    repo.branch("flavor")
    repo.replace("platform/flavors.yaml", "cloud.example.com/capacity-type: spot",
                 "cloud.example.com/capacity-type: preemptible")
    repo.commit("relabel spot", "alice")
    plan = plan_of(repo, "flavor")
    assert [c.name for c in plan.objects] == ["ResourceFlavor/spot"]
    (approval,) = plan.approvals
    assert approval.team == "platform" and approval.platform
    assert approval.maintainers == ("Alice Admin <alice@example.com>", "Bob Builder <bob@example.com>")
    assert "ResourceFlavor/spot: a global object" in approval.reasons


def test_an_invalid_head_exits_1_with_its_findings(repo: TemplateRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """A head whose ClusterQueue has a malformed quantity is rejected: exit 1, the finding with file:line."""
    repo.branch("broken")
    repo.replace("teams/data-science/cluster-queue.yaml", DS_CPU,
                 '{name: cpu, nominalQuota: "lots", borrowingLimit: "32"}')
    repo.commit("oops", "erin")
    code, out, _ = run(capsys, "plan", str(repo.root), "--base", "main", "--head", "broken")
    assert code == 1
    assert "teams/data-science/cluster-queue.yaml:" in out and "✗ rejected" in out


def test_a_base_that_fails_check_is_named_and_head_findings_still_show(repo: TemplateRepo) -> None:
    """When the base itself is invalid the plan says so, lists the base's errors, and judges the head alone."""
    repo.replace("teams/data-science/cluster-queue.yaml", DS_CPU, '{name: cpu, nominalQuota: "lots"}')
    repo.commit("broken on main", "erin")
    repo.branch("fix")
    repo.replace("teams/data-science/cluster-queue.yaml", '{name: cpu, nominalQuota: "lots"}', DS_CPU)
    repo.replace("teams/serving/cluster-queue.yaml", "queueingStrategy: StrictFIFO", "queueingStrategy: Sometimes")
    repo.commit("fix data-science, break serving", "erin")
    plan = plan_of(repo, "fix")
    assert not plan.base.ok and plan.base_errors
    assert any("does not pass check" in n for n in plan.notes)
    assert {f.location.path for f in plan.base_errors if f.location} <= {
        "teams/data-science/cluster-queue.yaml", "teams/data-science/local-queues.yaml"}
    assert "teams/serving/cluster-queue.yaml" in {f.location.path for f in plan.errors if f.location}
    # The unreadable serving queue is `invalid`, not a deletion: no deletion policy fires on it.
    assert ("invalid", "ClusterQueue/serving") in [(c.status, c.name) for c in plan.objects]
    assert "clusterqueue-delete-needs-platform" not in {v.policy for v in plan.policies.denied}
    assert plan.exit_code == 1


def test_an_unknown_revision_exits_3_naming_it(repo: TemplateRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown --head is a runtime failure (exit 3) with one line that names the revision."""
    code, out, err = run(capsys, "plan", str(repo.root), "--base", "main", "--head", "no-such-branch")
    assert code == 3 and out == ""
    assert "no-such-branch" in err and "Traceback" not in err


def test_unrelated_histories_are_said_and_the_trees_still_compared(repo: TemplateRepo) -> None:
    """A head with no common ancestor is reported as unrelated; the plan still compares the two trees."""
    repo.git("checkout", "-q", "--orphan", "other")
    repo.replace("teams/data-science/cluster-queue.yaml", DS_CPU,
                 '{name: cpu, nominalQuota: "100", borrowingLimit: "32"}')
    repo.commit("a fresh start", "alice")
    plan = plan_of(repo, "other")
    assert plan.history == "unrelated" and any("unrelated histories" in n for n in plan.notes)
    assert [c.name for c in plan.objects] == ["ClusterQueue/data-science"]


def test_a_base_ahead_of_head_is_said(repo: TemplateRepo) -> None:
    """When base moved on after head branched off, the plan says its diff also shows base's newer commits."""
    raise_data_science_cpu(repo)
    repo.git("checkout", "-q", "main")
    repo.replace("teams/serving/cluster-queue.yaml", "queueingStrategy: StrictFIFO",
                 "queueingStrategy: BestEffortFIFO")
    repo.commit("serving goes best-effort", "farid")
    plan = plan_of(repo, "raise-cpu")
    assert plan.history == "diverged" and any("moved on" in n for n in plan.notes)
    assert sorted(c.name for c in plan.objects) == ["ClusterQueue/data-science", "ClusterQueue/serving"]


def test_json_output_is_versioned_and_carries_every_section(repo: TemplateRepo,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """--output json prints one object, version 1, with the documented top-level keys and Kueue field names."""
    import json

    raise_data_science_cpu(repo)
    code, out, _ = run(capsys, "plan", str(repo.root), "--base", "main", "--head", "raise-cpu", "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["version"] == 1 and data["verdict"] == "accepted"
    assert set(data) == {"version", "repository", "base", "head", "history", "verdict", "notes", "summary",
                         "objects", "quota", "cohorts", "findings", "baseErrors", "policy", "approvals", "impact",
                         "trace", "impactNotes"}
    row = next(r for r in data["quota"][0]["rows"] if r["changed"])
    assert row["before"] == {"nominalQuota": "96", "borrowingLimit": "32", "lendingLimit": None}
    assert row["after"]["nominalQuota"] == "128" and row["nominalQuotaDelta"] == "+32"
    assert data == plan_json(plan_of(repo, "raise-cpu")) | {"repository": data["repository"]}


CPU_CAP = """apiVersion: gitopsq.dev/v1alpha1
kind: Policy
metadata:
  name: cpu-cap
spec:
  severity: {severity}
  match:
    kinds: [ClusterQueue]
  validations:
    - expression: >-
        object.spec.resourceGroups.all(g, g.flavors.all(f, f.resources.all(r,
          r.name != 'cpu' || !quantity(string(r.nominalQuota)).isGreaterThan(quantity('100')))))
      message: no ClusterQueue gets more than 100 CPUs of one flavor
"""


@pytest.mark.parametrize(("severity", "code"), [("Deny", 1), ("Warn", 0)], ids=["deny rejects", "warn reports"])
def test_the_repositorys_own_policies_judge_the_head(repo: TemplateRepo, severity: str, code: int) -> None:
    """A policy file under policyPaths is evaluated on the head's changes: Deny rejects, Warn only reports."""
    repo.write("policies/cpu-cap.yaml", CPU_CAP.format(severity=severity))
    repo.commit("platform: cap CPU per flavor", "alice")
    raise_data_science_cpu(repo)
    plan = plan_of(repo, "raise-cpu")
    failing = plan.policies.denied + plan.policies.warned
    assert [(v.policy, v.obj) for v in failing] == [("cpu-cap", "ClusterQueue/data-science")]
    assert plan.exit_code == code


def test_a_policy_file_that_does_not_load_rejects_the_head(repo: TemplateRepo) -> None:
    """A head adding a policy with a CEL syntax error gets a policy-load error at its file and exit 1."""
    repo.branch("bad-policy")
    repo.write("policies/cpu-cap.yaml", CPU_CAP.format(severity="Deny").replace("all(r,", "all(r,,"))
    repo.commit("platform: a broken policy", "alice")
    plan = plan_of(repo, "bad-policy")
    assert [(f.code, f.location.path if f.location else None) for f in plan.errors] == [
        ("policy-load", "policies/cpu-cap.yaml")]
    assert plan.exit_code == 1 and [a.team for a in plan.approvals] == ["platform"]
