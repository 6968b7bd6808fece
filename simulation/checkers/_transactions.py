"""Checkers for transactions (seed 004), judged from the clients' history in the trace, not the store's account.

The history is what the clients sent and heard: ``Taken`` answers delivered to a session, the
``CommitTx`` requests the store received and their ``TxCommitted`` answers (delivered, or dead
letters when the session had died meanwhile), and ``RollbackTx(handed_over=False)`` that gave a
take back uncounted. The end state (``TxFinal``: every queue's items, DLQs and lock counts, read
once the run was quiet) is only compared with what that history allows.

The store may be several actors (ZooKeeper backends sharing one root: ``tx_history`` takes their
paths). Two answers a ZooKeeper backend may give are partial: a commit whose reply was lost to a
connection loss and then found applied is answered ``TxCommitted`` without its created keys, and
one whose outcome stayed unknown is never answered. Their puts are matched by queue and body to
the items nobody else created (``TxHistory.attributed``); an unanswered commit may or may not
have applied, so its takes may be gone and its puts may exist.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
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
    TxAborted,
    TxCommitted,
    TxPut,
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
    """(event index, owner, key, body) of each ``Taken`` a session received; the index is the store's send (a
    ZooKeeper lock may vanish with its session while its ``Taken`` waits in a paused client's mailbox)."""
    commits: dict[Owner, tuple[int, CommitTx]] = attrs.field(factory=dict)
    """Each commit request the store received, with its event index."""
    committed: dict[Owner, TxCommitted] = attrs.field(factory=dict)
    """The commits the store answered ``TxCommitted`` (to a live session or a dead one)."""
    aborted: set[Owner] = attrs.field(factory=set)
    """The commits the store answered ``TxAborted``."""
    uncounted: set[Owner] = attrs.field(factory=set)
    """Transactions whose takes were handed back without reaching user code."""
    rolled_back: dict[Owner, int] = attrs.field(factory=dict)
    """The event index of each transaction's first rollback request the store received."""

    def unanswered(self) -> list[Owner]:
        """Commits the store received and never answered: their outcome is unknown (applied or not)."""
        return sorted(owner for owner in self.commits if owner not in self.committed and owner not in self.aborted)

    def created(self) -> dict[ItemKey, tuple[bytes, Owner]]:
        """Every item a committed transaction created, by the keys its answer named: key -> (body, creator)."""
        made: dict[ItemKey, tuple[bytes, Owner]] = {}
        for owner, answer in self.committed.items():
            request = self.commits.get(owner)
            if request is None:
                continue
            for key, put in zip(answer.created, request[1].puts, strict=False):
                made[key] = (put.body, owner)
        return made

    def attributed(self, final: TxFinal) -> tuple[dict[ItemKey, tuple[bytes, Owner]], list[tuple[TxPut, Owner]]]:
        """``created()`` plus the keys of puts whose answer named none, matched by queue and body to the items seen
        (taken, left, dead-lettered) that no answer named; and the puts of committed transactions left unmatched.

        The puts matched are those of a ``TxCommitted`` without its keys (applied for sure) and those of an
        unanswered commit (perhaps applied): a left-over of the first kind is lost, of the second kind never made.
        """
        made = self.created()
        sure: list[tuple[TxPut, Owner]] = []
        maybe: list[tuple[TxPut, Owner]] = []
        for owner, answer in sorted(self.committed.items()):
            request = self.commits.get(owner)
            if request is not None:
                sure += [(put, owner) for put in request[1].puts[len(answer.created):]]
        for owner in self.unanswered():
            maybe += [(put, owner) for put in self.commits[owner][1].puts]
        seen = [(key, body) for _, _, key, body in self.taken]
        seen += [(key, body) for _, items in final.items for key, body in items]
        seen += [(letter.key, letter.body) for letter in final.dead_letters()]
        for key, body in sorted(dict(seen).items()):
            if key in made:
                continue
            for pool in (sure, maybe):
                match = next((index for index, (put, _) in enumerate(pool)
                              if put.queue == key.queue and put.body == body), None)
                if match is not None:
                    made[key] = (body, pool.pop(match)[1])
                    break
        return made, sure


