"""Kueue's own sample and example configurations (every YAML file of the Kueue module outside its CRDs, charts and
tests: today cmd/kueueviz/examples) go through check → render with every field kept: each Kueue configuration
object is accepted and rendered with all it holds (after the v1beta1 → v1beta2 conversion), or refused with a
finding naming its file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gitopsq.manifests.check_report import Report
from gitopsq.manifests.loader import REPO_KINDS, load_file
from gitopsq.manifests.render import render_documents
from tests.api.crd_strategies import differences, dump, kueue_crd_dir, to_v1beta2

SKIPPED_DIRS = {"components", "charts", "test", "testdata", "templates", "node_modules", "hack"}


def kueue_module() -> Path:
    return kueue_crd_dir().parents[3]  # <module>/config/components/crd/bases


def example_documents() -> list[tuple[str, dict[str, Any]]]:
    """(file:index, document) for every Kueue configuration object in the module's YAML outside SKIPPED_DIRS."""
    root = kueue_module()
    found: list[tuple[str, dict[str, Any]]] = []
    for file in sorted([*root.rglob("*.yaml"), *root.rglob("*.yml")]):
        relative = file.relative_to(root)
        if SKIPPED_DIRS & set(relative.parts[:-1]):
            continue
        try:
            documents = list(yaml.safe_load_all(file.read_text()))
        except yaml.YAMLError:
            continue  # not YAML (a template): nothing of Kueue's configuration to read
        for i, doc in enumerate(documents):
            if isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith("kueue.x-k8s.io/") and \
                    doc.get("kind") in REPO_KINDS:
                found.append((f"{relative}#{i}", doc))
    return found


EXAMPLES = example_documents()


def test_the_module_holds_examples_of_several_kinds() -> None:
    assert len(EXAMPLES) >= 10 and len({doc["kind"] for _, doc in EXAMPLES}) >= 5, [n for n, _ in EXAMPLES]


@pytest.mark.parametrize(("name", "doc"), EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_each_example_is_kept_field_for_field(name: str, doc: dict[str, Any]) -> None:
    if doc["kind"] == "LocalQueue" and "namespace" not in doc["metadata"]:
        # Kueue's examples leave it to ``kubectl apply -n``; a repository names it
        doc = {**doc, "metadata": {**doc["metadata"], "namespace": "default"}}
    path = "platform/" + name.replace("/", "_").replace("#", "-") + ".yaml"
    result = load_file(path, dump(doc))
    errors = [f for f in result.findings if f.is_error]
    for finding in errors:
        assert finding.location is not None and finding.location.path == path and finding.location.line, finding
    assert errors == [], f"{name} refused: {[str(f) for f in errors]}"
    text = render_documents(Report(None, None, result.entries, ()))
    assert differences(to_v1beta2(doc), yaml.safe_load(text)) == []
    assert [e.obj for e in load_file(path, text.encode()).entries] == [e.obj for e in result.entries]
