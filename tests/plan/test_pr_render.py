"""Renderers of the pull-request plan: Markdown within GitHub's comment limit, text for terminals."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures_pr import TemplateRepo, raise_data_science_cpu

from gitopsq.commands.plan import make_plan
from gitopsq.plan.pr_plan import PrPlan
from gitopsq.plan.render_markdown import LIMIT, MARKER, render_markdown
from gitopsq.plan.render_text import render_text

LOCAL_QUEUE = """---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: batch-{i:04d}
  namespace: ml-research
spec:
  clusterQueue: ml-research
"""


@pytest.fixture(scope="module")
def big_plan(tmp_path_factory: pytest.TempPathFactory) -> PrPlan:
    """ml-research adds 600 LocalQueues in one pull request: far more diff than one comment holds."""
    repo = TemplateRepo(tmp_path_factory.mktemp("big") / "queues")
    repo.branch("many")
    repo.write("teams/ml-research/batch-queues.yaml", "".join(LOCAL_QUEUE.format(i=i) for i in range(600)))
    repo.commit("600 batch queues", "carol")
    return make_plan(str(repo.root), "main", "many", use_cache=False)


@pytest.mark.parametrize("limit", [LIMIT, 20_000, 4_000], ids=["GitHub's limit", "a smaller host", "tiny"])
def test_markdown_never_exceeds_the_limit_and_says_what_it_left_out(big_plan: PrPlan, limit: int) -> None:
    """600 added objects: the comment stays within the limit, keeps the summary and approvals first, shows whole
    <details> blocks only, and ends with a note counting the diffs it left out."""
    text = render_markdown(big_plan, limit=limit)
    assert len(text) <= limit
    assert text.startswith(MARKER) and "#### Approvals required" in text
    assert text.count("<details") == text.count("</details>")
    shown = text.count("<details")
    assert 0 < shown < 600 or limit == 4_000
    assert f"{600 - shown} of 600 object diffs not shown" in text


def test_a_small_plan_shows_every_diff_open(tmp_path: Path) -> None:
    """A one-field change fits whole: one open <details> block with the change as -/+ diff lines, no truncation."""
    repo = TemplateRepo(tmp_path / "queues")
    raise_data_science_cpu(repo)
    text = render_markdown(make_plan(str(repo.root), "main", "raise-cpu", use_cache=False))
    assert text.count("<details open>") == 1 and "Truncated" not in text
    assert "- spec.resourceGroups[0].flavors[on-demand].resources[cpu].nominalQuota: 96\n" in text
    assert "+ spec.resourceGroups[0].flavors[on-demand].resources[cpu].nominalQuota: 128\n" in text


def test_text_lists_added_objects_with_their_fields(big_plan: PrPlan) -> None:
    """Text output lists every added object with its spec fields and ends with the verdict line."""
    text = render_text(big_plan)
    assert text.count("  + LocalQueue/ml-research/batch-") == 600
    assert "      spec.clusterQueue: ml-research" in text
    assert text.rstrip().splitlines()[-1].startswith(("✓ accepted", "✗ rejected"))
