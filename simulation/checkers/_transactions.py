"""Checkers for transactions (seed 004), judged from the clients' history in the trace, not the store's account.

The history is what the clients sent and heard: ``Taken`` answers delivered to a session, the
``CommitTx`` requests the store received and their ``TxCommitted`` answers (delivered, or dead
letters when the session had died meanwhile), and ``RollbackTx(handed_over=False)`` that gave a
take back uncounted. The end state (``TxFinal``: every queue's items, DLQs and lock counts, read
once the run was quiet) is only compared with what that history allows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, final

import attrs

from conveyor.actors.transactions import (
    CommitTx,
    ConsumePolicy,
    ConsumeTimes,
    DeadLetter,
    ItemKey,
    RollbackTx,
    Taken,
    TxCommitted,
)
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult

Owner = tuple[str, int]


def _by_queue(value: Mapping[str, Any] | tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """A mapping of queue name to value as a sorted tuple of pairs (an immutable note)."""
    return tuple(sorted(dict(value).items()))


@final
@attrs.frozen
class TxFinal:
    """The store at the end of a quiet run, per queue (as sorted pairs): items (key, body), dead letters, locks."""

    items: tuple[tuple[str, tuple[tuple[ItemKey, bytes], ...]], ...] = attrs.field(converter=_by_queue)
    dead: tuple[tuple[str, tuple[DeadLetter, ...]], ...] = attrs.field(converter=_by_queue)
    locked: tuple[tuple[str, int], ...] = attrs.field(converter=_by_queue)
    left_while_served: tuple[ItemKey, ...] | None = None
    """Items of the consumed queue still there long after the last put while a consumer still served it
    (None: no consumer was left to serve it)."""

    def present(self) -> set[ItemKey]:
        """Every item still in a queue."""
        return {key for _, items in self.items for key, _ in items}

    def dead_letters(self) -> list[DeadLetter]:
        """Every dead letter of every queue."""
        return [letter for _, letters in self.dead for letter in letters]


@final
@attrs.define
class TxHistory:
    """What the clients' side of the trace shows, in trace order."""

    taken: list[tuple[int, Owner, ItemKey, bytes]] = attrs.field(factory=list)
    """(event index, owner, key, body) of each ``Taken`` a session received."""
    commits: dict[Owner, tuple[int, CommitTx]] = attrs.field(factory=dict)
    """Each commit request the store received, with its event index."""
    committed: dict[Owner, TxCommitted] = attrs.field(factory=dict)
    """The commits the store answered ``TxCommitted`` (to a live session or a dead one)."""
    uncounted: set[Owner] = attrs.field(factory=set)
    """Transactions whose takes were handed back without reaching user code."""
    rolled_back: dict[Owner, int] = attrs.field(factory=dict)
    """The event index of each transaction's first rollback request the store received."""

    def created(self) -> dict[ItemKey, tuple[bytes, Owner]]:
        """Every item a committed transaction created: key -> (body, creator)."""
        made: dict[ItemKey, tuple[bytes, Owner]] = {}
        for owner, answer in self.committed.items():
            request = self.commits.get(owner)
            if request is None:
                continue
            for key, put in zip(answer.created, request[1].puts, strict=False):
                made[key] = (put.body, owner)
        return made


def tx_history(trace: list[TraceEvent], store: str) -> TxHistory:
    """Read the transaction traffic with the store at path ``store`` out of ``trace``."""
    history = TxHistory()
    for index, event in enumerate(trace):
        message = event.message
        kind = event.kind
        if kind is EventKind.DELIVERED and event.receiver == store:
            if type(message) is CommitTx:
                history.commits[(message.session.path, message.tx)] = (index, message)
            elif type(message) is RollbackTx:
                owner = (message.session.path, message.tx)
                history.rolled_back.setdefault(owner, index)
                if not message.handed_over:
                    history.uncounted.add(owner)
        elif kind in (EventKind.DELIVERED, EventKind.DEAD_LETTER) and event.sender == store:
            receiver = event.receiver or ""
            if type(message) is Taken and kind is EventKind.DELIVERED:
                history.taken.append((index, (receiver, message.tx), message.item.key, message.item.body))
            elif type(message) is TxCommitted:
                history.committed[(receiver, message.tx)] = message
    return history


def tx_at_most_k(history: TxHistory, policies: Mapping[str, ConsumePolicy]) -> CheckResult:
    """No item of a ``ConsumeTimes(k)`` queue reached its clients more than k times."""
    counts: Counter[ItemKey] = Counter(key for _, owner, key, _ in history.taken if owner not in history.uncounted)
    violations = []
    for key, times in sorted(counts.items()):
        policy = policies.get(key.queue)
        if isinstance(policy, ConsumeTimes) and times > policy.times:
            violations.append(f"{key} was taken {times} times under {policy}")
    return CheckResult.of("tx_at_most_k", violations, items=len(counts), most=max(counts.values(), default=0))


