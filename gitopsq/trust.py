"""What judges a change comes from the trusted base, never from the head being judged (docs/policy.md "Trust").

- `base_trust`: the base revision's ``gitopsq.yaml`` is the trust model (maintainers, keys, ownership, signing
  mode). Absent at the base (the repository was not under gitopsq yet) and unreadable (a parse error, a source
  error) are different: absent lets the head's configuration judge, as for a first revision; unreadable fails
  closed with a finding, because falling back to the head would let a change name its own approvers.
- `commits_for_policy`: every commit the change brings, each with the paths it touched itself and its signature
  verified against the trusted keys, so an unsigned commit cannot hide behind a signed commit or merge on top.
- `policy_files`: the repository's own policies, read at the base (a change cannot rewrite its own rules).
- `descent_problem`: a head that does not descend from its base (a branch moved back, a force-push onto another
  history) is not a change that can be judged against that base: the commits between them would be none, and
  the base's trust model would not govern it. It is refused; going back is a new commit (a revert).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitopsq.api import findings
from gitopsq.api.findings import Finding
from gitopsq.errors import Location, SourceError, UnknownRevisionError
from gitopsq.manifests.check_report import Report
from gitopsq.manifests.config import parse_config
from gitopsq.manifests.config_model import CONFIG_PATH, RepoConfig
from gitopsq.manifests.keyfiles import revision_reader
from gitopsq.policy.forge_merge import forge_of
from gitopsq.source.keyring import signing_keys
from gitopsq.source.signatures import SignatureVerifier

_SOURCE_FAILURES = (SourceError, ValueError, KeyError, AttributeError)
ForgeApprovals = Callable[[str], Sequence[Mapping[str, Any]]]
MAX_POLICY_FILE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class BaseTrust:
    """The trusted configuration (None: there is none, the head's judges) or why the base cannot be trusted."""

    config: RepoConfig | None
    problem: Finding | None = None


def base_trust(base: str | None, base_report: Report | None, base_error: str | None) -> BaseTrust:
    """The trust model of ``base``: its parsed gitopsq.yaml; absent → None; unreadable → a finding."""
    if base is None:
        return BaseTrust(None)
    if base_report is None:
        return BaseTrust(None, _untrusted(base, f"the base revision cannot be read ({base_error or 'unknown error'})"))
    if base_report.config is not None:
        return BaseTrust(base_report.config)
    if any(f.code == "config-missing" for f in base_report.findings):
        return BaseTrust(None)  # absent: nothing governed the repository before this change
    first = next((f for f in base_report.errors), None)
    where = f"{CONFIG_PATH}:{first.location.line}" if first and first.location and first.location.line else CONFIG_PATH
    return BaseTrust(None, _untrusted(base, f"its {CONFIG_PATH} does not parse ({where}: "
                                            f"{first.message if first else 'unusable'})"))


def _untrusted(base: str, why: str) -> Finding:
    return findings.error(
        "untrusted-base",
        f"cannot judge this change against base {base[:12]}: {why}; approval and trust rules never fall back to "
        f"the {CONFIG_PATH} of the revision under review (check against a base whose {CONFIG_PATH} reads, e.g. "
        "the last revision the controller applied)",
        location=Location(CONFIG_PATH, None))


def commits_for_policy(source: Any, base: str | None, head: str, trust: RepoConfig | None,
                       forge_approvals: ForgeApprovals | None = None, *,
                       review_approvals: Sequence[Mapping[str, Any]] | None = None,
                       ) -> tuple[list[dict[str, Any]], Finding | None]:
    """Every commit of ``base..head`` (merge parents' commits included), oldest first, as policies see them; or
    a finding when the history cannot be read (a shallow clone): then nothing is judged as signed.
    ``forge_approvals(sha)`` gives the approvals of the pull request a forge-signed commit merged (raises
    ForgeError when the forge cannot say: the caller retries rather than judging without them).
    ``review_approvals`` are the standing approvals of the pull request under review, given at its head commit
    (`gitopsq check`/`plan` with forge options): every commit of the change carries them as ``reviewApprovals``
    (gitopsq.policy.forge_merge.review_teams); None when no forge was asked."""
    try:
        if base is None or not hasattr(source, "commits_between"):
            infos = (source.commit_info(head),)
        else:
            infos = source.commits_between(base, head)
        touched = [own_changes(source, info.sha, info.parents) for info in infos]
    except _SOURCE_FAILURES as err:
        return [], findings.error(
            "history-unreadable", f"cannot read the commits between {base or 'the root'} and {head[:12]}: {err}; "
            "every commit of a change is judged (fetch the full history: git fetch --unshallow; in CI "
            "fetch-depth: 0)", location=Location(CONFIG_PATH, None))
    out = []
    with SignatureVerifier(signing_keys(trust)) as verifier:
        for info, paths in zip(infos, touched, strict=True):
            status = verifier.verify(info)
            out.append({"sha": info.sha, "message": info.message, "changedPaths": list(paths),
                        "author": {"name": info.author.name, "email": info.author.email},
                        "committer": {"name": info.committer.name, "email": info.committer.email},
                        "signature": {"state": status.state, "kind": status.kind or "", "signer": status.signer or "",
                                      "fingerprint": status.fingerprint or "", "reason": status.reason}})
            if forge_approvals is not None and status.state == "good" and forge_of(status.signer or ""):
                # The forge signed it: who approved the merged pull request decides (gitopsq.policy.forge_merge).
                out[-1]["forgeApprovals"] = list(forge_approvals(info.sha))
            if review_approvals is not None:
                out[-1]["reviewApprovals"] = list(review_approvals)
    return out, None


def own_changes(source: Any, commit: str, parents: Sequence[str]) -> tuple[str, ...]:
    """The paths ``commit`` itself changed: against its parent; a root commit, everything; a merge, the paths
    whose result differs from every parent (what the merge itself wrote: a path taken as is from one side is
    that side's commits' change, and those commits are judged on their own)."""
    if not parents:
        return _paths(source.changed_paths(None, commit))
    found = set(_paths(source.changed_paths(parents[0], commit)))
    for parent in parents[1:]:
        found &= set(_paths(source.changed_paths(parent, commit)))
    return tuple(sorted(found))


def _paths(changes: Sequence[Any]) -> tuple[str, ...]:
    return tuple(sorted({p for c in changes for p in (c.path, c.old_path) if p}))


def policy_files(source: Any, commit: str, config: RepoConfig | None) -> tuple[dict[str, str], list[Finding]]:
    """The repository's own policy files (``policyPaths`` of ``config``) at ``commit``, the trusted base, and a
    finding for each file too large to be a policy (refused from its size in the tree, never read)."""
    if config is None or not config.policy_paths:
        return {}, []
    listed = source.list_files(commit, list(config.policy_paths), [])
    out: dict[str, str] = {}
    refused: list[Finding] = []
    for entry in listed:
        if not entry.path.endswith((".yaml", ".yml")):
            continue
        size = blob_size(source, entry.blob_id)
        if size is not None and size > MAX_POLICY_FILE_BYTES:
            refused.append(findings.error("policy-load", f"policy file is {size:,} bytes; the limit is "
                                          f"{MAX_POLICY_FILE_BYTES:,} bytes", location=Location(entry.path, None)))
            continue
        out[entry.path] = source.read_blob(entry.blob_id).decode("utf-8", errors="replace")
    return out, refused


def blob_size(source: Any, blob_id: str) -> int | None:
    """The size of a blob from the object header, without reading it (None when the source cannot tell)."""
    sizer = getattr(source, "blob_size", None)
    if sizer is None:
        return None
    try:
        size = sizer(blob_id)
    except _SOURCE_FAILURES:
        return None
    return int(size) if size is not None else None


def read_base_config(source: Any, base: str | None) -> BaseTrust:
    """`base_trust` for a caller holding only a source (the approvals of the sync loop): the base's gitopsq.yaml
    parsed; no base or no file → ``config`` None (the head's may judge); unreadable → ``problem`` (fail closed)."""
    if base is None:
        return BaseTrust(None)
    try:
        data = source.read_file(base, CONFIG_PATH)
    except _SOURCE_FAILURES as err:
        return BaseTrust(None, _untrusted(base, f"the base revision cannot be read ({err})"))
    if data is None:
        return BaseTrust(None)
    # a key file that cannot be read gives no key (its signatures bind nobody); the head's check reports it
    parsed = parse_config(data, read_file=revision_reader(source, base))
    if parsed.config is not None:
        return BaseTrust(parsed.config)
    first = next((f for f in parsed.findings if f.is_error), None)
    where = f"{CONFIG_PATH}:{first.location.line}" if first and first.location and first.location.line else CONFIG_PATH
    return BaseTrust(None, _untrusted(base, f"its {CONFIG_PATH} does not parse ({where}: "
                                            f"{first.message if first else 'unusable'})"))


def descent_problem(source: Any, base: str, head: str) -> str | None:
    """Why ``head`` may not follow ``base``, or None when it descends from it (or the source has no history:
    a plain directory). A base the repository no longer holds was rewritten away: refused. Other source
    failures (a remote that cannot be reached) raise SourceError, for the caller to fail closed or retry."""
    if base == head or not hasattr(source, "is_ancestor"):
        return None
    try:
        if source.is_ancestor(base, head):
            return None
        moved_back = source.is_ancestor(head, base)
    except UnknownRevisionError as err:
        return (f"revision {head[:12]} cannot be shown to descend from {base[:12]}: {err} (its history was "
                "rewritten)")
    how = (f"it is an older revision of the same history (the branch was moved back from {base[:12]})" if moved_back
           else "the two histories have diverged (a force-push onto another history, or a branch that does not "
                "contain the base yet: merge or rebase it onto the base first)")
    return (f"revision {head[:12]} does not descend from {base[:12]}: {how}; revisions only move forward: to go "
            f"back, commit a revert on top of {base[:12]}, which is judged like any change")


def descent_finding(source: Any, base: str, head: str) -> Finding | None:
    """`descent_problem` as an error finding (code ``history-not-forward``); a history that cannot be read
    fails closed (``history-unreadable``)."""
    try:
        problem = descent_problem(source, base, head)
    except _SOURCE_FAILURES as err:
        return findings.error("history-unreadable", f"cannot tell whether {head[:12]} descends from {base[:12]}: "
                              f"{err}", location=Location(CONFIG_PATH, None))
    if problem is None:
        return None
    return findings.error("history-not-forward", problem, location=Location(CONFIG_PATH, None))
