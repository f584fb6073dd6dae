"""`gitopsq audit verify` and `gitopsq audit export`: evidence from the audit branch alone.

Exit codes: 0 the chain is intact (and the export was written), 1 the chain is broken (the export is still
written, with the failure stated in it), 2 usage error, 3 the repository cannot be read, 4 the repository has no
audit branch (nothing to verify or export; not evidence of tampering, which is 1).

``--output`` is a format here as in every other command; the export's destination file is ``--to``/``-f``. The
spellings of earlier versions (``--format FORMAT``, ``--output FILE``) still work with a deprecation warning.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from gitopsq.audit.access import open_audit_repository
from gitopsq.audit.anchor import Anchor, status_anchor
from gitopsq.audit.bundle import write_bundle
from gitopsq.audit.evidence import build_evidence
from gitopsq.audit.evidence_formats import records_csv, to_html, to_jsonl
from gitopsq.audit.gitstore import DEFAULT_BRANCH
from gitopsq.audit.verify import Verification, verify_branch
from gitopsq.commands.groups import group
from gitopsq.commands.repo import locate
from gitopsq.errors import EXIT_OK, EXIT_REJECTED, AuditError, UsageError
from gitopsq.progress import for_stderr

EXIT_NO_BRANCH = 4
EXPORT_FORMATS = ("jsonl", "csv", "html")


def _moment(value: str | None, flag: str) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as err:
        raise UsageError(f"{flag} {value!r} is not a date or an ISO 8601 time") from err
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@group(name="audit")
def command() -> None:
    """Audit trail tools: verify the hash chain, export evidence for auditors."""


@command.command(name="verify")
@click.argument("repo")
@click.option("--branch", default=DEFAULT_BRANCH, show_default=True, help="The audit branch.")
@click.option("--since-head", metavar="[SEQ:]HASH",
              help="A chain head verified before; the branch must still contain it (detects rewritten history).")
@click.option("--allowed-signers", type=click.Path(exists=True, dir_okay=False),
              help="ssh allowed_signers file: every audit commit must be signed by its committer's key.")
@click.option("--anchor-from-cluster", "anchor_source", metavar="NAMESPACE/NAME",
              help="Also check the chain head the controller published in this GitSource's status.audit.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="For --anchor-from-cluster [default: $KUBECONFIG].")
@click.option("--context", "kube_context", help="For --anchor-from-cluster: the kubeconfig context.")
@click.option("--output", "-o", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def verify(ctx: click.Context, *, repo: str, branch: str, since_head: str | None, allowed_signers: str | None,
           anchor_source: str | None, kubeconfig: str | None, kube_context: str | None, output_format: str) -> None:
    """Check the audit branch of REPO: chain, heads, append-only history, the writer's anchors; name the first
    bad record, or the anchored head a rewound branch lost.

    Exit 0 intact, 1 broken or rewound, 3 REPO (or the GitSource) cannot be read, 4 REPO has no audit branch.
    """
    anchors = [cluster_anchor(anchor_source, branch, kubeconfig, kube_context)] if anchor_source else []
    result = _verified(repo, branch, since_head, allowed_signers, anchors)
    if output_format == "json":
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        click.echo(result.summary())
        for problem in [] if result.absent else result.problems[1:]:
            click.echo(f"  also: {problem.where()}: {problem.message}")
    ctx.exit(EXIT_NO_BRANCH if result.absent else EXIT_OK if result.ok else EXIT_REJECTED)


def _verified(repo: str, branch: str, since_head: str | None, allowed_signers: str | None,
              anchors: list[Anchor] | None = None) -> Verification:
    """Verify the audit branch of REPO (REPO may be a subdirectory of the repository), with progress on a TTY."""
    progress = for_stderr()
    try:
        with open_audit_repository(locate(repo), branch) as repository:
            return verify_branch(repository, branch, since_head=since_head, allowed_signers=allowed_signers,
                                 progress=progress, anchors=anchors or ())
    finally:
        progress.done()


@command.command(name="export")
@click.argument("repo")
@click.option("--branch", default=DEFAULT_BRANCH, show_default=True, help="The audit branch.")
@click.option("--since", help="Start of the period (inclusive), e.g. 2026-01-01 or 2026-01-01T00:00:00Z.")
@click.option("--until", help="End of the period (exclusive).")
@click.option("--output", "-o", "output", metavar="[jsonl|csv|html]", default=None,
              help="Format of the export.  [default: html]")
@click.option("--to", "-f", "to_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the export to this file instead of standard output.")
@click.option("--format", "old_format", type=click.Choice(EXPORT_FORMATS), hidden=True,
              help="Deprecated spelling of --output.")
@click.option("--bundle", "bundle_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a zip with records, report, checksums and the verification result.")
@click.option("--since-head", metavar="[SEQ:]HASH", help="Verify against a chain head checked before (see verify).")
@click.option("--allowed-signers", type=click.Path(exists=True, dir_okay=False),
              help="Verify audit commit signatures against this ssh allowed_signers file.")
@click.pass_context
def export(ctx: click.Context, *, repo: str, branch: str, since: str | None, until: str | None, output: str | None,
           to_path: Path | None, old_format: str | None, bundle_path: Path | None, since_head: str | None,
           allowed_signers: str | None) -> None:
    """Export the change log, unapproved changes and admission evidence of a period.

    Exit 0 written from an intact branch, 1 written but the branch is broken, 4 REPO has no audit branch.
    """
    fmt, output_path = _export_target(output, to_path, old_format)
    start, end = _moment(since, "--since"), _moment(until, "--until")
    if start and end and start >= end:
        raise UsageError("--since must be before --until")
    result = _verified(repo, branch, since_head, allowed_signers)
    if result.absent:
        click.echo(f"gitopsq: {result.summary()}", err=True)
        ctx.exit(EXIT_NO_BRANCH)
    verification = result.to_json()
    evidence = build_evidence([s.entry for s in result.entries], since=start, until=end)
    text = {"jsonl": to_jsonl, "csv": records_csv}.get(fmt, lambda e: to_html(e, verification))(evidence)
    if output_path is not None:
        output_path.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if bundle_path is not None:
        write_bundle(bundle_path, evidence, verification)
    if not result.ok:
        click.echo(f"gitopsq: warning: {result.summary()}", err=True)
    ctx.exit(EXIT_OK if result.ok else EXIT_REJECTED)


def _export_target(output: str | None, to_path: Path | None, old_format: str | None) -> tuple[str, Path | None]:
    """(format, file) from --output/--to, accepting the deprecated --format FORMAT and --output FILE."""
    if old_format is not None:
        click.echo("gitopsq: warning: --format is deprecated, use --output " + old_format, err=True)
        if output is not None and output in EXPORT_FORMATS and output != old_format:
            raise UsageError(f"--format {old_format} and --output {output} disagree")
    if output is not None and output not in EXPORT_FORMATS:
        looks_like_path = old_format is not None or any(sep in output for sep in "/.\\")
        if to_path is not None or not looks_like_path:
            raise UsageError(f"--output {output!r} is not a format ({', '.join(EXPORT_FORMATS)}); "
                             "write to a file with --to FILE")
        click.echo(f"gitopsq: warning: --output FILE is deprecated (--output is the format), use --to {output}",
                   err=True)
        return old_format or "html", Path(output)
    return output or old_format or "html", to_path


def cluster_anchor(source: str, branch: str, kubeconfig: str | None, context: str | None) -> Anchor:
    """The chain head the controller published in GitSource NAMESPACE/NAME's status.audit."""
    namespace, _, name = source.partition("/")
    if not namespace or not name or "/" in name:
        raise UsageError(f"--anchor-from-cluster {source!r}: expected NAMESPACE/NAME of a GitSource")
    # the Kubernetes client loads only here: verify without a cluster stays quick to start
    from gitopsq.cluster.apply import KubeRest
    from gitopsq.cluster.kube import load_api_client
    from gitopsq.cluster.status import SourceRef, StatusStore

    api_client = load_api_client(kubeconfig, context)
    try:
        state = StatusStore(KubeRest(api_client), SourceRef(namespace, name)).read()
    finally:
        api_client.close()  # type: ignore[no-untyped-call]
    if not state.exists:
        raise AuditError(f"no GitSource {source} in the cluster")
    return status_anchor(state.status, source, branch)
