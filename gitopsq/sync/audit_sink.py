"""The audit sink the `Syncer` writes to: ``sync.attempt`` records gain the commit (author, committer,
signature), the approvals the history of the change carries (merge commits, ``Reviewed-by`` /
``Approved-by`` trailers), the policy verdicts of the validated revision, and the approvals its ownership
requires (``requiredApprovals``, ``approvalRequired``; gitopsq.sync.change_approvals). The record id stays: it does
not depend on these fields."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import cast

from gitopsq import logs
from gitopsq.audit.git_approvals import commit_info
from gitopsq.audit.records import Approval, PolicyVerdict, Record
from gitopsq.audit.redact import redact
from gitopsq.errors import GitopsqError
from gitopsq.forge.port import Forge
from gitopsq.forge.reviews import maintainer_logins, merged_reviews
from gitopsq.manifests.config_model import RepoConfig
from gitopsq.source.facts import CommitInfo
from gitopsq.source.keyring import signing_keys
from gitopsq.source.port import HistorySource
from gitopsq.source.signatures import SignatureStatus, verify_signature
from gitopsq.sync.change_approvals import change_approvals
from gitopsq.sync.port import RecordSink
from gitopsq.sync.repo_config import repo_config
from gitopsq.sync.values import Validated

_log = logs.get("controller")


class SyncAuditRecords:
    """Enriches sync records on their way to ``sink``, reading the change from ``source`` and the verdicts from
    ``validated_at`` (revision -> its validation when it is the one validated last, else None; the Syncer's
    `validated_at`; by default no verdicts are known)."""

    def __init__(self, sink: RecordSink, source: HistorySource,
                 validated_at: Callable[[str], Validated | None] = lambda _revision: None,
                 forge: Forge | None = None) -> None:
        self.sink = sink
        self.source = source
        self.validated_at = validated_at
        self.forge = forge  # approving reviews of the merged pull requests count too

    def record(self, record: Record | Mapping[str, object]) -> None:
        self.sink.record(self.enrich(record))

    def submit(self, record: Record | Mapping[str, object]) -> int:
        return int(self.sink.submit(self.enrich(record)))

    def wait_durable(self, ticket: int | None = None, timeout: float | None = None) -> None:
        self.sink.wait_durable(ticket, timeout)

    def enrich(self, record: Record | Mapping[str, object]) -> Record | Mapping[str, object]:
        data = record.data if isinstance(record, Record) else record
        if data.get("type") != "sync.attempt" or data.get("commit"):
            return record
        # a sync.attempt names its previous revision, or None for a first sync (gitopsq.audit.records)
        revision, previous = str(data["revision"]), cast("str | None", data.get("previousRevision"))
        extra: dict[str, object] = {}
        try:
            info = self.source.commit_info(revision)
            extra["commit"] = commit_info(info, verified_signature(self.source, info, previous)).to_json()
        except (GitopsqError, ValueError, KeyError) as err:
            _log.warning("commit facts not added to the audit record", revision=revision, error=str(err))
        try:
            facts = change_approvals(self.source, revision, previous, self._forge_approvals)
            extra["approvals"] = [a.to_json() for a in facts.approvals]
            extra["requiredApprovals"] = facts.required_json()
            extra["approvalRequired"] = bool(facts.required)
        except Exception as err:  # the record must still be written, whatever the history reading hit
            # Unknown is not "not required": the export lists the change with this error as its reason.
            _log.warning("approvals not checked for the audit record", revision=revision, error=str(err))
            extra["approvalRequired"] = True
            extra["approvalError"] = str(err)
        validated = self.validated_at(revision)
        findings = validated.findings if validated is not None else ()
        verdicts = [PolicyVerdict(str(f["policy"]), str(f.get("object") or ""), str(f.get("severity", "")),
                                  False, str(f.get("message", ""))) for f in findings if f.get("policy")]
        extra["verdicts"] = [v.to_json() for v in verdicts]
        return Record({**data, **redact(extra)})

    def _forge_approvals(self, base: str | None, revision: str, trust: RepoConfig | None) -> list[Approval]:
        """Approving reviews of the merged pull requests, reviewers matched to maintainers by the e-mail the
        forge shows or by ``forgeUser`` (an unmatched reviewer keeps an empty e-mail and counts for nobody)."""
        if self.forge is None:
            return []
        logins = maintainer_logins(trust)
        out = []
        for review in merged_reviews(self.forge, self.source, base, revision):
            given = review.approval
            name, email = logins.get(given.reviewer.lower(), (given.reviewer, ""))
            source = "note" if given.via == "note" else "review"  # a signed note stood in for the forge
            out.append(Approval(name, given.email or email, source, review.merge, _time(given.at),
                                forge=given.forge, pull_request=review.pull_request, login=given.reviewer,
                                approved_commit=given.commit))
        return out


def verified_signature(source: HistorySource, info: CommitInfo, previous: str | None) -> SignatureStatus:
    """The head commit's signature verified as validation verifies it: against the keys of the trusted
    gitopsq.yaml (the previously applied revision's, else the first parent's, else the commit's own)."""
    base = previous if previous not in (None, info.sha) else (info.parents[0] if info.parents else None)
    trust = (repo_config(source, base) if base is not None else None) or repo_config(source, info.sha)
    return verify_signature(info, signing_keys(trust))


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
