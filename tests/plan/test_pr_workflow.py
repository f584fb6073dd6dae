"""The template's CI workflow, run step by step on the sample pull request; and the Markdown docs/plan.md shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures_pr import TEMPLATE, TemplateRepo, raise_data_science_cpu

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = TEMPLATE / ".github" / "workflows" / "gitopsq.yaml"
DOCS = ROOT / "docs" / "plan.md"
SAMPLE = re.compile(r"<!-- sample-plan:start -->\n````markdown\n(.*?)````\n<!-- sample-plan:end -->", re.S)
GH_STUB = """#!/bin/sh
# Stands in for the GitHub CLI: records each call; answers the comment listing from $GH_EXISTING.
printf '%s\\n' "$*" >> "$GH_LOG"
case "$*" in
  *--jq*) [ -n "$GH_EXISTING" ] && printf '%s\\n' "$GH_EXISTING" ;;
  *body=@plan.md*) cp plan.md "$GH_LOG.body" ;;
esac
exit 0
"""


def _steps() -> dict[str, dict[str, Any]]:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return {s.get("id") or s.get("name") or s["uses"]: s for s in workflow["jobs"]["check"]["steps"]}


def _run_step(step: dict[str, Any], repo: Path, env: dict[str, str], outcomes: dict[str, str]) -> int:
    script = step["run"]
    script = script.replace("${{ steps.check.outcome }}", outcomes.get("check", ""))
    script = script.replace("${{ steps.plan.outputs.exit }}", outcomes.get("plan.exit", ""))
    assert "${{" not in script, f"unhandled expression in {step.get('name')}"
    done = subprocess.run(["bash", "-e", "-c", script], cwd=repo, env={**env, **step.get("env", {})},
                          capture_output=True, text=True, check=False)
    return done.returncode


def _run_workflow(repo: TemplateRepo, base: str, head: str, tmp: Path, existing: str = "") -> dict[str, Any]:
    """Run the workflow's shell steps as Actions would (env, $GITHUB_OUTPUT, `gh` stubbed), in order."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gh").write_text(GH_STUB)
    (bin_dir / "gh").chmod(0o755)
    output, log = tmp / "github-output", tmp / "gh.log"
    env = {**os.environ, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "BASE": base, "HEAD": head, "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(tmp / "summary"),
           "GITHUB_REPOSITORY": "example/queues", "GH_LOG": str(log), "GH_EXISTING": existing,
           "GITOPSQ_CACHE_DIR": str(tmp / "cache")}
    steps = _steps()
    outcomes: dict[str, str] = {}
    rc = _run_step(steps["check"], repo.root, env, outcomes)
    outcomes["check"] = "success" if rc == 0 else "failure"
    assert _run_step(steps["plan"], repo.root, env, outcomes) == 0
    outcomes["plan.exit"] = dict(line.split("=", 1) for line in output.read_text().splitlines())["exit"]
    post = steps["Post or update the plan comment"]
    post["env"] = {"GH_TOKEN": "t", "PR": "7"}
    assert _run_step(post, repo.root, env, outcomes) == 0
    gate = _run_step(steps["Block the merge when the head is rejected"], repo.root, env, outcomes)
    return {"gate": gate, "calls": log.read_text().splitlines() if log.exists() else [],
            "posted": Path(f"{log}.body").read_text(encoding="utf-8") if Path(f"{log}.body").exists() else "",
            "plan": (repo.root / "plan.md").read_text(encoding="utf-8"), "outcomes": outcomes}


def _without_ids(text: str) -> str:
    return re.sub(r"\b[0-9a-f]{12}\b", "<sha>", text)


def test_workflow_posts_the_sample_plan_and_lets_it_merge(repo_with_pr: tuple[TemplateRepo, str, str],
                                                          tmp_path: Path) -> None:
    """On the sample pull request the workflow's check and plan pass, the Markdown is posted as a new comment,
    the gate step succeeds, and the posted Markdown is the one docs/plan.md shows (commit ids aside)."""
    repo, base, head = repo_with_pr
    run = _run_workflow(repo, base, head, tmp_path)
    assert run["outcomes"] == {"check": "success", "plan.exit": "0"} and run["gate"] == 0
    assert [c.split()[:3] for c in run["calls"]] == [
        ["api", "repos/example/queues/issues/7/comments", "--paginate"],
        ["api", "--method", "POST"]]
    assert run["posted"] == run["plan"] and run["posted"].startswith("<!-- gitopsq-plan -->")
    shown = SAMPLE.search(DOCS.read_text(encoding="utf-8"))
    assert shown is not None, "docs/plan.md lost its sample-plan block"
    assert _without_ids(shown.group(1)) == _without_ids(run["plan"]), f"regenerate the sample:\n{run['plan']}"


def test_workflow_updates_its_comment_and_blocks_a_rejected_head(tmp_path: Path) -> None:
    """When a plan comment exists it is edited (PATCH, not a second comment); a denied head fails check (the same
    policies as plan) and the gate."""
    repo = TemplateRepo(tmp_path / "queues")
    base = repo.git("rev-parse", "HEAD")
    repo.branch("join")
    repo.replace("teams/serving/cluster-queue.yaml", "cohortName: production", "cohortName: research")
    head = repo.commit("serving joins research", "farid")
    run = _run_workflow(repo, base, head, tmp_path, existing="4242")
    assert run["outcomes"] == {"check": "failure", "plan.exit": "1"} and run["gate"] != 0
    assert run["calls"][1].split()[:4] == ["api", "--method", "PATCH", "repos/example/queues/issues/comments/4242"]
    assert "❌ rejected" in run["posted"] and "cohort-in-trust-zone" in run["posted"]


@pytest.fixture
def repo_with_pr(tmp_path: Path) -> tuple[TemplateRepo, str, str]:
    repo = TemplateRepo(tmp_path / "queues")
    base = repo.git("rev-parse", "HEAD")
    return repo, base, raise_data_science_cpu(repo)
