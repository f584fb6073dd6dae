"""``admission.waitForPodsReady`` in gitopsq.yaml: Kueue's configuration block of that name, read with the same
fields and defaults (docs/admission-loop.md "waitForPodsReady"). Durations are Go duration strings ("30s",
"5m", "1h30m"), as in Kueue's configuration file."""

from __future__ import annotations

import re
from typing import Any, Final

from gitopsq.api.reader import FieldPath, Reader
from gitopsq.manifests.config_model import PodsReadySettings

_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: str) -> float | None:
    """Seconds in a Go duration string ("90s", "1h30m", "0"), or None when it is not one."""
    if text == "0":
        return 0.0
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT[u] for n, u in parts)


def _duration(r: Reader, raw: Any, path: FieldPath, default: float | None) -> float | None:
    if raw is None:
        return default
    seconds = go_duration(raw) if isinstance(raw, str) else None
    if seconds is None:
        r.error(path, "invalid-value", f"{'.'.join(map(str, path))} must be a duration such as \"30s\" or \"5m\", "
                f"got {raw!r}")
        return default
    return seconds


def read_pods_ready(r: Reader, raw: Any, path: FieldPath) -> PodsReadySettings:
    """The block at ``path``; a present block is enabled unless it says ``enable: false``."""
    if raw is None:
        return PodsReadySettings()
    body = r.mapping(raw, path, allowed=("enable", "timeout", "recoveryTimeout", "blockAdmission",
                                         "requeuingStrategy"))
    rq: FieldPath = (*path, "requeuingStrategy")
    strategy = r.mapping(body.get("requeuingStrategy"), rq, allowed=(
        "timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"))
    timeout = _duration(r, body.get("timeout"), (*path, "timeout"), 1800.0) or 0.0
    return PodsReadySettings(
        enable=r.boolean(body.get("enable"), (*path, "enable"), default=True),
        timeout=timeout,
        recovery_timeout=_duration(r, body.get("recoveryTimeout"), (*path, "recoveryTimeout"), None),
        block_admission=r.boolean(body.get("blockAdmission"), (*path, "blockAdmission"), default=False),
        timestamp=r.string(strategy.get("timestamp"), (*rq, "timestamp"), default="Eviction",
                           choices=("Eviction", "Creation")),
        backoff_limit_count=r.integer(strategy.get("backoffLimitCount"), (*rq, "backoffLimitCount"), minimum=0),
        backoff_base_seconds=r.integer(strategy.get("backoffBaseSeconds"), (*rq, "backoffBaseSeconds"), default=60,
                                       minimum=1) or 60,
        backoff_max_seconds=r.integer(strategy.get("backoffMaxSeconds"), (*rq, "backoffMaxSeconds"), default=3600,
                                      minimum=1) or 3600)
