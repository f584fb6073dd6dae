"""`audit verify` on tampered branches: each kind of tampering is detected and named where it happens."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner

from gitopsq.audit.canonical import ChainHead
from gitopsq.audit.trail import AuditTrail
from gitopsq.audit.verify import verify_branch
from gitopsq.commands.audit import command

from .conftest import BRANCH, admitted, bare_repo, fast_settings, verified
from .tamper import Files, commit_on_tip, edit_lines, read_files, rechain, record_files

BATCHES = ((0, 4), (4, 7), (7, 10))  # three commits: seqs 1-4, 5-7, 8-10


def _fill(remote: Path, wal: Path, *, queue: str = "cq-a") -> None:
    with AuditTrail.open(str(remote), wal, settings=fast_settings()) as trail:
        for start, stop in BATCHES:
            for i in range(start, stop):
                trail.record(admitted(i, queue=queue))
            assert trail.flush(30)


@pytest.fixture
def branch(remote: Path, tmp_path: Path) -> Path:
    _fill(remote, tmp_path / "wal")
    assert verified(remote).ok
    return remote


def _files(remote: Path) -> list[str]:
    repo = pygit2.Repository(str(remote))
    return record_files(read_files(repo, repo.references[f"refs/heads/{BRANCH}"].peel(pygit2.Commit).tree))


def _second(remote: Path) -> str:
    return _files(remote)[1]


def _set(field: str, value: object) -> Callable[[list[str]], list[str]]:
    def change(lines: list[str]) -> list[str]:
        entry = json.loads(lines[1])
        entry[field] = value
        lines[1] = json.dumps(entry)
        return lines
    return change


def _drop_file(index: int) -> Callable[[Path], Callable[[Files], None]]:
    def make(remote: Path) -> Callable[[Files], None]:
        victim = _files(remote)[index]
        return lambda files: files.pop(victim)
    return make


def _head(seq: int) -> Callable[[Path], Callable[[Files], None]]:
    def make(remote: Path) -> Callable[[Files], None]:
        def mutate(files: Files) -> None:
            head = json.loads(files["HEAD.json"])
            head["seq"] = seq
            files["HEAD.json"] = json.dumps(head).encode()
        return mutate
    return make


Tamper = Callable[[Path], Callable[[Files], None]]
TAMPERING: list[tuple[str, Tamper, tuple[str, int | None, int | None]]] = [
    ("edited-record", lambda r: edit_lines(_second(r), _set("clusterQueue", "cq-evil")), ("edited", 2, 6)),
    ("removed-record", lambda r: edit_lines(_second(r), lambda ls: [ls[0], ls[2]]), ("gap", 2, 7)),
    ("reordered-records", lambda r: edit_lines(_second(r), lambda ls: [ls[1], ls[0], ls[2]]), ("reordered", 1, 6)),
    ("inserted-copy", lambda r: edit_lines(_second(r), lambda ls: [ls[0], ls[0], *ls[1:]]), ("inserted", 2, 5)),
    ("forged-record-inserted", lambda r: edit_lines(
        _second(r), lambda ls: [ls[0], json.dumps({**json.loads(ls[0]), "seq": 6}), *ls[1:]]), ("chain", 2, 6)),
    ("gap-middle-file-removed", _drop_file(1), ("gap", 1, 8)),
    ("head-mismatch", _head(9), ("head", None, None)),
    ("last-file-removed", _drop_file(2), ("removed", None, None)),
]


@pytest.mark.parametrize(("label", "tamper", "where"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_tampering_is_detected_and_the_first_bad_record_named(
        branch: Path, label: str, tamper: Tamper, where: tuple[str, int | None, int | None]) -> None:
    """A tampered branch fails verification, and the first problem names the kind, file, line and seq."""
    kind, line, seq = where
    expected_file = _second(branch) if line is not None and label != "gap-middle-file-removed" else None
    if label == "gap-middle-file-removed":
        expected_file = _files(branch)[2]
    commit_on_tip(branch, tamper(branch))
    result = verified(branch)
    assert not result.ok
    first = result.problems[0]
    assert (first.kind, first.line, first.seq) == (kind, line, seq), first
    assert first.file == (expected_file or first.file)
    assert any(p.kind == "rewritten" and p.commit for p in result.problems), "the tampering commit is named"


def test_an_amended_commit_with_a_recomputed_chain_contradicts_the_earlier_stated_head(branch: Path) -> None:
    """Rewriting the last commit with a re-hashed chain breaks the head a surviving commit stated."""
    middle = _second(branch)

    def forge(files: Files) -> None:
        rechain(files, middle, ChainHead(4, json.loads(files[record_files(files)[0]].splitlines()[-1])["hash"]),
                lambda e: e.update(clusterQueue="cq-evil"))

    repo = pygit2.Repository(str(branch))
    tip = repo.references[f"refs/heads/{BRANCH}"].peel(pygit2.Commit)
    repo.references.create(f"refs/heads/{BRANCH}", tip.parent_ids[0], force=True)  # drop the last commit
    commit_on_tip(branch, forge, amend=True)  # and rewrite the middle one in place, message unchanged
    first = verified(branch).problems[0]
    assert (first.kind, first.file, first.seq) == ("rewritten", middle, 7)


def test_a_wholly_rebuilt_branch_is_caught_by_the_anchor_or_the_previous_head(branch: Path, tmp_path: Path) -> None:
    """A branch rebuilt from scratch contradicts the writer's anchor ref; rebuilt together with the anchor ref it
    verifies on its own, and --since-head with the earlier head exposes it."""
    honest_head = verified(branch)
    forged = bare_repo(tmp_path / "forged.git")
    _fill(forged, tmp_path / "forged-wal", queue="cq-evil")
    subprocess.run(["git", "-C", str(branch), "fetch", "-q", str(forged), f"+{BRANCH}:{BRANCH}"], check=True)
    repo = pygit2.Repository(str(branch))
    anchored = verify_branch(repo, BRANCH)
    assert anchored.state == "rewound" and [p.kind for p in anchored.problems] == ["rewound"]
    anchor = f"refs/gitopsq/audit-anchor/{BRANCH}"
    subprocess.run(["git", "-C", str(branch), "fetch", "-q", str(forged), f"+{anchor}:{anchor}"], check=True)
    assert verify_branch(repo, BRANCH).ok
    since = f"{honest_head.head_seq}:{honest_head.head_hash}"
    result = verify_branch(repo, BRANCH, since_head=since)
    assert [p.kind for p in result.problems] == ["rewritten"]


def test_since_head_accepts_a_branch_that_only_grew(branch: Path, tmp_path: Path) -> None:
    """A previously verified head still in the chain passes: the branch was extended, not rewritten."""
    before = verified(branch)
    with AuditTrail.open(str(branch), tmp_path / "wal", settings=fast_settings()) as trail:
        trail.record(admitted(99))
        assert trail.flush(30)
    repo = pygit2.Repository(str(branch))
    assert verify_branch(repo, BRANCH, since_head=f"sha256:{before.head_hash}").ok


def test_cli_verify_exit_codes_and_messages(branch: Path) -> None:
    """The CLI exits 0 with a summary when intact and 1 naming file, line and seq when not."""
    runner = CliRunner()
    ok = runner.invoke(command, ["verify", str(branch)])
    assert ok.exit_code == 0 and "intact: 10 records in 3 commits" in ok.output
    middle = _second(branch)
    commit_on_tip(branch, edit_lines(middle, _set("reason", "x")))
    bad = runner.invoke(command, ["verify", str(branch)])
    assert bad.exit_code == 1
    assert f"BROKEN at {middle}:2 (seq 6)" in bad.output
    as_json = json.loads(runner.invoke(command, ["verify", str(branch), "--output", "json"]).output)
    assert as_json["ok"] is False and as_json["problems"][0]["seq"] == 6


def test_cli_verify_reads_a_url(branch: Path) -> None:
    """verify works on a file:// URL by fetching the audit branch into a private repository."""
    result = CliRunner().invoke(command, ["verify", f"file://{branch}"])
    assert result.exit_code == 0, result.output


