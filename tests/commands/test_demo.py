"""`gitopsq demo`: the no-cluster tour, end to end on the real template and on a small hand-made one."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pygit2
import pytest
import yaml
from click.testing import CliRunner

from gitopsq.cli import cli
from gitopsq.demo import DemoOutcome, audit_records, find_template, run_demo
from gitopsq.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "tests" / "scenarios" / "preempted-victim-readmitted-after-finish.yaml"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _template(tmp_path: Path) -> Path:
    """A minimal template: one scenario's queue objects, and that scenario as the sample trace."""
    data = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
    root = tmp_path / "template"
    (root / "queues").mkdir(parents=True)
    (root / "traces").mkdir()
    (root / "queues" / "queues.yaml").write_text(yaml.safe_dump_all(data["objects"]), encoding="utf-8")
    (root / "traces" / "sample.yaml").write_text(SCENARIO.read_text(encoding="utf-8"), encoding="utf-8")
    (root / "gitopsq.yaml").write_text(yaml.safe_dump({
        "apiVersion": "gitopsq.dev/v1alpha1", "kind": "RepositoryConfig", "include": ["queues/"],
        "platformTeam": "platform",
        "teams": [{"name": "platform", "paths": ["**"], "namespaces": ["team-a"], "cohorts": [],
                   "maintainers": [{"name": "Alice Admin", "email": "alice@example.com"}]}],
    }), encoding="utf-8")
    return root


def _statuses(outcome: DemoOutcome) -> dict[str, str]:
    return {s.name: s.status for s in outcome.steps}


def test_demo_runs_every_step_on_a_small_template(tmp_path: Path) -> None:
    """Repository, sync, check, simulate, audit and report all succeed, in that order."""
    outcome = run_demo(tmp_path / "demo", _template(tmp_path), now=START)
    assert [s.name for s in outcome.steps] == ["repository", "sync", "check", "simulate", "audit", "report"]
    assert set(_statuses(outcome).values()) == {"ok"}
    assert outcome.ok
    assert outcome.result.count("Preempted") == 1


def test_demo_repository_is_a_git_repository_with_the_template_on_main(tmp_path: Path) -> None:
    """The demo commits the template on main, dated at the demo's start, in <dir>/queues."""
    outcome = run_demo(tmp_path / "demo", _template(tmp_path), now=START)
    repo = pygit2.Repository(str(outcome.repository))
    head = repo.revparse_single("refs/heads/main")
    assert str(head.id) == outcome.revision
    assert head.commit_time == int(START.timestamp())
    assert (outcome.repository / "traces" / "sample.yaml").is_file()


def test_demo_audit_branch_holds_one_record_per_transition_and_verifies(tmp_path: Path) -> None:
    """The audit branch holds the sync plus every admission, preemption and completion; `audit verify` passes."""
    outcome = run_demo(tmp_path / "demo", _template(tmp_path), now=START)
    # 1 sync + low admitted, low preempted, high admitted, high finished, low admitted again
    assert outcome.audit_records == 6
    assert pygit2.Repository(str(outcome.repository)).references.get("refs/heads/gitopsq/audit") is not None
    verify = CliRunner().invoke(cli, ["audit", "verify", str(outcome.repository)])
    assert verify.exit_code == 0, verify.output
    assert "intact" in verify.output and "6 records" in verify.output


def test_audit_records_sit_at_simulated_times_from_the_start() -> None:
    """Record times are the start plus the simulated seconds; the first record is the applied sync."""
    from gitopsq.simulate.replay import simulate
    from gitopsq.simulate.scenario import parse_scenario

    result = simulate(parse_scenario(SCENARIO.read_text(encoding="utf-8"), str(SCENARIO)))
    recs = audit_records(result, repository="/tmp/queues", revision="abc", start=START)
    types = [r.data["type"] for r in recs]
    assert types == ["sync.attempt", "admission.admitted", "admission.preempted", "admission.admitted",
                     "admission.finished", "admission.admitted"]
    assert [r.data["time"] for r in recs][-1] == "2026-03-02T09:01:50Z"
    assert recs[2].data["reason"] == "InClusterQueue"


