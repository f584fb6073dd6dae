"""A nominated head on its way through one scheduling cycle: what nomination found, what the cycle does with it.

A leaf below the cycle, the nomination, the tournament and the state (which remembers entries across cycles), so
none of them has to import another to name the type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gitopsq.admission.flavors import Nomination
from gitopsq.admission.preemption import Target
from gitopsq.admission.quota import FlavorResource
from gitopsq.admission.topology import QueueSpec
from gitopsq.admission.workload import WorkloadInfo


class EntryKind(StrEnum):
    """Nomination's verdict on a head (Kueue's entry status after ``nominate``)."""

    FIT = "Fit"  # fits as it is: the cycle admits it if it still fits when its turn comes
    PREEMPT = "Preempt"  # fits once its targets are gone: the cycle reserves its quota and preempts them
    NO_FIT = "NoFit"  # neither: it waits with a reason (and may hold capacity for the rest of the cycle)


FIT, PREEMPT, NO_FIT = EntryKind.FIT, EntryKind.PREEMPT, EntryKind.NO_FIT


@dataclass(slots=True)
class Entry:
    w: WorkloadInfo
    spec: QueueSpec
    kind: EntryKind
    nomination: Nomination | None = None
    targets: list[Target] = field(default_factory=list)
    reason: str = ""
    message: str = ""
    always_inadmissible: bool = False  # namespace mismatch: not retried even by StrictFIFO
    reserve: dict[FlavorResource, int] = field(default_factory=dict)
    preemptor: bool = False  # issued preemptions last cycle and PrioritizePreemptorWorkloads is on: goes first
    generation: int = 0  # of the ClusterQueue when nominated (decides whether the flavor scan may resume)
    resumed: bool = False  # the flavor scan started after the first flavor somewhere (Kueue's LastAssignment)

    def order_key(self) -> tuple[int, int, int, float, int]:
        borrow = self.nomination.borrow if self.nomination else 0
        return (0 if self.preemptor else 1, borrow, -self.w.priority, self.w.created, self.w.seq)

    def copy(self) -> Entry:
        """This entry as nomination made it, for a cycle to change without changing this one: `preemptor`, the one
        field a cycle sets (`cycle._nominate_heads`), starts unset as in a fresh nomination."""
        return Entry(self.w, self.spec, self.kind, nomination=self.nomination, targets=list(self.targets),
                     reason=self.reason, message=self.message, always_inadmissible=self.always_inadmissible,
                     reserve=dict(self.reserve), generation=self.generation, resumed=self.resumed)