def tx_history(trace: list[TraceEvent], store: str | Collection[str]) -> TxHistory:
    """Read the transaction traffic with the store at path ``store`` (or any of several paths) out of ``trace``."""
    stores = {store} if isinstance(store, str) else set(store)
    history = TxHistory()
    granted: dict[tuple[str, int, ItemKey], int] = {}
    for index, event in enumerate(trace):
        message = event.message
        kind = event.kind
        if kind is EventKind.SENT and type(message) is Taken and event.sender in stores:
            granted.setdefault((event.receiver or "", message.tx, message.item.key), index)
        elif kind is EventKind.DELIVERED and event.receiver in stores:
            if type(message) is CommitTx:
                history.commits[(message.session.path, message.tx)] = (index, message)
            elif type(message) is RollbackTx:
                owner = (message.session.path, message.tx)
                history.rolled_back.setdefault(owner, index)
                if not message.handed_over:
                    history.uncounted.add(owner)
        elif kind in (EventKind.DELIVERED, EventKind.DEAD_LETTER) and event.sender in stores:
            receiver = event.receiver or ""
            if type(message) is Taken and kind is EventKind.DELIVERED:
                sent = granted.pop((receiver, message.tx, message.item.key), index)
                history.taken.append((sent, (receiver, message.tx), message.item.key, message.item.body))
            elif type(message) is TxCommitted:
                history.committed[(receiver, message.tx)] = message
            elif type(message) is TxAborted:
                history.aborted.add((receiver, message.tx))
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
    """Every committed put is still there, was taken by a committed transaction, or is in its queue's DLQ.

    An item taken by a commit that was never answered may be gone (that commit may have applied); a
    put whose commit was answered without its key must be found by its queue and body.
    """
    removed = set(_removed_by(history))
    for owner in history.unanswered():
        removed.update(history.commits[owner][1].takes)
    present = final.present()
    dead = {letter.key for letter in final.dead_letters()}
    made, unmatched = history.attributed(final)
    violations = [f"{key} (put by {creator}) is gone: not in its queue, not committed by a taker, not dead-lettered"
                  for key, (_, creator) in sorted(made.items())
                  if key not in present and key not in removed and key not in dead]
    violations += [f"a put of {put.body!r} into {put.queue!r} by {owner}, committed (its keys unknown), is nowhere"
                   for put, owner in unmatched]
    return CheckResult.of("tx_no_loss", violations, created=len(made) + len(unmatched))


def tx_no_phantom(history: TxHistory, final: TxFinal) -> CheckResult:
    """Every item taken, left or dead-lettered was created by a committed transaction, with its body."""
    created, _ = history.attributed(final)
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


def transaction_checks(trace: list[TraceEvent], store: str | Collection[str], final: TxFinal,
                       policies: Mapping[str, ConsumePolicy]) -> list[CheckResult]:
    """Every transaction checker over one run, on the store at ``store`` (or the backends at several paths)."""
    history = tx_history(trace, store)
    return [
        tx_at_most_k(history, policies),
        tx_no_loss(history, final),
        tx_no_phantom(history, final),
        tx_atomicity(history, final),
        tx_no_lock_left(final),
        tx_drained(final),
    ]


def tx_story_line(event: TraceEvent) -> str | None:
    """A transaction step of the trace as a story line (without its time), or None: items given, commits asked and
    answered, rollbacks asked (each as its sender sent it)."""
    message = event.message
    if event.kind is not EventKind.SENT:
        return None
    route = f"{event.sender} -> {event.receiver}"
    if type(message) is Taken:
        return f"{route}: tx {message.tx} takes {_key(message.item.key)} (take {message.item.takes})"
    if type(message) is CommitTx:
        puts = ", ".join(f"{put.queue}:{put.body.decode('latin-1')}" for put in message.puts)
        return f"{route}: commit tx {message.tx}: remove [{', '.join(map(_key, message.takes))}], put [{puts}]"
    if type(message) is TxCommitted:
        return f"{route}: tx {message.tx} committed, created [{', '.join(map(_key, message.created))}]"
    if type(message) is TxAborted:
        return f"{route}: tx {message.tx} aborted: {message.reason}"
    if type(message) is RollbackTx:
        return f"{route}: roll back tx {message.tx} (failed={message.failed}, handed over={message.handed_over})"
    return None


def tx_steps(trace: Iterable[TraceEvent]) -> int:
    """How many items stores gave transactions (``Taken`` sent): a transactions run's steps, for the shrinker."""
    return sum(1 for event in trace if event.kind is EventKind.SENT and type(event.message) is Taken)


def _key(key: ItemKey) -> str:
    return f"{key.queue}#{key.number}"
