"""`gitopsq init DIR`: the template as a new repository ready to push, and `gitopsq --version` naming a commit."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pygit2
import pytest

from gitopsq import __version__, version
from gitopsq.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


pytestmark = pytest.mark.usefixtures("isolated_caches")


def _commits(path: Path) -> list[pygit2.Commit]:
    repo = pygit2.Repository(str(path))
    assert repo.head.shorthand == "main" and not repo.remotes
    return list(repo.walk(repo.head.target))


def test_init_writes_the_template_as_one_commit_that_checks_clean(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """One commit on main with the hidden files and without the fleet layout, committed by gitopsq and authored
    by the template's platform maintainer (the machine's git identity is never read: the suite has none)."""
    target = tmp_path / "queues"
    code, out, err = run(capsys, "init", str(target))
    assert code == 0, err
    (commit,) = _commits(target)
    assert (commit.author.name, commit.author.email) == ("Alice Admin", "alice@example.com")
    assert (commit.committer.name, commit.committer.email) == ("gitopsq init", "init@gitopsq.invalid")
    top = {entry.name for entry in commit.tree}
    assert {".github", ".pre-commit-config.yaml", "gitopsq.yaml", "platform", "teams", "traces"} <= top
    assert "fleet" not in top
    assert "remote add origin" in out and "push -u origin main" in out and "gitopsq controller --repo" in out
    code, out, err = run(capsys, "check", str(target))
    assert code == 0, out + err


def test_init_into_an_empty_directory_and_as_someone_else(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "empty"
    target.mkdir()
    code, _, err = run(capsys, "init", str(target), "--author-name", "Pat Ops", "--author-email", "pat@example.org")
    assert code == 0, err
    (commit,) = _commits(target)
    assert (commit.author.name, commit.author.email) == ("Pat Ops", "pat@example.org")


def test_init_fleet_writes_the_two_cluster_layout_as_the_repository(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "init", "--fleet", str(tmp_path / "fleet"))
    assert code == 0, err
    (commit,) = _commits(tmp_path / "fleet")
    assert {"base", "overlays", "gitopsq.yaml"} <= {e.name for e in commit.tree}
    assert "kustomize" in out


@pytest.mark.parametrize("args", [["--author-name", " "], ["--author-email", ""]])
def test_init_refuses_an_empty_identity(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, _, err = run(capsys, "init", str(tmp_path / "q"), *args)
    assert code == 2 and "must not be empty" in err and not (tmp_path / "q").exists()


def test_init_refuses_a_non_empty_directory_or_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine\n")
    code, _, err = run(capsys, "init", str(tmp_path / "taken"))
    assert code == 2 and "is not empty" in err and "Traceback" not in err
    assert sorted(p.name for p in (tmp_path / "taken").iterdir()) == ["notes.txt"]
    (tmp_path / "file").write_text("x\n")
    code, _, err = run(capsys, "init", str(tmp_path / "file"))
    assert code == 2 and "not a directory" in err


def test_version_names_the_checkouts_commit(capsys: pytest.CaptureFixture[str]) -> None:
    """From a checkout (no build record) the version line names the checkout's HEAD."""
    code, out, _ = run(capsys, "--version")
    head = str(pygit2.Repository(str(ROOT)).head.target)
    assert code == 0
    assert out in (f"gitopsq {__version__} (commit {head[:12]})\n",
                   f"gitopsq {__version__} (commit {head[:12]} with local changes)\n")


def test_version_prefers_the_build_record_and_never_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    record = types.ModuleType("gitopsq._build_info")
    record.COMMIT, record.DIRTY = "0123456789abcdef0123", False  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gitopsq._build_info", record)
    assert version.version_line() == f"gitopsq {__version__} (commit 0123456789ab)"
    monkeypatch.delitem(sys.modules, "gitopsq._build_info")
    monkeypatch.setattr(version, "_checkout", lambda: None)
    assert version.version_line() == f"gitopsq {__version__} (unknown commit)"
