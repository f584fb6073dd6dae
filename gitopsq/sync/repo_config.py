"""What the controller reads from the repository itself at a commit: ``gitopsq.yaml``, its ``audit`` block and the
repository's own policies for the Job webhook. Every reader answers "nothing" rather than fail: the sync rejects a
revision whose configuration does not parse, with findings, on its own path."""

from __future__ import annotations

from gitopsq.errors import GitopsqError, PolicyError
from gitopsq.manifests.config import parse_config
from gitopsq.manifests.config_model import CONFIG_PATH, RepoConfig
from gitopsq.manifests.keyfiles import revision_reader
from gitopsq.policy import load_policies
from gitopsq.policy.language import Policy
from gitopsq.source.port import Source


def repo_config(source: Source, commit: str) -> RepoConfig | None:
    """The RepoConfig of gitopsq.yaml at ``commit`` (None when it cannot be read or parsed)."""
    try:
        entry = next(iter(source.list_files(commit, [CONFIG_PATH], [])), None)
        if entry is None:
            return None
        return parse_config(source.read_blob(entry.blob_id), read_file=revision_reader(source, commit)).config
    except (GitopsqError, ValueError, KeyError, AttributeError):
        return None


def job_policies(source: Source, commit: str) -> list[Policy]:
    """The repository's own policies (``policyPaths``) at ``commit``, for the Job webhook (those matching kind
    Job judge Jobs); [] when there are none or they do not load (the sync rejects such a revision anyway)."""
    config = repo_config(source, commit)
    if config is None or not config.policy_paths:
        return []
    try:
        listed = source.list_files(commit, list(config.policy_paths), [])
        files = {e.path: source.read_blob(e.blob_id).decode("utf-8", errors="replace") for e in listed
                 if e.path.endswith((".yaml", ".yml"))}
        return list(load_policies(builtin=False, repo_files=files))
    except (GitopsqError, PolicyError, ValueError):
        return []


def audit_config(source: Source, branch: str) -> dict[str, object]:
    """The ``audit`` block of gitopsq.yaml at the followed branch, or {} when it cannot be read."""
    try:
        config = repo_config(source, source.resolve(branch))
    except GitopsqError:
        return {}
    return dict(config.as_policy_dict()["audit"]) if config is not None else {}
