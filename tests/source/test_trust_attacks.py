"""Issue 19's trust attacks, each as a pull request against the repository template with `signing.mode: required`,
checked the way the template's CI checks it (`gitopsq check . --rev main --base <base>`) on a real repository
with real SSH-signed commits."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from gitopsq.cli import main
from gitopsq.source.repository import GitSource

from .conftest import GitRepo, new_repo
from .test_signatures import SshKey, _ssh_key

TEMPLATE = Path(__file__).resolve().parents[2] / "repo-template"
PEOPLE = {"alice": "platform", "carol": "ml-research", "farid": "serving"}
CRB = ("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: carol-admin\n"
       "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n"
       "subjects: [{kind: User, name: carol@example.com, apiGroup: rbac.authorization.k8s.io}]\n")
ADMISSION_CHECK = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata:\n  name: carol-check\n"
                   "spec:\n  controllerName: example.com/anything\n")
DENY_ALL = ("apiVersion: gitopsq.dev/v1alpha1\nkind: Policy\nmetadata: {name: deny-everything}\nspec:\n"
            "  severity: Deny\n  validations:\n    - expression: 'false'\n      message: nothing passes\n")


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SshKey]:
    directory = tmp_path_factory.mktemp("trust-keys")
    return {name: _ssh_key(directory, name) for name in PEOPLE}


pytestmark = pytest.mark.usefixtures("isolated_caches")


def config_text(keys: dict[str, SshKey], *, extra: str = "") -> str:
    """The template's gitopsq.yaml with signing required and the test keys of Alice, Carol and Farid."""
    text = (TEMPLATE / "gitopsq.yaml").read_text(encoding="utf-8")
    for name, key in keys.items():
        text = re.sub(rf"ssh-ed25519 \S+ {name}@laptop", key.public_line, text)
    text = text.replace("signing:\n  mode: optional", "signing:\n  mode: required")
    return text + extra


def commit(repo: GitRepo, keys: dict[str, SshKey], who: str, message: str, files: dict[str, str | None],
           *, signed: bool = True) -> str:
    repo.write(files)
    repo.git("add", "-A")
    return finish(repo, keys, who, message, signed=signed)


def finish(repo: GitRepo, keys: dict[str, SshKey], who: str, message: str, *args: str, signed: bool = True,
           command: tuple[str, ...] = ("commit", "-q", "--allow-empty", "-m")) -> str:
    env = {"GIT_AUTHOR_NAME": who.title(), "GIT_AUTHOR_EMAIL": f"{who}@example.com",
           "GIT_COMMITTER_NAME": who.title(), "GIT_COMMITTER_EMAIL": f"{who}@example.com"}
    config = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={keys[who].private}"] if signed else []
    repo.git(*config, *command, message, *args, *(["-S"] if signed else []), env=env)
    return repo.git("rev-parse", "HEAD")


def copy_template(target: Path) -> None:
    for item in TEMPLATE.iterdir():
        if item.is_dir():
            shutil.copytree(item, target / item.name)
        else:
            shutil.copy(item, target / item.name)


@pytest.fixture
def template(tmp_path: Path, keys: dict[str, SshKey]) -> GitRepo:
    """The template as one commit signed by Alice (platform), with ClusterRoleBindings allowed through."""
    repo = new_repo(tmp_path)
    copy_template(repo.path)
    allow = "allowKinds: [rbac.authorization.k8s.io/v1/ClusterRoleBinding]\n"
    repo.write({"gitopsq.yaml": config_text(keys, extra=allow)})
    repo.git("add", "-A")
    finish(repo, keys, "alice", "template")
    return repo


