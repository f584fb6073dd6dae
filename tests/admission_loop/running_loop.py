"""An admission loop running on a thread against the rig, for the admission-loop tests (no tests here)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from envtest_rig import Envtest

from gitopsq.admission_loop.loop import AdmissionLoop
from gitopsq.admission_loop.options import LoopOptions

FAST = LoopOptions(qps=200, burst=400, resync=1.0, message_refresh=0.0, queue_status_interval=0.1,
                   local_queue_status_interval=0.1)


class RunningLoop:
    def __init__(self, envtest: Envtest, options: LoopOptions = FAST, metrics: Any = None) -> None:
        self.api_client = envtest.api_client()
        self.loop = AdmissionLoop(self.api_client, options, metrics=metrics)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop.run, args=(self.stop, lambda: True), daemon=True)

    def __enter__(self) -> RunningLoop:
        self.thread.start()
        assert self.loop.synced.wait(30), "admission loop cache never synced"
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.loop.cache.changed.set()
        self.thread.join(30)
        self.api_client.close()


@contextmanager
def running_on_clean(cluster: Envtest, options: LoopOptions = FAST, metrics: Any = None) -> Iterator[RunningLoop]:
    """A loop running with ``options`` on a rig with no Kueue objects before the test or after it."""
    cluster.delete_all()
    try:
        with RunningLoop(cluster, options, metrics) as running:
            yield running
    finally:
        cluster.delete_all()
