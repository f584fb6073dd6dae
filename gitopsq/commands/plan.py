"""`gitopsq plan REPO --base REV --head REV` (docs/plan.md "Pull-request plans").

The shell around gitopsq.plan.pr_plan: read both revisions through gitopsq.source, validate each with the
`check` pipeline (its parse cache included), evaluate the head's policies, gather current workloads (a
cluster, a snapshot file or a trace) for the impact, render. Exit 0 / 1 as `check` on the head; 3 when the
repository or a revision cannot be read. An unreachable cluster is not fatal: the plan says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import yaml

from gitopsq.admission.topology import Settings
from gitopsq.api import model as m
from gitopsq.api.codec import encode
from gitopsq.commands.check import DiskCache, cache_file
from gitopsq.commands.clusters import choose, declared_clusters
from gitopsq.commands.plan_post import post_plan, post_target
from gitopsq.commands.policy import backend_from_env
from gitopsq.commands.repo import locate
from gitopsq.commands.review import ReviewTarget, read_reviews, review_target
from gitopsq.errors import ClusterError, ScenarioError, SourceError, UsageError
from gitopsq.kustomize import default_renderer
from gitopsq.manifests import CONFIG_PATH, check_revision
from gitopsq.manifests.config import parse_config
from gitopsq.manifests.config_model import RepoConfig
from gitopsq.plan.fleet_plan import ClusterPlan, FleetPlan
from gitopsq.plan.impact import CurrentAdmission, CurrentWorkload, assess, compare_trace, from_trace
from gitopsq.plan.pr_plan import History, PrPlan, build_plan
from gitopsq.plan.render_fleet import fleet_json, fleet_markdown, fleet_text
from gitopsq.simulate.scenario import Scenario, parse_scenario
from gitopsq.simulate.scenario import _Parser as _ScenarioParser
from gitopsq.source import DirectorySource, open_any
from gitopsq.validation import ValidationCache, judge, touched_paths

WORKLOADS_PATH = "/apis/kueue.x-k8s.io/v1beta2/workloads"


def settings_of(config: RepoConfig | None) -> Settings | None:
    """The repository's ``admission`` block as engine settings (None: not declared)."""
    if config is None or not config.admission.declared:
        return None
    from gitopsq.admission_loop.options import engine_settings  # the live loop's reading, feature gates included

    return engine_settings(config.admission)


