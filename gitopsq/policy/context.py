"""Build the `PolicyInput` for a revision: changes, ``repo``, ``commit``, ``actor`` and ``aggregate``.

The same builder serves ``gitopsq check``, the PR plan, the sync loop and ``gitopsq policy test``, so a policy
sees exactly the same context everywhere.

Identity (``actor``) comes from the commit. A signature the source layer verified (state ``good``) binds the
commit to the maintainer whose signing key has that fingerprint in ``gitopsq.yaml``; the author's e-mail is
only a claim, used when there is no bound signature. Git alone would accept any allowed key for any committer:
here the key decides the team, whatever the author or committer fields say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gitopsq.api.quantity import QuantityError, format_milli, parse_quantity
from gitopsq.policy.budget_sums import aggregate_budgets
from gitopsq.policy.forge_merge import forge_of, review_block, vouching_maintainers
from gitopsq.policy.language import Change, ObjectKey, Operation, PolicyInput, SourcedObject
from gitopsq.policy.repo import normalise_repo_config, teams_of_email, teams_of_fingerprint
from gitopsq.policy.revision_changes import desired_by_kind, diff_revisions, find_duplicates

CONFIG_PATH = "gitopsq.yaml"
CONFIG_KEY = ObjectKey("gitopsq.dev", "RepositoryConfig", "", CONFIG_PATH)
QUOTA_KINDS = ("ClusterQueue", "Cohort")


def _person(raw: Any) -> dict[str, str]:
    raw = raw if isinstance(raw, Mapping) else {}
    return {"name": str(raw.get("name") or ""), "email": str(raw.get("email") or "").lower()}


def normalise_commit(raw: Mapping[str, Any], repo: Mapping[str, Any]) -> dict[str, Any]:
    """The ``commit`` variable, with the verified signer resolved to a maintainer of ``repo`` (or null)."""
    found = raw.get("signature")
    sig: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    state = str(sig.get("state") or "unsigned")
    fingerprint = str(sig.get("fingerprint") or "")
    maintainer, teams = teams_of_fingerprint(repo, fingerprint) if state == "good" else (None, [])
    forge = forge_of(str(sig.get("signer") or "")) if state == "good" and maintainer is None else ""
    approved_by: list[str] = []
    if forge:  # the forge's own key: the commit stands for whoever approved it in the forge
        maintainer, teams, approved_by = vouching_maintainers(raw.get("forgeApprovals"),
                                                              _person(raw.get("author"))["email"], repo)
    return {
        "sha": str(raw.get("sha") or ""),
        "author": _person(raw.get("author")),
        "committer": _person(raw.get("committer")),
        "message": str(raw.get("message") or ""),
        "signature": {
            "state": state,
            "kind": str(sig.get("kind") or ""),
            "signer": str(sig.get("signer") or ""),
            "fingerprint": fingerprint,
            "reason": str(sig.get("reason") or ""),
            "maintainer": None if maintainer is None else {"name": maintainer["name"], "email": maintainer["email"]},
            "teams": teams,
            "forge": forge,
            "approvedBy": approved_by,
        },
        "changedPaths": sorted(str(p) for p in raw.get("changedPaths") or []),
        "review": review_block(raw.get("reviewApprovals"), _person(raw.get("author"))["email"], repo),
    }


def actor_of(commit: Mapping[str, Any], repo: Mapping[str, Any]) -> dict[str, Any]:
    """Who made the change: the bound signer when there is one, else the author's claimed identity."""
    sig = commit["signature"]
    if sig["maintainer"] is not None:
        teams, email, verified = list(sig["teams"]), sig["maintainer"]["email"], True
    else:
        email, verified = commit["author"]["email"], False
        teams = teams_of_email(repo, email)
    review = commit.get("review")
    if review is not None:  # a pull request under review: its approvers' teams stand behind the change too
        teams = teams + [t for t in review["teams"] if t not in teams]
    actor = {"email": email, "teams": teams, "verified": verified,
             "platform": bool(repo.get("platformTeam")) and repo.get("platformTeam") in teams}
    if review is not None:  # rules can say whose approval the pull request still awaits
        actor["underReview"] = True
    return actor


def aggregate_quota(objects: Iterable[SourcedObject]) -> dict[str, Any]:
    """Nominal quota summed per flavor and resource over ClusterQueues and Cohorts, with who contributes.

    Computed in Python because CEL has no fold and cel-cpp bounds comprehensions; policies compare the sums.
    Quantities that do not parse are skipped here (the manifest validator reports them).
    """
    totals: dict[tuple[str, str], int] = {}
    contributors: dict[tuple[str, str], list[str]] = {}
    for item in sorted(objects, key=lambda o: (o.path, o.line or 0, o.key)):
        if item.key.kind not in QUOTA_KINDS:
            continue
        spec = item.object.get("spec")
        for group in (spec.get("resourceGroups") if isinstance(spec, Mapping) else None) or []:
            for flavor in (group.get("flavors") if isinstance(group, Mapping) else None) or []:
                for resource in (flavor.get("resources") if isinstance(flavor, Mapping) else None) or []:
                    if not isinstance(resource, Mapping):
                        continue
                    try:
                        milli = parse_quantity(resource.get("nominalQuota", 0)).milli
                    except QuantityError:
                        continue
                    cell = (str(flavor.get("name") or ""), str(resource.get("name") or ""))
                    totals[cell] = totals.get(cell, 0) + milli
                    contributors.setdefault(cell, []).append(f"{item.key} ({item.path})")
    quotas: list[dict[str, Any]] = [
        {"flavor": f, "resource": r, "nominalQuota": format_milli(totals[(f, r)]),
         "contributors": contributors[(f, r)]} for f, r in sorted(totals)]
    nominal: dict[str, dict[str, str]] = {}
    for f, r in sorted(totals):
        nominal.setdefault(f, {})[r] = format_milli(totals[(f, r)])
    return {"nominalQuota": nominal, "quotas": quotas}


