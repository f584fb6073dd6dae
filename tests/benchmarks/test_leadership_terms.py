"""The side-by-side run's summary of gitopsq's requests says when the controller lost its Lease during the run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from kueue_side_by_side.main import gitopsq_requests


def _log(tmp_path: Path, terms: int) -> Path:
    lines = []
    for _ in range(terms):
        lines.append(json.dumps({"component": "controller", "runnables": ["admission"], "event": "runnables started"}))
        lines.append(json.dumps({"component": "admission", "passes": 7, "by_kind": {"PATCH workloads": 5},
                                 "events_sent": 1, "events_dropped": 0, "throttled_seconds": 0.5,
                                 "event": "admission loop stopped"}))
    path = tmp_path / "gitopsq.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_run_that_kept_the_lease_says_nothing_of_it(tmp_path: Path) -> None:
    summary = gitopsq_requests(_log(tmp_path, 1))
    assert summary.startswith("7 passes; requests: PATCH workloads 5;") and "LEASE" not in summary


def test_a_run_with_a_second_term_is_flagged(tmp_path: Path) -> None:
    assert gitopsq_requests(_log(tmp_path, 3)).endswith("; LEASE LOST 2 time(s): 3 leadership terms")
