"""A Budget in a real Git repository (the repository template plus one team's Budget), through the command line:
`check` accepts it and reports its mistakes at its lines, `plan` shows the Budget and the queues it produces,
`render` prints the compiled queues and never the Budget."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

TEMPLATE = Path(__file__).resolve().parents[2] / "repo-template"
BUDGET_PATH = "teams/ml-research/gpu-budget.yaml"
BUDGET = """# ml-research's GPU pool: 4 A100s promised, up to 8 when the research cohort has them idle.
apiVersion: gitopsq.dev/v1alpha1
kind: Budget
metadata:
  name: ml-research-gpu
spec:
  team: ml-research
  namespaces: [ml-research, ml-research-dev]
  queueName: gpu
  cohort: research
  priorityClass: standard
  fairShareWeight: "2"
  flavors:
    - name: a100
      committed: {nvidia.com/gpu: 4, cpu: "32", memory: 256Gi}
      burst: {nvidia.com/gpu: 8}
    - name: spot
      committed: {}
      burst: {cpu: "32", memory: 128Gi}
"""
PEOPLE = {"alice": ("Alice Admin", "alice@example.com"), "carol": ("Carol Chen", "carol@example.com")}


class Repo:
    def __init__(self, root: Path) -> None:
        self.root = root
        shutil.copytree(TEMPLATE, root, ignore=shutil.ignore_patterns("traces"))
        self.git("init", "-q", "-b", "main")
        self.commit("template", "alice")

    def git(self, *args: str, who: str = "alice") -> str:
        name, email = PEOPLE[who]
        env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
               "GIT_COMMITTER_EMAIL": email, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.root.parent)}
        return subprocess.run(["git", *args], cwd=self.root, env=env, capture_output=True, text=True,
                              check=True).stdout.strip()

    def commit(self, message: str, who: str) -> str:
        self.git("add", "-A", who=who)
        self.git("commit", "-q", "-m", message, who=who)
        return self.git("rev-parse", "HEAD")

    def write(self, path: str, text: str) -> None:
        (self.root / path).write_text(text, encoding="utf-8")

    def gitopsq(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "GITOPSQ_CACHE_DIR": str(self.root.parent / "cache")}
        return subprocess.run([sys.executable, "-m", "gitopsq", *args], cwd=self.root, env=env,
                              capture_output=True, text=True, check=False)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    made = Repo(tmp_path / "queues")
    made.write(BUDGET_PATH, BUDGET)
    made.commit("ml-research: a GPU pool budget", "carol")
    return made


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_check_accepts_the_budget(repo: Repo) -> None:
    """`gitopsq check` passes the revision with the Budget (its policies included)."""
    done = repo.gitopsq("check", ".")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "valid" in done.stdout


def test_render_prints_compiled_queues_not_the_budget(repo: Repo) -> None:
    """`gitopsq render` prints the ClusterQueue and LocalQueues, labelled with the Budget's name; no Budget."""
    done = repo.gitopsq("render", ".")
    assert done.returncode == 0, done.stderr
    docs = list(yaml.safe_load_all(done.stdout))
    assert not [d for d in docs if d["kind"] == "Budget"]
    compiled = [d for d in docs if d["metadata"].get("labels", {}).get("gitopsq.dev/budget") == "ml-research-gpu"]
    assert sorted((d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in compiled) == [
        ("ClusterQueue", "", "ml-research-gpu"), ("LocalQueue", "ml-research", "gpu"),
        ("LocalQueue", "ml-research-dev", "gpu")]
    cq = next(d for d in compiled if d["kind"] == "ClusterQueue")
    a100 = cq["spec"]["resourceGroups"][0]["flavors"][0]
    assert a100["name"] == "a100"
    gpu = next(r for r in a100["resources"] if r["name"] == "nvidia.com/gpu")
    assert (str(gpu["nominalQuota"]), str(gpu["borrowingLimit"])) == ("4", "4")
    assert cq["metadata"]["annotations"]["gitopsq.dev/compiled-from"] == "Budget/ml-research-gpu"


def test_plan_shows_budget_and_its_queues(repo: Repo) -> None:
    """`gitopsq plan` lists the Budget first, then the ClusterQueue and LocalQueues from the Budget's file, and
    the quota table has the compiled ClusterQueue's rows."""
    done = repo.gitopsq("plan", ".", "--base", "main~1", "--head", "main", "-o", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    plan = json.loads(done.stdout)
    objects = [(o["kind"], o["namespace"] or "", o["name"], o["status"], o["path"]) for o in plan["objects"]]
    assert objects == [("Budget", "", "ml-research-gpu", "added", BUDGET_PATH),
                       ("ClusterQueue", "", "ml-research-gpu", "added", BUDGET_PATH),
                       ("LocalQueue", "ml-research", "gpu", "added", BUDGET_PATH),
                       ("LocalQueue", "ml-research-dev", "gpu", "added", BUDGET_PATH)]
    (quota,) = plan["quota"]
    assert quota["name"] == "ml-research-gpu" and quota["cohortAfter"] == "research"
    assert {(r["flavor"], r["resource"]) for r in quota["rows"]} >= {("a100", "nvidia.com/gpu"), ("spot", "cpu")}
    text = repo.gitopsq("plan", ".", "--base", "main~1", "--head", "main").stdout
    assert "+ Budget/ml-research-gpu" in text and "ClusterQueue ml-research-gpu [added]" in text


def test_plan_of_a_budget_change_changes_its_queue(repo: Repo) -> None:
    """Raising committed GPUs shows as a change of the Budget and of the compiled ClusterQueue's nominal quota."""
    repo.write(BUDGET_PATH, BUDGET.replace("nvidia.com/gpu: 4,", "nvidia.com/gpu: 6,"))
    repo.commit("ml-research: 6 GPUs", "carol")
    plan = json.loads(repo.gitopsq("plan", ".", "--base", "main~1", "--head", "main", "-o", "json").stdout)
    assert [(o["kind"], o["status"]) for o in plan["objects"]] == [("Budget", "changed"), ("ClusterQueue", "changed")]
    rows = {(r["flavor"], r["resource"]): r for r in plan["quota"][0]["rows"]}
    assert rows[("a100", "nvidia.com/gpu")]["nominalQuotaDelta"] == "+2"


def test_bad_budget_is_reported_at_its_line(repo: Repo) -> None:
    """Burst below committed fails `check` with the Budget file and the burst line, never compiled output."""
    bad = BUDGET.replace("burst: {nvidia.com/gpu: 8}", "burst: {nvidia.com/gpu: 2}")
    repo.write(BUDGET_PATH, bad)
    repo.commit("oops", "carol")
    done = repo.gitopsq("check", ".")
    assert done.returncode == 1
    assert f"{BUDGET_PATH}:{_line(bad, 'burst: {nvidia.com/gpu: 2}')}: error: Budget/ml-research-gpu:" in done.stdout
    assert "[budget-burst-below-committed]" in done.stdout


def test_conflict_with_hand_written_cluster_queue(repo: Repo) -> None:
    """A Budget named like the team's hand-written ClusterQueue is one error naming both files."""
    repo.write(BUDGET_PATH, BUDGET.replace("name: ml-research-gpu", "name: ml-research"))
    repo.commit("clash", "carol")
    done = repo.gitopsq("check", ".")
    assert done.returncode == 1
    line = next(t for t in done.stdout.splitlines() if "[budget-conflict]" in t)
    assert line.startswith(f"{BUDGET_PATH}:") and "teams/ml-research/cluster-queue.yaml:" in line


def test_commitments_past_capacity_are_denied(repo: Repo) -> None:
    """Two teams' Budgets committing more A100 GPUs together than gitopsq.yaml declares (the template's
    data-science Budget commits 4 of 64) are denied by the built-in budget-capacity policy, naming both."""
    repo.write(BUDGET_PATH, BUDGET.replace("nvidia.com/gpu: 4,", "nvidia.com/gpu: 61,")
               .replace("burst: {nvidia.com/gpu: 8}", "burst: {nvidia.com/gpu: 61}"))
    repo.commit("greedy", "carol")
    done = repo.gitopsq("check", ".")
    assert done.returncode == 1
    assert ("policy budget-capacity: Budgets commit more than the declared capacity: a100/nvidia.com/gpu committed "
            "65 > 64 (Budget/data-science-gpu (teams/data-science/gpu-budget.yaml) 4, Budget/ml-research-gpu "
            f"({BUDGET_PATH}) 61)") in done.stdout


def test_check_json_lists_the_budget_and_its_queues_at_its_file(repo: Repo) -> None:
    """`check --output json` lists the Budget and the objects it compiles into, all at the Budget's file."""
    done = repo.gitopsq("check", ".", "--output", "json")
    assert done.returncode == 0, done.stdout
    at_file = sorted((o["kind"], o["namespace"] or "", o["name"], o["line"])
                     for o in json.loads(done.stdout)["objects"] if o["path"] == BUDGET_PATH)
    assert at_file == [("Budget", "", "ml-research-gpu", 2), ("ClusterQueue", "", "ml-research-gpu", 2),
                       ("LocalQueue", "ml-research", "gpu", 8), ("LocalQueue", "ml-research-dev", "gpu", 8)]
