"""The window of push deliveries already acted on (gitopsq/webhook/deliveries.py): times given, no clock."""

from __future__ import annotations

import pytest

from gitopsq.webhook.deliveries import MAX_ID, RecentDeliveries, delivery_id


def test_a_delivery_is_remembered_for_the_window_only() -> None:
    window = RecentDeliveries(window=60.0, capacity=10)
    assert not window.seen("a", 0.0)
    window.record("a", 0.0)
    assert window.seen("a", 59.0)
    assert not window.seen("a", 60.0)
    assert len(window) == 0


def test_memory_is_bounded_by_the_capacity_oldest_forgotten_first() -> None:
    window = RecentDeliveries(window=3600.0, capacity=100)
    for i in range(10_000):
        window.record(f"d{i}", float(i) / 1000)
    assert len(window) == 100
    assert window.seen("d9999", 10.0) and window.seen("d9900", 10.0)
    assert not window.seen("d9899", 10.0)


@pytest.mark.parametrize(("headers", "expected"), [
    ({"x-github-delivery": "72d3162e"}, "x-github-delivery:72d3162e"),
    ({"x-gitea-delivery": " 9 "}, "x-gitea-delivery:9"),
    ({"x-gitlab-event-uuid": "e-1"}, "x-gitlab-event-uuid:e-1"),
    ({"x-github-delivery": "", "x-gitea-delivery": "g"}, "x-gitea-delivery:g"),
    ({}, ""),
])
def test_the_delivery_id_by_forge(headers: dict[str, str], expected: str) -> None:
    assert delivery_id(headers) == expected


def test_a_long_id_is_cut() -> None:
    assert len(delivery_id({"x-github-delivery": "x" * 10_000})) == len("x-github-delivery:") + MAX_ID


def test_a_window_needs_a_duration_and_a_capacity() -> None:
    with pytest.raises(ValueError, match="positive"):
        RecentDeliveries(window=0)
