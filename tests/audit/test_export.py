"""Evidence export: change log, missing approvals, admission evidence, and the jsonl/csv/html/bundle outputs."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitopsq.audit import records as r
from gitopsq.audit.canonical import ChainHead, link_all
from gitopsq.audit.evidence import build_evidence
from gitopsq.audit.evidence_formats import records_csv, to_html
from gitopsq.audit.trail import AuditTrail
from gitopsq.commands.audit import command

from .conftest import T0, fast_settings
from .tamper import commit_on_tip, edit_lines, read_files, record_files

ANN = r.Person("Ann", "ann@example.com", T0 - timedelta(hours=2))
COMMIT = r.CommitInfo("c1", ANN, ANN, "raise quota", r.SignatureState("verified", "ann@example.com"))


def _approval(email: str, minutes: int) -> r.Approval:
    return r.Approval(email.partition("@")[0], email, "Reviewed-by", "c1", T0 + timedelta(minutes=minutes))


def _sync(revision: str, approvals: list[r.Approval], *, required: bool = True, result: str = "applied",
          message: str = "") -> r.Record:
    return r.sync_attempt(time=T0, source_url="https://git.example.com/q.git", revision=revision,
                          previous_revision="c0", result=result, commit=COMMIT, approvals=approvals,
                          approval_required=required, message=message,
                          changes=[r.ObjectChange("ClusterQueue", "team-a-cq", "updated"),
                                   r.ObjectChange("LocalQueue", "lq", "unchanged", "team-a")],
                          verdicts=[r.PolicyVerdict("quota-cap", "ClusterQueue/team-a-cq", "Deny", True)])


def _admit(name: str, *, wait: int, nominal: bool, queue: str = "cq-a") -> r.Record:
    return r.admission("admitted", time=T0 + timedelta(seconds=wait), workload=r.WorkloadRef("ns", name, name),
                       cluster_queue=queue, times={"created": T0}, within_nominal_quota=nominal)


def _preempt(name: str, reason: str) -> r.Record:
    return r.admission("preempted", time=T0, workload=r.WorkloadRef("ns", name, name), cluster_queue="cq-a",
                       reason=reason, preempted_by=r.WorkloadRef("ns", "big", "big"))


def _entries(items: list[r.Record]) -> list[dict[str, Any]]:
    return link_all([i.data for i in items], ChainHead())[0]


@pytest.mark.parametrize(("approvals", "required", "reason"), [
    ([_approval("bob@example.com", -10)], True, None),
    ([], False, None),
    ([], True, "no approval found"),
    ([_approval("ann@example.com", -10)], True, "only by its own author"),
    ([_approval("bob@example.com", 30)], True, "retroactive"),
], ids=["independent-approval-before-apply", "approval-not-required", "required-but-missing",
        "self-approval-does-not-count", "approved-only-after-apply"])
def test_changes_applied_without_required_approval(approvals: list[r.Approval], required: bool,
                                                   reason: str | None) -> None:
    """An applied change that needed an approval from someone else, before the apply, is flagged otherwise."""
    evidence = build_evidence(_entries([_sync("c1", approvals, required=required)]))
    assert len(evidence.changes) == 1
    found = [u.reason for u in evidence.unapproved]
    assert (found == []) if reason is None else (reason in found[0])


def test_change_log_lists_what_who_and_verdicts_and_skips_unchanged_objects() -> None:
    """The change log row carries the revision, author, approvers, policy verdicts and the changed objects."""
    change = build_evidence(_entries([_sync("c1", [_approval("bob@example.com", -5)])])).changes[0]
    assert change.author == "Ann <ann@example.com>"
    assert change.objects == ("updated ClusterQueue team-a-cq",)
    assert change.approvers == ("bob <bob@example.com> (Reviewed-by)",)
    assert change.verdicts == ("quota-cap on ClusterQueue/team-a-cq: allowed (Deny)",)
    assert change.signature == "verified by ann@example.com"


def test_rejected_attempts_are_not_changes() -> None:
    """A rejected sync attempt appears among rejected revisions, not in the change log."""
    evidence = build_evidence(_entries([_sync("c1", [], result="rejected")]))
    assert evidence.changes == () and len(evidence.rejected) == 1


def test_admission_evidence_counts_waits_within_nominal_quota_only() -> None:
    """Per-queue wait figures cover admissions within nominal quota; borrowing admissions are kept apart."""
    items = [_admit(f"w{s}", wait=s, nominal=True) for s in (10, 20, 30, 40, 100)]
    items += [_admit("borrower", wait=5000, nominal=False), _preempt("v1", "InCohortReclamation"),
              _preempt("v2", "InCohortReclamation"), _preempt("v3", "InClusterQueue")]
    queue = build_evidence(_entries(items)).queues[0]
    assert (queue.admitted, queue.admitted_within_nominal) == (6, 5)
    waits = queue.wait_within_nominal
    assert (waits.count, waits.p50_seconds, waits.max_seconds, waits.mean_seconds) == (5, 30.0, 100.0, 40.0)
    assert queue.wait_all.max_seconds == 5000.0
    assert queue.preemption_reasons == (("InClusterQueue", 1), ("InCohortReclamation", 2))
    assert queue.preemptions[0].preempted_by == "ns/big"


def test_the_period_filter_is_inclusive_start_exclusive_end() -> None:
    """since includes records at that instant, until excludes them."""
    items = [_admit(f"w{s}", wait=s, nominal=True) for s in (0, 60, 120)]
    evidence = build_evidence(_entries(items), since=T0 + timedelta(seconds=60), until=T0 + timedelta(seconds=120))
    assert [e["workload"]["name"] for e in evidence.records] == ["w60"]


def test_html_escapes_everything_and_has_no_scripts() -> None:
    """Hostile text in a record is shown escaped; the report carries no script and names every section."""
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    evidence = build_evidence(_entries([_sync("c1", [], message=hostile, result="rejected"),
                                        _sync("c2", []), _preempt("v1", hostile)]))
    page = to_html(evidence, {"ok": True, "branch": "gitopsq/audit", "head": {"seq": 3, "hash": "ab"}})
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&lt;script&gt;" in page
    for heading in ("Changes applied without a required approval", "Change log", "Rejected revisions",
                    "Drift corrections", "Admission evidence per ClusterQueue", "How to check this report"):
        assert f">{heading}</h2>" in page


def test_html_states_a_failed_verification_first() -> None:
    """When the chain is broken the report says so and lists the problem."""
    page = to_html(build_evidence([]), {"ok": False, "problems": [
        {"kind": "edited", "file": "records/a.jsonl", "line": 2, "seq": 6, "message": "edited"}]})
    assert "FAILED verification" in page and "records/a.jsonl" in page


def test_csv_neutralises_spreadsheet_formulas() -> None:
    """A value starting with = is exported as text so a spreadsheet does not run it."""
    rejected = r.sync_rejected(time=T0, source_url="https://h/q.git", revision="c1", reason="PolicyDenied",
                               message='=HYPERLINK("http://evil")')
    evidence = build_evidence(_entries([rejected]))
    rows = list(csv.DictReader(io.StringIO(records_csv(evidence))))
    assert rows[0]["details"].startswith("'=")


@pytest.fixture
def populated(remote: Path, tmp_path: Path) -> Path:
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=fast_settings()) as trail:
        trail.record(_sync("c1", [_approval("bob@example.com", -5)]))
        trail.record(_sync("c2", []))
        trail.record(_admit("w1", wait=30, nominal=True))
        trail.record(_preempt("v1", "InCohortReclamation"))
        assert trail.flush(30)
    return remote


@pytest.mark.parametrize(("fmt", "check"), [
    ("jsonl", lambda text: [json.loads(line)["seq"] for line in text.splitlines()] == [1, 2, 3, 4]),
    ("csv", lambda text: text.splitlines()[0].startswith("seq,time,type") and len(text.splitlines()) == 5),
    ("html", lambda text: text.startswith("<!DOCTYPE html>") and "intact" in text),
], ids=["jsonl-chained-records", "csv-one-row-per-record", "html-report"])
def test_cli_export_formats(populated: Path, tmp_path: Path, fmt: str, check: Any) -> None:
    """Each export format writes the period's evidence to the output file and exits 0."""
    out = tmp_path / f"out.{fmt}"
    result = CliRunner().invoke(command, ["export", str(populated), "--output", fmt, "--to", str(out)])
    assert result.exit_code == 0, result.output
    assert check(out.read_text())


