"""`gitopsq plan` flags an approval that can never be given: the sole maintainer of a team whose file the pull
request touches is its author (real repository, the plan as the command computes it)."""

from __future__ import annotations

from pathlib import Path

from queue_repo import QueueRepo

from gitopsq.commands.plan import make_plan


def plan_codes(repo: QueueRepo, base: str) -> list[str]:
    plan = make_plan(str(repo.path), base, "HEAD", use_cache=False)
    return [f.code for f in plan.findings]


def test_the_sole_maintainer_authoring_the_change_is_a_finding(tmp_path: Path) -> None:
    """t is the platform team's only maintainer: a change t authors needs an approval nobody can give (warning,
    naming the team); the same change authored by someone else does not."""
    repo = QueueRepo(tmp_path / "q", "p")
    base = repo.commit("set-up")
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="9") + repo.lq(repo.team_a))
    repo.commit("t raises team-a", author=("t", "t@example.com"))
    plan = make_plan(str(repo.path), base, "HEAD", use_cache=False)
    (finding,) = [f for f in plan.findings if f.code == "approval-impossible"]
    assert not finding.is_error and "team platform must approve" in finding.message
    assert "t@example.com" in finding.message

    repo._git("reset", "-q", "--hard", base)
    repo.write("queues/team-a.yaml", repo.cq(repo.team_a, cpu="9") + repo.lq(repo.team_a))
    repo.commit("nick raises team-a", author=("Nick", "nick@example.com"))
    assert "approval-impossible" not in plan_codes(repo, base)
