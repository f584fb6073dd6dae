"""Manifests (pure core): bytes of a revision → located Kueue objects, gitopsq.yaml, and Kueue's validation rules.

Public API (docs/check.md, docs/config.md):
    check_files(files, config_bytes, *, revision=None, blob_ids=None, cache=None) -> Report     pure
    check_revision(source, commit, *, cache=None) -> Report       through any object with the Source port's reads
    parse_config(data) -> ConfigResult                             gitopsq.yaml
    load_yaml(path, data) -> YamlFile                              documents with file and line for every field
    render_documents(report) -> str                                normalised v1beta2 multi-document YAML
"""

from gitopsq.manifests.check_report import LoadedObject, PassThrough, Report, finding_json
from gitopsq.manifests.config import ConfigResult, parse_config
from gitopsq.manifests.config_model import CONFIG_PATH, RepoConfig, Team, TrustZone
from gitopsq.manifests.loader import REPO_KINDS, FileResult, LoadSettings, load_file
from gitopsq.manifests.pipeline import DEFAULT_CACHE, ParseCache, check_files, check_revision, git_blob_id
from gitopsq.manifests.render import render_documents, render_order
from gitopsq.manifests.yamldoc import YamlDocument, YamlFile, YamlLimits, load_yaml

__all__ = [
    "CONFIG_PATH",
    "DEFAULT_CACHE",
    "REPO_KINDS",
    "ConfigResult",
    "FileResult",
    "LoadSettings",
    "LoadedObject",
    "ParseCache",
    "PassThrough",
    "RepoConfig",
    "Report",
    "Team",
    "TrustZone",
    "YamlDocument",
    "YamlFile",
    "YamlLimits",
    "check_files",
    "check_revision",
    "finding_json",
    "git_blob_id",
    "load_file",
    "load_yaml",
    "parse_config",
    "render_documents",
    "render_order",
]
