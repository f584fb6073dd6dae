"""What gitopsq asks of a forge, as one small typed interface (`Forge`) and the values it trades in.

Pure: no I/O here. The REST clients beside this module (gitea, github, gitlab) implement `Forge` over
`gitopsq.forge.http`; the controller and `gitopsq plan --post` depend only on this interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Protocol

# gitopsq's own commit-status vocabulary; each client maps it onto its forge's words (docs/source.md "Forges").
State = Literal["pending", "running", "success", "failure", "error"]
STATES: Final[tuple[State, ...]] = ("pending", "running", "success", "failure", "error")
FORGES: Final = ("gitea", "github", "gitlab")


@dataclass(frozen=True, slots=True)
class Approval:
    """One reviewer's standing approval of a pull request.

    ``commit`` is the revision the reviewer approved (None where the forge does not say: GitLab); ``at`` is the
    forge's ISO-8601 time of the approval (None where it cannot be read); ``email`` is the reviewer's e-mail when
    the forge shows it to the token's user (Gitea does unless the reviewer keeps it private; GitHub and GitLab
    do not), else None — a maintainer's ``forgeUser`` in gitopsq.yaml then names the reviewer's login.
    """

    reviewer: str
    at: str | None
    commit: str | None
    forge: str
    email: str | None = None
    via: str = "forge"  # "note": read from a signed approvals note (gitopsq.forge.notes), not the forge's API


@dataclass(frozen=True, slots=True)
class Status:
    """A commit status as the forge reports it, its state mapped back to gitopsq's words."""

    context: str
    state: State
    description: str
    target_url: str | None


@dataclass(frozen=True, slots=True)
class Comment:
    """A pull-request comment gitopsq wrote; ``created`` is False when an earlier one was updated in place."""

    id: int
    created: bool


class Forge(Protocol):
    """The forge calls gitopsq makes. Every method raises `gitopsq.forge.http.ForgeError` on failure."""

    name: str

    def set_status(self, sha: str, state: State, *, context: str, description: str,
                   target_url: str | None = None) -> None:
        """Set (or replace) the status named ``context`` on commit ``sha``."""
        ...

    def statuses(self, sha: str) -> tuple[Status, ...]:
        """The statuses set on ``sha``, newest first."""
        ...

    def upsert_comment(self, pr: int, marker: str, body: str) -> Comment:
        """Update the first comment of pull request ``pr`` that contains ``marker``, else create one."""
        ...

    def approvals(self, pr: int) -> tuple[Approval, ...]:
        """The standing approvals of pull request ``pr``: each reviewer's latest verdict, when it approves."""
        ...

    def pull_request_of(self, sha: str) -> int | None:
        """The number of the merged pull request whose merge (or squash) commit is ``sha``; None when none is."""
        ...


Review = tuple[str, str, str | None, str | None]  # reviewer, verdict (forge's word), time, commit


def latest_verdicts(reviews: list[Review]) -> dict[str, tuple[str, str | None, str | None]]:
    """Each reviewer's last verdict from ``(reviewer, verdict, at, commit)`` rows in the forge's order.

    Comments are not verdicts: a reviewer who approved and then only commented still approves.
    """
    out: dict[str, tuple[str, str | None, str | None]] = {}
    for reviewer, verdict, at, commit in reviews:
        if verdict in ("COMMENT", "COMMENTED", "PENDING", "REQUEST_REVIEW"):
            continue
        out[reviewer] = (verdict, at, commit)
    return out
