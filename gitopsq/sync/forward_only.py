"""Revisions only move forward: a head that does not descend from the revision applied last is not applied.

A branch moved back to an older revision, or force-pushed onto another history, leaves no commits between the
applied revision and the head, so the rules that judge every commit of a change would see none, and the trust
model (maintainers, keys, signing mode) of the applied revision would not govern what comes next. The sync
refuses such a head before validating it: nothing is applied, the GitSource is Stalled with reason
``HistoryRewound``, and an Event, a metric and an audit record name both revisions (docs/sync.md). Going back
is a new commit, a revert, judged like any change. The first sync has nothing applied, so nothing to descend
from: it is judged as before (the change its head commit brings).
"""

from __future__ import annotations

from gitopsq.source.port import Source
from gitopsq.trust import descent_problem

HISTORY_REWOUND = "HistoryRewound"  # the Ready/Stalled reason, the Event reason and the audit record's reason


def rewind_refusal(source: Source, head: str, applied: str | None) -> str | None:
    """Why ``head`` is refused after ``applied`` (None: it may be judged). Raises SourceError when the history
    cannot be read now (a remote that cannot be reached): the pass fails and is retried, nothing is applied."""
    if applied is None or applied == head:
        return None
    return descent_problem(source, applied, head)