def test_cli_bundle_checksums_match_its_files(populated: Path, tmp_path: Path) -> None:
    """The bundle holds records, report, verification and checksums that match every file."""
    bundle = tmp_path / "evidence.zip"
    result = CliRunner().invoke(command, ["export", str(populated), "--since", "2026-03-01", "--until",
                                          "2026-03-02", "--to", str(tmp_path / "r.html"),
                                          "--bundle", str(bundle)])
    assert result.exit_code == 0, result.output
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        sums = dict(reversed(line.split("  ")) for line in archive.read("SHA256SUMS").decode().splitlines())
        for name in names:
            if name != "SHA256SUMS":
                assert hashlib.sha256(archive.read(name)).hexdigest() == sums[name], name
        manifest = json.loads(archive.read("manifest.json"))
        verification = json.loads(archive.read("verification.json"))
    assert {"report.html", "records.jsonl", "verification.json", "manifest.json", "SHA256SUMS"} <= set(names)
    assert manifest["verified"] is True and verification["records"] == 4
    assert "no approval found" in (tmp_path / "r.html").read_text()


def test_cli_export_of_a_broken_branch_still_writes_and_exits_1(populated: Path, tmp_path: Path) -> None:
    """Export on a tampered branch writes the report stating the failure and exits 1."""
    import pygit2

    repo = pygit2.Repository(str(populated))
    path = record_files(read_files(repo, repo.references["refs/heads/gitopsq/audit"].peel(pygit2.Commit).tree))[0]
    commit_on_tip(populated, edit_lines(path, lambda ls: [ls[0].replace("c1", "c9"), *ls[1:]]))
    out = tmp_path / "r.html"
    result = CliRunner().invoke(command, ["export", str(populated), "-f", str(out)])
    assert result.exit_code == 1
    assert "FAILED verification" in out.read_text()


