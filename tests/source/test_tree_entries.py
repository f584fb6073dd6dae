"""Trees Git would refuse are refused: entries git fsck flags (`.`, `..`, `.git` in any case, `/` or NUL in a name,
duplicate names, entries out of order) make `gitopsq check` exit 1 with a finding naming the commit, the tree
and the entry. Each tree is written byte by byte with `git hash-object -t tree --literally` into a real
repository (the repository template), as a change under teams/ml-research/."""

from __future__ import annotations

import pytest

from gitopsq.source import open_source
from gitopsq.sync.revision_validation import check_pipeline_validator

from .conftest import GitRepo
from .test_signatures import SshKey
from .test_trust_attacks import check, keys, template

__all__ = ["keys", "template"]  # the fixtures this module shares with the trust attacks

pytestmark = pytest.mark.usefixtures("isolated_caches")

QUEUE = (b"apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: sneaky\n"
         b"  namespace: ml-research\nspec:\n  clusterQueue: ml-research\n")
Entry = tuple[bytes, bytes, str]  # mode, name, object id


def _listing(repo: GitRepo, treeish: str) -> list[Entry]:
    out = repo.git("ls-tree", "-z", treeish)
    entries = []
    for item in out.split("\0"):
        if item:
            head, name = item.split("\t", 1)
            mode, _, oid = head.split(" ")
            entries.append((b"40000" if mode == "040000" else mode.encode(), name.encode(), oid))
    return entries


def _write_tree(repo: GitRepo, entries: list[Entry], *, raw_tail: bytes = b"") -> str:
    data = b"".join(mode + b" " + name + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries) + raw_tail
    return repo.git("hash-object", "-t", "tree", "--literally", "-w", "--stdin", input=data)


def _blob(repo: GitRepo, data: bytes) -> str:
    return repo.git("hash-object", "-w", "--stdin", input=data)


def _replace(entries: list[Entry], name: bytes, oid: str) -> list[Entry]:
    return [(mode, n, oid if n == name else o) for mode, n, o in entries]


def _commit_team_tree(repo: GitRepo, team_tree: str, carol: SshKey) -> str:
    """A commit by Carol (a maintainer of ml-research), signed with her key, on top of main whose
    teams/ml-research is ``team_tree``; main moves to it."""
    teams = _write_tree(repo, _replace(_listing(repo, "HEAD:teams"), b"ml-research", team_tree))
    root = _write_tree(repo, _replace(_listing(repo, "HEAD"), b"teams", teams))
    env = {"GIT_AUTHOR_NAME": "Carol", "GIT_AUTHOR_EMAIL": "carol@example.com",
           "GIT_COMMITTER_NAME": "Carol", "GIT_COMMITTER_EMAIL": "carol@example.com"}
    sha = repo.git("-c", "gpg.format=ssh", "-c", f"user.signingkey={carol.private}", "commit-tree", "-S", root,
                   "-p", "HEAD", "-m", "crafted tree", env=env)
    repo.git("update-ref", "refs/heads/main", sha)
    return sha


def _sorted(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: e[1] + b"/" if e[0] == b"40000" else e[1])


def _case(repo: GitRepo, case: str, carol: SshKey) -> tuple[str, str]:
    """teams/ml-research as ``case`` crafts it; returns (the entry's name, git fsck's rule)."""
    team = _listing(repo, "HEAD:teams/ml-research")
    queue = _blob(repo, QUEUE)
    inner = _write_tree(repo, [(b"100644", b"sneaky.yaml", queue)])
    if case in ("..", ".", ".git", ".GIT", "Git~1"):
        rule = {"..": "hasDotdot", ".": "hasDot"}.get(case, "hasDotgit")
        _write_team(repo, _sorted([*team, (b"40000", case.encode(), inner)]), carol)
        return case, rule
    if case == "slash":
        _write_team(repo, _sorted([*team, (b"100644", b"sub/sneaky.yaml", queue)]), carol)
        return "sub/sneaky.yaml", "fullPathname"
    if case == "duplicate":
        first = team[0]
        _write_team(repo, _sorted([*team, (first[0], first[1], queue)]), carol)
        return first[1].decode(), "duplicateEntries"
    if case == "unsorted":
        _write_team(repo, [*team, (b"100644", b"a-first.yaml", queue)], carol)
        return "a-first.yaml", "treeNotSorted"
    assert case == "nul"
    _write_team(repo, team, carol, raw_tail=b"100644 sneaky\0.yaml\0" + bytes.fromhex(queue))
    return "", "badTree"


def _write_team(repo: GitRepo, entries: list[Entry], carol: SshKey, *, raw_tail: bytes = b"") -> str:
    return _commit_team_tree(repo, _write_tree(repo, entries, raw_tail=raw_tail), carol)


@pytest.mark.parametrize("case", ["..", ".", ".git", ".GIT", "Git~1", "slash", "nul", "duplicate", "unsorted"])
def test_a_tree_git_refuses_is_refused(template: GitRepo, keys: dict[str, SshKey],
                                       capsys: pytest.CaptureFixture[str], case: str) -> None:
    """check exits 1 with a `tree-refused` finding naming the commit, the tree and the entry; the sync's
    validator rejects the revision the same way."""
    base = template.git("rev-parse", "HEAD")
    entry, rule = _case(template, case, keys["carol"])
    head = template.git("rev-parse", "HEAD")
    code, out = check(template, capsys, base)
    assert code == 1, out
    assert "tree-refused" in out, out
    assert f"commit {head[:12]}: tree 'teams/ml-research', " in out, out
    if entry:
        assert f"entry {entry!r}" in out, out
    assert f"[{rule}]" in out, out
    validated = check_pipeline_validator()(open_source(str(template.path)), head, base)
    assert validated.rejected and {f["code"] for f in validated.findings} == {"tree-refused"}


def test_a_sound_crafted_tree_is_read(template: GitRepo, keys: dict[str, SshKey],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the same byte-by-byte writing, with the new file under a proper name and in Git's order,
    is an ordinary change that git fsck accepts, and so does check (Carol signed it; the path is her team's)."""
    base = template.git("rev-parse", "HEAD")
    team = _listing(template, "HEAD:teams/ml-research")
    _write_team(template, _sorted([*team, (b"100644", b"sneaky.yaml", _blob(template, QUEUE))]), keys["carol"])
    assert template.git("fsck", "--no-progress", "--no-dangling") == ""
    code, out = check(template, capsys, base)
    assert code == 0, out
