"""The status of a sync pass is written once, at its end, on every path: each step of `Syncer` made to raise."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from gitopsq.cluster.apply import Execution
from gitopsq.cluster.status import SourceRef, SourceState
from gitopsq.errors import ClusterError, SourceError
from gitopsq.reconcile.pairing import Plan
from gitopsq.sync.syncer import PROGRESS_THRESHOLD, Syncer
from gitopsq.sync.values import SyncOptions, Validated

SHA = "a" * 40
NOW = datetime(2026, 1, 1, tzinfo=UTC)
OPTIONS = SyncOptions(health_timeout=5.0)
DOCS = tuple({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f"f{i}"},
              "spec": {}} for i in range(PROGRESS_THRESHOLD + 5))  # enough writes to be marked Reconciling first


class FakeStore:
    """A GitSource in memory: every status write and Event kept in order."""

    def __init__(self) -> None:
        self.ref = SourceRef("gitopsq-system", "queues")
        self.state = SourceState(exists=True, generation=1, status={}, spec={})
        self.writes: list[dict[str, Any]] = []
        self.events: list[str] = []

    def read(self) -> SourceState:
        return self.state

    def labelled(self, state: SourceState) -> bool:
        return True

    def write(self, state: SourceState, status: dict[str, Any]) -> bool:
        self.writes.append(status)
        self.state = SourceState(exists=True, generation=1, status=status, spec={})
        return True

    def event(self, state: SourceState, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.append(reason)


class FakeExecutor:
    """Every action goes through."""

    class rest:  # noqa: N801  (attempt reads executor.rest.retries)
        retries = 0

    def execute(self, plan: Plan, *, dry_run: bool = False, advance: Callable[[int], None] | None = None) -> Execution:
        return Execution(dry_run, applied=tuple(a.key for a in plan.applies))


class FakeSource:
    def resolve(self, rev: str) -> str:
        return SHA


def _syncer(monkeypatch: pytest.MonkeyPatch) -> tuple[Syncer, FakeStore]:
    syncer = Syncer(FakeSource(), object(), SourceRef("gitopsq-system", "queues"),  # type: ignore[arg-type]
                    url="https://git.example/queues.git", validator=lambda source, sha, base: Validated(DOCS),
                    clock=lambda: NOW)
    store = FakeStore()
    syncer.store = store  # type: ignore[assignment]
    syncer.executor = FakeExecutor()  # type: ignore[assignment]
    monkeypatch.setattr(syncer, "_read_live", lambda *args: ({}, frozenset()))

    def healthy(*args: Any, **kwargs: Any) -> tuple[list[Any], bool, SourceState]:
        return [], False, store.state

    monkeypatch.setattr(syncer, "_health", healthy)
    return syncer, store


def _ready(status: Mapping[str, Any]) -> dict[str, Any]:
    return dict(status["conditions"][0])


def test_a_pass_that_applies_writes_its_status_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """The long plan is marked Reconciling first, then the one final status: Ready, with the revision applied."""
    syncer, store = _syncer(monkeypatch)
    result = syncer.sync(OPTIONS)
    assert result.outcome == "applied"
    assert [_ready(w)["message"].split(":")[0] for w in store.writes] == [f"Applying revision {SHA}",
                                                                         f"Applied revision {SHA}"]
    assert _ready(store.writes[-1])["status"] == "True"
    assert store.writes[-1]["lastAppliedRevision"] == SHA
    assert store.events == ["Synced"]


# Every step after the GitSource was read, in pass order.
STEPS = ["_validate", "_inventory", "_read_live", "_plan", "_mark_applying", "_apply_whole", "_health"]


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("error", [ClusterError("boom"), KeyError("boom")], ids=["ClusterError", "KeyError"])
def test_a_step_that_raises_leaves_the_error_in_the_status(monkeypatch: pytest.MonkeyPatch, step: str,
                                                           error: Exception) -> None:
    """The finaliser writes Ready=False naming the error (a bug's message stays in the log), and re-raises."""
    syncer, store = _syncer(monkeypatch)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(syncer, step, fail)
    with pytest.raises(type(error)):
        syncer.sync(OPTIONS)
    final = _ready(store.writes[-1])
    said = "boom" if isinstance(error, ClusterError) else "interrupted"
    assert (final["status"], final["message"]) == ("False", f"Revision {SHA} not applied: {said}")
    assert store.writes[-1]["lastAttemptedRevision"] == SHA
    assert "lastAppliedRevision" not in store.writes[-1]
    assert len(store.writes) == (2 if step in ("_apply_whole", "_health") else 1)  # the Reconciling mark first


def test_an_unreachable_source_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    syncer, store = _syncer(monkeypatch)

    def fail(*args: Any) -> str:
        raise SourceError("no route to git.example")

    monkeypatch.setattr(syncer, "_resolve", fail)
    assert syncer.sync(OPTIONS).outcome == "failed"
    assert _ready(store.writes[-1])["message"] == "no route to git.example"
    assert store.events == ["SourceUnavailable"]


@pytest.mark.parametrize("step", ["_resolve", "_read_status"])
def test_a_pass_that_raises_before_reading_the_gitsource_writes_nothing(monkeypatch: pytest.MonkeyPatch,
                                                                      step: str) -> None:
    """Without the GitSource as read there is nothing to write the status over: the error is the news."""
    syncer, store = _syncer(monkeypatch)

    def fail(*args: Any) -> Any:
        raise ClusterError("API server unreachable")

    monkeypatch.setattr(syncer, step, fail)
    with pytest.raises(ClusterError):
        syncer.sync(OPTIONS)
    assert store.writes == []


def test_an_interrupted_status_the_api_refuses_keeps_the_first_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Best effort: the failing status write is logged, the step's error is what the caller sees."""
    syncer, store = _syncer(monkeypatch)

    def fail_plan(*args: Any, **kwargs: Any) -> Any:
        raise ClusterError("reading live failed")

    def fail_write(state: SourceState, status: dict[str, Any]) -> bool:
        raise ClusterError("status write refused")

    monkeypatch.setattr(syncer, "_plan", fail_plan)
    monkeypatch.setattr(store, "write", fail_write)
    with pytest.raises(ClusterError, match="reading live failed"):
        syncer.sync(OPTIONS)


def test_a_dry_run_writes_no_status_even_when_a_step_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    syncer, store = _syncer(monkeypatch)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise ClusterError("boom")

    monkeypatch.setattr(syncer, "_plan", fail)
    with pytest.raises(ClusterError):
        syncer.sync(SyncOptions(dry_run=True))
    assert store.writes == []
