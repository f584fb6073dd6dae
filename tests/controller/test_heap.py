"""The controller's heap keeper (gitopsq/controller/heap.py): the long-lived heap frozen out of the collector's
scans, a cycle among frozen objects still freed by the periodic full collection, the process left as found."""

from __future__ import annotations

import gc
import threading
import time
import weakref

from gitopsq.controller.heap import HeapKeeper


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _wait(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_alive_objects_are_frozen_and_the_process_is_left_as_found() -> None:
    keeper, stop = HeapKeeper(freeze_every=0.02, full_every=3600), threading.Event()
    cache = [{"metadata": {"name": f"w-{i}"}} for i in range(1000)]  # stands for a watch cache
    keeper.start(stop)
    try:
        _wait(lambda: keeper.freezes >= 2)
        assert gc.get_freeze_count() >= len(cache)  # out of every generation the collector scans
    finally:
        stop.set()
        assert keeper._thread is not None
        keeper._thread.join(timeout=5)
    assert gc.get_freeze_count() == 0


def test_a_cycle_formed_among_frozen_objects_is_freed_by_the_full_collection() -> None:
    keeper, stop = HeapKeeper(freeze_every=0.02, full_every=3600), threading.Event()
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    keeper.start(stop)
    try:
        _wait(lambda: keeper.freezes >= 2)
        del a, b  # now only the cycle holds them, and they are frozen
        gc.collect()
        assert gone() is not None  # an ordinary collection does not look at the permanent generation
        assert keeper.collect_all() >= 2
        assert gone() is None
    finally:
        stop.set()
        assert keeper._thread is not None
        keeper._thread.join(timeout=5)


def test_the_full_collection_comes_every_full_every_seconds() -> None:
    keeper, stop = HeapKeeper(freeze_every=0.02, full_every=0.1), threading.Event()
    keeper.start(stop)
    try:
        _wait(lambda: keeper.full_collections >= 2)
    finally:
        stop.set()
        assert keeper._thread is not None
        keeper._thread.join(timeout=5)
