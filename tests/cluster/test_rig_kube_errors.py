"""gitopsq.cluster.kube: kubeconfig loading and the translation of API failures, on the real API server."""

from __future__ import annotations

from pathlib import Path

import pytest
from envtest_rig import Envtest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gitopsq.cluster.kube import (
    ClusterConflict,
    ClusterError,
    ClusterInvalid,
    ClusterNotFound,
    ClusterUnavailable,
    api_errors,
    load_api_client,
    translate,
)
from gitopsq.errors import EXIT_RUNTIME

pytestmark = pytest.mark.envtest


def test_missing_object_is_cluster_not_found(envtest: Envtest) -> None:
    """Reading an object that does not exist raises ClusterNotFound naming the object."""
    api, obj = envtest.api_client(), "ConfigMap/default/absent"
    with api, pytest.raises(ClusterNotFound) as missing, api_errors(obj=obj):
        client.CoreV1Api(api).read_namespaced_config_map("absent", "default")
    assert (missing.value.status, missing.value.obj) == (404, "ConfigMap/default/absent")


def test_stale_resource_version_is_cluster_conflict(envtest: Envtest) -> None:
    """An update carrying an outdated resourceVersion raises ClusterConflict (409), the retryable kind."""
    namespace = envtest.new_namespace("conflict")
    with envtest.api_client() as api:
        core = client.CoreV1Api(api)
        created = core.create_namespaced_config_map(namespace, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="cm"), data={"a": "1"}))  # fmt: skip
        core.patch_namespaced_config_map("cm", namespace, {"data": {"a": "2"}})
        created.data = {"a": "3"}
        with pytest.raises(ClusterConflict) as conflict, api_errors(obj="ConfigMap/cm"):
            core.replace_namespaced_config_map("cm", namespace, created)
    assert conflict.value.status == 409


def test_invalid_object_is_cluster_invalid_with_causes(envtest: Envtest) -> None:
    """An object the API server refuses as invalid raises ClusterInvalid listing the offending fields."""
    with envtest.api_client() as api, pytest.raises(ClusterInvalid) as invalid, api_errors():
        client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="Not_Valid")))
    assert invalid.value.status == 422
    assert any(cause.startswith("metadata.name:") for cause in invalid.value.causes)


def test_stopped_apiserver_is_cluster_unavailable_and_recovers(envtest: Envtest) -> None:
    """With the API server down a call raises ClusterUnavailable (exit code 3); after start it works again."""
    api = envtest.api_client()
    api.configuration.retries = 0
    envtest.stop_apiserver()
    try:
        with api, pytest.raises(ClusterUnavailable) as down, api_errors(obj="Namespace/default"):
            client.CoreV1Api(api).read_namespace("default", _request_timeout=2)
    finally:
        envtest.start_apiserver()
    assert down.value.exit_code == EXIT_RUNTIME
    assert down.value.status is None
    with envtest.api_client() as api:
        assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"


def test_unreadable_kubeconfig_is_cluster_unavailable(tmp_path: Path) -> None:
    """A kubeconfig that does not exist is reported as ClusterUnavailable, not a traceback."""
    with pytest.raises(ClusterUnavailable) as missing:
        load_api_client(str(tmp_path / "absent-kubeconfig"))
    assert "absent-kubeconfig" in str(missing.value)


@pytest.mark.parametrize(
    ("status", "headers", "expected", "retry_after"),
    [
        pytest.param(429, {"Retry-After": "3"}, ClusterUnavailable, 3.0, id="throttled-with-retry-after"),
        pytest.param(503, {}, ClusterUnavailable, None, id="service-unavailable"),
        pytest.param(500, {}, ClusterUnavailable, None, id="internal-error"),
        pytest.param(410, {}, ClusterNotFound, None, id="gone"),
        pytest.param(418, {}, ClusterError, None, id="unexpected-status-stays-generic"),
    ],
)
def test_status_codes_without_a_server_round_trip(
    status: int, headers: dict[str, str], expected: type[ClusterError], retry_after: float | None
) -> None:
    """Statuses the rig cannot easily produce (throttling, 5xx) map to the documented classes."""
    err = ApiException(status=status, reason="x", body='{"kind":"Status","message":"said the server"}')
    err.headers = headers
    translated = translate(err, obj="ClusterQueue/a")
    assert type(translated) is expected
    assert (translated.status, translated.obj, str(translated)) == (status, "ClusterQueue/a", "said the server")
    assert getattr(translated, "retry_after", None) == retry_after