def test_a_missing_branch_is_absent_not_broken(remote: Path) -> None:
    """A repository without the audit branch exits 4 saying there is nothing to verify, never "BROKEN" (exit 1)."""
    result = CliRunner().invoke(command, ["verify", str(remote)])
    assert result.exit_code == 4, result.output
    assert result.output.startswith("no audit branch gitopsq/audit: nothing to verify")
    assert "BROKEN" not in result.output
    as_json = json.loads(CliRunner().invoke(command, ["verify", str(remote), "--output", "json"]).output)
    assert as_json["state"] == "absent" and as_json["ok"] is False
    assert as_json["problems"][0]["kind"] == "missing"


def test_an_intact_and_a_broken_branch_state_themselves_in_json(branch: Path) -> None:
    """verify's JSON names the state: intact before tampering, broken after."""
    runner = CliRunner()
    assert json.loads(runner.invoke(command, ["verify", str(branch), "--output", "json"]).output)["state"] == "intact"
    commit_on_tip(branch, edit_lines(_second(branch), _set("reason", "x")))
    assert json.loads(runner.invoke(command, ["verify", str(branch), "--output", "json"]).output)["state"] == "broken"


def test_export_of_a_repository_without_audit_branch_exits_4(remote: Path, tmp_path: Path) -> None:
    """export with no audit branch writes nothing, says why on stderr and exits 4."""
    out = tmp_path / "r.html"
    result = CliRunner().invoke(command, ["export", str(remote), "--to", str(out)])
    assert result.exit_code == 4 and not out.exists()
    assert "no audit branch gitopsq/audit" in result.output


def test_verify_reads_the_branch_of_a_clone(branch: Path, tmp_path: Path) -> None:
    """In a clone the audit branch exists as origin's remote-tracking branch; verify reads it there."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(branch), str(clone)], check=True)
    result = CliRunner().invoke(command, ["verify", str(clone)])
    assert result.exit_code == 0, result.output


def test_an_unreachable_url_is_reported_without_its_credentials() -> None:
    """verify on a URL that cannot be fetched fails with exit 3 and an error that hides the URL's token."""
    import socket

    from gitopsq.errors import AuditError

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = CliRunner().invoke(command, ["verify", f"http://bot:s3cr3t-token@127.0.0.1:{port}/queues.git"])
    assert isinstance(result.exception, AuditError)
    assert "s3cr3t" not in str(result.exception) and "127.0.0.1" in str(result.exception)
