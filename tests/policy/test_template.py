"""The repository template passes the built-in library: a fork starts from a revision every policy accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gitopsq.policy import SourcedObject, build_policy_input, evaluate, load_policies
from gitopsq.policy.repo import key_fingerprint

from .helpers import BACKENDS

TEMPLATE = Path(__file__).resolve().parents[2] / "repo-template"


def _objects() -> list[SourcedObject]:
    out = []
    for file in sorted([*TEMPLATE.glob("platform/**/*.yaml"), *TEMPLATE.glob("teams/**/*.yaml")]):
        for doc in yaml.safe_load_all(file.read_text(encoding="utf-8")):
            if doc:
                out.append(SourcedObject(file.relative_to(TEMPLATE).as_posix(), doc))
    return out


def _config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((TEMPLATE / "gitopsq.yaml").read_text(encoding="utf-8"))
    return config


def _platform_commit(config: dict[str, Any]) -> dict[str, Any]:
    platform = next(t for t in config["teams"] if t["name"] == config["platformTeam"])
    person = platform["maintainers"][0]
    return {"sha": "t3mpl4te", "author": {"name": person["name"], "email": person["email"]},
            "signature": {"state": "good", "kind": "ssh", "signer": person["email"],
                          "fingerprint": key_fingerprint(person["signingKeys"][0])}}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("signed", [False, True], ids=["working tree", "first commit signed by the platform team"])
def test_template_passes_the_library(backend: str, signed: bool) -> None:
    """Every object of repo-template is accepted by every built-in policy, with or without a commit."""
    config = _config()
    objects = _objects()
    commit = _platform_commit(config) if signed else None
    pi = build_policy_input([], objects, config, None, commit=commit, touched_paths={o.path for o in objects},
                            first_revision=True)
    verdicts = evaluate(load_policies(builtin=True), pi, backend)
    assert [str(v) for v in verdicts if not v.allowed] == []
    assert len({v.obj for v in verdicts}) > len(objects) // 2
