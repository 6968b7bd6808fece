"""ZkTxBackend: the ZooKeeper backend of transactions, answering the same protocol as ``TxStoreActor``.

Seed 004's layout under ``/<root>/<queue>/``: ``items/item-N`` (persistent sequential, the body),
``locks/lock-N`` (ephemeral, its data the taking transaction's uuid: a create lost to a
connection loss is recovered by reading it back), ``meta/meta-N`` (the item's ``ItemMeta``) and
``dlq/dead-N``. A commit is one multi whose result is checked. Every ZooKeeper call goes through
a session actor (``ZkCall``/``ZkReply``); handlers chain continuations and never block
(``docs/transactions.md``, "The ZooKeeper backend").
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from typing import Any, cast, final

import attrs

from conveyor.runtime import Actor, ActorRef, Terminated
from conveyor.runtime.lowlevel import (
    ZkCall,
    ZkCheck,
    ZkCreate,
    ZkDelete,
    ZkExists,
    ZkGetChildren,
    ZkGetData,
    ZkMulti,
    ZkMultiFailed,
    ZkNode,
    ZkReply,
    ZkSessionEvent,
    ZkSetData,
    ZkWatchSession,
)

from ._policy import ItemMeta, refuse_take, release
from ._protocol import (
    CancelTake,
    CommitTx,
    DeadLetters,
    DeclareTxQueue,
    GetTxStats,
    NothingTaken,
    QueueItems,
    ReadDeadLetters,
    ReadItems,
    RollbackTx,
    TakeItem,
    Taken,
    TxAborted,
    TxCommitted,
    TxQueueDeclared,
    TxRefused,
    TxRolledBack,
)
from ._store import TxQueueStats
from ._values import DeadLetter, ItemKey, TxItem, TxQueueSettings

CANDIDATES = 8
"""A take tries among this many first items, in an order drawn from the context's random (FIFO relaxed)."""

RETRY_S = 0.05
"""A take that waits for an item lists the queue again this often."""

COMMIT_CHECKS = 20
"""After a commit's multi is answered ``connection_loss``, read its marker back at most this many times."""

COMMIT_CHECK_PAUSE_S = 0.25
"""The pause between two reads of a commit's marker, while the session reconnects."""

LISTING_TTL_S = 0.1
"""A take picks its candidates from the last listing of ``items/`` while it is this young (seconds) and names
an item we do not claim; our own commits keep it up to date, items committed away by others are skipped
when their check fails, and a take that finds nothing in it lists again before it answers."""

MARKERS_A_BATCH = 64
"""Answered commits' markers are deleted this many in one multi..."""

MARKERS_AFTER_S = 1.0
"""... or this long after the first of a batch, whichever comes first."""

Continuation = Callable[[ZkReply], None]


@final
@attrs.frozen
class _Retry:
    """Time to list the queue again for a waiting take."""

    session: ActorRef
    tx: int


@final
@attrs.frozen
class _Later:
    """Time to run the step stored under ``number``."""

    number: int


@final
@attrs.define
class _Held:
    """An item a transaction holds locked: its key, body and meta (takes counted)."""

    key: ItemKey
    body: bytes
    meta: ItemMeta


@final
@attrs.define
class _Take:
    """A take in progress: the request, who to answer, when it stops waiting."""

    request: TakeItem
    reply_to: ActorRef | None
    deadline: float
    cancelled: bool = False
    from_cache: bool = False
    """Its candidates came from the cached listing (``ZkTxBackend.listings``)."""


def _number(name: str) -> int:
    """``item-0000000007`` -> 7."""
    return int(name.rsplit("-", 1)[1])


def _meta_bytes(meta: ItemMeta) -> bytes:
    return json.dumps([meta.takes, meta.rollbacks, meta.not_before]).encode()


def _meta_of(node: object) -> ItemMeta:
    if not isinstance(node, ZkNode) or not node.data:
        return ItemMeta()
    takes, rollbacks, not_before = json.loads(node.data)
    return ItemMeta(takes, rollbacks, not_before)