def test_demo_writes_report_json_and_self_contained_charts(tmp_path: Path) -> None:
    """report.txt holds timeline and table, result.json the JSON result; the charts need no network or script."""
    outcome = run_demo(tmp_path / "demo", _template(tmp_path), now=START)
    report = (outcome.directory / "report.txt").read_text(encoding="utf-8")
    assert "Timeline:" in report and "ClusterQueues:" in report and "team-a/high" in report
    for name in ("usage.html", "usage.svg"):
        text = (outcome.directory / name).read_text(encoding="utf-8")
        assert "<script" not in text and "team-a-cq" in text
    result = json.loads((outcome.directory / "result.json").read_text(encoding="utf-8"))
    assert result["summary"]["preempted"] == 1 and set(result) == {"events", "final", "summary"}


def test_demo_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    """--dir must be new or empty: the demo never writes over someone's files (usage error, exit 2)."""
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine", encoding="utf-8")
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "busy"), "--template", str(_template(tmp_path))])
    assert result.exit_code != 0
    assert isinstance(result.exception, UsageError)
    assert (tmp_path / "busy" / "keep.txt").read_text(encoding="utf-8") == "mine"


def test_template_without_gitopsq_yaml_is_refused(tmp_path: Path) -> None:
    """A template directory must hold gitopsq.yaml; otherwise a usage error says where it looked."""
    with pytest.raises(UsageError, match="no repository template found"):
        find_template(tmp_path)


@pytest.fixture
def kustomize(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned kustomize build the fleet step needs (scripts/kustomize-prepare, as scripts/demo runs it)."""
    done = subprocess.run([str(ROOT / "scripts" / "kustomize-prepare")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.setenv("GITOPSQ_KUSTOMIZE", done.stdout.strip().splitlines()[-1])


@pytest.mark.usefixtures("kustomize")
def test_readme_first_command_runs_on_the_embedded_template(tmp_path: Path) -> None:
    """`gitopsq demo --dir DIR` on the real repo-template succeeds end to end and says where to look; its fleet
    step plans an edit of one overlay patch, and the diff names that patch's line."""
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "tour")])
    assert result.exit_code == 0, result.output
    out = result.output
    for needle in ("✓ repository", "✓ sync", "✓ check", "✓ simulate", "✓ audit", "✓ report", "Where to look:",
                   f"gitopsq audit verify {tmp_path / 'tour' / 'queues'}"):
        assert needle in out, needle
    assert "✗" not in out
    assert "Still pending at the end (1):" in out and "ml-research/train-llama-70b: ExceedsMaxQuota" in out
    patch = "overlays/prod-us/teams/ml-research/gpu-budget.yaml"
    assert f"✓ fleet      2 clusters, one repository of kustomize overlays; branch more-gpus edits {patch}: the " \
           "plan changes prod-us, leaves prod-eu alone, accepted" in out
    assert f"prod-us: Budget/ml-research-gpu spec.flavors[a100].committed.nvidia.com/gpu: 8 → 16  ({patch}:11)" in out
    assert "  left alone: prod-eu" in out
    plan = (tmp_path / "tour" / "fleet-plan.txt").read_text(encoding="utf-8")
    assert "══ cluster prod-us ══" in plan and "Clusters left alone (no object changes, accepted): prod-eu" in plan
    assert f"nominalQuota: 8 → 16  ({patch}:11)" in plan  # the diff names the patch line Carol edited
    assert not (tmp_path / "tour" / "queues" / "fleet").exists()  # a repository of its own, not a subdirectory
    trace = json.loads(CliRunner().invoke(
        cli, ["simulate", str(tmp_path / "tour" / "queues" / "traces" / "sample.yaml"), "--output", "json"]).stdout)
    assert trace["summary"]["admitted"] > 0


