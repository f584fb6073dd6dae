"""`gitopsq check` and `gitopsq render` through the real CLI entry point, on real Git repositories."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest
import yaml
from cli_runs import commit_tree, forget_validations, run

from gitopsq.commands import check as check_command
from gitopsq.manifests import loader, pipeline

TEMPLATE = Path(__file__).resolve().parents[2] / "repo-template"


pytestmark = pytest.mark.usefixtures("isolated_caches")


def test_template_directory_checks_clean_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    """`gitopsq check repo-template` (a plain directory) exits 0, says it is valid, and notes it read the disk."""
    code, out, err = run(capsys, "check", str(TEMPLATE))
    assert code == 0, out
    assert out.strip().splitlines()[-1].startswith(f"✓ {TEMPLATE} at WORKTREE: ")
    assert "not the root of a Git repository" in err


def test_git_repository_is_checked_at_a_revision(template_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A committed repository is read from the commit, without a note; a later bad commit does not affect it."""
    first = str(pygit2.Repository(str(template_repo)).head.target)
    lq = template_repo / "teams/serving/local-queues.yaml"
    lq.write_text(lq.read_text().replace("clusterQueue: serving\n", "clusterQueue: servng\n", 1))
    commit_tree(template_repo, "typo")
    code, out, err = run(capsys, "check", str(template_repo), "--rev", first)
    assert code == 0 and err == ""
    code, out, _ = run(capsys, "check", str(template_repo))
    assert code == 1
    assert ("teams/serving/local-queues.yaml:7: error: LocalQueue/serving/inference: clusterQueue 'servng' is not "
            "defined in this revision (did you mean 'serving'?) [unknown-cluster-queue]") in out
    assert out.splitlines()[-1].startswith("✗ ") and "1 error, 0 warnings" in out.splitlines()[-1]


def test_worktree_flag_reads_uncommitted_edits(template_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--worktree checks the files on disk even inside a Git repository; without it HEAD is checked."""
    flavors = template_repo / "platform/flavors.yaml"
    flavors.write_text(flavors.read_text() + "---\nkind: [\n")
    assert run(capsys, "check", str(template_repo))[0] == 0
    code, out, _ = run(capsys, "check", str(template_repo), "--worktree")
    assert code == 1 and "[yaml-syntax]" in out


def test_json_output_is_stable(template_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--output json carries version, revision, ok, summary, findings and objects with their locations."""
    code, out, _ = run(capsys, "check", str(template_repo), "--output", "json")
    data = json.loads(out)
    assert code == 0
    assert set(data) == {"repository", "version", "revision", "ok", "summary", "findings", "objects"}
    assert data["ok"] is True and data["findings"] == []
    assert data["summary"] == {"files": 11, "objects": 26, "errors": 0, "warnings": 0}
    assert {"kind": "ClusterQueue", "namespace": None, "name": "serving", "apiVersion": "kueue.x-k8s.io/v1beta2",
            "path": "teams/serving/cluster-queue.yaml", "line": 2} in data["objects"]


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (["check", "{repo}", "--rev", "no-such-branch"], 3, "unknown revision 'no-such-branch'"),
    (["check", "{missing}"], 3, "does not exist"),
    (["check", "{repo}", "--output", "yaml"], 2, "Invalid value for '--output'"),
    (["render", "{repo}", "--rev", "v9"], 3, "unknown revision 'v9'"),
], ids=["unknown-revision", "missing-path", "bad-output-format", "render-unknown-revision"])
def test_failures_exit_with_the_documented_code(template_repo: Path, tmp_path: Path, args: list[str], code: int,
                                                fragment: str, *, capsys: pytest.CaptureFixture[str]) -> None:
    """Unknown revisions and missing repositories exit 3 with one line; usage errors exit 2; no traceback."""
    argv = [a.format(repo=template_repo, missing=tmp_path / "missing") for a in args]
    got, _, err = run(capsys, *argv)
    assert got == code
    assert fragment in err and "Traceback" not in err