def check(repo: GitRepo, capsys: pytest.CaptureFixture[str], base: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(["check", str(repo.path), "--rev", "main", "--base", base])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out + err


def serving_queue(repo: GitRepo, quota: str) -> dict[str, str | None]:
    text = (repo.path / "teams/serving/cluster-queue.yaml").read_text(encoding="utf-8")
    return {"teams/serving/cluster-queue.yaml": text.replace('{name: cpu, nominalQuota: "128"}',
                                                             f'{{name: cpu, nominalQuota: "{quota}"}}', 1)}


def test_a_signed_change_by_the_owner_passes(template: GitRepo, keys: dict[str, SshKey],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The control: Farid (serving) changes serving's queue in a signed commit; check exits 0."""
    commit(template, keys, "farid", "serving: more cpu", serving_queue(template, "120"))
    code, out = check(template, capsys, "main~1")
    assert code == 0, out


def test_an_unsigned_commit_cannot_hide_behind_a_signed_commit_on_top(
        template: GitRepo, keys: dict[str, SshKey], capsys: pytest.CaptureFixture[str]) -> None:
    """Attack 1: Carol's unsigned commit to serving's file, then Farid's signed commit on top: denied, naming
    Carol's commit, the path and the rule."""
    carol = commit(template, keys, "carol", "serving: less cpu", serving_queue(template, "8"), signed=False)
    commit(template, keys, "farid", "serving: notes", {"teams/serving/NOTES.md": "ok\n"})
    code, out = check(template, capsys, "main~2")
    assert code == 1, out
    assert f"commit {carol} (author carol@example.com, signature unsigned) changes teams/serving/cluster-queue.yaml " \
           "without the signature of a maintainer of team serving" in out


def test_an_unsigned_commit_cannot_hide_behind_a_signed_merge(
        template: GitRepo, keys: dict[str, SshKey], capsys: pytest.CaptureFixture[str]) -> None:
    """Attack 1: Farid's signed `git merge --no-ff -S` of Carol's unsigned branch is denied for Carol's commit."""
    template.git("checkout", "-q", "-b", "carol")
    carol = commit(template, keys, "carol", "serving: less cpu", serving_queue(template, "8"), signed=False)
    template.git("checkout", "-q", "main")
    finish(template, keys, "farid", "merge carol", "carol", command=("merge", "-q", "--no-ff", "-m"))
    assert template.git("rev-list", "--parents", "-n1", "main").count(" ") == 2  # a real merge
    code, out = check(template, capsys, "main~1")
    assert code == 1, out
    assert f"commit {carol} (author carol@example.com, signature unsigned) changes " \
           "teams/serving/cluster-queue.yaml" in out


@pytest.mark.parametrize("kind", ["symlink", "submodule"])
def test_links_and_submodules_in_another_teams_path_are_denied(
        template: GitRepo, keys: dict[str, SshKey], capsys: pytest.CaptureFixture[str], kind: str) -> None:
    """Attack 2: a symbolic link or a gitlink that Carol (ml-research) adds under teams/serving/ is a change to
    that path, denied like a file."""
    if kind == "symlink":
        (template.path / "teams/serving/evil.yaml").symlink_to("cluster-queue.yaml")
        template.git("add", "-A")
        path = "teams/serving/evil.yaml"
    else:
        head = template.git("rev-parse", "HEAD")
        template.git("update-index", "--add", "--cacheinfo", f"160000,{head},teams/serving/vendor")
        path = "teams/serving/vendor"
    finish(template, keys, "carol", f"add a {kind}")
    code, out = check(template, capsys, "main~1")
    assert code == 1, out
    assert f"changes {path}, which belongs to team serving; the author belongs to ml-research" in out


@pytest.mark.parametrize("path", ["teams/ml-research/.gitattributes", ".gitmodules"])
def test_files_that_change_rendering_are_the_platforms(
        template: GitRepo, keys: dict[str, SshKey], capsys: pytest.CaptureFixture[str], path: str) -> None:
    """Attack 3: Carol's `.gitattributes` (working-tree-encoding=UTF-16, which would break `render --worktree` for
    everyone), even in her own team's directory, is denied: such files belong to the platform team."""
    commit(template, keys, "carol", "attributes", {path: "*.yaml working-tree-encoding=UTF-16\n"})
    code, out = check(template, capsys, "main~1")
    assert code == 1, out
    assert f"changes {path}, which belongs to team platform; the author belongs to ml-research" in out


def test_an_unreadable_base_config_fails_closed(template: GitRepo, keys: dict[str, SshKey],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Attack 6: when the base's gitopsq.yaml does not parse, the head's (which makes Carol a platform
    maintainer) is not used instead: the change is denied with `untrusted-base`."""
    commit(template, keys, "alice", "broken", {"gitopsq.yaml": "include: [\n"})
    promoted = config_text(keys).replace("  - name: platform\n", "  - name: platform\n", 1)
    promoted = promoted.replace("    maintainers:\n      - name: Alice Admin",
                                "    maintainers:\n      - name: Carol Chen\n        email: carol@example.com\n"
                                f"        signingKeys: [\"{keys['carol'].public_line}\"]\n      - name: Alice Admin", 1)
    commit(template, keys, "carol", "carol fixes the config", {"gitopsq.yaml": promoted})
    code, out = check(template, capsys, "main~1")
    assert code == 1, out
    assert "untrusted-base" in out and "does not parse (gitopsq.yaml:" in out
    assert "never fall back to the gitopsq.yaml of the revision under review" in out


def test_a_base_without_config_is_judged_by_the_head(tmp_path: Path, keys: dict[str, SshKey],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Attack 6, the other side: a base with no gitopsq.yaml at all (the repository was not governed yet) is
    absent, not unreadable: the head's configuration judges, as for a first revision."""
    repo = new_repo(tmp_path)
    commit(repo, keys, "alice", "readme", {"README.md": "hello\n"})
    copy_template(repo.path)
    commit(repo, keys, "alice", "adopt gitopsq", {"gitopsq.yaml": config_text(keys)})
    code, out = check(repo, capsys, "main~1")
    assert code == 0, out


@pytest.mark.parametrize("case", [
    ("teams/ml-research/check.yaml", ADMISSION_CHECK, "AdmissionCheck/carol-check"),
    ("teams/ml-research/rbac.yaml", CRB, "ClusterRoleBinding/carol-admin"),
])
def test_cluster_scoped_objects_in_a_team_path_are_the_platforms(
        template: GitRepo, keys: dict[str, SshKey], capsys: pytest.CaptureFixture[str],
        case: tuple[str, str, str]) -> None:
    """Attack 7: Carol's AdmissionCheck, or a ClusterRoleBinding allowed through `allowKinds`, in her own
    directory is denied with a finding naming the file, the line and the object."""
    path, text, obj = case
    commit(template, keys, "carol", "cluster-wide", {path: text})
    code, out = check(template, capsys, "main~1")
    assert code == 1, out
    kind = obj.split("/", maxsplit=1)[0]
    assert f"{path}:1: error: {obj}: {obj} is cluster-scoped and {path} belongs to " \
           f"team ml-research" in out
    assert f"unless gitopsq.yaml lists {kind} under teamClusterScopedKinds" in out


def test_a_kind_the_platform_opts_in_may_live_in_a_team_path(
        template: GitRepo, keys: dict[str, SshKey], capsys: pytest.CaptureFixture[str]) -> None:
    """Attack 7, the opt-in: with `teamClusterScopedKinds: [ClusterQueue, AdmissionCheck]` in the base, Carol's
    AdmissionCheck in her directory is allowed."""
    text = (template.path / "gitopsq.yaml").read_text(encoding="utf-8")
    commit(template, keys, "alice", "opt in", {
        "gitopsq.yaml": text + "teamClusterScopedKinds: [ClusterQueue, AdmissionCheck]\n"})
    commit(template, keys, "carol", "a check", {"teams/ml-research/check.yaml": ADMISSION_CHECK})
    code, out = check(template, capsys, "main~1")
    assert "cluster-scoped-in-team-path" not in out
    assert code == 0, out


def test_a_teams_policy_file_does_not_judge_its_own_change(
        template: GitRepo, keys: dict[str, SshKey], capsys: pytest.CaptureFixture[str]) -> None:
    """Attack 8: Carol's new file under policies/ is the platform's (denied), and it does not judge the change
    that adds it: the rules come from the base."""
    commit(template, keys, "carol", "my rules", {"policies/mine.yaml": DENY_ALL})
    code, out = check(template, capsys, "main~1")
    assert code == 1, out
    assert "changes policies/mine.yaml, which belongs to team platform; the author belongs to ml-research" in out
    assert "deny-everything" not in out


def test_a_platform_policy_judges_the_changes_after_it(
        template: GitRepo, keys: dict[str, SshKey], capsys: pytest.CaptureFixture[str]) -> None:
    """Attack 8, the other side: Alice's policy is loaded (a broken one would be refused) but judges only the
    changes that follow it."""
    commit(template, keys, "alice", "rules", {"policies/mine.yaml": DENY_ALL})
    code, out = check(template, capsys, "main~1")
    assert code == 0, out
    commit(template, keys, "farid", "serving: more cpu", serving_queue(template, "120"))
    code, out = check(template, capsys, "main~1")
    assert code == 1 and "policy deny-everything" in out, out


def test_a_huge_file_is_refused_from_its_size_without_reading_it(
        template: GitRepo, keys: dict[str, SshKey], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack 9: a 50 MB file is refused with `file-too-large` from the size in its object header; its blob is
    never read."""
    huge = template.path / "teams/ml-research/huge.yaml"
    huge.write_bytes(b"# " + b"x" * (50 * 1024 * 1024) + b"\n")
    template.git("add", "-A")
    finish(template, keys, "carol", "huge")
    huge_id = template.git("rev-parse", "HEAD:teams/ml-research/huge.yaml")
    huge.unlink()
    read: list[str] = []
    original = GitSource.read_blob

    def spy(self: GitSource, blob_id: str) -> bytes:
        read.append(blob_id)
        return original(self, blob_id)

    monkeypatch.setattr(GitSource, "read_blob", spy)
    code, out = check(template, capsys, "main~1")
    assert code == 1, out
    assert "teams/ml-research/huge.yaml: error: file is 52,428,803 bytes; the limit is 2,097,152" \
           in out
    assert read and huge_id not in read


def test_a_base_the_source_cannot_read_fails_closed(template: GitRepo, keys: dict[str, SshKey]) -> None:
    """Attack 6, a source error: a base commit the repository does not hold (as past a shallow clone's boundary)
    is unreadable, not absent: `untrusted-base`, and the approvals' reader says the same."""
    from gitopsq.source import open_source
    from gitopsq.trust import read_base_config
    from gitopsq.validation import validate_revision

    head = commit(template, keys, "farid", "serving: more cpu", serving_queue(template, "120"))
    source = open_source(str(template.path))
    missing = "0123456789" * 4
    report = validate_revision(source, head, base=missing).report
    assert [f.code for f in report.errors] == ["untrusted-base"]
    assert "the base revision cannot be read" in report.errors[0].message
    assert read_base_config(source, missing).problem is not None
    assert read_base_config(source, head).config is not None and read_base_config(source, head).problem is None


def test_a_huge_file_on_disk_is_refused_without_reading_it(tmp_path: Path, keys: dict[str, SshKey],
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Attack 9 for a plain directory (`check --worktree`, `render --worktree`): a 50 MB file is refused from its
    size on disk; its bytes are never read."""
    root = tmp_path / "tree"
    root.mkdir()
    copy_template(root)
    (root / "teams/ml-research/huge.yaml").write_bytes(b"# " + b"x" * (50 * 1024 * 1024) + b"\n")
    read: list[str] = []
    original = Path.read_bytes

    def spy(self: Path) -> bytes:
        read.append(self.name)
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", spy)
    with pytest.raises(SystemExit) as exited:
        main(["check", str(root), "--worktree"])
    out = capsys.readouterr().out
    assert exited.value.code == 1, out
    assert "teams/ml-research/huge.yaml: error: file is 52,428,803 bytes; the limit is 2,097,152" in out
    assert read and "huge.yaml" not in read


def test_a_merge_owns_what_it_wrote_and_not_what_it_took(template: GitRepo, keys: dict[str, SshKey]) -> None:
    """A merge's own changed paths are those whose merged content differs from every parent: a path taken as is
    from the merged branch is that branch's commit's change; one the merge rewrote is the merge's."""
    from gitopsq.source import open_source
    from gitopsq.trust import own_changes

    template.git("checkout", "-q", "-b", "side")
    side = commit(template, keys, "carol", "side", {"teams/ml-research/a.md": "a\n", "teams/ml-research/b.md": "b\n"})
    template.git("checkout", "-q", "main")
    commit(template, keys, "alice", "main moves on", {"platform/c.md": "c\n"})
    template.git("merge", "-q", "--no-ff", "--no-commit", "side")
    template.write({"teams/ml-research/b.md": "rewritten by the merge\n"})
    merge = finish(template, keys, "alice", "merge side", command=("commit", "-q", "-a", "-m"))
    source = open_source(str(template.path))
    info = source.commit_info(merge)
    assert info.parents[1] == side
    assert own_changes(source, merge, info.parents) == ("teams/ml-research/b.md",)


EVERY_COMMIT = ("apiVersion: gitopsq.dev/v1alpha1\nkind: Policy\nmetadata: {name: every-commit-by-owner}\nspec:\n"
                "  severity: Deny\n  validations:\n    - expression: >-\n        owner == null || commits.all(c, "
                "!(path in c.changedPaths) || c.actor.platform || owner.name in c.actor.teams)\n"
                "      message: a commit of the change is not by the path's owner\n")


def test_a_repository_policy_can_judge_every_commits_actor(template: GitRepo, keys: dict[str, SshKey],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Without required signatures, the documented repository policy over `commits[].actor` denies Carol's
    commit to serving's file behind Farid's commit on top."""
    text = (template.path / "gitopsq.yaml").read_text(encoding="utf-8").replace("mode: required", "mode: optional")
    commit(template, keys, "alice", "optional signing, stricter ownership",
           {"gitopsq.yaml": text, "policies/every-commit.yaml": EVERY_COMMIT})
    commit(template, keys, "carol", "serving: less cpu", serving_queue(template, "8"), signed=False)
    commit(template, keys, "farid", "serving: notes", {"teams/serving/NOTES.md": "ok\n"})
    code, out = check(template, capsys, "main~2")
    assert code == 1 and "policy every-commit-by-owner" in out, out
    assert "signed-by-maintainer" not in out
