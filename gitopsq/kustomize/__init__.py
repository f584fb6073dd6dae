"""The kustomize binary behind `gitopsq.manifests.kustomize_build.KustomizeRenderer` (imperative shell).

Public API (docs/kustomize.md):
    default_renderer() -> KustomizeBinary | None     the pinned build, else kustomize or kubectl on PATH
    KustomizeBinary(command).build(files, directory) -> BuildResult
"""

from gitopsq.kustomize.runner import PINNED_VERSION, KustomizeBinary, default_renderer, find_command

__all__ = ["PINNED_VERSION", "KustomizeBinary", "default_renderer", "find_command"]