class ZkTxBackend(Actor):
    """Transactional queues kept in ZooKeeper, through the session actor ``zk``, under ``/<root>``."""

    def __init__(self, zk: ActorRef, *, root: str = "conveyor-tx") -> None:
        if type(root) is not str or not root or "/" in root:
            msg = f"ZkTxBackend.root must be a non-empty str without '/', got {root!r}"
            raise ValueError(msg)
        self.zk = zk
        self.root = root
        self.settings: dict[str, TxQueueSettings] = {}
        self.pending: dict[int, Continuation] = {}
        self.next_request = 0
        self.held: dict[tuple[ActorRef, int], list[_Held]] = {}
        self.takes: dict[tuple[ActorRef, int], _Take] = {}
        self.watched: set[ActorRef] = set()
        self.later: dict[int, Callable[[], None]] = {}
        self.claimed: set[str] = set()
        """Lock paths a transaction of this backend holds or is taking; any other lock of our session is an orphan."""
        self.session_id: int | None = None
        self.expired = False
        self.listings: dict[str, tuple[float, list[str]]] = {}
        """Per queue, when ``items/`` was listed and its names in order, kept up to date with our own commits."""
        self.spent_markers: list[str] = []
        """Markers of answered commits, to delete in one multi (``_spend_marker``)."""

    def on_start(self) -> None:
        """Hear the ZooKeeper session's events: an expiry drops every lock at once."""
        self.ctx.send(self.zk, ZkWatchSession(self.ctx.self_ref))

    # --- plumbing --------------------------------------------------------------------------------

    def _path(self, queue: str, *parts: str) -> str:
        return "/".join((f"/{self.root}", queue, *parts))

    def _commits(self) -> str:
        """Where commit markers live: beside the queues, so no queue name can clash with it."""
        return f"/{self.root}-commits"

    def _call(self, operation: Any, then: Continuation) -> None:
        request_id = self.next_request
        self.next_request += 1
        self.pending[request_id] = then
        self.ctx.send(self.zk, ZkCall(request_id, self.ctx.self_ref, operation))

    def _after(self, seconds: float, step: Callable[[], None]) -> None:
        """Run ``step`` in a later handler, ``seconds`` from now."""
        number = self.next_request
        self.next_request += 1
        self.later[number] = step
        self.ctx.schedule(seconds, _Later(number))

    def _uuid(self) -> str:
        return f"{self.ctx.random.getrandbits(128):032x}"

    def receive(self, message: Any) -> None:
        """Answer the transaction protocol; carry on the chain a ``ZkReply`` belongs to."""
        match message:
            case ZkReply(request_id=request_id):
                then = self.pending.pop(request_id, None)
                if then is not None:
                    then(message)
            case ZkSessionEvent(session_id=session_id, state=state):
                self.session_id = session_id
                if state in ("expired", "closed"):
                    self.expired = True
                    self.held.clear()  # ZooKeeper removed every lock of this session at once
                    self.claimed.clear()
            case DeclareTxQueue(settings=settings):
                self._declare(settings)
            case TakeItem():
                self._start_take(message)
            case _Later(number=number):
                step = self.later.pop(number, None)
                if step is not None:
                    step()
            case _Retry(session=session, tx=tx):
                take = self.takes.get((session, tx))
                if take is not None:
                    self._list(take)
            case CancelTake(session=session, tx=tx):
                take = self.takes.get((session, tx))
                if take is not None:
                    take.cancelled = True
            case CommitTx():
                self._commit(message)
            case RollbackTx(session=session, tx=tx, failed=failed, handed_over=handed_over):
                take = self.takes.get((session, tx))
                if take is not None:
                    take.cancelled = True
                reply_to = self.ctx.sender
                held = self.held.pop((session, tx), [])
                self._release(held, failed=failed, handed_over=handed_over)
                if reply_to is not None:
                    self.ctx.send(reply_to, TxRolledBack(tx, tuple(h.key for h in held)))
            case Terminated(ref=ref):
                self.watched.discard(ref)
                for take in self.takes.values():
                    if take.request.session == ref:
                        take.cancelled = True  # a lock it is taking now is released when the take ends
                for owner in [owner for owner in self.held if owner[0] == ref]:
                    self._release(self.held.pop(owner), failed=False, handed_over=True)
            case ReadItems(queue=queue):
                self._read_items(queue)
            case ReadDeadLetters(queue=queue):
                self._read_dead(queue)
            case GetTxStats(queue=queue):
                self._stats(queue)

    def _refuse_unknown(self, request: str, queue: str) -> bool:
        if queue in self.settings:
            return False
        declared = ", ".join(self.settings) or "none"
        self.ctx.reply(TxRefused(request, f"unknown queue {queue!r}; declared queues: {declared}"))
        return True

    # --- declare ---------------------------------------------------------------------------------

    def _declare(self, settings: TxQueueSettings) -> None:
        reply_to = self.ctx.sender
        known = self.settings.get(settings.name)
        if known is not None and known != settings:
            self.ctx.reply(TxRefused("DeclareTxQueue", f"queue {settings.name!r} exists with {known}"))
            return
        remaining = [self._path(settings.name, folder) for folder in ("items", "locks", "meta", "dlq")]
        remaining.append(self._commits())

        def next_path(reply: ZkReply | None) -> None:
            if reply is not None and reply.error == "connection_loss":
                remaining.insert(0, current[0])  # a create is safe to repeat: node_exists counts as done
            elif reply is not None and reply.error not in (None, "node_exists"):
                if reply_to is not None:
                    self.ctx.send(reply_to, TxRefused("DeclareTxQueue", f"ZooKeeper answered {reply.error}"))
                return
            if not remaining:
                self.settings[settings.name] = settings
                if reply_to is not None:
                    self.ctx.send(reply_to, TxQueueDeclared(settings.name))
                return
            current[0] = remaining.pop(0)
            self._call(ZkCreate(current[0], make_parents=True), next_path)

        current = [""]
        next_path(None)

    # --- take ------------------------------------------------------------------------------------

    def _start_take(self, request: TakeItem) -> None:
        if request.queue not in self.settings:
            declared = ", ".join(self.settings) or "none"
            reason = f"unknown queue {request.queue!r}; declared queues: {declared}"
            self.ctx.reply(NothingTaken(request.tx, request.queue, reason))
            return
        if self.expired:
            self.ctx.reply(NothingTaken(request.tx, request.queue, "the ZooKeeper session expired"))
            return
        if request.session not in self.watched:
            self.watched.add(request.session)
            self.ctx.watch(request.session)
        take = _Take(request, self.ctx.sender, self.ctx.now() + request.wait_s)
        self.takes[(request.session, request.tx)] = take
        self._list(take)

    def _finish(self, take: _Take, answer: Taken | NothingTaken) -> None:
        request = take.request
        self.takes.pop((request.session, request.tx), None)
        if take.reply_to is not None:
            self.ctx.send(take.reply_to, answer)

    def _nothing(self, take: _Take, reason: str = "") -> None:
        """No item now: answer, or list again later while the take may wait."""
        if take.from_cache and not (reason or take.cancelled or self.expired):
            take.from_cache = False  # the cached listing may miss items others put: list before saying none
            self._list_again(take)
            return
        if reason or take.cancelled or self.expired or self.ctx.now() + RETRY_S > take.deadline:
            self._finish(take, NothingTaken(take.request.tx, take.request.queue, reason))
            return
        self.ctx.schedule(RETRY_S, _Retry(take.request.session, take.request.tx))

    def _list(self, take: _Take) -> None:
        queue = take.request.queue
        cached = self.listings.get(queue)
        if cached is not None and self.ctx.now() - cached[0] < LISTING_TTL_S:
            candidates = self._candidates(queue, cached[1])
            if candidates:
                take.from_cache = True
                self._try_fresh(take, candidates)
                return

        def listed(reply: ZkReply) -> None:
            if reply.error is not None:
                self._nothing(take, "" if reply.error == "connection_loss" else f"ZooKeeper answered {reply.error}")
                return
            names = sorted(reply.value, key=_number)  # type: ignore[call-overload]
            self.listings[queue] = (self.ctx.now(), names)
            take.from_cache = False
            self._try_fresh(take, self._candidates(queue, names))

        self._call(ZkGetChildren(self._path(queue, "items")), listed)

    def _list_again(self, take: _Take) -> None:
        self.listings.pop(take.request.queue, None)
        self._list(take)

    def _candidates(self, queue: str, names: list[str]) -> list[str]:
        """The first ``CANDIDATES`` items no transaction of ours claims, in an order drawn from the context's
        random (replayable in the simulator): contending consumers spread out (FIFO relaxed)."""
        candidates = [name for name in names
                      if self._path(queue, "locks", f"lock-{_number(name)}") not in self.claimed][:CANDIDATES]
        seeded = self.ctx.random
        seeded.shuffle(candidates)
        return candidates

    def _listing_changed(self, queue: str, gone: tuple[int, ...] = (), created: tuple[int, ...] = ()) -> None:
        """Keep the cached listing of ``queue`` up to date with what this backend removed or created."""
        cached = self.listings.get(queue)
        if cached is None:
            return
        names = cached[1]
        for number in gone:
            name = f"item-{number:010d}"
            if name in names:
                names.remove(name)
        for number in created:
            bisect.insort(names, f"item-{number:010d}", key=_number)

    def _try(self, take: _Take, candidates: list[str]) -> None:
        """Lock the first candidate that can be locked, else answer that nothing was taken."""
        if take.cancelled or self.expired:
            self._nothing(take)
            return
        if not candidates:
            self._nothing(take)
            return
        queue = take.request.queue
        number = _number(candidates[0])
        rest = candidates[1:]
        lock = self._path(queue, "locks", f"lock-{number}")
        if lock in self.claimed:  # another transaction of this backend holds it or is taking it
            self._try(take, rest)
            return
        self.claimed.add(lock)
        uuid = self._uuid().encode()

        def created(reply: ZkReply) -> None:
            if reply.error is None:
                self._locked(take, number, rest)
            else:  # connection_loss: was it applied? our uuid says so. node_exists: is it an orphan of ours?
                self._call(ZkGetData(lock), lambda read: checked(read, lost=reply.error == "connection_loss"))

        def checked(reply: ZkReply, *, lost: bool) -> None:
            node = reply.value if reply.error is None else None
            if isinstance(node, ZkNode) and (node.data == uuid if lost else self._orphan(node)):
                self._locked(take, number, rest)
            else:
                self.claimed.discard(lock)
                self._try(take, rest)

        self._call(ZkCreate(lock, uuid, ephemeral=True), created)

    def _try_fresh(self, take: _Take, candidates: list[str]) -> None:
        """Take the first candidate as a fresh item (no ``meta-N`` yet: never taken), in one write.

        One multi checks the item, creates our lock and creates its meta with the take counted; the
        item's read is sent right behind it (a session's requests are served in order), so a take
        costs one round trip after the listing, as a raw lock create does. Whatever else happens (the
        lock is held, maybe by an orphan of ours; the item has meta) goes to ``_try``, which locks
        first and reads after; an item committed away meanwhile is skipped.
        """
        if take.cancelled or self.expired or not candidates:
            self._try(take, candidates)
            return
        queue = take.request.queue
        number = _number(candidates[0])
        rest = candidates[1:]
        lock = self._path(queue, "locks", f"lock-{number}")
        if lock in self.claimed:
            self._try_fresh(take, rest)
            return
        self.claimed.add(lock)
        uuid = self._uuid().encode()
        item_path = self._path(queue, "items", f"item-{number:010d}")
        counted = ItemMeta(takes=1)
        replies: dict[str, ZkReply] = {}

        def arrived(which: str, reply: ZkReply) -> None:
            replies[which] = reply
            if len(replies) == 2:
                decide(replies["multi"], replies["item"])

        def decide(multi: ZkReply, item: ZkReply) -> None:
            if multi.error is None:
                got_item(item)
            elif multi.error == "connection_loss":  # applied or not: our uuid in the lock says
                self._call(ZkGetData(lock), recovered)
            else:
                self.claimed.discard(lock)
                if isinstance(multi.value, ZkMultiFailed) and multi.value.index == 0:
                    self._listing_changed(queue, gone=(number,))
                    self._try_fresh(take, rest)  # the item is gone: committed by another transaction
                else:
                    self._try(take, candidates)  # locked elsewhere, or not fresh: lock first, then read

        def recovered(reply: ZkReply) -> None:
            if reply.error is None and isinstance(reply.value, ZkNode) and reply.value.data == uuid:
                self._call(ZkGetData(item_path), got_item)
            else:
                self.claimed.discard(lock)
                self._try_fresh(take, rest)

        def got_item(reply: ZkReply) -> None:
            held = _Held(ItemKey(queue, number), b"", counted)
            if reply.error is None and isinstance(reply.value, ZkNode):
                self._hand_over(take, attrs.evolve(held, body=reply.value.data))
            else:  # the read was lost: give the item back, its take uncounted
                self._release([held], failed=False, handed_over=False)
                self._try_fresh(take, rest)

        operations = (ZkCheck(item_path, -1), ZkCreate(lock, uuid, ephemeral=True),
                      ZkCreate(self._path(queue, "meta", f"meta-{number}"), _meta_bytes(counted)))
        self._call(ZkMulti(operations), lambda reply: arrived("multi", reply))
        self._call(ZkGetData(item_path), lambda reply: arrived("item", reply))

    def _hand_over(self, take: _Take, held: _Held) -> None:
        """The item is locked with its take counted: answer ``Taken``, or release it if nobody waits any more."""
        request = take.request
        if take.cancelled or self.expired or request.session not in self.watched:
            self._release([held], failed=False, handed_over=False)
            self._nothing(take)
            return
        self.held.setdefault((request.session, request.tx), []).append(held)
        self._finish(take, Taken(request.tx, TxItem(held.key, held.body, held.meta.takes)))

    def _orphan(self, lock: ZkNode) -> bool:
        """A lock this session holds that no transaction of ours claims: its delete or read-back was lost."""
        return self.session_id is not None and lock.ephemeral_owner == self.session_id

    def _locked(self, take: _Take, number: int, rest: list[str]) -> None:
        """We hold ``lock-N``: read the item and its meta, apply the policy, count the take."""
        queue = take.request.queue
        settings = self.settings[queue]
        key = ItemKey(queue, number)
        item_path = self._path(queue, "items", f"item-{number:010d}")
        meta_path = self._path(queue, "meta", f"meta-{number}")
        lock = self._path(queue, "locks", f"lock-{number}")

        def give_up(_: ZkReply | None = None) -> None:
            self.claimed.discard(lock)
            self._call(ZkDelete(lock), lambda _: self._try(take, rest))

        def got_item(reply: ZkReply) -> None:
            if reply.error is not None or not isinstance(reply.value, ZkNode):
                give_up()  # committed away by another transaction meanwhile
                return
            body = reply.value.data
            self._call(ZkGetData(meta_path), lambda meta_reply: got_meta(body, meta_reply))

        def got_meta(body: bytes, reply: ZkReply) -> None:
            meta = _meta_of(reply.value) if reply.error is None else ItemMeta()
            meta_exists = reply.error is None
            if meta.not_before > self.ctx.now():
                give_up()
                return
            reason = refuse_take(settings, meta)
            if reason is not None:
                self._dead_letter(_Held(key, body, meta), reason, meta_exists, lambda: self._try(take, rest))
                return
            counted = attrs.evolve(meta, takes=meta.takes + 1)
            write = ZkSetData(meta_path, _meta_bytes(counted)) if meta_exists else ZkCreate(
                meta_path, _meta_bytes(counted))

            def counted_done(reply: ZkReply) -> None:
                if reply.error is not None:
                    give_up()
                    return
                self._hand_over(take, _Held(key, body, counted))

            self._call(write, counted_done)

        self._call(ZkGetData(item_path), got_item)

    # --- release, dead letters -------------------------------------------------------------------

    def _release(self, held: list[_Held], *, failed: bool, handed_over: bool) -> None:
        """Unlock items held without a commit: write their meta (policy's ``release``) or dead-letter them."""
        for item in held:
            queue = item.key.queue
            released = release(self.settings[queue], item.meta, self.ctx.now(), failed=failed, handed_over=handed_over)
            if released.dead_letter is not None:
                self._dead_letter(_Held(item.key, item.body, released.meta), released.dead_letter, True, lambda: None)
                continue
            meta_path = self._path(queue, "meta", f"meta-{item.key.number}")
            lock = self._path(queue, "locks", f"lock-{item.key.number}")
            self.claimed.discard(lock)
            self._call(ZkMulti((ZkSetData(meta_path, _meta_bytes(released.meta)), ZkDelete(lock))), lambda _: None)

    def _dead_letter(self, item: _Held, reason: str, meta_exists: bool, then: Callable[[], None]) -> None:
        """Move a locked item to ``dlq/`` in one multi: the dead letter, the item, its meta and its lock."""
        queue, number = item.key.queue, item.key.number
        letter = json.dumps({"number": number, "body": item.body.decode("latin-1"), "takes": item.meta.takes,
                             "rollbacks": item.meta.rollbacks, "reason": reason}).encode()
        operations: list[Any] = [
            ZkCreate(self._path(queue, "dlq", "dead-"), letter, sequential=True),
            ZkDelete(self._path(queue, "items", f"item-{number:010d}")),
        ]
        if meta_exists:
            operations.append(ZkDelete(self._path(queue, "meta", f"meta-{number}")))
        lock = self._path(queue, "locks", f"lock-{number}")
        self.claimed.discard(lock)
        operations.append(ZkDelete(lock))
        self._call(ZkMulti(tuple(operations)), lambda _: then())

    # --- commit ----------------------------------------------------------------------------------

    def _commit(self, request: CommitTx) -> None:
        reply_to = self.ctx.sender
        owner = (request.session, request.tx)

        def answer(message: TxCommitted | TxAborted) -> None:
            if reply_to is not None:
                self.ctx.send(reply_to, message)

        if self.expired:
            self.held.pop(owner, None)
            answer(TxAborted(request.tx, "the ZooKeeper session expired: its locks are gone"))
            return
        held = {item.key: item for item in self.held.get(owner, [])}
        missing = [key for key in request.takes if key not in held]
        unknown = sorted({put.queue for put in request.puts if put.queue not in self.settings})
        if missing or unknown:
            self._release(self.held.pop(owner, []), failed=False, handed_over=True)
            why = f"not locked by this transaction: {missing}" if missing else f"unknown queues {unknown}"
            answer(TxAborted(request.tx, why))
            return
        operations: list[Any] = []
        for key in request.takes:
            operations += [
                ZkDelete(self._path(key.queue, "items", f"item-{key.number:010d}")),
                ZkDelete(self._path(key.queue, "meta", f"meta-{key.number}")),
                ZkDelete(self._path(key.queue, "locks", f"lock-{key.number}")),
            ]
        marker = f"{self._commits()}/commit-{self._uuid()}"
        operations.append(ZkCreate(marker))  # says, after a lost connection, whether the multi was applied
        first_put = len(operations)
        operations += [ZkCreate(self._path(put.queue, "items", "item-"), put.body, sequential=True)
                       for put in request.puts]

        def committed(created: tuple[ItemKey, ...]) -> None:
            self.held.pop(owner, None)
            for key in request.takes:
                self._listing_changed(key.queue, gone=(key.number,))
            for key in created:
                self._listing_changed(key.queue, created=(key.number,))
            for key in request.takes:
                self.claimed.discard(self._path(key.queue, "locks", f"lock-{key.number}"))
            self._spend_marker(marker)
            answer(TxCommitted(request.tx, created))

        def aborted(reason: str) -> None:
            self._release(self.held.pop(owner, []), failed=False, handed_over=True)
            answer(TxAborted(request.tx, reason))

        def done(reply: ZkReply) -> None:
            if reply.error is None:
                paths = cast("tuple[str, ...]", reply.value)[first_put:]
                committed(tuple(ItemKey(put.queue, _number(path.rsplit("/", 1)[1]))
                                for put, path in zip(request.puts, paths, strict=True)))
            elif reply.error == "connection_loss":
                self._call(ZkExists(marker), lambda found: resolved(found, COMMIT_CHECKS))
            else:
                aborted(f"the commit's multi failed: {reply.value or reply.error}")

        def resolved(reply: ZkReply, checks_left: int) -> None:
            """The multi's outcome after a lost connection: its marker exists iff it was applied."""
            if reply.error is None:
                if reply.value is not None:
                    committed(())  # applied; the created numbers were in the lost reply
                else:
                    aborted("the connection was lost before the commit's multi was applied")
            elif reply.error == "connection_loss" and checks_left > 1:
                self._after(COMMIT_CHECK_PAUSE_S, lambda: self._call(
                    ZkExists(marker), lambda found: resolved(found, checks_left - 1)))
            # else: the outcome stays unknown; no answer, the client's ask times out (as for a crashed backend)

        self._call(ZkMulti(tuple(operations)), done)

    def _spend_marker(self, marker: str) -> None:
        """An answered commit's marker is no longer read: delete it with others, in one multi.

        A delete of its own would be one more write (one more fsync) a transaction; batched, the
        markers cost one write per ``MARKERS_A_BATCH`` commits, or one ``MARKERS_AFTER_S`` after
        the first of a batch when commits are few.
        """
        self.spent_markers.append(marker)
        if len(self.spent_markers) >= MARKERS_A_BATCH:
            self._delete_markers()
        elif len(self.spent_markers) == 1:
            self._after(MARKERS_AFTER_S, self._delete_markers)

    def _delete_markers(self) -> None:
        batch, self.spent_markers = self.spent_markers, []
        if not batch:
            return

        def deleted(reply: ZkReply) -> None:
            if reply.error is not None and len(batch) > 1:  # one of them failed the multi: one by one
                for marker in batch:
                    self._call(ZkDelete(marker), lambda _: None)

        self._call(ZkMulti(tuple(ZkDelete(marker) for marker in batch)), deleted)

    # --- reads -----------------------------------------------------------------------------------

    def _children(self, queue: str, folder: str, then: Callable[[list[str]], None]) -> None:
        def listed(reply: ZkReply) -> None:
            then(sorted(reply.value, key=_number) if reply.error is None else [])  # type: ignore[call-overload]

        self._call(ZkGetChildren(self._path(queue, folder)), listed)

    def _read_all(self, queue: str, folder: str, then: Callable[[list[tuple[str, bytes]]], None]) -> None:
        """Every child of ``folder`` with its data, in order (children gone meanwhile are skipped)."""

        def listed(names: list[str]) -> None:
            found: list[tuple[str, bytes]] = []
            remaining = list(names)

            def next_one(reply: ZkReply | None) -> None:
                if reply is not None and reply.error is None and isinstance(reply.value, ZkNode):
                    found.append((current[0], reply.value.data))
                if not remaining:
                    then(found)
                    return
                current[0] = remaining.pop(0)
                self._call(ZkGetData(self._path(queue, folder, current[0])), next_one)

            current = [""]
            next_one(None)

        self._children(queue, folder, listed)

    def _read_items(self, queue: str) -> None:
        if self._refuse_unknown("ReadItems", queue):
            return
        reply_to = self.ctx.sender

        def read(found: list[tuple[str, bytes]]) -> None:
            if reply_to is not None:
                items = tuple((ItemKey(queue, _number(name)), body) for name, body in found)
                self.ctx.send(reply_to, QueueItems(queue, items))

        self._read_all(queue, "items", read)

    def _read_dead(self, queue: str) -> None:
        if self._refuse_unknown("ReadDeadLetters", queue):
            return
        reply_to = self.ctx.sender

        def read(found: list[tuple[str, bytes]]) -> None:
            letters = []
            for _, data in found:
                fields = json.loads(data)
                letters.append(DeadLetter(ItemKey(queue, fields["number"]), fields["body"].encode("latin-1"),
                                          fields["takes"], fields["rollbacks"], fields["reason"]))
            if reply_to is not None:
                self.ctx.send(reply_to, DeadLetters(queue, tuple(letters)))

        self._read_all(queue, "dlq", read)

    def _stats(self, queue: str) -> None:
        if self._refuse_unknown("GetTxStats", queue):
            return
        reply_to = self.ctx.sender

        def counted(items: list[str], locks: list[str], dead: list[str]) -> None:
            if reply_to is not None:
                self.ctx.send(reply_to, TxQueueStats(queue, len(items), len(locks), len(dead)))

        self._children(queue, "items", lambda items: self._children(
            queue, "locks", lambda locks: self._children(queue, "dlq", lambda dead: counted(items, locks, dead))))
