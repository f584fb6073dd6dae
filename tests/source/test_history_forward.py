"""Revisions only move forward: a head that does not descend from its base (a branch moved back, a force-push onto
another history) is refused by `gitopsq check --base` and by the sync's validator, so moving a branch can never
downgrade the trust configuration. Real repositories with real SSH-signed commits, on the repository template
with `signing.mode: required`."""

from __future__ import annotations

import pytest

from gitopsq.source import open_source
from gitopsq.sync.revision_validation import check_pipeline_validator

from .conftest import GitRepo
from .test_signatures import SshKey
from .test_trust_attacks import check, commit, finish, keys, serving_queue, template

__all__ = ["keys", "template"]  # the fixtures this module shares with the trust attacks

pytestmark = pytest.mark.usefixtures("isolated_caches")


@pytest.fixture
def optional_then_required(template: GitRepo, keys: dict[str, SshKey]) -> tuple[str, str]:
    """The template with signing optional, then Alice's signed commit that makes it required: (before, after)."""
    text = (template.path / "gitopsq.yaml").read_text(encoding="utf-8")
    before = commit(template, keys, "alice", "signing optional for now",
                    {"gitopsq.yaml": text.replace("mode: required", "mode: optional")})
    after = commit(template, keys, "alice", "require signatures", {"gitopsq.yaml": text})
    return before, after


def _rewind(repo: GitRepo, to: str) -> None:
    repo.git("reset", "-q", "--hard", to)


def test_a_rewind_to_an_older_revision_is_refused(template: GitRepo, keys: dict[str, SshKey],
                                                  optional_then_required: tuple[str, str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """main moved back from the applied revision to the one before signing was required: exit 1, naming both
    commits, instead of an empty change that every commit rule passes."""
    before, applied = optional_then_required
    _rewind(template, before)
    code, out = check(template, capsys, applied)
    assert code == 1, out
    assert "history-not-forward" in out
    assert f"revision {before[:12]} does not descend from {applied[:12]}: it is an older revision of the same " \
           "history" in out


def test_an_unsigned_commit_on_a_rewound_branch_is_refused(template: GitRepo, keys: dict[str, SshKey],
                                                           optional_then_required: tuple[str, str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The downgrade: main moved back to the optional-signing revision. The sync's validator refuses it against
    the applied revision, so the applied revision (signatures required) stays the base; Carol's unsigned change
    to serving's queue on top is refused against it too, by check and by the validator alike."""
    before, applied = optional_then_required
    _rewind(template, before)
    validate = check_pipeline_validator()
    rewound = validate(open_source(str(template.path)), before, applied)
    assert rewound.rejected, rewound.findings
    assert [f["code"] for f in rewound.findings] == ["history-not-forward"]
    unsigned = commit(template, keys, "carol", "serving: less cpu", serving_queue(template, "8"), signed=False)
    code, out = check(template, capsys, applied)
    assert code == 1, out
    assert f"revision {unsigned[:12]} does not descend from {applied[:12]}: the two histories have diverged" in out
    validated = validate(open_source(str(template.path)), unsigned, applied)
    assert [f["code"] for f in validated.findings] == ["history-not-forward"]


def test_a_force_push_onto_another_history_is_refused(template: GitRepo, keys: dict[str, SshKey],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """main replaced by an unrelated history, Carol's single commit holding the very same files: nothing
    differs, so no rule had a path to judge; it is refused as not descending from the applied revision."""
    applied = template.git("rev-parse", "HEAD")
    template.git("checkout", "-q", "--orphan", "other")
    replaced = finish(template, keys, "carol", "a fresh start")
    assert template.git("rev-parse", f"{replaced}^{{tree}}") == template.git("rev-parse", f"{applied}^{{tree}}")
    template.git("branch", "-q", "-f", "main", "other")
    template.git("checkout", "-q", "main")
    code, out = check(template, capsys, applied)
    assert code == 1, out
    assert "the two histories have diverged (a force-push onto another history, or a branch that does not " \
           "contain the base yet" in out


def test_going_back_is_a_revert_judged_like_any_change(template: GitRepo, keys: dict[str, SshKey],
                                                       optional_then_required: tuple[str, str],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The way back: Alice's signed revert on top of the applied revision descends from it and passes; Carol's
    unsigned revert is judged by the applied revision's trust model (signatures required) and denied."""
    _, applied = optional_then_required
    template.git("revert", "--no-commit", "HEAD")
    finish(template, keys, "alice", "back to optional signing")
    assert template.git("rev-parse", "HEAD~1") == applied
    code, out = check(template, capsys, applied)
    assert code == 0, out
    _rewind(template, applied)
    template.git("revert", "--no-commit", "HEAD")
    finish(template, keys, "carol", "back to optional signing", signed=False)
    code, out = check(template, capsys, applied)
    assert code == 1 and "history-not-forward" not in out, out