def scenario_with_objects(path: str, objects: Sequence[m.QueueObject]) -> Scenario:
    """Parse a snapshot or trace file in the scenario format, its ``objects`` replaced by ``objects``'
    ClusterQueues (so admitted workloads are checked against these definitions; callers replace them anyway).

    Fast path: json (or libyaml) and no line index (a 10,000-workload JSON snapshot in about half a second
    instead of about twenty). Only when that finds a problem is the file parsed again by `parse_scenario`, with
    line numbers, so every error still names its file:line.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from err
    queues = [encode(o) for o in objects if isinstance(o, m.ClusterQueue)]
    try:
        try:  # JSON is YAML too, and json parses a large snapshot several times faster than libyaml
            data = json.loads(text)
        except ValueError:
            data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if isinstance(data, dict):
            return _Unlined({**data, "objects": queues}, path).parse()
    except (yaml.YAMLError, ScenarioError):
        pass
    # Slow path for its messages: append the queues as the last top-level key (YAML keeps the last duplicate),
    # so the user's lines keep their numbers.
    docs = json.dumps(queues, ensure_ascii=False, separators=(",", ":"))
    return parse_scenario(text.rstrip("\n") + f"\nobjects: {docs}\n", path)


class _Unlined(_ScenarioParser):
    """The scenario parser over already-loaded data, without the line index (findings carry no line)."""

    def __init__(self, data: Any, file: str) -> None:  # replaces the YAML loading on purpose
        self.file = file
        self.data = data
        self.lines = {}
        self.findings = []


def cluster_workloads(kubeconfig: str) -> tuple[CurrentWorkload, ...]:
    """Every unfinished, active Workload of the cluster, with its admission (ClusterError when unreachable)."""
    # Imported on use for CLI start-up time: the Kubernetes client only with --cluster.
    from gitopsq.admission_loop.live_workload import ADMITTED, EVICTING, PENDING, read_workload
    from gitopsq.api.raw_objects import child, children, text
    from gitopsq.cluster.apply import Backoff, KubeRest
    from gitopsq.cluster.kube import load_api_client

    rest = KubeRest(load_api_client(kubeconfig), backoff=Backoff(deadline=5.0), timeout=15.0)
    items: list[Mapping[str, Any]] = []
    token = ""
    while True:
        query = [("limit", "5000"), *([("continue", token)] if token else [])]
        page = child(rest.request("GET", WORKLOADS_PATH, query=query, obj="workloads"))
        items.extend(children(page, "items"))
        token = text(page, "metadata", "continue")
        if not token:
            break
    out = []
    for raw in items:
        live = read_workload(raw)
        if live is None or live.state not in (ADMITTED, EVICTING, PENDING):
            continue
        admitted = CurrentAdmission(live.cluster_queue or "", live.flavors, live.reserved_at) \
            if live.state != PENDING and live.cluster_queue else None
        out.append(CurrentWorkload(namespace=live.namespace, name=live.name, queue=live.queue,
                                   pod_sets=live.pod_sets, priority=live.priority, priority_class=live.priority_class,
                                   created=live.created, admitted=admitted))
    return tuple(out)


def _history(source: Any, base: str, head: str) -> tuple[History, list[str]]:
    if base == head:
        return "ancestor", ["base and head are the same commit: nothing to merge"]
    try:
        if source.merge_base(base, head) is None:
            return "unrelated", ["base and head share no history (unrelated histories): the plan compares the "
                                 "two revisions' trees as they are; GitHub would refuse to merge them"]
        if source.is_ancestor(base, head):
            return "ancestor", []
    except SourceError as err:
        return "unknown", [f"cannot read the history between base and head ({err}); the plan compares the trees"]
    return "diverged", ["base has moved on since head branched off: the plan compares the two trees, so changes "
                        "made on base meanwhile show as reverted; merge or rebase base into head for an exact "
                        "preview"]


def make_plan(repo: str, base_rev: str, head_rev: str, *, cluster: str | None = None,
              kubeconfig: str | None = None, workloads: str | None = None, trace: str | None = None,
              use_cache: bool = True, review: ReviewTarget | None = None) -> PrPlan:
    """Everything `gitopsq plan` computes for one cluster, as a `PrPlan` (used by tests and benchmarks).
    ``cluster`` names a cluster of gitopsq.yaml (required when it declares several; docs/fleet.md)."""
    fleet = make_fleet_plan(repo, base_rev, head_rev, cluster=cluster, kubeconfig=kubeconfig, workloads=workloads,
                            trace=trace, use_cache=use_cache, review=review)
    if len(fleet.plans) != 1:
        raise UsageError(f"the head declares {len(fleet.plans)} clusters: name one, or use make_fleet_plan")
    return fleet.first


def make_fleet_plan(repo: str, base_rev: str, head_rev: str, *, cluster: str | None = None,
                    kubeconfig: str | None = None, workloads: str | None = None, trace: str | None = None,
                    use_cache: bool = True, review: ReviewTarget | None = None) -> FleetPlan:
    """Everything `gitopsq plan` computes: a `PrPlan` per cluster judged (every cluster the head's gitopsq.yaml
    declares, or ``cluster`` alone; the implicit one without clusters). Impact options read one cluster's work,
    so they need one cluster judged. ``cluster`` that names no declared cluster but an existing file is the old
    ``--cluster KUBECONFIG`` (deprecated: a warning). ``review`` names the pull request whose approving reviews
    at the head count (gitopsq.commands.review)."""
    repo = locate(repo)  # from a subdirectory: its repository's root, as git does
    source = open_any(repo)
    if isinstance(source, DirectorySource):
        raise UsageError(f"{repo} is not the root of a Git repository: plan compares two revisions of one")
    base_sha, head_sha = source.resolve(base_rev), source.resolve(head_rev)
    declared = declared_clusters(source, head_sha)
    warnings: list[str] = []
    if cluster is not None and cluster not in declared and Path(cluster).is_file():
        if kubeconfig is not None:
            raise UsageError(f"--cluster {cluster} is a file, not a cluster of gitopsq.yaml, and --kubeconfig is "
                             "given too")
        warnings.append(f"--cluster {cluster}: a kubeconfig given as --cluster is deprecated; use --kubeconfig "
                        f"{cluster} (--cluster now names a cluster of gitopsq.yaml)")
        cluster, kubeconfig = None, cluster
    names = choose(declared, cluster)
    if len(names) > 1 and (kubeconfig or workloads or trace):
        raise UsageError(f"--kubeconfig, --workloads and --trace describe one cluster's work; gitopsq.yaml declares "
                         f"{', '.join(names)}: choose one with --cluster NAME")
    cache = DiskCache(cache_file(str(Path(repo).resolve()) if Path(repo).exists() else source.display)
                      if use_cache else None)
    history, notes = _history(source, base_sha, head_sha)
    authors = _authors(source, base_sha, head_sha)
    reviews = read_reviews(review, head_sha) if review is not None else None  # once, for every cluster
    policy_cache = ValidationCache()  # policies compile once for every cluster
    touched = touched_paths(source, base_sha, head_sha)
    views = [c for sha in (base_sha, head_sha) for c in _cluster_views(source, sha)]
    plans = []
    for name in names:
        plans.append(ClusterPlan(name, _cluster_plan(
            source, name, (base_rev, base_sha), (head_rev, head_sha), cache=cache, policy_cache=policy_cache,
            history=history, notes=notes, authors=authors, kubeconfig=kubeconfig, workloads=workloads,
            trace=trace, touched=_cluster_touched(touched, name, views) if views else None, reviews=reviews)))
    cache.save()
    removed = tuple(n for n in declared_clusters(source, base_sha) if n not in declared)
    return FleetPlan(tuple(plans), removed, tuple(warnings))


def _cluster_views(source: Any, commit: str) -> list[RepoConfig]:
    data = source.read_file(commit, CONFIG_PATH)
    config = parse_config(data).config if data is not None else None
    return list(config.views()) if config is not None and config.clusters else []


def _cluster_touched(touched: tuple[str, ...], cluster: str, views: list[RepoConfig]) -> tuple[str, ...]:
    """The touched files a cluster's section judges: those its paths select (in base or head), and those no
    cluster selects (gitopsq.yaml, policies, shared files elsewhere). A file of another cluster alone is judged
    in that cluster's section, so every touched file is judged at least once and the verdict is as strict."""
    own = [v for v in views if v.cluster == cluster]
    return tuple(p for p in touched if any(v.selects(p) for v in own) or not any(v.selects(p) for v in views))