def test_cli_export_refuses_a_bad_period(populated: Path) -> None:
    """An unparsable date is a usage error."""
    from gitopsq.errors import UsageError

    result = CliRunner().invoke(command, ["export", str(populated), "--since", "last tuesday"])
    assert isinstance(result.exception, UsageError)


def test_cli_export_verifies_against_a_previous_head(populated: Path, tmp_path: Path) -> None:
    """--since-head on export fails the export's verification when that head is not in the chain."""
    out = tmp_path / "r.html"
    result = CliRunner().invoke(command, ["export", str(populated), "--to", str(out),
                                          "--since-head", "1:" + "f" * 64])
    assert result.exit_code == 1
    assert "rewritten" in out.read_text()


def test_cli_export_output_is_the_format_and_to_the_file(populated: Path, tmp_path: Path) -> None:
    """--output names the format (as in every command) and -f/--to the file; to stdout without --to."""
    runner = CliRunner()
    piped = runner.invoke(command, ["export", str(populated), "-o", "jsonl"])
    assert piped.exit_code == 0 and [json.loads(x)["seq"] for x in piped.stdout.splitlines()] == [1, 2, 3, 4]
    out = tmp_path / "e.csv"
    assert runner.invoke(command, ["export", str(populated), "-o", "csv", "-f", str(out)]).exit_code == 0
    assert out.read_text().startswith("seq,time,type")


def test_cli_export_old_spellings_still_work_with_a_deprecation_warning(populated: Path, tmp_path: Path) -> None:
    """The earlier `--format FMT --output FILE` still writes the file, warning that both spellings are deprecated."""
    out = tmp_path / "old.csv"
    result = CliRunner().invoke(command, ["export", str(populated), "--format", "csv", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("seq,time,type")
    assert "--format is deprecated, use --output csv" in result.stderr
    assert f"--output FILE is deprecated (--output is the format), use --to {out}" in result.stderr


def test_cli_export_refuses_an_output_that_is_neither_format_nor_path(populated: Path) -> None:
    """--output pdf is a usage error naming the formats and --to."""
    from gitopsq.errors import UsageError

    result = CliRunner().invoke(command, ["export", str(populated), "--output", "pdf"])
    assert isinstance(result.exception, UsageError)
    assert "jsonl, csv, html" in str(result.exception) and "--to FILE" in str(result.exception)