def _raw(config: Any) -> Mapping[str, Any] | None:
    """The file as written: a parsed `RepoConfig` (one cluster's view, docs/fleet.md) carries its raw mapping."""
    if config is not None and not isinstance(config, Mapping) and hasattr(config, "as_policy_dict"):
        raw: Mapping[str, Any] = config.raw
        return raw
    return config  # type: ignore[no-any-return]


def _config_change(repo_raw: Mapping[str, Any] | None, previous_raw: Mapping[str, Any] | None,
                   touched: frozenset[str], first_revision: bool) -> Change | None:
    if first_revision:
        return Change(Operation.CREATE, CONFIG_PATH, CONFIG_KEY, dict(repo_raw or {}), None, 1)
    if CONFIG_PATH in touched or (previous_raw is not None and dict(previous_raw) != dict(repo_raw or {})):
        return Change(Operation.UPDATE, CONFIG_PATH, CONFIG_KEY, dict(repo_raw or {}), dict(previous_raw or {}), 1)
    return None


def _file_change(path: str) -> Change:
    obj = {"apiVersion": "gitopsq.dev/v1alpha1", "kind": "File", "metadata": {"name": path}}
    return Change(Operation.UPDATE, path, ObjectKey("gitopsq.dev", "File", "", path), obj, obj, None)


def build_policy_input(
    old_objects: Iterable[SourcedObject],
    new_objects: Iterable[SourcedObject],
    repo_config: Mapping[str, Any] | Any | None,
    previous_repo_config: Mapping[str, Any] | Any | None = None,
    *,
    commit: Mapping[str, Any] | None = None,
    commits: Sequence[Mapping[str, Any]] = (),
    touched_paths: Iterable[str] = (),
    first_revision: bool = False,
) -> PolicyInput:
    """Everything policies need for one revision.

    ``old_objects``/``new_objects`` are the objects of the previous accepted revision and of the new one;
    ``repo_config`` and ``previous_repo_config`` the raw ``gitopsq.yaml`` dicts (or parsed `RepoConfig`
    views of one cluster, whose policy form is that cluster's); ``commit`` the head commit as
    a dict (sha, author, committer, signature{state, kind, signer, fingerprint, reason}, changedPaths) or None
    when there is no commit (a working tree); ``commits`` every commit the revision brings, oldest first,
    each with its ``changedPaths`` (the head defaults to the last one); ``touched_paths`` every file the
    revision changed (a file without objects, such as a policy file, becomes a ``File`` change so ownership
    rules see it).
    ``first_revision`` says there is no previous accepted revision: ``gitopsq.yaml`` itself is then a CREATE.
    """
    new_list = list(new_objects)
    old_list = list(old_objects)
    touched = frozenset(touched_paths)
    repo = normalise_repo_config(repo_config)
    previous = None if previous_repo_config is None else normalise_repo_config(previous_repo_config)
    changes = diff_revisions(old_list, new_list)
    config = _config_change(_raw(repo_config), _raw(previous_repo_config), touched, first_revision)
    if config is not None:
        changes.insert(0, config)
    covered = {c.path for c in changes} | {c.old_path for c in changes if c.old_path}
    changes.extend(_file_change(p) for p in sorted(touched - covered - {CONFIG_PATH}))
    # Identity is bound with the trust model already accepted: a revision cannot vouch for itself.
    trust = previous if previous is not None else repo
    head = commit if commit is not None else (commits[-1] if commits else None)
    commit_value = None if head is None else normalise_commit(head, trust)
    # Each commit carries its own ``actor``, so rules can judge every commit that touched a path, not the head's.
    all_commits = tuple({**(n := normalise_commit(c, trust)), "actor": actor_of(n, trust)} for c in commits) \
        if commits else (() if commit_value is None else ({**commit_value, "actor": actor_of(commit_value, trust)},))
    return PolicyInput(
        changes=tuple(changes),
        desired=desired_by_kind(new_list),
        repo=repo,
        previous_repo=previous,
        commit=commit_value,
        commits=all_commits,
        touched_paths=touched,
        duplicates=find_duplicates(new_list),
        actor=None if commit_value is None else actor_of(commit_value, trust),
        aggregate={**aggregate_quota(new_list), "budgets": aggregate_budgets(new_list)},
    )
