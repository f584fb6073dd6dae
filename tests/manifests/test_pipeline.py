"""The revision pipeline: per-blob reuse, rendering order, determinism and round trip."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml

from gitopsq.manifests import ParseCache, check_files, git_blob_id, render_documents
from gitopsq.source import open_directory

TEMPLATE = Path(__file__).resolve().parents[2] / "repo-template"


class CountingFiles(Mapping[str, bytes]):
    """A revision's files that records which ones the pipeline actually read."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.read: list[str] = []

    def __getitem__(self, path: str) -> bytes:
        self.read.append(path)
        return self.files[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


def template_files() -> tuple[dict[str, bytes], bytes]:
    source = open_directory(TEMPLATE)
    entries = source.list_files("WORKTREE", ["**"])
    files = {e.path: source.read_blob(e.blob_id) for e in entries}
    return files, files["gitopsq.yaml"]


def test_template_is_clean() -> None:
    """The repository template passes every rule with no error and no warning."""
    files, config = template_files()
    report = check_files(files, config, cache=ParseCache())
    assert report.findings == ()
    assert len(report.entries) >= 20


def test_unchanged_blobs_are_not_read_again() -> None:
    """With blob ids and a warm cache, only the changed file's bytes are read and parsed."""
    files, config = template_files()
    cache = ParseCache()
    ids = {p: git_blob_id(b) for p, b in files.items()}
    check_files(CountingFiles(files), config, blob_ids=ids, cache=cache)
    changed = dict(files)
    path = "teams/serving/cluster-queue.yaml"
    changed[path] = files[path].replace(b'nominalQuota: "128"', b'nominalQuota: "120"')
    counting = CountingFiles(changed)
    report = check_files(counting, config, blob_ids={p: git_blob_id(b) for p, b in changed.items()}, cache=cache)
    assert counting.read == [path]
    assert report.ok


def test_cached_result_equals_fresh_result() -> None:
    """A check served from the cache reports exactly what a fresh check reports."""
    files, config = template_files()
    files["teams/serving/local-queues.yaml"] += b"---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\n" \
                                               b"metadata: {name: x, namespace: serving}\nspec: {clusterQueue: nope}\n"
    cache = ParseCache()
    first = check_files(files, config, cache=cache)
    second = check_files(files, config, cache=cache)
    fresh = check_files(files, config, cache=ParseCache())
    assert first.findings == second.findings == fresh.findings
    assert first.objects == second.objects == fresh.objects
    assert [f.code for f in fresh.findings] == ["unknown-cluster-queue"]


def test_same_bytes_at_two_paths_are_located_separately() -> None:
    """The cache key includes the path, so a copied file reports its own location."""
    files, config = template_files()
    files["teams/serving/copy.yaml"] = files["teams/serving/local-queues.yaml"]
    report = check_files(files, config, cache=ParseCache())
    paths = {f.location.path for f in report.findings if f.code == "duplicate-object" and f.location}
    assert paths == {"teams/serving/local-queues.yaml"}


def test_git_blob_id_matches_git() -> None:
    """git_blob_id gives Git's own object id (the empty blob's well-known id)."""
    assert git_blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def test_render_orders_kinds_for_apply_and_is_deterministic() -> None:
    """Namespaces first, then priority classes, flavors, cohorts, ClusterQueues, LocalQueues; same bytes twice."""
    files, config = template_files()
    report = check_files(files, config, cache=ParseCache())
    text = render_documents(report)
    assert text == render_documents(check_files(dict(reversed(files.items())), config, cache=ParseCache()))
    kinds = [d["kind"] for d in yaml.safe_load_all(text)]
    order = ["Namespace", "WorkloadPriorityClass", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"]
    assert [k for k in order if k in kinds] == order
    assert kinds == sorted(kinds, key=order.index)


def test_render_round_trips() -> None:
    """Rendered manifests, checked again, give equal objects and no findings."""
    files, config = template_files()
    report = check_files(files, config, cache=ParseCache())
    again = check_files({"platform/all.yaml": render_documents(report).encode()}, config, cache=ParseCache())
    assert again.findings == ()
    assert sorted(again.objects, key=repr) == sorted(report.objects, key=repr)
    assert {d["apiVersion"] for d in yaml.safe_load_all(render_documents(again))} <= {
        "v1", "kueue.x-k8s.io/v1beta2"}
