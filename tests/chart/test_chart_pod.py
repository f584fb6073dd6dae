"""The credentials the chart mounts reach the audit writer's git CLI (gitopsq.audit.gitstore.git_env over the
rendered environment) with the real git and ssh, and the pod-filesystem mapping the process tests rely on maps
mount paths and nothing else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from chart_helm import Helm
from chart_pod import PodFiles, translate

from gitopsq.audit.gitstore import git_env

TOKEN = b"glpat-example-token\n"


def files(helm: Helm, tmp_path: Path) -> PodFiles:
    rendered = helm.render({"audit": {"enabled": True},
                            "git": {"username": "x-access-token", "tokenSecret": {"name": "tok"},
                                    "sshSecret": {"name": "ssh"}}})
    secrets = {"tok": {"token": TOKEN},
               "ssh": {"ssh-privatekey": b"not a real key\n", "known_hosts": b"git.example.com ssh-ed25519 AAAA\n"}}
    return PodFiles(rendered, tmp_path, secrets=secrets, namespace="gitopsq-system", kubeconfig=tmp_path / "kc")


def test_audit_pushes_over_https_get_the_mounted_token(helm: Helm, tmp_path: Path) -> None:
    """`git credential fill` in the environment the audit writer gives git answers with the user name and the
    token read from the mounted Secret file (git asks exactly this before an https push)."""
    env = git_env({**files(helm, tmp_path).env, "HOME": str(tmp_path)})
    done = subprocess.run(["git", "credential", "fill"], input="protocol=https\nhost=git.example.com\n\n",
                          env=env, capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    answer = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert answer["username"] == "x-access-token"
    assert answer["password"] == TOKEN.decode().strip()


def test_audit_pushes_over_ssh_use_the_mounted_key_and_known_hosts(helm: Helm, tmp_path: Path) -> None:
    """The audit writer's GIT_SSH_COMMAND, as git runs it, makes ssh use the mounted key and known_hosts only."""
    pod = files(helm, tmp_path)
    env = git_env(pod.env)
    done = subprocess.run(["sh", "-c", f'{env["GIT_SSH_COMMAND"]} -G git.example.com'], env=env,
                          capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    config = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert config["identityfile"] == str(pod.mounts["/etc/gitopsq/git-ssh"] / "ssh-privatekey")
    assert config["userknownhostsfile"] == str(pod.mounts["/etc/gitopsq/git-ssh"] / "known_hosts")
    assert config["batchmode"] == "yes" and config["identitiesonly"] == "yes"


@pytest.mark.parametrize("audit", [True, False], ids=["audit-trail", "no-audit-trail"])
def test_the_chart_configures_no_git_cli_of_its_own(helm: Helm, audit: bool) -> None:
    """The chart hands over credentials only as GITOPSQ_* variables (the source and the audit writer read the
    same ones); it sets no git configuration or ssh command that could diverge from them."""
    rendered = helm.render({"audit": {"enabled": audit},
                            "git": {"tokenSecret": {"name": "tok"}, "sshSecret": {"name": "ssh"}}})
    names = {e["name"] for e in rendered.container["env"]}
    assert not names & {"GIT_CONFIG_COUNT", "GIT_SSH_COMMAND"}
    assert {"GITOPSQ_GIT_TOKEN_FILE", "GITOPSQ_SSH_KEY_FILE", "GITOPSQ_SSH_KNOWN_HOSTS"} <= names
    assert ("--audit-wal-dir=/var/cache/gitopsq/audit-wal" in rendered.container["args"]) is audit


@pytest.mark.parametrize(("value", "expected"), [
    pytest.param("--cache-dir=/var/cache/gitopsq/repos", "--cache-dir=/L/cache/repos", id="flag-value"),
    pytest.param("/var/cache/gitopsq", "/L/cache", id="whole-path"),
    pytest.param("ssh -i /etc/k/id -o UserKnownHostsFile=/etc/k/kh", "ssh -i /L/k/id -o UserKnownHostsFile=/L/k/kh",
                 id="inside-a-command"),
    pytest.param("--repo=file:///tmp/queues", "--repo=file:///tmp/queues", id="url-path-untouched"),
    pytest.param("/tmpfoo/x", "/tmpfoo/x", id="prefix-of-a-longer-name-untouched"),
    pytest.param("/tmp/x", "/L/tmp/x", id="short-mount"),
])
def test_mount_paths_map_into_the_pod_root(value: str, expected: str) -> None:
    """Mount paths become local directories wherever they appear as paths; URLs and longer names stay."""
    mounts = {"/var/cache/gitopsq": Path("/L/cache"), "/etc/k": Path("/L/k"), "/tmp": Path("/L/tmp")}
    assert translate(value, mounts) == expected
