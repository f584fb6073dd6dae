"""CLI habits (issue 23), through the real entry point on real Git repositories: a dirty work tree is named,
`gitopsq` finds the repository root from a subdirectory, `render` and `policy test` speak JSON, a mistyped command
gets a suggestion, shell completion works, and progress shows on a real terminal only."""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pygit2
import pytest
from cli_runs import commit_tree, run

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "repo-template"


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a `python -m gitopsq` child: this checkout's code, no CI marker unless given."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITOPSQ_PROGRESS")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


pytestmark = pytest.mark.usefixtures("isolated_caches")


# --- a dirty work tree ---------------------------------------------------------------------------------------

def test_dirty_work_tree_is_named_and_head_is_said_to_be_checked(template_repo: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """With an uncommitted edit and a new file, check still judges HEAD but says so on stderr, naming the paths."""
    head = str(pygit2.Repository(str(template_repo)).head.target)
    flavors = template_repo / "platform/flavors.yaml"
    flavors.write_text(flavors.read_text() + "---\nkind: [\n")
    (template_repo / "teams/new.yaml").write_text("{}\n")
    code, out, err = run(capsys, "check", str(template_repo))
    assert code == 0 and out.splitlines()[-1].startswith(f"✓ {template_repo} at {head[:12]}")
    assert err == (f"note: {template_repo} has 2 uncommitted paths (platform/flavors.yaml, teams/new.yaml); "
                   f"checked the commit HEAD ({head[:12]}), not the files on disk: commit them, or add --worktree "
                   "to check the files on disk\n")
    code, _, err = run(capsys, "check", str(template_repo), "--worktree")
    assert code == 1 and "uncommitted" not in err


def test_clean_work_tree_and_other_revisions_print_no_notice(template_repo: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A clean work tree, or a revision other than HEAD in a dirty one, gets no notice."""
    first = str(pygit2.Repository(str(template_repo)).head.target)
    assert run(capsys, "check", str(template_repo))[2] == ""
    (template_repo / "README.md").write_text("changed\n")
    commit_tree(template_repo, "second")
    (template_repo / "README.md").write_text("dirty again\n")
    assert run(capsys, "check", str(template_repo), "--rev", first)[2] == ""
    assert "1 uncommitted path (README.md)" in run(capsys, "render", str(template_repo))[2]


# --- the repository root from a subdirectory --------------------------------------------------------------------

def test_check_dot_in_a_subdirectory_checks_the_repository(template_repo: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`gitopsq check .` inside teams/serving checks the whole repository at HEAD, as git would find it."""
    head = str(pygit2.Repository(str(template_repo)).head.target)
    monkeypatch.chdir(template_repo / "teams" / "serving")
    code, out, err = run(capsys, "check", ".")
    assert code == 0, out + err
    assert out.splitlines()[-1].startswith(f"✓ {template_repo} at {head[:12]}: 26 objects in 11 files valid")
    assert err == ""
    code, out, _ = run(capsys, "render", ".", "--output", "json")
    assert code == 0 and json.loads(out)["revision"] == head


def test_plan_dot_in_a_subdirectory_plans_the_repository(template_repo: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`gitopsq plan . --base A --head B` inside a subdirectory compares the repository's two revisions."""
    first = str(pygit2.Repository(str(template_repo)).head.target)
    (template_repo / "README.md").write_text("changed\n")
    second = commit_tree(template_repo, "second")
    monkeypatch.chdir(template_repo / "platform")
    code, out, err = run(capsys, "plan", ".", "--base", first, "--head", second, "--output", "json")
    assert code == 0, out + err
    assert json.loads(out)["head"]["sha"] == second


def test_queue_repository_inside_another_project_is_found_by_its_config(capsys: pytest.CaptureFixture[str],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside repo-template/teams (a subdirectory of this project), the nearest gitopsq.yaml marks the root."""
    monkeypatch.chdir(TEMPLATE / "teams")
    code, out, err = run(capsys, "check", ".")
    assert code == 0, out + err
    # repo-template/ links to gitopsq/data/repo-template: a working directory is always the resolved path
    assert out.splitlines()[-1].startswith(f"✓ {TEMPLATE.resolve()} at WORKTREE: 26 objects")


def test_outside_any_repository_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory in no Git repository and under no gitopsq.yaml: the note says so, the finding says what lacks."""
    lonely = tmp_path / "lonely" / "sub"
    lonely.mkdir(parents=True)
    monkeypatch.chdir(lonely)
    code, out, err = run(capsys, "check", ".")
    assert code == 1
    assert err.startswith("note: . is not inside a Git repository and no directory above it holds gitopsq.yaml")
    assert "[config-missing]" in out


def test_audit_verify_from_a_subdirectory_reads_the_repository(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`audit verify .` in a subdirectory of a repository without audit branch reports absence (exit 4)."""
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("x\n")
    commit_tree(root, "one")
    monkeypatch.chdir(root / "sub")
    code, out, _ = run(capsys, "audit", "verify", ".")
    assert code == 4 and out.startswith("no audit branch gitopsq/audit: nothing to verify")


# --- JSON output ---------------------------------------------------------------------------------------------------

def test_render_json_has_the_documented_shape(template_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """render --output json: version, repository, revision, ok, findings and items in apply order (as the YAML)."""
    code, out, err = run(capsys, "render", str(template_repo), "-o", "json")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert list(data) == ["version", "repository", "revision", "ok", "findings", "items"]
    assert data["version"] == 1 and data["ok"] is True and data["findings"] == []
    assert len(data["items"]) == 26 and data["items"][0]["kind"] == "Namespace"
    _, yaml_out, _ = run(capsys, "render", str(template_repo))
    import yaml
    assert list(yaml.safe_load_all(yaml_out)) == data["items"]


def test_render_json_of_an_invalid_revision_holds_the_findings(template_repo: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """An invalid revision: ok false, no items, the findings in the document, exit 1."""
    lq = template_repo / "teams/serving/local-queues.yaml"
    lq.write_text(lq.read_text().replace("clusterQueue: serving\n", "clusterQueue: servng\n", 1))
    commit_tree(template_repo, "typo")
    code, out, err = run(capsys, "render", str(template_repo), "--output", "json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["items"] == [] and err == ""
    assert data["findings"][0]["code"] == "unknown-cluster-queue" and data["findings"][0]["line"] == 7


def test_policy_test_json_has_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    """policy test --output json: version, ok, backends, summary and one outcome per test and backend."""
    code, out, _ = run(capsys, "policy", "test", "--backend", "cel-python", "--output", "json")
    data = json.loads(out)
    assert code == 0 and data["ok"] is True and data["backends"] == ["cel-python"]
    assert set(data) == {"version", "ok", "backends", "summary", "outcomes", "disagreements"}
    assert data["summary"]["failed"] == 0 and data["summary"]["tests"] == len(data["outcomes"]) > 10
    assert set(data["outcomes"][0]) == {"policy", "test", "backend", "passed", "detail"}


def test_policy_test_json_reports_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A failing embedded test shows as passed false with the reason, and exit 1."""
    (tmp_path / "p.yaml").write_text("""apiVersion: gitopsq.dev/v1alpha1
kind: Policy
metadata: {name: names}
spec:
  match: {kinds: [LocalQueue]}
  validations:
    - expression: "object.metadata.name.startsWith('x')"
      message: "LocalQueue names start with q-"
  tests:
    - name: a good name
      expect: allow
      object: {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {name: q-1, namespace: a}}
""")
    code, out, _ = run(capsys, "policy", "test", str(tmp_path), "--backend", "cel-python", "-o", "json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["summary"]["failed"] == 1
    assert data["outcomes"][0]["passed"] is False and "expected allow" in data["outcomes"][0]["detail"]


# --- suggestions and completion ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "hint"), [
    (["chekc", "."], "No such command 'chekc'. Did you mean 'check'?"),
    (["audit", "verfy", "."], "No such command 'verfy'. Did you mean 'verify'?"),
    (["policy", "tset"], "No such command 'tset'. Did you mean 'test'?"),
], ids=["verb", "audit-sub-command", "policy-sub-command"])
def test_mistyped_command_gets_a_suggestion(argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped command or sub-command exits 2 naming the closest real one."""
    code, _, err = run(capsys, *argv)
    assert code == 2 and hint in err


def test_far_off_command_gets_no_guess(capsys: pytest.CaptureFixture[str]) -> None:
    """A word close to nothing is refused without a made-up suggestion."""
    code, _, err = run(capsys, "xyzzy")
    assert code == 2 and "No such command 'xyzzy'." in err and "Did you mean" not in err


def test_shell_completion_script_generates_and_completes_a_verb() -> None:
    """`_GITOPSQ_COMPLETE=bash_source gitopsq` prints a bash script; completing `gitopsq che` offers check."""
    exe = [sys.executable, "-m", "gitopsq"]
    script = subprocess.run(exe, env=cli_env(_GITOPSQ_COMPLETE="bash_source"), capture_output=True, text=True,
                            timeout=60, check=False)
    assert script.returncode == 0 and "complete -o nosort -F _gitopsq_completion gitopsq" in script.stdout
    done = subprocess.run(exe, env=cli_env(_GITOPSQ_COMPLETE="bash_complete", COMP_WORDS="gitopsq che",
                                           COMP_CWORD="1"), capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.split() == ["plain,check"]
    sub = subprocess.run(exe, env=cli_env(_GITOPSQ_COMPLETE="bash_complete", COMP_WORDS="gitopsq audit ",
                                          COMP_CWORD="2"), capture_output=True, text=True, timeout=60, check=False)
    assert sorted(sub.stdout.split()) == ["plain,export", "plain,verify"]


def test_completion_works_in_a_real_bash(tmp_path: Path) -> None:
    """Sourced into bash, the script's completion function fills COMPREPLY with the verb."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gitopsq").write_text(f"#!/bin/sh\nexec {sys.executable} -m gitopsq \"$@\"\n")
    (bin_dir / "gitopsq").chmod(0o755)
    env = cli_env(PATH=f"{bin_dir}:{os.environ['PATH']}")
    line = ('eval "$(_GITOPSQ_COMPLETE=bash_source gitopsq)"; COMP_WORDS=(gitopsq ren); COMP_CWORD=1; '
            '_gitopsq_completion gitopsq ren gitopsq; echo "${COMPREPLY[@]}"')
    done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.strip() == "render", done.stderr


# --- progress on a terminal --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bench_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 5,000-object, 1,000-file repository of benchmarks/check_bench.py, committed."""
    tmp_path = tmp_path_factory.mktemp("bench")
    spec = importlib.util.spec_from_file_location("check_bench", ROOT / "benchmarks" / "check_bench.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    root = tmp_path / "bench"
    assert bench.generate(root, 1000) == 5000
    # The benchmark's author owns its namespaces and paths here, so the policies accept the revision.
    namespaces = ", ".join(f"ns-{i}" for i in range(500))
    (root / "gitopsq.yaml").write_text(bench.CONFIG + f"    namespaces: [{namespaces}]\n"
                                       "    maintainers: [{name: bench, email: bench@example.com}]\n")
    bench.commit_all(pygit2.init_repository(str(root), initial_head="main"), "bench")
    return root


def run_on_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str, bytes]:
    """Run `python -m gitopsq ARGV` with stderr on a fresh pseudo-terminal; (exit code, stdout, terminal bytes)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "gitopsq", *argv], stdout=subprocess.PIPE, stderr=follower,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the child
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode() if proc.stdout else ""
    code = proc.wait(timeout=60)
    os.close(leader)
    return code, out, seen


def test_large_check_shows_progress_on_a_terminal_and_erases_it(bench_repo: Path, tmp_path: Path) -> None:
    """A 5,000-object check with stderr on a real pseudo-terminal draws a counting line there and erases it;
    stdout keeps only the result."""
    repo = bench_repo
    code, out, seen = run_on_terminal(["check", str(repo), "--no-cache"], cli_env(GITOPSQ_CACHE_DIR=str(tmp_path)))
    assert code == 0, out + seen.decode(errors="replace")
    assert "5000 objects in 1000 files valid" in out and "reading files" not in out
    text = seen.decode()
    drawn = re.findall(r"\rgitopsq: reading files: ([\d,]+)", text)
    assert drawn[0] == "0" and len(drawn) >= 2  # drawn at the start, then redrawn as files are read
    assert text.endswith("\r") and text.rstrip("\r ").endswith(drawn[-1])  # then erased: blanks, back to column 0


@pytest.mark.parametrize("env_extra", [{"CI": "true"}, {"GITOPSQ_PROGRESS": "0"}], ids=["ci", "turned-off"])
def test_progress_stays_quiet_in_ci_even_on_a_terminal(env_extra: dict[str, str], bench_repo: Path,
                                                        tmp_path: Path) -> None:
    """With CI=true (or GITOPSQ_PROGRESS=0) nothing at all is written to the terminal for a clean check."""
    repo = bench_repo
    code, out, seen = run_on_terminal(["check", str(repo)], cli_env(GITOPSQ_CACHE_DIR=str(tmp_path), **env_extra))
    assert code == 0 and "5000 objects" in out
    assert seen == b""


def test_progress_stays_quiet_when_stderr_is_not_a_terminal(bench_repo: Path, tmp_path: Path) -> None:
    """With stderr on a pipe (not a TTY) and no CI marker, stderr stays empty."""
    repo = bench_repo
    done = subprocess.run([sys.executable, "-m", "gitopsq", "check", str(repo)], capture_output=True, text=True,
                          env=cli_env(GITOPSQ_CACHE_DIR=str(tmp_path)), timeout=120, check=False)
    assert done.returncode == 0 and done.stderr == ""


def test_audit_export_shows_progress_on_a_terminal(tmp_path: Path) -> None:
    """audit export draws its verification progress on a terminal, with the record total, and stays quiet in CI."""
    from datetime import UTC, datetime, timedelta

    from gitopsq.audit import records as r
    from gitopsq.audit.trail import AuditTrail, TrailSettings

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    t0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
    settings = TrailSettings(batch_seconds=0.05, batch_records=100_000, backoff_initial=0.05, backoff_max=0.2)
    with AuditTrail.open(str(remote), tmp_path / "wal", settings=settings) as trail:
        for i in range(300):
            trail.record(r.admission("admitted", time=t0 + timedelta(seconds=i),
                                     workload=r.WorkloadRef("team-a", f"w{i}", f"uid-{i}"), cluster_queue="cq",
                                     flavors={"main": {"cpu": "default"}}, times={"created": t0},
                                     within_nominal_quota=True))
        assert trail.flush(30)
    out_file = tmp_path / "e.jsonl"
    code, _, seen = run_on_terminal(["audit", "export", str(remote), "-o", "jsonl", "--to", str(out_file)],
                                    cli_env())
    assert code == 0 and len(out_file.read_text().splitlines()) == 300
    assert "\rgitopsq: verifying audit records: 0/300 (0%)" in seen.decode()
    code, _, seen = run_on_terminal(["audit", "export", str(remote), "-o", "jsonl", "--to", str(out_file)],
                                    cli_env(CI="true"))
    assert code == 0 and seen == b""
