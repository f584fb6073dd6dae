"""Kubernetes client construction, and the one place where Kubernetes client failures become gitopsq errors.

Every other module in gitopsq.cluster calls the API inside ``with api_errors(obj=...)`` (or calls
``translate``) and matches on the classes below, never on HTTP codes or message text.

    ClusterError (gitopsq.errors)
    ├── ClusterConflict      409: resourceVersion or field-manager conflict (retry or report)
    ├── ClusterNotFound      404: object, namespace or API kind absent
    ├── ClusterForbidden     401 / 403: our credentials may not do this
    ├── ClusterInvalid       422 / 400: the API server refused the object (schema, CEL, admission)
    └── ClusterUnavailable   429, 5xx, timeouts, refused connections: retry with backoff
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from gitopsq.api.raw_objects import Status
from gitopsq.errors import ClusterError


class ClusterConflict(ClusterError):  # noqa: N818 - names fixed by the interface
    """The object changed under us, or another field manager owns a field we set."""


class ClusterNotFound(ClusterError):  # noqa: N818 - names fixed by the interface
    """The object, its namespace, or its API kind does not exist."""


class ClusterForbidden(ClusterError):  # noqa: N818 - names fixed by the interface
    """The API server refused our credentials (401) or their permissions (403)."""


class ClusterInvalid(ClusterError):  # noqa: N818 - names fixed by the interface
    """The API server rejected the object as invalid; ``causes`` lists the field errors it gave."""

    def __init__(
        self, reason: str, *, status: int | None = None, obj: str | None = None, causes: tuple[str, ...] = ()
    ) -> None:
        super().__init__(reason, status=status, obj=obj)
        self.causes = causes


class ClusterUnavailable(ClusterError):  # noqa: N818 - names fixed by the interface
    """The API server is unreachable, overloaded (429) or failing (5xx); ``retry_after`` is its hint."""

    def __init__(
        self, reason: str, *, status: int | None = None, obj: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(reason, status=status, obj=obj)
        self.retry_after = retry_after


def load_api_client(kubeconfig: str | None = None, context: str | None = None) -> k8s_client.ApiClient:
    """An API client for ``kubeconfig`` (or $KUBECONFIG / ~/.kube/config, or the in-cluster service account)."""
    try:
        if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            try:
                configuration = k8s_client.Configuration()
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                return k8s_client.ApiClient(configuration)
            except ConfigException:
                pass  # not really in a pod: fall through to the kubeconfig
        api_client: k8s_client.ApiClient = k8s_config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context
        )
        return api_client
    except (ConfigException, OSError, TypeError, ValueError) as err:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise ClusterUnavailable(f"cannot load kubeconfig {where}: {err}") from err


def _status_body(err: ApiException) -> Status:
    body = err.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str) or not body.startswith("{"):
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return cast(Status, parsed) if isinstance(parsed, dict) else {}


def _retry_after(err: ApiException) -> float | None:
    headers = err.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def translate(err: BaseException, *, obj: str | None = None) -> ClusterError:
    """The gitopsq error for a Kubernetes client, urllib3 or socket failure (returned, not raised)."""
    if isinstance(err, ClusterError):
        return err
    if isinstance(err, ApiException):
        status = int(err.status) if err.status is not None else None
        body = _status_body(err)
        message = str(body.get("message") or err.reason or "request failed")
        if status == 409:
            return ClusterConflict(message, status=status, obj=obj)
        if status in (404, 410) and body.get("reason") != "Expired":
            return ClusterNotFound(message, status=status, obj=obj)
        if status in (401, 403):
            return ClusterForbidden(message, status=status, obj=obj)
        if status in (400, 422):
            causes = tuple(
                f"{cause.get('field', '')}: {cause.get('message', '')}".lstrip(": ")
                for cause in (body.get("details") or {}).get("causes") or []
                if isinstance(cause, dict)
            )
            return ClusterInvalid(message, status=status, obj=obj, causes=causes)
        if status is None or status in {0, 429} or status >= 500:
            return ClusterUnavailable(message, status=status, obj=obj, retry_after=_retry_after(err))
        return ClusterError(message, status=status, obj=obj)
    if isinstance(err, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)):
        return ClusterUnavailable(f"API server unreachable: {_short(err)}", obj=obj)
    if isinstance(err, OSError):
        return ClusterUnavailable(f"API server unreachable: {err}", obj=obj)
    return ClusterError(f"unexpected Kubernetes client failure: {err!r}", obj=obj)


def _short(err: BaseException) -> str:
    # urllib3's MaxRetryError wraps the interesting cause; its own text repeats the whole pool state
    reason = getattr(err, "reason", None)
    return str(reason) if reason is not None else str(err)


@contextmanager
def api_errors(obj: str | None = None) -> Iterator[None]:
    """Run Kubernetes calls; re-raise their failures as ClusterError subclasses chained with ``from``."""
    try:
        yield
    except ClusterError:
        raise
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as err:
        raise translate(err, obj=obj) from err