def _removed_by(history: TxHistory) -> dict[ItemKey, list[Owner]]:
    removed: dict[ItemKey, list[Owner]] = {}
    for owner in history.committed:
        request = history.commits.get(owner)
        for key in dict.fromkeys(request[1].takes if request else ()):
            removed.setdefault(key, []).append(owner)
    return removed


def tx_no_loss(history: TxHistory, final: TxFinal) -> CheckResult:
    """Every committed put is still there, was taken by a committed transaction, or is in its queue's DLQ."""
    removed = _removed_by(history)
    present = final.present()
    dead = {letter.key for letter in final.dead_letters()}
    violations = [f"{key} (put by {creator}) is gone: not in its queue, not committed by a taker, not dead-lettered"
                  for key, (_, creator) in sorted(history.created().items())
                  if key not in present and key not in removed and key not in dead]
    return CheckResult.of("tx_no_loss", violations, created=len(history.created()))


def tx_no_phantom(history: TxHistory, final: TxFinal) -> CheckResult:
    """Every item taken, left or dead-lettered was created by a committed transaction, with its body."""
    created = history.created()
    violations = []
    seen = [(key, body, "taken") for _, _, key, body in history.taken]
    seen += [(key, body, "left in its queue") for _, items in final.items for key, body in items]
    seen += [(letter.key, letter.body, "dead-lettered") for letter in final.dead_letters()]
    for key, body, where in seen:
        made = created.get(key)
        if made is None:
            violations.append(f"{key} {where} was never committed as a put")
        elif made[0] != body:
            violations.append(f"{key} {where} has body {body!r}, its put had {made[0]!r}")
    return CheckResult.of("tx_no_phantom", sorted(set(violations)))


def tx_atomicity(history: TxHistory, final: TxFinal) -> CheckResult:
    """A committed transaction held every item it removed, removed each once, and nothing it removed came back."""
    violations = []
    held: dict[Owner, set[ItemKey]] = {}
    for _, owner, key, _ in history.taken:
        held.setdefault(owner, set()).add(key)
    for owner in sorted(history.committed):
        request = history.commits.get(owner)
        if request is None:
            continue
        for key in request[1].takes:
            if key not in held.get(owner, set()):
                violations.append(f"{owner} committed the removal of {key}, which it was never given")
        if history.rolled_back.get(owner, request[0]) < request[0]:
            violations.append(f"{owner} was committed after its rollback")
    removed = _removed_by(history)
    present = final.present()
    dead = {letter.key for letter in final.dead_letters()}
    for key, owners in sorted(removed.items()):
        if len(owners) > 1:
            violations.append(f"{key} was removed by {len(owners)} commits: {sorted(owners)}")
        if key in present or key in dead:
            where = "in its queue" if key in present else "in the DLQ"
            violations.append(f"{key} was committed as taken by {owners[0]} but is still {where}")
        commit_at = history.commits[owners[0]][0]
        later = [owner for index, owner, taken_key, _ in history.taken if taken_key == key and index > commit_at]
        if later:
            violations.append(f"{key} was taken again by {later[0]} after {owners[0]} committed its removal")
    return CheckResult.of("tx_atomicity", violations, committed=len(history.committed))


def tx_no_lock_left(final: TxFinal) -> CheckResult:
    """Once the run is quiet and its clients have stopped, no item is locked."""
    violations = [f"{count} items of {queue!r} are still locked"
                  for queue, count in final.locked if count]
    return CheckResult.of("tx_no_lock_left", violations)


def tx_drained(final: TxFinal) -> CheckResult:
    """While a consumer serves the queue, every item is eventually committed or dead-lettered (none stays locked)."""
    left = final.left_while_served or ()
    violations = [f"{key} was still in its queue long after the last put, with a consumer serving it" for key in left]
    return CheckResult.of("tx_drained", violations)


def transaction_checks(trace: list[TraceEvent], store: str, final: TxFinal,
                       policies: Mapping[str, ConsumePolicy]) -> list[CheckResult]:
    """Every transaction checker over one run."""
    history = tx_history(trace, store)
    return [
        tx_at_most_k(history, policies),
        tx_no_loss(history, final),
        tx_no_phantom(history, final),
        tx_atomicity(history, final),
        tx_no_lock_left(final),
        tx_drained(final),
    ]
