"""A name means one ref on a real forge: the history of tests/source/test_ref_names.py (a branch and a tag both
named `main`, a branch named like a full commit id) pushed to a real Gitea and read over its smart HTTP with a
user's token, with a cold and a warm cache, resolves exactly as in a local repository."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from forge_rig import GiteaRig
from source.conftest import new_repo
from source.test_ref_names import CASES, Published, warm

from gitopsq.errors import UnknownRevisionError
from gitopsq.source import Credentials, open_source

from .scene import ORG, _ensure_org

NAME = "ref-names"


@pytest.fixture(scope="module")
def pushed(gitea: GiteaRig, tmp_path_factory: pytest.TempPathFactory) -> tuple[Published, str]:
    """The history pushed with every branch and tag to ``platform/ref-names``; returns it and the clone URL."""
    _ensure_org(gitea)
    status, body = gitea.api("forge-admin", "POST", f"/orgs/{ORG}/repos",
                             {"name": NAME, "auto_init": False, "default_branch": "main"})
    assert status == 201, body
    published = Published(new_repo(tmp_path_factory.mktemp(NAME)))
    published.repo.git("push", "-q", gitea.push_url("forge-admin", ORG, NAME), "refs/heads/*:refs/heads/*",
                       "refs/tags/*:refs/tags/*")
    for _ in range(100):  # Gitea records pushed refs through its queue
        status, body = gitea.api("forge-admin", "GET", f"/repos/{ORG}/{NAME}/branches/main")
        if status == 200 and body["commit"]["id"] == published.c3:
            break
        time.sleep(0.1)
    return published, f"{gitea.url}/{ORG}/{NAME}.git"


@pytest.mark.parametrize("cache_state", ["cold", "warm"])
def test_a_name_means_one_ref_on_gitea(gitea: GiteaRig, pushed: tuple[Published, str], tmp_path: Path,
                                       cache_state: str) -> None:
    """Every case of the local table, over Gitea's HTTP with the member's token."""
    published, url = pushed
    user = gitea.users["member"]
    credentials = Credentials(token=user.token, username="member")
    ids = {"<c1>": published.c1, "<c2>": published.c2}
    for number, (name, expected, ambiguous) in enumerate(CASES):
        source = open_source(url, cache_dir=tmp_path / f"cache-{number}", credentials=credentials, env={})
        if cache_state == "warm":
            warm(source, published)
        rev = ids.get(name, name)
        if ambiguous:
            with pytest.raises(UnknownRevisionError) as refused:
                source.resolve(rev)
            assert all(ref in str(refused.value) for ref in ambiguous), refused.value
        else:
            assert source.resolve(rev) == expected(published), rev
