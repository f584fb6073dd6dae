"""A name means one ref, on every transport and with a cold or a warm cache: a branch and a tag of the same name
are refused (naming both), a full commit id is that commit even when a branch is named like it, and the
controller's ``--branch`` follows ``refs/heads/`` only.

Transports: a local repository read in place, ``file://``, ``git://`` (git daemon) and smart HTTP behind Basic
auth (git http-backend), all real. ssh resolves through the same code as every remote transport (the cache's
`RemoteMirror`: the remote's advertised refs, then gitopsq.source.refnames); the suite has no ssh server.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gitopsq.errors import UnknownRevisionError
from gitopsq.source import Credentials, GitSource, open_source

from .conftest import Daemon, GitRepo, HttpRemote, bare_clone, new_repo


class Published:
    """main: c1 → c2 → c3 (branch main at c3, a tag `main` at c1, a tag `v1` at c2, a branch named like c1's
    full id at c3, a branch `feature` at f1 on c2)."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self.c1 = repo.commit("first", {"a.yaml": "kind: ResourceFlavor\n"})
        self.c2 = repo.commit("second", {"b.yaml": "kind: ClusterQueue\n"})
        repo.git("tag", "-a", "v1", "-m", "release 1")
        self.c3 = repo.commit("third", {"c.yaml": "kind: LocalQueue\n"})
        repo.git("tag", "main", self.c1)  # beside branch main: whoever may push tags must not steer `main`
        repo.git("branch", self.c1, self.c3)  # a branch whose name is c1's full id
        repo.git("checkout", "-q", "-b", "feature", self.c2)
        self.f1 = repo.commit("feature", {"d.yaml": "kind: LocalQueue\n"})
        repo.git("checkout", "-q", "main")


@pytest.fixture
def published(repo: GitRepo) -> Published:
    return Published(repo)


Opener = Callable[[Published, Path], GitSource]


def _local(published: Published, cache: Path) -> GitSource:
    source = open_source(str(published.repo.path), cache_dir=cache)
    assert isinstance(source, GitSource) and not source.is_remote
    return source


def _file_url(published: Published, cache: Path) -> GitSource:
    bare = cache.parent / "bare.git"
    if not bare.exists():
        bare_clone(published.repo, bare)
    source = open_source(bare.as_uri(), cache_dir=cache)
    assert isinstance(source, GitSource) and source.is_remote
    return source


@pytest.fixture
def transports(published: Published, git_daemon: Daemon, http_remote: HttpRemote) -> dict[str, Opener]:
    bare_clone(published.repo, git_daemon.base / "queues.git")
    bare_clone(published.repo, http_remote.root / "queues.git")
    credentials = Credentials(token=http_remote.token, username=http_remote.user)

    def daemon(_: Published, cache: Path) -> GitSource:
        source = open_source(git_daemon.url("queues.git"), cache_dir=cache)
        assert isinstance(source, GitSource)
        return source

    def http(_: Published, cache: Path) -> GitSource:
        source = open_source(http_remote.url("queues.git"), cache_dir=cache, credentials=credentials, env={})
        assert isinstance(source, GitSource)
        return source

    return {"local": _local, "file": _file_url, "git": daemon, "http": http}


def warm(source: GitSource, published: Published) -> None:
    """Fill the cache as a controller running for a while would: every ref and commit fetched."""
    for rev in ("refs/heads/main", "refs/tags/main", "refs/heads/feature", "v1", published.c1):
        source.resolve(rev)
    source.commits_between(None, published.c3)


# (revision, the commit it means, or the refs an ambiguity names)
CASES: list[tuple[str, Callable[[Published], str], tuple[str, ...]]] = [
    ("<c1>", lambda p: p.c1, ()),  # a full id is that commit, not the branch named like it (at c3)
    ("feature", lambda p: p.f1, ()),
    ("v1", lambda p: p.c2, ()),
    ("refs/heads/main", lambda p: p.c3, ()),
    ("refs/tags/main", lambda p: p.c1, ()),
    ("main", lambda p: "", ("refs/heads/main", "refs/tags/main")),
    ("main~1", lambda p: "", ("refs/heads/main", "refs/tags/main")),
    ("<c2>", lambda p: p.c2, ()),  # a commit no ref points at
    ("feature~1", lambda p: p.c2, ()),
]


@pytest.mark.parametrize("cache_state", ["cold", "warm"])
@pytest.mark.parametrize("transport", ["local", "file", "git", "http"])
def test_a_name_means_one_ref_on_every_transport(published: Published, transports: dict[str, Opener],
                                                 tmp_path: Path, transport: str, cache_state: str) -> None:
    """Every case of CASES resolves alike on every transport, whatever the cache already holds."""
    ids = {"<c1>": published.c1, "<c2>": published.c2}
    for number, (name, expected, ambiguous) in enumerate(CASES):
        cache = tmp_path / f"cache-{number}"
        cache.mkdir()
        source = transports[transport](published, cache)
        if cache_state == "warm":
            warm(source, published)
        rev = ids.get(name, name)
        if ambiguous:
            with pytest.raises(UnknownRevisionError) as refused:
                source.resolve(rev)
            message = str(refused.value)
            assert f"ambiguous revision '{rev.split('~')[0]}'" in message, message
            assert all(ref in message for ref in ambiguous), message
        else:
            assert source.resolve(rev) == expected(published), rev


def test_the_controller_follows_the_branch_not_a_tag_pushed_beside_it(tmp_path: Path) -> None:
    """`--branch main` means refs/heads/main: a tag `main` pushed later at an older commit changes nothing, and
    the plain name is refused rather than resolved to the tag."""
    from gitopsq.source.refnames import branch_ref

    repo = new_repo(tmp_path)
    old = repo.commit("old", {"a.yaml": "kind: ResourceFlavor\n"})
    new = repo.commit("new", {"a.yaml": "kind: ResourceFlavor # v2\n"})
    bare = bare_clone(repo, tmp_path / "remote.git")
    source = open_source(bare.as_uri(), cache_dir=tmp_path / "cache")
    assert source.resolve(branch_ref("main")) == new
    pusher = GitRepo(repo.path, repo.home)
    pusher.git("tag", "main", old)
    pusher.git("push", "-q", str(bare), "refs/tags/main")
    assert source.resolve(branch_ref("main")) == new
    assert branch_ref("refs/heads/main") == "refs/heads/main"
    with pytest.raises(UnknownRevisionError, match="refs/heads/main and refs/tags/main"):
        source.resolve("main")
