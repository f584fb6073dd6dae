"""The side-by-side table's eviction and preemption counts by reason, read from a controller's /metrics answer."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from kueue_side_by_side.measure import by_reason

ANSWER = """# HELP kueue_evicted_workloads_total Workloads evicted
# TYPE kueue_evicted_workloads_total counter
kueue_evicted_workloads_total{cluster_queue="cq-1",reason="Preempted",underlying_cause=""} 3.0
kueue_evicted_workloads_total{cluster_queue="cq-2",reason="Preempted",underlying_cause=""} 4.0
kueue_evicted_workloads_total{cluster_queue="cq-2",reason="PodsReadyTimeout"} 0.0
kueue_preempted_workloads_total{preempting_cluster_queue="cq-1",reason="InClusterQueue",replica_role="leader"} 5.0
kueue_preempted_workloads_total{preempting_cluster_queue="cq-3",reason="InCohortReclamation",replica_role="leader"} 2.0
kueue_preempted_workloads_created{preempting_cluster_queue="cq-3",reason="InCohortReclamation"} 1.7e+09
"""


def test_counts_are_summed_by_reason_and_zeros_left_out() -> None:
    assert by_reason(ANSWER) == "evicted: Preempted 7; preempted: InClusterQueue 5, InCohortReclamation 2"


def test_a_controller_without_the_series_reads_zero() -> None:
    assert by_reason("# nothing here\n") == "evicted: 0; preempted: 0"