def _cluster_plan(source: Any, cluster: str, base: tuple[str, str], head: tuple[str, str], *,
                  cache: DiskCache, policy_cache: ValidationCache, history: History, notes: list[str],
                  authors: list[str], kubeconfig: str | None, workloads: str | None, trace: str | None,
                  touched: tuple[str, ...] | None, reviews: Sequence[Mapping[str, Any]] | None = None) -> PrPlan:
    (base_rev, base_sha), (head_rev, head_sha) = base, head
    notes = list(notes)
    base_report = check_revision(source, base_sha, cache=cache, cluster=cluster or None, renderer=default_renderer())
    head_report = check_revision(source, head_sha, cache=cache, cluster=cluster or None, renderer=default_renderer())
    policies, judged = judge(source, head_sha, head_report, base=base_sha, base_report=base_report,
                             backend=backend_from_env(), cache=policy_cache, touched=touched,
                             review_approvals=reviews)
    if base_report.config is None and source.read_file(base_sha, CONFIG_PATH) is None:
        notes.append(f"the base revision has no {CONFIG_PATH}: every head object counts as added")
    elif cluster and base_report.config is not None and cluster not in base_report.config.cluster_names():
        notes.append(f"the base revision does not declare cluster {cluster}: every head object counts as added")
    base_settings, head_settings = settings_of(base_report.config), settings_of(head_report.config)
    impact_notes: list[str] = []
    current: tuple[CurrentWorkload, ...] | None = None
    if workloads is not None:
        current = from_trace(scenario_with_objects(workloads, base_report.objects).workloads)
        impact_notes.append(f"workloads from the snapshot file {workloads}")
    if kubeconfig is not None:
        try:
            current = (current or ()) + cluster_workloads(kubeconfig)
            impact_notes.append(f"workloads read from the cluster of {kubeconfig}")
        except ClusterError as err:
            impact_notes.append(f"the cluster of {kubeconfig} is unreachable ({err}): no impact from live workloads")
    impact = None
    if current is not None:
        impact = assess(base_report.objects, head_report.objects, current, base_settings=base_settings,
                        head_settings=head_settings)
    trace_impact = None
    if trace is not None:
        scenario = scenario_with_objects(trace, base_report.objects)
        trace_impact = compare_trace(scenario, base_report.objects, head_report.objects,
                                     base_settings=base_settings, head_settings=head_settings)
    return build_plan(repository=source.display, base_ref=base_rev, base_sha=base_sha, base=base_report,
                      head_ref=head_rev, head_sha=head_sha, head=head_report, touched_paths=judged, history=history,
                      policies=policies, notes=notes, impact=impact, trace=trace_impact, impact_notes=impact_notes,
                      authors=authors)


