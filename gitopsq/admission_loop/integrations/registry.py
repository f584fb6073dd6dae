"""The integrations gitopsq knows, by Kueue's framework name, and the choice of the ones a controller runs.

`REGISTRY` is the one list: the watch cache's informers, the chart's RBAC rules (tests/test_integration_registry
checks charts/gitopsq/templates/rbac.yaml against `rbac_rules`), the job webhook's rules and the event
recorder's apiVersions all come from it. `select` turns ``--integrations`` (the chart's ``integrations:``) into
integrations; an empty choice means ``batch/job``, as Kueue's empty ``integrations.frameworks`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from gitopsq.admission_loop.integrations.base import Integration, Rule
from gitopsq.admission_loop.integrations.batch_job import BatchJob
from gitopsq.admission_loop.integrations.jobset import JobSet
from gitopsq.admission_loop.integrations.pod import Pod
from gitopsq.admission_loop.integrations.raycluster import RayCluster
from gitopsq.admission_loop.integrations.rayjob import RayJob
from gitopsq.admission_loop.integrations.trainjob import TrainJob
from gitopsq.cluster.kinds import Kind
from gitopsq.errors import UsageError

REGISTRY: Final[tuple[Integration, ...]] = (BatchJob(), JobSet(), TrainJob(), RayJob(), RayCluster(), Pod())
BY_FRAMEWORK: Final[Mapping[str, Integration]] = {i.framework: i for i in REGISTRY}
DEFAULT_FRAMEWORKS: Final[tuple[str, ...]] = ("batch/job",)
Refusals = Callable[[Mapping[str, object]], list[str]]  # a job as the job webhook reads it


def select(names: Sequence[str]) -> tuple[Integration, ...]:
    """The integrations named (Kueue's names, registry order); a name gitopsq does not know is a usage error
    that lists the known ones."""
    wanted = [n.strip() for n in names if n.strip()] or list(DEFAULT_FRAMEWORKS)
    unknown = [n for n in wanted if n not in BY_FRAMEWORK]
    if unknown:
        raise UsageError(f"--integrations: unknown framework(s) {', '.join(unknown)}; known: "
                         f"{', '.join(BY_FRAMEWORK)}")
    return tuple(i for i in REGISTRY if i.framework in wanted)


def parse(text: str) -> tuple[Integration, ...]:
    """``--integrations batch/job,jobset.x-k8s.io/jobset`` → integrations."""
    return select(text.split(","))


def rbac_rules(integrations: Iterable[Integration] = REGISTRY) -> list[Rule]:
    """Every rule the integrations need, merged per (group, resource): one verb set each."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for integration in integrations:
        for rule in integration.rules:
            for resource in rule.resources:
                verbs.setdefault((rule.group, resource), set()).update(rule.verbs)
    return [Rule(group, (resource,), tuple(sorted(v))) for (group, resource), v in sorted(verbs.items())]


def owner_kinds(integrations: Iterable[Integration] = REGISTRY) -> frozenset[tuple[str, str]]:
    """(group, kind) of every integration: an object whose controller is one of these may be a managed child."""
    return frozenset((i.group, i.kind) for i in integrations)


def spec_label_kinds(integrations: Iterable[Integration]) -> frozenset[tuple[str, str]]:
    """(group, kind) of the integrations whose queue label the job webhook also writes into ``spec.labels``
    (``queue_label_in_spec``: a TrainJob, whose labels there Trainer copies onto its JobSet and pods)."""
    return frozenset((i.group, i.kind) for i in integrations if getattr(i, "queue_label_in_spec", False))


def refusals(integrations: Iterable[Integration]) -> dict[tuple[str, str], Refusals]:
    """(group, kind) → the integration's ``refusals`` (why the job webhook refuses a queued job of that kind), for
    the integrations that have one (optional: an integration without it refuses nothing)."""
    out: dict[tuple[str, str], Refusals] = {}
    for integration in integrations:
        judge = getattr(integration, "refusals", None)
        if judge is not None:
            out[(integration.group, integration.kind)] = judge
    return out


def webhook_kinds(integrations: Iterable[Integration]) -> tuple[Kind, ...]:
    """The job kinds the job webhook serves for ``integrations`` (`gitopsq.webhook.certs.webhook_configurations`)."""
    return tuple(i.kind_info for i in integrations if i.webhook)
