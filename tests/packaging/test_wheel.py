"""The package as a user installs it: the sdist and wheel built from this checkout carry everything the commands
need, and the installed `gitopsq`, run from outside the checkout on a machine with no git identity, names its
commit, runs the demo, writes a new repository with `init` and checks it.

Offline and quick: the build runs without isolation (setuptools, wheel and build come with the dev extra), and
the fresh virtualenv gets the wheel alone (``--no-deps``); its dependencies are borrowed from the test's own
environment through a ``.pth`` path line, which makes them importable but runs none of that environment's own
``.pth`` files, so the editable checkout stays invisible. The test asserts the wheel's gitopsq is what runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pygit2
import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_FILES = (".github/workflows/gitopsq.yaml", ".github/workflows/gitopsq-approvals.yaml",
                  ".pre-commit-config.yaml", "gitopsq.yaml", "traces/sample.yaml", "fleet/gitopsq.yaml",
                  "fleet/overlays/prod-us/kustomization.yaml")
DATA_FILES = ("gitopsq/data/crds/gitopsq.dev_gitsources.yaml", "gitopsq/data/policies/team-owns-path.yaml",
              "gitopsq/data/audit/record.schema.json", "gitopsq/py.typed", "gitopsq/_build_info.py",
              *(f"gitopsq/data/repo-template/{name}" for name in TEMPLATE_FILES))

# one worker builds the wheel for both tests: setuptools writes its metadata into the checkout while it builds
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it, as `python -m build` makes them."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return out


def _wheel(dist: Path) -> Path:
    return next(dist.glob("gitopsq-*.whl"))


def test_wheel_and_sdist_carry_the_data_and_the_commit(dist: Path) -> None:
    """The template with its hidden files, the fleet layout, policies, CRDs and the build record, in both."""
    head = str(pygit2.Repository(str(ROOT)).head.target)
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        names = set(wheel.namelist())
        info = wheel.read("gitopsq/_build_info.py").decode()
    assert sorted(set(DATA_FILES) - names) == []
    assert f"COMMIT = {head!r}" in info
    with tarfile.open(next(dist.glob("gitopsq-*.tar.gz"))) as sdist:
        in_sdist = {name.partition("/")[2] for name in sdist.getnames()}
    assert sorted(set(DATA_FILES) - in_sdist) == []


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv outside the checkout holding the wheel; its bin directory."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--no-index", "--disable-pip-version-check", str(_wheel(dist))],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


@pytest.fixture
def new_machine(tmp_path: Path, installed: Path) -> dict[str, str]:
    """An empty HOME, git's system configuration ignored, no GIT_* and no PYTHONPATH; the fresh venv on PATH."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GIT_", "GNUPG", "SSH_", "PYTHON", "VIRTUAL_ENV", "GITOPSQ_"))}
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache"),
                "GIT_CONFIG_NOSYSTEM": "1", "PATH": f"{installed}{os.pathsep}/usr/bin{os.pathsep}/bin"})
    return env


def test_the_installed_commands_work_outside_the_checkout(tmp_path: Path, installed: Path,
                                                          new_machine: dict[str, str]) -> None:
    """--version names the commit; demo, init and check succeed with the wheel's gitopsq, not the checkout's."""
    where = tmp_path / "elsewhere"
    where.mkdir()
    gitopsq = str(installed / "gitopsq")

    imported = _run([str(installed / "python"), "-c", "import gitopsq; print(gitopsq.__file__)"], new_machine, where)
    assert Path(imported.stdout.strip()).is_relative_to(installed.parent), imported.stdout + imported.stderr

    version = _run([gitopsq, "--version"], new_machine, where)
    head = str(pygit2.Repository(str(ROOT)).head.target)
    assert version.returncode == 0, version.stderr
    assert re.fullmatch(rf"gitopsq \d+\.\d+\.\d+ \(commit {head[:12]}( with local changes)?\)\n", version.stdout)

    demo = _run([gitopsq, "demo", "--dir", str(where / "tour")], new_machine, where)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "✗" not in demo.stdout and "✓ simulate" in demo.stdout

    init = _run([gitopsq, "init", "queues"], new_machine, where)
    assert init.returncode == 0, init.stdout + init.stderr
    repo = pygit2.Repository(str(where / "queues"))
    commits = list(repo.walk(repo.branches["main"].target))
    assert len(commits) == 1 and repo.head.shorthand == "main" and not repo.remotes
    assert (where / "queues" / ".github" / "workflows" / "gitopsq.yaml").is_file()
    assert "git -C" in init.stdout and "push -u origin main" in init.stdout

    check = _run([gitopsq, "check", "queues"], new_machine, where)
    assert check.returncode == 0, check.stdout + check.stderr
