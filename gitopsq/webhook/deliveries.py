"""Which push deliveries were already acted on: forges retry a delivery (and a user may redeliver it) under the same
delivery id, and each copy would otherwise trigger a sync of its own."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Final

# The headers naming a delivery, by forge (Gitea also sends GitHub's; GitLab names the event, not the attempt,
# which is what a retried delivery repeats).
DELIVERY_HEADERS: Final = ("x-github-delivery", "x-gitea-delivery", "x-gitlab-event-uuid")
MAX_ID: Final = 128  # characters of an id kept: a longer one is cut, so memory stays bounded by the capacity


def delivery_id(headers: Mapping[str, str]) -> str:
    """The delivery's id from ``headers`` (lower-case names), '' when it carries none."""
    for name in DELIVERY_HEADERS:
        value = (headers.get(name) or "").strip()
        if value:
            return f"{name}:{value[:MAX_ID]}"
    return ""


class RecentDeliveries:
    """Delivery ids recorded within the last ``window`` seconds, at most ``capacity`` of them (past it the oldest
    is forgotten first). Times are given by the caller (a monotonic clock)."""

    def __init__(self, window: float = 3600.0, capacity: int = 10_000) -> None:
        if window <= 0 or capacity < 1:
            raise ValueError("a delivery window needs a positive duration and capacity")
        self.window, self.capacity = window, capacity
        self._seen: OrderedDict[str, float] = OrderedDict()

    def _expire(self, now: float) -> None:
        while self._seen:
            oldest, at = next(iter(self._seen.items()))
            if at > now - self.window:
                break
            del self._seen[oldest]

    def seen(self, delivery: str, now: float) -> bool:
        """Whether ``delivery`` was recorded within the window before ``now``."""
        self._expire(now)
        return delivery in self._seen

    def record(self, delivery: str, now: float) -> None:
        self._expire(now)
        self._seen.pop(delivery, None)
        self._seen[delivery] = now
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)

    def __len__(self) -> int:
        return len(self._seen)
