"""Fair sharing's admission order: a tournament on dominant resource shares (kueue.md §1.5 rule 2).

Within a cohort tree, at each cohort the candidates of its children are compared on (would not borrow first,
lower DRS of the child including the candidate, higher priority, older); one winner is processed at a time and
shares are recomputed before the next is chosen.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gitopsq.admission.dominant_share import chain, drs
from gitopsq.admission.entry import Entry
from gitopsq.admission.quota import QuotaNode, QuotaTree
from gitopsq.admission.topology import Topology


def tournament(tree: QuotaTree, topology: Topology, entries: list[Entry]) -> Iterator[Entry]:
    """Yield entries in fair-sharing order, recomputing shares after each one is processed (rule 2).

    ``entries`` is consumed in place: entries the caller appends while iterating join the tournament.
    """
    remaining = entries
    while remaining:
        by_root: dict[str, list[Entry]] = {}
        for e in remaining:
            root = tree.queues[e.spec.name].root()
            by_root.setdefault(f"{int(root.is_cohort)}/{root.name}", []).append(e)
        first_root = sorted(by_root)[0]
        group = by_root[first_root]
        winner = _winner(tree, topology, group)
        remaining.remove(winner)
        yield winner


@dataclass(slots=True)
class _Contender:
    """An entry with, from the root down, the node of its path below each cohort and that node's standing."""

    entry: Entry
    path: list[QuotaNode]
    standing: list[tuple[int, tuple[int, float]]]  # (would borrow, DRS rank with the entry's usage) per path node


def _contender(tree: QuotaTree, topology: Topology, e: Entry) -> _Contender:
    usage = e.nomination.usage if e.nomination else {}
    path = list(reversed(chain(tree.queues[e.spec.name])[:-1]))
    standing = [(1 if any(n.borrowing_with(fr, v) for fr, v in usage.items()) else 0, drs(n, topology, usage).rank)
                for n in path]
    return _Contender(e, path, standing)


def _less(a: _Contender, b: _Contender, depth: int) -> bool:
    """Whether ``a`` beats ``b`` where their paths part (``depth``): preemptor first, then not borrowing and the
    lower share of the node at that depth, then priority and queue order (Kueue's entryComparer)."""
    if a.entry.preemptor != b.entry.preemptor:
        return a.entry.preemptor
    if depth < len(a.standing) and depth < len(b.standing) and a.standing[depth] != b.standing[depth]:
        return a.standing[depth] < b.standing[depth]
    wa, wb = a.entry.w, b.entry.w
    return (-wa.priority, wa.created, wa.seq) < (-wb.priority, wb.created, wb.seq)


def _tournament(contenders: list[_Contender], depth: int) -> _Contender:
    """Kueue's runTournament: every child of the cohort at ``depth`` puts up its own winner (recursively), and
    the winners are compared on the standing of those children. A linear scan is not the same: a queue that
    loses inside its cohort must not win against another cohort."""
    if len(contenders) == 1:
        return contenders[0]
    by_child: dict[int, list[_Contender]] = {}
    for c in contenders:
        by_child.setdefault(id(c.path[depth]), []).append(c)
    finalists = []
    for members in by_child.values():
        if len(members) > 1 and all(depth + 1 < len(m.path) for m in members):
            finalists.append(_tournament(members, depth + 1))
            continue
        best = members[0]  # one queue's entries (look-ahead): its own order decides
        for m in members[1:]:
            if _less(m, best, len(m.path)):
                best = m
        finalists.append(best)
    best = finalists[0]
    for c in finalists[1:]:
        if _less(c, best, depth):
            best = c
    return best


def _winner(tree: QuotaTree, topology: Topology, group: list[Entry]) -> Entry:
    return _tournament([_contender(tree, topology, e) for e in group], 0).entry
