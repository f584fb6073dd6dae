"""The credentials the chart hands to the git CLI for audit pushes work with the real git and ssh, and the
pod-filesystem mapping the process tests rely on maps mount paths and nothing else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from chart_helm import Helm
from chart_pod import PodFiles, translate

TOKEN = b"glpat-example-token\n"


def files(helm: Helm, tmp_path: Path) -> PodFiles:
    rendered = helm.render({"audit": {"enabled": True},
                            "git": {"username": "x-access-token", "tokenSecret": {"name": "tok"},
                                    "sshSecret": {"name": "ssh"}}})
    secrets = {"tok": {"token": TOKEN},
               "ssh": {"ssh-privatekey": b"not a real key\n", "known_hosts": b"git.example.com ssh-ed25519 AAAA\n"}}
    return PodFiles(rendered, tmp_path, secrets=secrets, namespace="gitopsq-system", kubeconfig=tmp_path / "kc")


def test_audit_pushes_over_https_get_the_mounted_token(helm: Helm, tmp_path: Path) -> None:
    """`git credential fill` with the rendered environment answers with the user name and the token read from
    the mounted Secret file (the audit writer's git CLI asks exactly this)."""
    env = {**files(helm, tmp_path).env, "HOME": str(tmp_path), "GIT_TERMINAL_PROMPT": "0"}
    done = subprocess.run(["git", "credential", "fill"], input="protocol=https\nhost=git.example.com\n\n",
                          env=env, capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    answer = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert answer["username"] == "x-access-token"
    assert answer["password"] == TOKEN.decode().strip()


def test_audit_pushes_over_ssh_use_the_mounted_key_and_known_hosts(helm: Helm, tmp_path: Path) -> None:
    """The rendered GIT_SSH_COMMAND, as git runs it, makes ssh use the mounted key and known_hosts only."""
    pod = files(helm, tmp_path)
    done = subprocess.run(["sh", "-c", f'{pod.env["GIT_SSH_COMMAND"]} -G git.example.com'], env=pod.env,
                          capture_output=True, text=True, check=False, timeout=30)
    assert done.returncode == 0, done.stderr
    config = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert config["identityfile"] == str(pod.mounts["/etc/gitopsq/git-ssh"] / "ssh-privatekey")
    assert config["userknownhostsfile"] == str(pod.mounts["/etc/gitopsq/git-ssh"] / "known_hosts")
    assert config["batchmode"] == "yes" and config["identitiesonly"] == "yes"


def test_no_git_cli_credentials_without_the_audit_trail(helm: Helm) -> None:
    """Without audit.enabled nothing configures the git CLI (the Git source reads the token itself)."""
    rendered = helm.render({"git": {"tokenSecret": {"name": "tok"}, "sshSecret": {"name": "ssh"}}})
    names = {e["name"] for e in rendered.container["env"]}
    assert not names & {"GIT_CONFIG_COUNT", "GIT_SSH_COMMAND"}
    assert "--audit-wal-dir=/var/cache/gitopsq/audit-wal" not in rendered.container["args"]


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
