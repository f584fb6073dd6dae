"""What the controller's parts ask of one another, where a part must not import the one that wires it.

`WebhookWiring` is what `start_job_webhook` reads of the controller's `Wiring` (which imports it); `Log` the two
calls the parts make on a structured logger; `ServedWebhook` what the wiring asks of the running Job webhook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from kubernetes import client as k8s_client

from gitopsq.source.port import Source


class Log(Protocol):
    def info(self, event: str, **fields: object) -> object: ...

    def warning(self, event: str, **fields: object) -> object: ...


class ServedWebhook(Protocol):
    @property
    def port(self) -> int: ...

    def serving(self) -> bool:
        """Whether it answers (readiness)."""
        ...


class WebhookWiring(Protocol):
    @property
    def f(self) -> dict[str, Any]:
        """The command's flags, as click parsed them (each option's own type)."""
        ...

    @property
    def api_client(self) -> k8s_client.ApiClient: ...

    @property
    def log(self) -> Log: ...

    @property
    def stopping(self) -> threading.Event: ...

    @property
    def closers(self) -> list[Callable[[], object]]: ...

    @property
    def source(self) -> Source | None: ...

    @property
    def integrations(self) -> tuple[str, ...]: ...

    @property
    def poll(self) -> float: ...

    def source_name(self) -> str: ...
