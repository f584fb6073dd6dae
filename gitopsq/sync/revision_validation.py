"""The sync's validation: a revision checked by the same pipeline as ``gitopsq check`` (gitopsq.validation), adapted
to the `Validated` the `Syncer` works with."""

from __future__ import annotations

from dataclasses import replace

from gitopsq.api.codec import encode
from gitopsq.api.raw_objects import JsonMapping
from gitopsq.manifests import finding_json
from gitopsq.manifests.check_report import LoadedObject, PassThrough, Report
from gitopsq.reconcile.pairing import key_of_document
from gitopsq.source.port import Source
from gitopsq.sync.values import Validated, Validator
from gitopsq.trust import ForgeApprovals
from gitopsq.validation import ValidationCache, validate_revision


def check_pipeline_validator(forge_approvals: ForgeApprovals | None = None, *,
                             cluster: str | None = None) -> Validator:
    """The Validator running the one validation path (gitopsq.validation.validate_revision: `gitopsq check`'s
    manifest pipeline, then the CEL policies as `gitopsq plan` runs them), judging the revision against the one
    applied last, or on a first sync the change the head commit brings (against its first parent: the history
    before it is what the admin installed gitopsq on). Parsed files, reports by commit and compiled policies are
    cached across revisions (gitopsq.validation.ValidationCache). ``forge_approvals`` reads the approvals of the
    pull request a forge-signed commit merged (gitopsq.forge.reviews.approvals_reader). ``cluster`` judges
    every revision as that cluster of gitopsq.yaml sees it (docs/fleet.md; gitopsq.controller.cluster_scope)."""
    cache = ValidationCache()

    def validate(source: Source, commit: str, previous: str | None) -> Validated:
        base: str | bool = previous if previous is not None and previous != commit else True
        return from_report(validate_revision(source, commit, base=base, cache=cache,
                                             forge_approvals=forge_approvals, cluster=cluster).report)

    return validate


def from_report(report: Report) -> Validated:
    """Adapt a check Report (objects, pass-through documents, findings including policy verdicts) to Validated."""
    findings = []
    for f in report.findings:
        item = {**finding_json(f), "reason": f.code}
        if f.code.startswith("policy/"):
            item["policy"] = f.code.removeprefix("policy/")
        findings.append(item)
    errors = [f for f in report.findings if f.is_error]
    documents = tuple(encode(o) for o in report.objects) + tuple(dict(p.doc) for p in report.passthrough)
    places = [(e.path, e.line) for e in report.entries] + [(p.path, p.line) for p in report.passthrough]
    locations = {key_of_document(d): place for d, place in zip(documents, places, strict=True)}
    sourced: tuple[LoadedObject | PassThrough, ...] = (*report.entries, *report.passthrough)
    overlays = {key_of_document(d): item.overlay for d, item in zip(documents, sourced, strict=True) if item.overlay}
    reason = f"{len(errors)} error(s), first: {errors[0]}" if errors else ""
    policy_only = bool(errors) and all(f.code.startswith("policy") for f in errors)
    return Validated(documents, tuple(findings), bool(errors), reason,
                     "PolicyDenied" if policy_only else "ValidationFailed", locations, overlays)


def within_paths(validated: Validated, paths: tuple[str, ...]) -> Validated:
    """Only the objects from files under ``paths`` (the GitSource's ``spec.paths``; all when empty). The
    revision is validated whole all the same: references between files need every file."""
    roots = [p.strip("/").removeprefix("./").strip("/") for p in paths]
    if not roots or "" in roots or "." in roots:
        return validated
    where = validated.locations

    def inside(doc: JsonMapping) -> bool:
        key = key_of_document(doc)
        path = validated.overlays.get(key) or where.get(key, ("", 0))[0]
        return any(path == r or path.startswith(r + "/") for r in roots)

    return replace(validated, documents=tuple(d for d in validated.documents if inside(d)))
