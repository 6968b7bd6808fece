"""The total-queue count over the histories of ``zk_worker`` processes and the queues' end state (pure).

As Jepsen's ``total-queue`` checker, ``count`` sorts every body: put by a commit that returned
(``put_ok``), then found committed away (in ``out``), dead-lettered, or still queued; anything else
is **lost**. Found anywhere without a put is **unexpected**, as is a body of a put whose commit was
refused (``put_aborted``: a refused commit created nothing). A body in ``out`` twice, or a returned
consumer commit (``commit_ok``) whose put is not in ``out``, breaks atomicity. Takes handed to user
code (``taken``) are counted per body over every process: a body taken again after a take that
*committed*, or that never ended in a process that was not killed, is a **bad redelivery** whatever
the policy; one after a take that ended without a commit (rolled back, refused, unanswered, or open
when its process was killed) is an allowed one,
and under ``ConsumeTimes(k)`` no body may be handed over more than ``k`` times.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

Event = dict[str, Any]

ENDS = {"rolled_back": "rolled back", "commit_ok": "committed", "commit_aborted": "aborted",
        "commit_unknown": "unknown"}
"""A consumer's events that end its open take of a body, and the outcome each gives."""


def read_history(path: str | Path) -> list[Event]:
    """The events of one history file; a torn last line (a write cut by SIGKILL) is dropped."""
    lines = Path(path).read_bytes().split(b"\n")
    return [json.loads(line) for line in lines[:-1] if line]


@attrs.frozen
class Take:
    """One hand-over of ``body`` to user code in process ``process``, and how that transaction ended."""

    process: str
    body: str
    takes: int
    """The item's take count as handed over: ZooKeeper's meta counts every take, so it orders a body's takes."""
    outcome: str
    """committed, rolled back, aborted, unknown, or open (no end: its process was killed or is still running)."""


@attrs.frozen
class FinalState:
    """The queues once quiet: bodies in ``out`` (repeats kept), left in ``in``, and in ``in``'s DLQ with their takes."""

    out: tuple[str, ...]
    remaining: tuple[str, ...]
    dead: tuple[tuple[str, int], ...]


@attrs.frozen
class Count:
    """What ``count`` found; ``ok`` when no promise was broken."""

    put: int
    put_ok: int
    consumed: int
    dead: int
    remaining: int
    takes: int
    redelivered: int
    lost: tuple[str, ...]
    unexpected: tuple[str, ...]
    double_commits: tuple[str, ...]
    lost_commits: tuple[str, ...]
    bad_redeliveries: tuple[str, ...]
    over_k: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.unexpected or self.double_commits or self.lost_commits
                    or self.bad_redeliveries or self.over_k)

    def summary(self) -> str:
        """One line of figures, as the tests print them."""
        return (f"put {self.put} (returned {self.put_ok}), consumed {self.consumed}, dead-lettered {self.dead}, "
                f"left {self.remaining}; {self.takes} takes, {self.redelivered} redelivered: "
                f"lost {len(self.lost)}, unexpected {len(self.unexpected)}, "
                f"double commits {len(self.double_commits)}, lost commits {len(self.lost_commits)}, "
                f"bad redeliveries {len(self.bad_redeliveries)}, over K {len(self.over_k)}")


def takes_of(histories: Mapping[str, Sequence[Event]]) -> list[Take]:
    """Every take handed to user code, with its outcome read from the same process's later events."""
    found: list[Take] = []
    for process, events in histories.items():
        open_takes: dict[str, list[int]] = {}  # body -> indexes into ``found`` of its open takes here
        for event in events:
            op = event["op"]
            if op == "taken":
                open_takes.setdefault(event["body"], []).append(len(found))
                found.append(Take(process, event["body"], event["takes"], "open"))
            elif op in ENDS:
                for index in open_takes.pop(event["body"], []):
                    found[index] = attrs.evolve(found[index], outcome=ENDS[op])
    return found


def count(histories: Mapping[str, Sequence[Event]], final: FinalState, *, killed: Iterable[str] = (),
          k: int | None = None) -> Count:
    """Count the histories against the end state. ``killed``: the processes killed with SIGKILL (a take
    they left open may come back); ``k``: the ``ConsumeTimes`` limit (None: at-least-once)."""
    put: set[str] = set()
    put_ok: set[str] = set()
    refused: set[str] = set()
    for events in histories.values():
        for event in events:
            match event["op"]:
                case "put":
                    put.update(event["bodies"])
                case "put_ok":
                    put_ok.update(event["bodies"])
                case "put_aborted":
                    refused.update(event["bodies"])
    takes = takes_of(histories)
    out = Counter(final.out)
    dead = {body for body, _ in final.dead}
    remaining = set(final.remaining)
    found = set(out) | dead | remaining
    everything = found | {take.body for take in takes}
    by_body: dict[str, list[Take]] = {}
    for take in sorted(takes, key=lambda take: take.takes):  # the item's own take count orders its takes
        by_body.setdefault(take.body, []).append(take)
    died = set(killed)
    bad_redeliveries = [body for body, list_ in by_body.items()
                        if any(take.outcome == "committed" or (take.outcome == "open" and take.process not in died)
                               for take in list_[:-1])]
    over_k: list[str] = []
    if k is not None:
        over_k = [body for body, list_ in by_body.items() if len(list_) > k]
        over_k += [body for body, takes_counted in final.dead if takes_counted > k and body not in over_k]
    committed = [take.body for take in takes if take.outcome == "committed"]
    return Count(
        put=len(put),
        put_ok=len(put_ok),
        consumed=len(out),
        dead=len(dead),
        remaining=len(remaining),
        takes=len(takes),
        redelivered=sum(len(list_) - 1 for list_ in by_body.values()),
        lost=_sorted(body for body in put_ok if body not in found),
        unexpected=_sorted(body for body in everything if body not in put or body in refused),
        double_commits=_sorted({body for body, times in out.items() if times > 1}
                               | {body for body in out if body in dead or body in remaining}
                               | {body for body, times in Counter(committed).items() if times > 1}),
        lost_commits=_sorted(body for body in committed if body not in out),
        bad_redeliveries=_sorted(bad_redeliveries),
        over_k=_sorted(over_k),
    )


def _sorted(bodies: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(bodies)))
