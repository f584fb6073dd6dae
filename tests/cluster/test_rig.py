"""The envtest rig itself: a real kube-apiserver answering on loopback, its credentials, restarts, PIDs."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from envtest_rig import Envtest
from envtestrig.processes import stop_pid
from kubernetes import client

from gitopsq.cluster.kube import ClusterForbidden, api_errors

pytestmark = pytest.mark.envtest


def _get(envtest: Envtest, path: str) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(envtest.rig.pki_dir / "serving-ca.crt"))
    request = urllib.request.Request(
        envtest.api_url + path, headers={"Authorization": f"Bearer {envtest.rig.admin_token()}"}
    )
    with urllib.request.urlopen(request, timeout=5, context=context) as answer:
        return answer.status, answer.read().decode()


def test_readyz_answers_ok_over_verified_tls(envtest: Envtest) -> None:
    """/readyz returns 200 "ok" over TLS verified against the rig's own serving CA."""
    assert _get(envtest, "/readyz") == (200, "ok")


def test_apiserver_reports_the_pinned_kubernetes_version(envtest: Envtest) -> None:
    """/version shows the release pinned in hack/envtest/go.mod, stamped in at build time."""
    _, body = _get(envtest, "/version")
    assert json.loads(body)["gitVersion"] == envtest.rig.state.kubernetes_version


@pytest.mark.parametrize("context", ["envtest", "envtest-token"], ids=["client-certificate", "bearer-token"])
def test_kubeconfig_contexts_authenticate_as_cluster_admin(envtest: Envtest, context: str) -> None:
    """Both admin identities in the kubeconfig may do anything (system:masters under RBAC)."""
    answer = envtest.kubectl("--context", context, "auth", "can-i", "*", "*", "--all-namespaces")
    assert answer.stdout.strip() == "yes"


def test_nobody_context_is_forbidden_and_translated(envtest: Envtest) -> None:
    """The no-rights user is refused by RBAC, and gitopsq sees that as ClusterForbidden with status 403."""
    api = envtest.api_client("envtest-nobody")
    with api, pytest.raises(ClusterForbidden) as refused, api_errors(obj="Namespace/default"):
        client.CoreV1Api(api).read_namespace("default")
    assert refused.value.status == 403


def test_new_namespace_creates_distinct_namespaces_without_service_account_errors(envtest: Envtest) -> None:
    """Each call creates a fresh namespace, and pods can be created there with no default service account."""
    first, second = envtest.new_namespace("rig"), envtest.new_namespace("rig")
    assert first != second
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "example.invalid/none"}]},
    }
    with envtest.api_client() as api:
        created = client.CoreV1Api(api).create_namespaced_pod(first, pod)
    assert created.metadata.namespace == first


def test_restart_apiserver_keeps_data_and_port(envtest: Envtest) -> None:
    """After restart_apiserver the same URL answers and objects written before are still there."""
    namespace = envtest.new_namespace("restart")
    with envtest.api_client() as api:
        client.CoreV1Api(api).create_namespaced_config_map(
            namespace, {"metadata": {"name": "kept"}, "data": {"k": "v"}}
        )
    old_pid, old_url = envtest.rig.state.apiserver_pid, envtest.api_url
    envtest.restart_apiserver()
    assert envtest.rig.state.apiserver_pid != old_pid
    assert envtest.rig.api_url == old_url
    with envtest.api_client() as api:
        kept = client.CoreV1Api(api).read_namespaced_config_map("kept", namespace)
    assert kept.data == {"k": "v"}


def test_stop_pid_refuses_a_process_that_is_not_ours() -> None:
    """A recorded PID whose command line lacks our marker (a reused PID) is never signalled."""
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    deadline = time.monotonic() + 10
    while "time.sleep(30)" not in Path(f"/proc/{stranger.pid}/cmdline").read_text() and time.monotonic() < deadline:
        time.sleep(0.01)  # the kernel shows the new command line only once exec has finished
    try:
        assert stop_pid(stranger.pid, "gitopsq-envtest-marker-that-is-not-there") is False
        assert stranger.poll() is None
        assert stop_pid(stranger.pid, "time.sleep(30)") is True
        assert stranger.wait(timeout=5) is not None
    finally:
        if stranger.poll() is None:
            stranger.kill()
            stranger.wait()


def test_start_retries_when_a_probed_port_is_taken_before_bind(
    envtest: Envtest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If another process binds a probed port first (here: the running rig's port), start tries fresh ports."""
    from envtestrig import prepare
    from envtestrig import rig as rig_module

    taken = iter([envtest.rig.state.etcd_port])
    real_free_port = rig_module.free_port
    monkeypatch.setattr(rig_module, "free_port", lambda: next(taken, None) or real_free_port())
    second = rig_module.Rig.start(prepare(log=False), tmp_path / "second")
    try:
        assert second.state.etcd_port != envtest.rig.state.etcd_port
        assert all(second.running().values())
        assert "address already in use" in (tmp_path / "second" / "logs" / "etcd.log").read_text()
    finally:
        second.stop()
