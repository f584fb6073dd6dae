"""The rule for a pull request under review (gitopsq.policy.forge_merge.review_block) as policies see it: the
approvers who count are maintainers of the trusted gitopsq.yaml, matched by e-mail or forgeUser login, never
the commit's own author; with no forge asked there is no review at all (the author alone is judged)."""

from __future__ import annotations

from gitopsq.policy.context import actor_of, normalise_commit
from gitopsq.policy.forge_merge import review_block

REPO = {"platformTeam": "platform", "teams": [
    {"name": "platform", "paths": ["**"], "maintainers": [{"name": "P", "email": "p@x.io", "forgeUser": ""}]},
    {"name": "team-a", "paths": ["a/**"], "maintainers": [
        {"name": "Ann", "email": "ann@x.io", "forgeUser": "ann-gh"},
        {"name": "Abe", "email": "abe@x.io", "forgeUser": ""}]}]}


def test_an_approval_by_the_commits_author_does_not_count() -> None:
    """Ann approving a commit she authored adds nothing; Abe approving it (by e-mail) brings team-a."""
    mine = review_block([{"login": "ann-gh", "email": ""}], "ann@x.io", REPO)
    assert mine == {"teams": [], "approvedBy": []}
    theirs = review_block([{"login": "abe", "email": "abe@x.io"}], "ann@x.io", REPO)
    assert theirs == {"teams": ["team-a"], "approvedBy": ["abe@x.io"]}


def test_an_unknown_reviewer_counts_for_nobody_and_no_forge_means_no_review() -> None:
    """A login no maintainer lists brings no team; absent approvals (no forge asked) give no review block."""
    assert review_block([{"login": "mallory", "email": "m@evil.io"}], "nick@x.io", REPO)["teams"] == []
    assert review_block(None, "nick@x.io", REPO) is None


def test_the_actor_of_a_reviewed_commit_carries_its_approvers_teams() -> None:
    """A member's commit approved by Ann (login) acts for team-a and is marked under review; without the forge
    its actor is the member alone, with no team."""
    raw = {"sha": "1" * 40, "author": {"name": "Nick", "email": "nick@x.io"}, "signature": {"state": "unsigned"},
           "reviewApprovals": [{"login": "ann-gh", "email": ""}]}
    reviewed = actor_of(normalise_commit(raw, REPO), REPO)
    assert (reviewed["teams"], reviewed.get("underReview"), reviewed["platform"]) == (["team-a"], True, False)
    alone = actor_of(normalise_commit({k: v for k, v in raw.items() if k != "reviewApprovals"}, REPO), REPO)
    assert alone["teams"] == [] and "underReview" not in alone
