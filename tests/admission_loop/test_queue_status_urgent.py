"""Which queue-status changes skip the write interval: Active flips and turning idle or busy, not count churn."""

from __future__ import annotations

from typing import Any

import pytest

from gitopsq.admission_loop.queue_status import urgent


def status(pending: int, reserving: int, active: str = "True", reason: str = "Ready") -> dict[str, Any]:
    return {"conditions": [{"type": "Active", "status": active, "reason": reason, "message": ""}],
            "pendingWorkloads": pending, "reservingWorkloads": reserving, "admittedWorkloads": reserving}


@pytest.mark.parametrize(("old", "new", "expected"), [
    pytest.param(status(5, 3), status(4, 4), False, id="counts moving while busy wait for the interval"),
    pytest.param(status(0, 1), status(0, 0), True, id="the last reserving workload gone: idle at once"),
    pytest.param(status(1, 0), status(0, 0), True, id="the last pending workload gone: idle at once"),
    pytest.param(status(0, 0), status(1, 0), True, id="work arrives in an idle queue: at once"),
    pytest.param({}, status(0, 0), True, id="a new queue's first status (Active appears): at once"),
    pytest.param(status(2, 2), status(2, 2, "False", "FlavorNotFound"), True, id="an Active flip: at once"),
    pytest.param(status(0, 0), status(0, 0), False, id="nothing changed that clients wait for"),
])
def test_urgent_changes(old: dict[str, Any], new: dict[str, Any], expected: bool) -> None:
    """Only the changes clients wait for (Active, idle ↔ busy) are written ahead of the queue's interval."""
    assert urgent(old, new) is expected