def test_second_process_reuses_parsed_files_from_disk(template_repo: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """After one check, a new process (empty memory) gets every unchanged file from the disk cache."""
    assert run(capsys, "check", str(template_repo))[0] == 0
    forget_validations()
    parsed: list[str] = []
    real = loader.load_file
    monkeypatch.setattr(pipeline, "load_file", lambda path, *a: parsed.append(path) or real(path, *a))
    cq = template_repo / "teams/data-science/cluster-queue.yaml"
    cq.write_text(cq.read_text().replace('nominalQuota: "96"', 'nominalQuota: "80"'))
    commit_tree(template_repo, "less cpu")
    assert run(capsys, "check", str(template_repo))[0] == 0
    assert parsed == ["teams/data-science/cluster-queue.yaml"]


def test_findings_in_files_served_from_disk_keep_their_lines(template_repo: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A reference broken by another file's change is reported at the right line of the unchanged, cached file."""
    assert run(capsys, "check", str(template_repo))[0] == 0
    forget_validations()
    cq = template_repo / "teams/data-science/cluster-queue.yaml"
    cq.write_text(cq.read_text().replace("name: data-science\n", "name: data-sci\n", 1))
    commit_tree(template_repo, "rename the ClusterQueue")
    code, out, _ = run(capsys, "check", str(template_repo))
    assert code == 1
    assert "teams/data-science/local-queues.yaml:7: error: LocalQueue/data-science/analysis: clusterQueue " \
           "'data-science' is not defined in this revision" in out


def test_damaged_disk_cache_is_ignored(template_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cache file that is not ours (or truncated) is ignored and replaced, never an error."""
    target = check_command.cache_file(str(template_repo.resolve()))
    assert target is not None
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"\x80\x05garbage")
    assert run(capsys, "check", str(template_repo))[0] == 0
    forget_validations()
    assert run(capsys, "check", str(template_repo))[0] == 0


def test_render_prints_only_manifests(template_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gitopsq render` writes normalised v1beta2 YAML to stdout, Namespaces first, and nothing else."""
    code, out, err = run(capsys, "render", str(template_repo))
    assert code == 0 and err == ""
    docs = list(yaml.safe_load_all(out))
    assert docs[0]["kind"] == "Namespace" and docs[-1]["kind"] == "LocalQueue"
    cq = next(d for d in docs if d["kind"] == "ClusterQueue" and d["metadata"]["name"] == "data-science")
    assert cq["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}


def test_render_refuses_an_invalid_revision(template_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An invalid revision renders nothing: stdout empty, findings on stderr, exit 1."""
    flavors = template_repo / "platform/flavors.yaml"
    flavors.write_text(flavors.read_text().replace("name: spot\n", "name: Spot\n", 1))
    commit_tree(template_repo, "bad name")
    code, out, err = run(capsys, "render", str(template_repo))
    assert code == 1 and out == ""
    assert "platform/flavors.yaml:13: error: ResourceFlavor/Spot: name 'Spot' must be a DNS subdomain" in err


def test_policies_judge_the_change_a_commit_brings(template_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check runs the CEL policies on the change the commit brings: another team's queue edited by a stranger is
    rejected with the policy's name, file and line, while the same change by the owning team passes."""
    cq = template_repo / "teams/serving/cluster-queue.yaml"
    original = cq.read_text()
    cq.write_text(original + "\n# touched\n")
    commit_tree(template_repo, "stranger edits serving", email="mallory@example.com")
    code, out, _ = run(capsys, "check", str(template_repo))
    assert code == 1
    assert "policy/team-owns-path" in out and "teams/serving/cluster-queue.yaml" in out
    cq.write_text(original + "\n# touched again\n")
    commit_tree(template_repo, "platform edits serving")
    code, out, _ = run(capsys, "check", str(template_repo))
    assert code == 0, out
