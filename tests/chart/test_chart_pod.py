"""The credentials the chart mounts reach the audit writer's git CLI (gitopsq.audit.gitstore.git_env over the
rendered environment) with the real git and ssh, and the pod-filesystem mapping the process tests rely on maps
mount paths and nothing else."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from chart_helm import Helm
from chart_pod import PodFiles, PodProcess, translate
from chart_rig import apply, free_port, service_account_kubeconfig

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


@pytest.mark.envtest
def test_admission_mode_runs_with_the_rendered_configuration(helm: Helm, kueue_crds: Any, tmp_path: Path) -> None:
    """mode=admission, started with exactly the rendered args and env as the chart's ServiceAccount: no
    repository, the Lease taken, the Job webhook serving with its certificate stored in the chart's Secret, a
    queued Job admitted into hand-applied queues, Kueue metrics with replica_role="leader", nothing forbidden."""
    from gitopsq.cluster.apply import KubeRest

    rig = kueue_crds
    namespace, release = rig.new_namespace("gitopsq"), f"a{uuid.uuid4().hex[:6]}"
    health, metrics, webhook = free_port(), free_port(), free_port()
    rendered = helm.render({"mode": "admission", "health": {"port": health}, "metrics": {"port": metrics},
                            "webhook": {"port": webhook},
                            "leaderElection": {"leaseName": f"{release}-lease", "leaseDuration": "4s",
                                               "renewDeadline": "3s", "retryPeriod": "1s"}},
                           release=release, namespace=namespace, with_repo=False)
    kinds = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Secret"}
    done = apply(rig, [o for o in rendered.objects if o["kind"] in kinds], dry_run=False)
    assert done.returncode == 0, done.stderr
    account = rendered.get("ServiceAccount")["metadata"]["name"]
    kubeconfig = service_account_kubeconfig(rig, namespace, account, tmp_path / "sa.kubeconfig")
    team = rig.new_namespace("team")
    queues = f"""apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {team}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {team}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: {team}, resources: [{{name: cpu, nominalQuota: "4"}}]}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: main, namespace: {team}}}
spec: {{clusterQueue: {team}}}
"""
    rig.kubectl("apply", "--server-side", "-f", "-", stdin=queues)
    pod = PodProcess(PodFiles(rendered, tmp_path, secrets={}, namespace=namespace, kubeconfig=kubeconfig))
    api = KubeRest(rig.api_client())
    try:
        pod.wait_http(health, "/readyz")
        secret = rendered.get("Secret")["metadata"]["name"]
        data = api.request("GET", f"/api/v1/namespaces/{namespace}/secrets/{secret}").get("data") or {}
        assert {"ca.crt", "tls.crt", "tls.key"} <= set(data)
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "work", "namespace": team, "labels": {"kueue.x-k8s.io/queue-name": "main"}},
               "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                   {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]}}}}
        api.request("POST", f"/apis/batch/v1/namespaces/{team}/jobs", body=job)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = api.request("GET", f"/apis/batch/v1/namespaces/{team}/jobs/work")
            if got["spec"]["suspend"] is False:
                break
            time.sleep(0.3)
        assert got["spec"]["suspend"] is False, pod.logs()[-3000:]
        pod.wait_series(metrics, "/metrics", [b'replica_role="leader"', b"kueue_admitted_workloads_total{"])
    finally:
        code = pod.stop()
        for kind in ("clusterrolebinding", "clusterrole"):
            rig.kubectl("delete", kind, f"{release}-gitopsq", "--ignore-not-found", check=False)
    assert code == 0, pod.logs()[-3000:]
    assert "forbidden" not in pod.logs().lower(), pod.logs()[-3000:]


def test_git_settings_given_through_extra_env_win(tmp_path: Path) -> None:
    """A credential helper in GIT_CONFIG_* or a GIT_SSH_COMMAND set by the operator (extraEnv) is kept as it is:
    gitopsq adds its own only where git has none."""
    token = tmp_path / "token"
    token.write_text("from-file\n")
    own = {"GITOPSQ_GIT_TOKEN_FILE": str(token), "GITOPSQ_SSH_KEY_FILE": "/k/id", "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path)}
    operator = {**own, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "credential.helper",
                "GIT_CONFIG_VALUE_0": "!f() { echo username=op; echo password=op-secret; }; f",
                "GIT_SSH_COMMAND": "ssh -F /etc/operator/ssh_config"}
    kept = git_env(operator)
    assert kept["GIT_CONFIG_COUNT"] == "1" and "GIT_CONFIG_KEY_1" not in kept
    assert kept["GIT_SSH_COMMAND"] == "ssh -F /etc/operator/ssh_config"
    done = subprocess.run(["git", "credential", "fill"], input="protocol=https\nhost=h\n\n", env=kept,
                          capture_output=True, text=True, check=True, timeout=30)
    assert "password=op-secret" in done.stdout
    ours = git_env(own)
    assert "-i /k/id" in ours["GIT_SSH_COMMAND"] and "IdentitiesOnly=yes" in ours["GIT_SSH_COMMAND"]
    assert "from-file" not in repr(ours)  # the token is read by the helper when git asks, never copied
