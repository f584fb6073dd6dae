"""check, render, plan and simulate on a repository that declares clusters (docs/fleet.md), through the real CLI
entry point on a real Git repository made from repo-template/fleet: a kustomize base and an overlay per cluster,
built by the real kustomize (scripts/kustomize-prepare, docs/kustomize.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pygit2
import pytest
from cli_runs import run

from gitopsq.commands.plan import make_fleet_plan

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "repo-template" / "fleet"
TRACE = ROOT / "repo-template" / "traces" / "sample.yaml"
US_ML = "overlays/prod-us/teams/ml-research/gpu-budget.yaml"  # ml-research's patch sizing its Budget on prod-us


class Fleet:
    """A Git repository holding the fleet template on main; `change` commits an edit on a new branch."""

    def __init__(self, root: Path) -> None:
        shutil.copytree(FLEET, root)
        self.root = root
        self.repo = pygit2.init_repository(str(root), initial_head="main")
        self._commit("fleet template", "alice@example.com")

    def _commit(self, message: str, email: str) -> None:
        self.repo.index.add_all()
        self.repo.index.write()
        tree = self.repo.index.write_tree()
        who = pygit2.Signature("Someone", email, 1_700_000_000, 0)
        parents = [] if self.repo.head_is_unborn else [self.repo.head.target]
        self.repo.create_commit("HEAD", who, who, message, tree, parents)

    def change(self, branch: str, path: str, old: str, new: str, *, email: str = "alice@example.com",
               also: tuple[str, str] | None = None) -> None:
        main_ref = self.repo.branches["main"]
        self.repo.branches.local.create(branch, self.repo[main_ref.target])
        self.repo.checkout(f"refs/heads/{branch}")
        file = self.root / path
        text = file.read_text(encoding="utf-8")
        assert old in text
        text = text.replace(old, new)
        if also is not None:
            assert also[0] in text
            text = text.replace(*also)
        file.write_text(text, encoding="utf-8")
        self._commit(f"{branch}: {path}", email)
        self.repo.checkout("refs/heads/main")

    def write(self, branch: str, files: dict[str, str], *, email: str = "alice@example.com") -> None:
        """Commit ``files`` (path to whole new text) on a new branch off main."""
        self.repo.branches.local.create(branch, self.repo[self.repo.branches["main"].target])
        self.repo.checkout(f"refs/heads/{branch}")
        for path, text in files.items():
            (self.root / path).parent.mkdir(parents=True, exist_ok=True)
            (self.root / path).write_text(text, encoding="utf-8")
        self._commit(f"{branch}: {', '.join(files)}", email)
        self.repo.checkout("refs/heads/main")


@pytest.fixture(scope="module")
def kustomize_path() -> str:
    """The pinned kustomize build (idempotent; built from the Go module proxy on first use)."""
    done = subprocess.run([str(ROOT / "scripts" / "kustomize-prepare")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(autouse=True)
def _pinned_kustomize(isolated_caches: None, monkeypatch: pytest.MonkeyPatch, kustomize_path: str) -> None:
    monkeypatch.setenv("GITOPSQ_KUSTOMIZE", kustomize_path)


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    return Fleet(tmp_path / "fleet")


def test_check_judges_every_cluster_and_one_with_cluster(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --cluster each declared cluster gets its own section and summary; --cluster judges one."""
    code, out, _ = run(capsys, "check", str(fleet.root))
    assert code == 0, out
    assert "── cluster prod-eu ──" in out and "── cluster prod-us ──" in out
    assert out.strip().splitlines()[-1] == "✓ all 2 clusters valid: prod-eu, prod-us"
    code, out, _ = run(capsys, "check", str(fleet.root), "--cluster", "prod-us", "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["cluster"] == "prod-us" and data["ok"]
    paths = {o["path"] for o in data["objects"]}
    assert "base/teams/ml-research/gpu-budget.yaml" in paths  # an object's home is its base document
    assert not any(p.startswith("overlays/") for p in paths)


def test_check_of_every_cluster_in_json_lists_them(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """--output json without --cluster holds one report per cluster under clusters."""
    code, out, _ = run(capsys, "check", str(fleet.root), "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["ok"] and [c["cluster"] for c in data["clusters"]] == ["prod-eu", "prod-us"]


def test_an_unknown_cluster_is_a_usage_error_listing_the_names(fleet: Fleet,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """--cluster with a name gitopsq.yaml does not declare exits 2 and lists the declared ones."""
    code, _, err = run(capsys, "check", str(fleet.root), "--cluster", "prod-ap")
    assert code == 2 and "prod-eu, prod-us" in err
    code, _, err = run(capsys, "check", str(ROOT / "repo-template"), "--cluster", "prod-eu")
    assert code == 2 and "declares no clusters" in err  # the single-cluster template


def test_render_needs_a_cluster_on_a_fleet(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """render without --cluster exits 2 naming the clusters; with it prints that cluster's compiled queues."""
    code, out, err = run(capsys, "render", str(fleet.root))
    assert code == 2 and out == "" and "prod-eu, prod-us" in err and "--cluster" in err
    code, out, _ = run(capsys, "render", str(fleet.root), "--cluster", "prod-eu")
    assert code == 0
    assert "nominalQuota: '48'" in out  # prod-eu's ml-research budget, not prod-us's 8


def test_plan_has_a_section_per_changed_cluster(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """A change to prod-us's overlay plans prod-us and says prod-eu is left alone (text and markdown)."""
    fleet.change("more-gpus", US_ML, "nvidia.com/gpu: 8,", "nvidia.com/gpu: 16,", email="carol@example.com")
    code, out, _ = run(capsys, "plan", str(fleet.root), "--base", "main", "--head", "more-gpus")
    assert code == 0, out
    assert "══ cluster prod-us ══" in out and "══ cluster prod-eu ══" not in out
    assert "Clusters left alone (no object changes, accepted): prod-eu" in out
    assert "ClusterQueue/ml-research-gpu" in out
    code, md, _ = run(capsys, "plan", str(fleet.root), "--base", "main", "--head", "more-gpus", "-o", "markdown")
    assert md.startswith("<!-- gitopsq-plan -->") and md.count("<!-- gitopsq-plan -->") == 1
    assert "### Cluster `prod-us`:" in md and "Left alone: `prod-eu`" in md


def test_plan_json_names_changed_and_unchanged_clusters(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """--output json has one plan object per cluster with cluster and changed, and the unchanged names."""
    fleet.change("more-gpus", US_ML, "nvidia.com/gpu: 8,", "nvidia.com/gpu: 16,", email="carol@example.com")
    code, out, _ = run(capsys, "plan", str(fleet.root), "--base", "main", "--head", "more-gpus", "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "accepted"
    assert [(c["cluster"], c["changed"]) for c in data["clusters"]] == [("prod-eu", False), ("prod-us", True)]
    assert data["unchangedClusters"] == ["prod-eu"]
    us = data["clusters"][1]
    assert any(o["name"] == "ml-research-gpu" and o["status"] == "changed" for o in us["objects"])


def test_a_shared_base_change_plans_every_cluster(fleet: Fleet) -> None:
    """A change under base/ reaches both clusters, so both are changed."""
    fleet.change("low-prio", "base/platform/priority-classes.yaml", "value: 100\n", "value: 150\n")
    plan = make_fleet_plan(str(fleet.root), "main", "low-prio", use_cache=False)
    assert [p.cluster for p in plan.changed] == ["prod-eu", "prod-us"] and plan.unchanged == ()


def test_budget_capacity_is_judged_per_cluster(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """24 committed GPUs fit prod-eu's 64 but not prod-us's 32: the plan is rejected on prod-us alone, and the
    policy's message names the cluster."""
    fleet.change("too-many", US_ML, "nvidia.com/gpu: 8,", "nvidia.com/gpu: 24,", email="carol@example.com",
                 also=("burst: {nvidia.com/gpu: 16}", "burst: {nvidia.com/gpu: 24}"))
    plan = make_fleet_plan(str(fleet.root), "main", "too-many", use_cache=False)
    assert plan.rejected and [p.cluster for p in plan.plans if p.plan.rejected] == ["prod-us"]
    denied = plan.plans[1].plan.policies.denied
    assert any(v.policy == "budget-capacity" and "of cluster prod-us" in v.message for v in denied)
    code, out, _ = run(capsys, "plan", str(fleet.root), "--base", "main", "--head", "too-many")
    assert code == 1 and "rejected on prod-us" in out.strip().splitlines()[-1]


def test_plan_cluster_kubeconfig_still_works_with_a_warning(fleet: Fleet, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The old form --cluster KUBECONFIG (a file, not a declared cluster name) still reads live workloads, as
    --kubeconfig does, with a deprecation warning (here the API server is unreachable, which the plan notes);
    on a fleet, live work describes one cluster, so it needs --cluster NAME."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "current-context: x\n", encoding="utf-8")
    single = tmp_path / "single"
    shutil.copytree(ROOT / "repo-template", single, ignore=shutil.ignore_patterns("fleet"))
    repo = pygit2.init_repository(str(single), initial_head="main")
    repo.index.add_all()
    repo.index.write()
    who = pygit2.Signature("Alice Admin", "alice@example.com", 1_700_000_000, 0)
    repo.create_commit("HEAD", who, who, "template", repo.index.write_tree(), [])
    code, out, err = run(capsys, "plan", str(single), "--base", "main", "--head", "main", "--cluster", str(kubeconfig))
    assert code == 0, out
    assert "deprecated" in err and "--kubeconfig" in err
    assert f"the cluster of {kubeconfig} is unreachable" in out
    code, _, err = run(capsys, "plan", str(fleet.root), "--base", "main", "--head", "main",
                       "--kubeconfig", str(kubeconfig))
    assert code == 2 and "choose one with --cluster NAME" in err


def test_simulate_on_each_cluster_of_a_repository(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """simulate --repo replays the scenario on each cluster's objects; --cluster keeps one."""
    _, out, _ = run(capsys, "simulate", str(TRACE), "--repo", str(fleet.root), "--rev", "main", "-o", "json")
    data = json.loads(out)
    assert [c["cluster"] for c in data["clusters"]] == ["prod-eu", "prod-us"]
    _, out, _ = run(capsys, "simulate", str(TRACE), "--repo", str(fleet.root), "--cluster", "prod-us")
    assert "── cluster prod-us ──" in out and "prod-eu" not in out


def test_a_cluster_added_or_removed_by_the_pull_request(fleet: Fleet) -> None:
    """A cluster the base does not declare is planned from nothing (every object added, with a note); a cluster
    the head drops is named as removed."""
    fleet.change("add-dev", "gitopsq.yaml", "  - name: prod-us ",
                 "  - name: dev\n    paths: [base/]\n  - name: prod-us ")
    plan = make_fleet_plan(str(fleet.root), "main", "add-dev", use_cache=False)
    dev = next(p for p in plan.plans if p.cluster == "dev")
    assert dev.changed and {c.status for c in dev.plan.objects} == {"added"}
    assert any("does not declare cluster dev" in n for n in dev.plan.notes)
    assert plan.unchanged == ("prod-eu", "prod-us")
    fleet.change("drop-us", "gitopsq.yaml", "  - name: prod-us ", "  - name: prod-ap ")
    plan = make_fleet_plan(str(fleet.root), "main", "drop-us", use_cache=False)
    assert plan.removed == ("prod-us",) and [p.cluster for p in plan.plans] == ["prod-eu", "prod-ap"]


def test_the_fleet_comment_stays_within_its_limit(fleet: Fleet) -> None:
    """Every changed cluster's section shares the comment's character budget; the whole never exceeds it."""
    from gitopsq.plan.render_fleet import fleet_markdown

    fleet.change("low-prio", "base/platform/priority-classes.yaml", "value: 100\n", "value: 150\n")
    plan = make_fleet_plan(str(fleet.root), "main", "low-prio", use_cache=False)
    full = fleet_markdown(plan)
    assert full.count("### Cluster `") == 2
    short = fleet_markdown(plan, limit=5_000)
    assert len(short) <= 5_000 and short.startswith("<!-- gitopsq-plan -->")


def test_a_file_is_judged_in_the_clusters_that_read_it(fleet: Fleet) -> None:
    """A non-owner editing prod-us's ml-research Budget is denied in prod-us's section only (prod-eu, which never
    reads the file, is left alone); a team member editing the shared base is denied in every cluster."""
    fleet.change("farid-us", US_ML, "nvidia.com/gpu: 8,", "nvidia.com/gpu: 12,", email="farid@example.com")
    plan = make_fleet_plan(str(fleet.root), "main", "farid-us", use_cache=False)
    assert plan.rejected and plan.unchanged == ("prod-eu",)
    us = plan.plans[1].plan
    assert any(v.policy == "team-owns-path" for v in us.policies.denied)
    assert [a.team for a in us.approvals] == ["ml-research"]
    assert plan.plans[0].plan.approvals == () and not plan.plans[0].plan.policies.denied
    fleet.change("farid-base", "base/platform/priority-classes.yaml", "value: 100\n", "value: 150\n",
                 email="farid@example.com")
    plan = make_fleet_plan(str(fleet.root), "main", "farid-base", use_cache=False)
    assert [p.cluster for p in plan.plans if p.plan.rejected] == ["prod-eu", "prod-us"]


def test_the_plan_points_each_changed_field_at_the_overlay_patch_line(fleet: Fleet,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Carol's edit of prod-us's ml-research patch: the Budget's and the compiled ClusterQueue's changed fields
    name the patch file and the line she edited, while the objects' homes stay their base documents."""
    fleet.change("more-gpus", US_ML, "nvidia.com/gpu: 8,", "nvidia.com/gpu: 16,", email="carol@example.com")
    code, out, _ = run(capsys, "plan", str(fleet.root), "--base", "main", "--head", "more-gpus", "-o", "json")
    assert code == 0
    us = json.loads(out)["clusters"][1]
    changed = {o["kind"]: o for o in us["objects"]}
    assert set(changed) == {"Budget", "ClusterQueue"}
    assert all(o["path"] == "base/teams/ml-research/gpu-budget.yaml" for o in changed.values())
    budget = changed["Budget"]["fields"]
    assert [(f["new"], f["source"]) for f in budget] == [(16, {"path": US_ML, "line": 11})]
    quota = next(f for f in changed["ClusterQueue"]["fields"] if f["path"].endswith("nominalQuota"))
    assert quota["source"] == {"path": US_ML, "line": 11}
    code, out, _ = run(capsys, "plan", str(fleet.root), "--base", "main", "--head", "more-gpus")
    assert f"committed.nvidia.com/gpu: 8 → 16  ({US_ML}:11)" in out


def test_each_overlay_patches_its_own_cluster_only(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """The platform's patch in prod-us relabels the a100 flavor there only; each cluster's Budgets carry its own
    overlay's sizes."""
    _, us, _ = run(capsys, "render", str(fleet.root), "--cluster", "prod-us")
    _, eu, _ = run(capsys, "render", str(fleet.root), "--cluster", "prod-eu")
    assert "nvidia-a100-40gb" in us and "nvidia-a100-80gb" not in us
    assert "nvidia-a100-80gb" in eu and "nvidia-a100-40gb" not in eu
    assert "nominalQuota: '48'" in eu and "nominalQuota: '48'" not in us
    assert "config.kubernetes.io/origin" not in us  # the build metadata never reaches the manifests


def test_a_budget_finding_points_at_the_patch_that_wrote_the_value(fleet: Fleet,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A burst below committed written in prod-us's patch is an error at that patch's line, on prod-us only."""
    fleet.change("bad-burst", US_ML, "burst: {nvidia.com/gpu: 16}", "burst: {nvidia.com/gpu: 6}",
                 email="carol@example.com")
    code, out, _ = run(capsys, "check", str(fleet.root), "--rev", "bad-burst")
    assert code == 1
    assert f"{US_ML}:12: error: Budget/ml-research-gpu: burst of a100/nvidia.com/gpu is 6" in out
    assert "✗ 1 of 2 clusters rejected: prod-us" in out


def test_a_team_patching_another_teams_budget_is_refused(fleet: Fleet) -> None:
    """A patch under serving's overlay path that changes ml-research's Budget breaks the ownership rule of
    docs/kustomize.md (kustomize-patch-owner) on prod-us, whichever maintainer commits it; prod-eu is untouched."""
    kustomization = (fleet.root / "overlays/prod-us/kustomization.yaml").read_text(encoding="utf-8")
    steal = "overlays/prod-us/teams/serving/take-gpus.yaml"
    fleet.write("take-gpus", {
        "overlays/prod-us/kustomization.yaml": kustomization + "  - path: teams/serving/take-gpus.yaml\n",
        steal: "apiVersion: gitopsq.dev/v1alpha1\nkind: Budget\nmetadata:\n  name: ml-research-gpu\nspec:\n"
               "  flavors:\n    - name: a100\n      committed: {nvidia.com/gpu: 1}\n",
    })
    plan = make_fleet_plan(str(fleet.root), "main", "take-gpus", use_cache=False)
    assert [p.cluster for p in plan.plans if p.plan.rejected] == ["prod-us"] and plan.unchanged == ("prod-eu",)
    owner = [f for f in plan.plans[1].plan.findings if f.code == "kustomize-patch-owner"]
    assert len(owner) == 1 and str(owner[0].location).startswith(steal)
    assert "team serving" in owner[0].message and "team ml-research" in owner[0].message


def test_an_overlay_that_does_not_size_a_budget_is_refused(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """The base Budgets carry no sizes: dropping serving's patch from prod-eu's kustomization rejects prod-eu
    (spec.flavors is required, at the base Budget) and leaves prod-us valid."""
    fleet.change("forget", "overlays/prod-eu/kustomization.yaml", "  - path: teams/serving/gpu-budget.yaml\n", "")
    code, out, _ = run(capsys, "check", str(fleet.root), "--rev", "forget")
    assert code == 1
    assert "base/teams/serving/gpu-budget.yaml:9: error: Budget/serving-gpu: spec.flavors must list" in out
    assert out.strip().splitlines()[-1] == "✗ 1 of 2 clusters rejected: prod-eu"
