"""The template's sample trace: it mirrors the template's objects and settings, and tells the story it promises."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from gitopsq.admission.topology import Settings
from gitopsq.api import model as m
from gitopsq.manifests import Report, check_revision
from gitopsq.simulate.replay import simulate
from gitopsq.simulate.result import Result
from gitopsq.simulate.scenario import Scenario, parse_scenario
from gitopsq.source import WORKTREE, open_directory

TEMPLATE = Path(__file__).resolve().parents[2] / "repo-template"
TRACE = TEMPLATE / "traces" / "sample.yaml"


@cache
def _template() -> Report:
    return check_revision(open_directory(TEMPLATE), WORKTREE)


@cache
def _scenario() -> Scenario:
    return parse_scenario(TRACE.read_text(encoding="utf-8"), str(TRACE))


@cache
def _result() -> Result:
    return simulate(_scenario())


def _events(workload: str, type_: str) -> list[tuple[float, str]]:
    return [(e.time, e.reason) for e in _result().events if e.workload == workload and e.type == type_]


def test_template_is_valid() -> None:
    """The template the trace runs on passes the `gitopsq check` pipeline."""
    assert _template().errors == ()


def test_trace_objects_are_the_template_objects() -> None:
    """The trace repeats exactly the template's queue objects, so `simulate` alone and the demo agree."""
    def by_key(objects: tuple[m.QueueObject, ...]) -> dict[m.ObjectKey, m.QueueObject]:
        return {m.key_of(o): o for o in objects}

    assert by_key(_scenario().objects) == by_key(_template().objects)


def test_trace_settings_are_the_template_admission_settings() -> None:
    """The trace's settings are gitopsq.yaml's admission block (fair sharing with both strategies)."""
    admission = _template().config.admission
    assert admission.declared and admission.fair_sharing
    assert _scenario().settings == Settings(fair_sharing=True,
                                            preemption_strategies=tuple(admission.preemption_strategies))


def test_gpu_queue_fills_and_the_waiting_runs_start_when_gpus_free() -> None:
    """ml-research's a100 GPUs fill up at 09:10; the runs queued behind start when finetune-rlhf ends."""
    assert _events("ml-research/finetune-rlhf", "Finished") == [(7800.0, "Succeeded")]
    assert [t for t, _ in _events("ml-research/train-moe-ablation", "Admitted")] == [7800.0]
    assert [t for t, _ in _events("ml-research/train-distill-small", "Admitted")] == [7800.0]


def test_data_science_reclaims_borrowed_quota_and_the_sweep_falls_back_to_spot() -> None:
    """At 10:00 data-science reclaims on-demand quota from the sweep, whose trials move to spot."""
    reclaimed = [w for w in (f"ml-research/sweep-lr-{i}" for i in range(1, 7))
                 if _events(w, "Preempted") == [(3600.0, "InCohortReclamation")]]
    assert len(reclaimed) == 2
    for workload in reclaimed:
        readmitted = [e for e in _result().events if e.workload == workload and e.type == "Admitted"]
        assert readmitted[-1].time == 3600.0
        assert dict(readmitted[-1].flavors)["main"]["cpu"] == "spot"
    pipelines = [f"data-science/feature-pipeline-{i}" for i in range(1, 7)]
    assert all(_events(w, "Admitted") == [(3600.0, "Admitted")] for w in pipelines)


def test_production_inference_preempts_low_priority_evaluation_in_serving() -> None:
    """At 11:30 production batch inference preempts serving's own low-priority evaluation."""
    assert _events("serving-batch/offline-eval", "Preempted") == [(9000.0, "InClusterQueue")]
    assert [t for t, _ in _events("serving/llm-batch-translate", "Admitted")] == [9000.0]


def test_day_ends_with_one_run_too_big_for_any_quota() -> None:
    """At 18:00 only train-llama-70b waits, with ExceedsMaxQuota (32 GPUs asked, 24 at most)."""
    pending = {k: w for k, w in _result().workloads.items() if w.state == "Pending"}
    assert list(pending) == ["ml-research/train-llama-70b"]
    assert pending["ml-research/train-llama-70b"].reason == "ExceedsMaxQuota"
    assert "current podset request (32) > maximum capacity (24)" in pending["ml-research/train-llama-70b"].message
    assert _result().end == 32400.0