def _authors(source: Any, base: str, head: str) -> list[str]:
    """The e-mails of the authors of the pull request's own commits (merges aside); [] when unreadable."""
    try:
        return [c.author.email for c in source.commits_between(base, head) if not c.is_merge]
    except (SourceError, AttributeError, ValueError):
        return []


@click.command(name="plan")
@click.argument("repo")
@click.option("--base", "base_rev", required=True, help="The revision the pull request merges into.")
@click.option("--head", "head_rev", required=True, help="The pull request's revision.")
@click.option("--cluster", metavar="NAME", help="Plan only this cluster of gitopsq.yaml (default: every one; a "
              "kubeconfig file here is the deprecated form of --kubeconfig).")
@click.option("--kubeconfig", metavar="FILE", help="Read current Workloads from this cluster for the impact.")
@click.option("--workloads", metavar="FILE", help="Current workloads: the scenario `workloads` list (with admitted).")
@click.option("--trace", metavar="FILE", help="A scenario trace to replay on base and on head (waits per queue).")
@click.option("--output", "-o", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("--no-cache", is_flag=True, help="Parse every file again instead of reusing earlier results.")
@click.option("--post", is_flag=True, help="Also post the markdown plan on the pull request (or update it).")
@click.option("--forge", type=click.Choice(["gitea", "github", "gitlab"]),
              help="The forge hosting the pull request: its approving reviews count; --post writes there.")
@click.option("--forge-url", metavar="URL", help="The forge's base URL (default: GitHub's or GitLab's SaaS API).")
@click.option("--repo-slug", "--forge-repo", "repo_slug", metavar="OWNER/NAME",
              help="The repository on the forge (GitLab: the project path).")
@click.option("--pr", type=int, metavar="N", help="The pull (merge) request number.")
@click.option("--token-file", "--forge-token-file", "token_file", metavar="FILE",
              help="File holding the forge token (else $GITOPSQ_FORGE_TOKEN).")
@click.pass_context
def command(ctx: click.Context, *, repo: str, base_rev: str, head_rev: str, cluster: str | None,
            kubeconfig: str | None, workloads: str | None, trace: str | None, output: str, no_cache: bool, post: bool,
            forge: str | None, forge_url: str | None, repo_slug: str | None, pr: int | None,
            token_file: str | None) -> None:
    """What merging HEAD into BASE would change: object diff, quota table, policy verdicts, approvals, impact.

    A repository declaring clusters gets a section per cluster the change touches (docs/fleet.md). Exit 0 when
    the head revision passes check and no policy denies it (on every cluster), 1 when it does not, 2 for a usage
    error, 3 when the repository or a revision cannot be read or the forge refuses --post.
    """
    target = post_target(post, forge=forge, url=forge_url, slug=repo_slug, pr=pr, token_file=token_file)
    review = review_target(forge=forge, url=forge_url, slug=repo_slug, pr=pr, token_file=token_file)
    plan = make_fleet_plan(repo, base_rev, head_rev, cluster=cluster, kubeconfig=kubeconfig, workloads=workloads,
                           trace=trace, use_cache=not no_cache, review=review)
    for warning in plan.warnings:
        click.echo(f"gitopsq: warning: {warning}", err=True)
    rendered = {"json": fleet_json, "markdown": fleet_markdown}.get(output, fleet_text)(plan)
    click.echo(rendered, nl=not rendered.endswith("\n"))
    if target is not None:
        comment = post_plan(fleet_markdown(plan), target)
        click.echo(f"gitopsq: plan {'posted as' if comment.created else 'updated in'} comment {comment.id} on "
                   f"{target.slug}#{target.pr}", err=True)
    ctx.exit(plan.exit_code)

