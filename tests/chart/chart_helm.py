"""Rendering charts/gitopsq with the real Helm engine: the `helm` CLI that scripts/helm-prepare builds from the Go
module proxy (pinned version, cached under ~/.cache/gitopsq/helm)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "gitopsq"
REPO_URL = "https://git.example.com/platform/queues.git"


def helm_binary() -> str:
    """The cached helm (built on first use by scripts/helm-prepare; idempotent)."""
    explicit = os.environ.get("GITOPSQ_HELM")
    if explicit:
        return explicit
    done = subprocess.run([str(ROOT / "scripts" / "helm-prepare")], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/helm-prepare failed: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


@dataclass(frozen=True, slots=True)
class Rendered:
    objects: list[dict[str, Any]]

    def kinds(self) -> list[str]:
        return [o["kind"] for o in self.objects]

    def get(self, kind: str, name_suffix: str = "") -> dict[str, Any]:
        found = [o for o in self.objects if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)]
        assert len(found) == 1, f"expected one {kind} *{name_suffix}, got {[o['metadata']['name'] for o in found]}"
        return found[0]

    def has(self, kind: str) -> bool:
        return any(o["kind"] == kind for o in self.objects)

    @property
    def container(self) -> dict[str, Any]:
        spec = self.get("Deployment")["spec"]["template"]["spec"]
        return dict(spec["containers"][0])

    @property
    def pod(self) -> dict[str, Any]:
        return dict(self.get("Deployment")["spec"]["template"]["spec"])


class Helm:
    def __init__(self, binary: str, home: Path) -> None:
        self.binary = binary
        # keep helm's own config/cache/data out of the user's home
        self.env = {**os.environ, "HELM_CONFIG_HOME": str(home / "config"), "HELM_CACHE_HOME": str(home / "cache"),
                    "HELM_DATA_HOME": str(home / "data")}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.binary, *args], capture_output=True, text=True, env=self.env, check=False)

    def template(self, values: Mapping[str, Any] | None = None, *, release: str = "gitopsq",
                 namespace: str = "gitopsq-system", include_crds: bool = False,
                 with_repo: bool = True) -> subprocess.CompletedProcess[str]:
        merged: dict[str, Any] = {"repo": {"url": REPO_URL}} if with_repo else {}
        _merge(merged, dict(values or {}))
        args = ["template", release, str(CHART), "--namespace", namespace, "--values", "-"]
        if include_crds:
            args.append("--include-crds")
        return subprocess.run([self.binary, *args], input=json.dumps(merged), capture_output=True, text=True,
                              env=self.env, check=False)

    def render(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> Rendered:
        done = self.template(values, **kwargs)
        assert done.returncode == 0, f"helm template failed: {done.stderr}"
        return Rendered([d for d in yaml.safe_load_all(done.stdout) if d])


def _merge(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