def test_demo_skips_the_fleet_step_without_kustomize(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine with no kustomize to build the fleet's overlays, the tour still completes (exit 0): the fleet
    step is marked skipped and says how to get kustomize, and no fleet plan is written."""
    bin_dir = tmp_path / "bin"  # git only: no kustomize, no kubectl
    bin_dir.mkdir()
    git = shutil.which("git")
    assert git is not None
    (bin_dir / "git").symlink_to(git)
    monkeypatch.delenv("GITOPSQ_KUSTOMIZE", raising=False)
    monkeypatch.setenv("GITOPSQ_KUSTOMIZE_DIR", str(tmp_path / "no-kustomize"))
    monkeypatch.setenv("PATH", str(bin_dir))
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "tour")])
    assert result.exit_code == 0, result.output
    assert "– fleet      skipped: the fleet layout's overlays are built by kustomize" in result.output
    assert "scripts/kustomize-prepare" in result.output
    assert "✓ report" in result.output and "✗" not in result.output
    assert not (tmp_path / "tour" / "fleet-plan.txt").exists()


def test_demo_stops_at_a_rejected_revision(tmp_path: Path) -> None:
    """A template that fails `gitopsq check` stops the demo at the check step (exit 1), never simulating it."""
    template = _template(tmp_path)
    (template / "queues" / "broken.yaml").write_text(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: orphan, namespace: team-a}\n"
        "spec: {clusterQueue: no-such-cq}\n", encoding="utf-8")
    outcome = run_demo(tmp_path / "demo", template, now=START)
    assert [(s.name, s.status) for s in outcome.steps][-1][0] == "check"
    assert _statuses(outcome)["check"] == "failed"
    assert outcome.result is None and not outcome.ok
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "again"), "--template", str(template)])
    assert result.exit_code == 1
    assert "✗ check" in result.output


def test_audit_records_carry_the_evidence_auditors_read() -> None:
    """Records name LocalQueue, priority, milestones, nominal-quota standing and the preemptor."""
    from gitopsq.simulate.chart import nominal_quotas
    from gitopsq.simulate.replay import simulate
    from gitopsq.simulate.scenario import parse_scenario

    scenario = parse_scenario(SCENARIO.read_text(encoding="utf-8"), str(SCENARIO))
    recs = audit_records(simulate(scenario), repository="/tmp/queues", revision="abc", start=START,
                         scenario=scenario, nominal=nominal_quotas(scenario.objects))
    high = next(r.data for r in recs if r.data["type"] == "admission.admitted" and r.data["workload"]["name"] == "high")
    assert high["localQueue"] == "team-a-queue" and high["priority"] == 100
    assert high["times"] == {"admitted": "2026-03-02T09:00:10Z", "created": "2026-03-02T09:00:10Z",
                             "quotaReserved": "2026-03-02T09:00:10Z"}
    assert high["withinNominalQuota"] is True
    preempted = next(r.data for r in recs if r.data["type"] == "admission.preempted")
    assert preempted["preemptedBy"] == {"namespace": "team-a", "name": "high", "uid": None}
    readmitted = [r.data for r in recs
                  if r.data["type"] == "admission.admitted" and r.data["workload"]["name"] == "low"]
    assert readmitted[-1]["times"]["created"] == "2026-03-02T09:00:00Z"
    assert readmitted[-1]["times"]["admitted"] == "2026-03-02T09:01:50Z"


def test_demo_without_dir_builds_in_a_new_kept_temporary_directory(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --dir the demo builds in a fresh gitopsq-demo-* temporary directory and leaves it to look at."""
    import tempfile

    template = _template(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    result = CliRunner().invoke(cli, ["demo", "--template", str(template)])
    assert result.exit_code == 0, result.output
    (made,) = scratch.glob("gitopsq-demo-*")
    assert (made / "queues" / ".git").is_dir() and (made / "report.txt").is_file()
    assert f"gitopsq audit verify {made / 'queues'}" in result.output
