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
import contextlib
import json
from collections.abc import Callable, Iterable
from typing import Any, Literal, cast, final

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
    ZkWatchFired,
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
from ._values import AtLeastOnce, DeadLetter, ItemKey, TxItem, TxQueueSettings
from ._zk_group import MultiGroups
from ._zk_settings import settings_from_bytes, settings_to_bytes

CANDIDATES = 8
"""A take tries among this many first items, in an order drawn from the context's random (FIFO relaxed)."""

RESCAN_S = 1.0
"""A waiting take wakes when a children watch on ``items/`` or ``locks/`` fires, and lists again at least this
often anyway: a watch can be lost (kazoo fires its watches when the connection drops, an expiry drops them)."""

LOST_RETRY_S = 0.25
"""A waiting take whose listing was lost to a connection loss lists again this soon."""

COMMIT_CHECKS = 20
"""After a commit's multi is answered ``connection_loss``, read its marker back at most this many times."""

COMMIT_CHECK_PAUSE_S = 0.25
"""The pause between two reads of a commit's marker, while the session reconnects."""

LISTING_TTL_S = 0.1
"""A take's first look picks its candidates from the last listing of ``items/`` while it is this young
(seconds); our own commits keep it up to date, items committed away by others are skipped when their check
fails, and a take that finds nothing in it lists again for real (watches set) before it answers or parks.
A watch firing on the queue's ``items/``, an expiry and every session event drop it."""

AHEAD_MAX = 8
"""At most this many items of a queue taken ahead (locked, waiting for the next take) or being taken ahead."""

AHEAD_LISTING_S = 1.0
"""A take ahead picks its item from the cached listing while it is this young (seconds): a listing older than
a take's (``LISTING_TTL_S``) may name an item committed away, whose check then fails the combined multi and
sends the commit again alone, a round trip more, as it cost before takes ahead."""

AHEAD_HOLD_S = 0.1
"""An item taken ahead that no take asked for within this long is given back (its lock and meta deleted)."""

BODIES_MAX_BYTES = 4 * 1024 * 1024
"""By default, at most about this many bytes of bodies of items this backend put are kept, to hand over without a
read (``ZkTxBackend.body_cache_bytes``)."""

MARKERS_A_BATCH = 64
"""Answered commits' markers are deleted this many in one multi..."""

MARKERS_AFTER_S = 1.0
"""... or this long after the first of a batch, whichever comes first."""

Continuation = Callable[[ZkReply], None]

_TRANSIENT = ("connection_loss", "session_expired")
"""Answers that say nothing about the request but that the session is being replaced or reconnected."""


@final
@attrs.frozen
class _Retry:
    """Time to list the queue again for a take parked in round ``round`` (a later round ignores it)."""

    session: ActorRef
    tx: int
    round: int


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
    meta_version: int = -1
    """The version of ``meta-N`` as this transaction wrote it: a release or dead letter applies only at it."""


@final
@attrs.define
class _Take:
    """A take in progress: the request, who to answer, when it stops waiting."""

    request: TakeItem
    reply_to: ActorRef | None
    deadline: float
    cancelled: bool = False
    parked: bool = False
    """Waiting for a watch, a timer or the next session; no chain of calls runs for it."""
    round: int = 0
    woken: bool = False
    """A watch fired while its chain ran: list again at once instead of parking."""
    wake_at: float | None = None
    """The earliest end of a backoff it skipped this round."""
    first_look: Literal["", "cache", "listing"] = ""
    """Where its first candidates came from: the cached listing (it may miss items others put) or a listing
    without watches (a take that finds an item needs none). Either way ``_nothing`` lists again, with
    watches, before it parks, and after the cache before it answers none."""
    lock: str = ""
    """The lock its fresh take is creating (``_try_fresh``)."""
    ahead: bool = False
    """Taken ahead, for no transaction yet: its item goes to ``ZkTxBackend.ready`` (``_take_ahead``), unless a
    take adopts it first and it becomes that take's."""


@final
@attrs.frozen
class _Ready:
    """An item taken ahead (locked, its take counted, its body read) on the session of ``epoch``, since ``since``."""

    held: _Held
    epoch: int
    since: float


class BodyCache:
    """Bodies of the items a backend put, by key, oldest dropped first past ``max_bytes``.

    An item's body never changes (``item-N`` is created with it and only ever deleted) and its number is
    never reused while its queue exists (ZooKeeper's sequence), so a body kept here is the item's as long
    as the item is there: a take whose multi checked ``item-N`` may hand it over without reading it.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        """Bytes of the bodies kept."""
        self._bodies: dict[ItemKey, bytes] = {}

    def remember(self, bodies: Iterable[tuple[ItemKey, bytes]]) -> None:
        """Keep these items' bodies, then drop the oldest until at most ``max_bytes`` are kept."""
        for key, body in bodies:
            self.size += len(body) - len(self._bodies.pop(key, b""))
            self._bodies[key] = body
        while self.size > self.max_bytes:
            oldest = next(iter(self._bodies))
            self.size -= len(self._bodies.pop(oldest))

    def take(self, key: ItemKey) -> bytes | None:
        """The item's body if kept, forgotten now (its take has it; a later take reads it), else None."""
        body = self._bodies.pop(key, None)
        if body is not None:
            self.size -= len(body)
        return body

    def __len__(self) -> int:
        return len(self._bodies)


def _number(name: str) -> int:
    """``item-0000000007`` -> 7."""
    return int(name.rsplit("-", 1)[1])


def _meta_bytes(meta: ItemMeta) -> bytes:
    return json.dumps([meta.takes, meta.rollbacks, meta.not_before]).encode()


_FIRST_TAKE = ItemMeta(takes=1)
_FIRST_TAKE_BYTES = _meta_bytes(_FIRST_TAKE)
"""``meta-N`` as a fresh item's take creates it."""


def _meta_of(node: object) -> ItemMeta:
    if not isinstance(node, ZkNode) or not node.data:
        return ItemMeta()
    takes, rollbacks, not_before = json.loads(node.data)
    return ItemMeta(takes, rollbacks, not_before)


class ZkTxBackend(Actor):
    """Transactional queues kept in ZooKeeper, through the session actor ``zk``, under ``/<root>``."""

    def __init__(self, zk: ActorRef, *, root: str = "conveyor-tx", strict_fifo: bool = False,
                 body_cache_bytes: int = BODIES_MAX_BYTES) -> None:
        if type(root) is not str or not root or "/" in root:
            msg = f"ZkTxBackend.root must be a non-empty str without '/', got {root!r}"
            raise ValueError(msg)
        if type(strict_fifo) is not bool:
            msg = f"ZkTxBackend.strict_fifo must be a bool, got {strict_fifo!r}"
            raise ValueError(msg)
        if type(body_cache_bytes) is not int or body_cache_bytes < 0:
            msg = f"ZkTxBackend.body_cache_bytes must be an int >= 0 (0: none kept), got {body_cache_bytes!r}"
            raise ValueError(msg)
        self.zk = zk
        self.root = root
        self.strict_fifo = strict_fifo
        """Try the first items in their order; by default in a drawn order (FIFO relaxed: contenders spread out)."""
        self.settings: dict[str, TxQueueSettings] = {}
        self.pending: dict[int, Continuation] = {}
        self.multi_groups = MultiGroups(self._call, self._after)
        """Commit and fresh-take multis ready while another is in flight go as one (``_zk_group.py``)."""
        self.next_request = 0
        self.held: dict[tuple[ActorRef, int], list[_Held]] = {}
        self.takes: dict[tuple[ActorRef, int], _Take] = {}
        self.watched: set[ActorRef] = set()
        self.later: dict[int, Callable[[], None]] = {}
        self.watching: set[str] = set()
        """Folders (``items/``, ``locks/``) with a children watch set and not yet fired."""
        self.backoff: dict[tuple[str, int], float] = {}
        """Items seen in their redelivery backoff, by (queue, number): not tried again before that time."""
        self.claimed: set[str] = set()
        """Lock paths a transaction of this backend holds or is taking; any other lock of our session is an orphan."""
        self.session_id: int | None = None
        self.guarded: int | None = None
        """The last session whose guard node (``_guard``) this backend created."""
        self.expired = False
        """The session expired (or closed) and no new one is connected yet."""
        self.closed = False
        """The session was closed: no new one will come."""
        self.epoch = 0
        """Counts lost sessions: a chain begun on an earlier session neither answers ``Taken`` nor deletes a lock."""
        self.on_connected: list[Callable[[], None]] = []
        """Steps waiting for the next session (a commit whose outcome an expiry hid)."""
        self.lost: set[tuple[ActorRef, int]] = set()
        """Transactions whose locks went with an expired session: their commit aborts naming the expiry."""
        self.listings: dict[str, tuple[float, list[int]]] = {}
        """Per queue, when ``items/`` was listed and its item numbers in order, kept up to date with our commits."""
        self.spent_markers: list[str] = []
        """Markers of this session's answered commits, to delete in one multi (``_spend_marker``)."""
        self.ready: dict[str, list[_Ready]] = {}
        """Per queue, items taken ahead that wait for the next take (``_take_ahead``)."""
        self.ahead: dict[str, list[_Take]] = {}
        """Per queue, takes ahead in progress: a take that finds no ready item adopts one."""
        self.sweeping = False
        """A sweep of the ready items is due (``_sweep_ready``)."""
        self.bodies = BodyCache(body_cache_bytes)
        """Bodies of items this backend's commits put: a fresh take of one needs no read of it."""

    def on_start(self) -> None:
        """Hear the ZooKeeper session's events: an expiry drops every lock at once."""
        self.ctx.send(self.zk, ZkWatchSession(self.ctx.self_ref))

    def on_stop(self) -> None:
        """Give back the items taken ahead: no take of this backend will ask for them."""
        for queue in list(self.ready):
            for entry in list(self.ready[queue]):
                self._give_back(queue, entry)

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
                if state == "connected" and session_id != self.guarded and not self.closed:
                    self.guarded = session_id
                    self._keep_guard(session_id)
                self.session_id = session_id
                self.listings.clear()  # items may have come and gone unseen (and our watches with the session)
                if state in ("expired", "closed"):
                    self._session_lost(closed=state == "closed")
                elif state == "connected" and not self.closed and self.expired:
                    self.expired = False  # a new session (kazoo opens one after an expiry): serve on it
                    for waiting in list(self.takes.values()):
                        self._wake(waiting)
                    resumed, self.on_connected = self.on_connected, []
                    for resume in resumed:
                        resume()
            case ZkWatchFired(path=path):
                self.watching.discard(path)
                queue, folder = path[len(self.root) + 2:].rsplit("/", 1)
                if folder == "items":  # a lock's change (our own creates included) leaves the listing right
                    self.listings.pop(queue, None)
                for waiting in [t for t in self.takes.values() if t.request.queue == queue]:
                    self._wake(waiting)
            case DeclareTxQueue(settings=settings):
                self._declare(settings)
            case TakeItem():
                self._start_take(message)
            case _Later(number=number):
                step = self.later.pop(number, None)
                if step is not None:
                    step()
            case _Retry(session=session, tx=tx, round=round_):
                take = self.takes.get((session, tx))
                if take is not None and take.parked and take.round == round_:
                    self._wake(take)
            case CancelTake(session=session, tx=tx):
                take = self.takes.get((session, tx))
                if take is not None:
                    self._cancel(take)
            case CommitTx():
                self._commit(message)
            case RollbackTx(session=session, tx=tx, failed=failed, handed_over=handed_over):
                take = self.takes.get((session, tx))
                if take is not None:
                    self._cancel(take)
                reply_to = self.ctx.sender
                self.lost.discard((session, tx))
                held = self.held.pop((session, tx), [])
                self._release(held, failed=failed, handed_over=handed_over)
                if reply_to is not None:
                    self.ctx.send(reply_to, TxRolledBack(tx, tuple(h.key for h in held)))
            case Terminated(ref=ref):
                self.watched.discard(ref)
                self.lost = {owner for owner in self.lost if owner[0] != ref}
                for waiting in list(self.takes.values()):
                    if waiting.request.session == ref:
                        self._cancel(waiting)  # a lock it is taking now is released when the take ends
                for owner in [owner for owner in self.held if owner[0] == ref]:
                    self._release(self.held.pop(owner), failed=False, handed_over=True)
            case ReadItems(queue=queue):
                self._read_items(queue)
            case ReadDeadLetters(queue=queue):
                self._read_dead(queue)
            case GetTxStats(queue=queue):
                self._stats(queue)

    def _session_lost(self, *, closed: bool) -> None:
        """ZooKeeper removed every lock of the session at once: forget every held item and claimed lock."""
        self.epoch += 1
        self.expired = True
        self.closed = self.closed or closed
        self.lost.update(self.held)
        self.held.clear()
        self.claimed.clear()
        self.watching.clear()  # an expired session's watches are gone with it
        self.spent_markers.clear()  # ephemeral: they went with it
        self.ready.clear()  # their locks went with it; their takes stay counted, as a client's that died

    def _when_back(self, step: Callable[[], None]) -> None:
        """Run ``step`` after a lost connection or session: a moment later, on a connected session."""
        self._after(LOST_RETRY_S, lambda: self._when_connected(step))

    def _when_connected(self, step: Callable[[], None]) -> None:
        """Run ``step`` now if a session is connected, else once the next one is (never, once closed)."""
        if not self.expired:
            step()
        elif not self.closed:
            self.on_connected.append(step)

    def _session_problem(self) -> str:
        """Why nothing can be done now ("" once a session is connected)."""
        if self.closed:
            return "the ZooKeeper session is closed"
        if self.expired:
            return "the ZooKeeper session expired; a new one is opening"
        return ""

    def _unknown(self, queues: list[str]) -> str:
        declared = ", ".join(self.settings) or "none"
        named = f"queue {queues[0]!r}" if len(queues) == 1 else f"queues {queues}"
        return f"unknown {named}; declared queues: {declared}"

    def _with_queues(self, queues: list[str], then: Callable[[], None], refuse: Callable[[str], None]) -> None:
        """Run ``then`` once every queue's settings are known: declared here, or read from ``/<root>/<queue>``
        (a process needs no declare of a queue another declared); else ``refuse`` with why."""
        missing = sorted({queue for queue in queues if queue not in self.settings})

        def next_queue(index: int) -> None:
            if index < len(missing):
                self._read_settings(missing[index], lambda: next_queue(index + 1))
                return
            unknown = [queue for queue in missing if queue not in self.settings]
            if unknown:
                refuse(self._unknown(unknown))
            else:
                then()

        next_queue(0)

    def _read_settings(self, queue: str, then: Callable[[], None], tries: int = COMMIT_CHECKS) -> None:
        """Learn ``queue``'s settings from its node's data (none there: it stays unknown), then ``then()``."""

        def read(reply: ZkReply) -> None:
            if reply.error in _TRANSIENT and tries > 1:
                self._when_back(lambda: self._read_settings(queue, then, tries - 1))
                return
            if reply.error is None and isinstance(reply.value, ZkNode) and reply.value.data:
                with contextlib.suppress(ValueError):  # unreadable: the queue stays unknown
                    self.settings.setdefault(queue, settings_from_bytes(queue, reply.value.data))
            then()

        self._call(ZkGetData(self._path(queue)), read)

    def _known(self, request: str, queue: str, then: Callable[[ActorRef | None], None]) -> None:
        """``then(reply_to)`` once ``queue`` is known, else answer ``TxRefused`` naming it."""
        reply_to = self.ctx.sender

        def refuse(why: str) -> None:
            if reply_to is not None:
                self.ctx.send(reply_to, TxRefused(request, why))

        self._with_queues([queue], lambda: then(reply_to), refuse)

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
            if reply is not None and reply.error in _TRANSIENT:
                remaining.insert(0, current[0])  # a create is safe to repeat: node_exists counts as done
                self._when_back(lambda: next_path(None))
                return
            if reply is not None and reply.error not in (None, "node_exists"):
                if reply_to is not None:
                    self.ctx.send(reply_to, TxRefused("DeclareTxQueue", f"ZooKeeper answered {reply.error}"))
                return
            if not remaining:
                self._claim_settings(settings, reply_to)
                return
            current[0] = remaining.pop(0)
            self._call(ZkCreate(current[0], make_parents=True), next_path)

        current = [""]
        next_path(None)

    def _claim_settings(self, settings: TxQueueSettings, reply_to: ActorRef | None, tries: int = COMMIT_CHECKS) -> None:
        """Write the queue's settings into ``/<root>/<queue>`` if none are there, else check they are ours.

        The folders exist first (the node was made as their parent, with no data), so a reader that
        finds settings finds the queue ready; two declares racing are ordered by the node's version.
        """
        path = self._path(settings.name)
        ours = settings_to_bytes(settings)

        def answer(message: TxQueueDeclared | TxRefused) -> None:
            if reply_to is not None:
                self.ctx.send(reply_to, message)

        def again(reply: ZkReply) -> bool:
            if reply.error in _TRANSIENT and tries > 1:
                self._when_back(lambda: self._claim_settings(settings, reply_to, tries - 1))
                return True
            if reply.error == "bad_version" and tries > 1:  # another declare wrote first: read what it wrote
                self._claim_settings(settings, reply_to, tries - 1)
                return True
            if reply.error is not None:
                answer(TxRefused("DeclareTxQueue", f"ZooKeeper answered {reply.error} on {path}"))
                return True
            return False

        def written(reply: ZkReply) -> None:
            if not again(reply):
                self.settings[settings.name] = settings
                answer(TxQueueDeclared(settings.name))

        def read(reply: ZkReply) -> None:
            if again(reply):
                return
            node = cast("ZkNode", reply.value)
            if not node.data:
                self._call(ZkSetData(path, ours, node.version), written)
                return
            try:
                theirs: TxQueueSettings | str = settings_from_bytes(settings.name, node.data)
            except ValueError as error:
                theirs = str(error)
            if theirs != settings:
                answer(TxRefused("DeclareTxQueue", f"queue {settings.name!r} is declared in ZooKeeper ({path}) with "
                                                   f"{theirs}; this declare asks {settings}"))
                return
            self.settings[settings.name] = settings
            answer(TxQueueDeclared(settings.name))

        self._call(ZkGetData(path), read)

    # --- take ------------------------------------------------------------------------------------

    def _start_take(self, request: TakeItem) -> None:
        if self.closed or (self.expired and request.wait_s <= 0):
            self.ctx.reply(NothingTaken(request.tx, request.queue, self._session_problem()))
            return
        if request.session not in self.watched:
            self.watched.add(request.session)
            self.ctx.watch(request.session)
        take = _Take(request, self.ctx.sender, self.ctx.now() + request.wait_s)
        self.takes[(request.session, request.tx)] = take
        self._with_queues([request.queue],
                          lambda: self._first_list(take) if not take.cancelled else self._nothing(take),
                          lambda why: self._nothing(take, why))

    def _finish(self, take: _Take, answer: Taken | NothingTaken) -> None:
        if take.ahead:  # nobody asked: nothing to answer
            self._ahead_over(take)
            return
        request = take.request
        self.takes.pop((request.session, request.tx), None)
        if take.reply_to is not None:
            self.ctx.send(take.reply_to, answer)

    def _nothing(self, take: _Take, reason: str = "", *, soon: bool = False) -> None:
        """No item now: answer, or park the take until a watch fires, a backoff ends or a rescan is due."""
        now = self.ctx.now()
        if reason or take.cancelled or self.closed:
            self._finish(take, NothingTaken(take.request.tx, take.request.queue, reason))
            return
        if take.first_look == "cache" or (take.first_look == "listing" and now < take.deadline):
            take.first_look = ""  # look again, for real: watches set if it may park (docs: "Cost")
            take.woken = False
            self.listings.pop(take.request.queue, None)
            self._list(take)
            return
        if now >= take.deadline:
            self._finish(take, NothingTaken(take.request.tx, take.request.queue))
            return
        if take.woken and not self.expired:
            take.woken = False
            self._list(take)
            return
        take.parked = True
        take.round += 1
        delay = min(take.deadline - now, LOST_RETRY_S if soon else RESCAN_S)
        if take.wake_at is not None:
            delay = min(delay, max(0.0, take.wake_at - now))
            take.wake_at = None
        self.ctx.schedule(delay, _Retry(take.request.session, take.request.tx, take.round))

    def _wake(self, take: _Take) -> None:
        """Something may have changed for ``take``: list again now if parked, else once its chain ends."""
        if not take.parked:
            take.woken = True
            return
        take.parked = False
        if take.cancelled or self.ctx.now() >= take.deadline:
            self._nothing(take)
        else:
            self._list(take)

    def _cancel(self, take: _Take) -> None:
        """Stop ``take``: answered at once if parked, else when its chain ends (a lock it took is released)."""
        take.cancelled = True
        if take.parked:
            take.parked = False
            self._nothing(take)

    def _watch(self, folder: str) -> bool:
        """Whether a listing of ``folder`` should set a children watch (none set yet); marks it set."""
        if folder in self.watching:
            return False
        self.watching.add(folder)
        return True

    def _in_backoff(self, take: _Take, number: int) -> bool:
        """Whether item ``number`` was seen in a backoff that has not ended; the take then wakes at its end."""
        until = self.backoff.get((take.request.queue, number))
        if until is None:
            return False
        if until <= self.ctx.now():
            del self.backoff[(take.request.queue, number)]
            return False
        take.wake_at = until if take.wake_at is None else min(take.wake_at, until)
        return True

    def _first_list(self, take: _Take) -> None:
        """A take's first look: an item taken ahead, or a take ahead in progress; else the cached listing
        while it is young, else a listing without watches.

        A take served at once needs no watch, and a watch set at every take would fire at every commit
        and lock of ours, dropping the cache and costing a listing of ``items/`` and ``locks/`` each time.
        """
        if self._from_ready(take) or self._adopt(take):
            return
        cached = self.listings.get(take.request.queue)
        if cached is not None and not self.expired and self.ctx.now() - cached[0] < LISTING_TTL_S:
            candidates = self._candidates(take, cached[1])
            if candidates:
                take.first_look = "cache"
                self._try_fresh(take, candidates)
                return
        take.first_look = "listing"
        self._list(take)

    def _list(self, take: _Take) -> None:
        """List ``items/`` and try its first candidates; a take that may park (after its first look) watches
        ``items/`` and ``locks/``."""
        queue = take.request.queue
        if self.expired:  # between two sessions: wait for the next one
            self._nothing(take)
            return
        items = self._path(queue, "items")
        waits = take.deadline > self.ctx.now() and take.first_look != "listing"
        if waits:
            locks = self._path(queue, "locks")
            if self._watch(locks):
                self._call(ZkGetChildren(locks, watch=True),
                           lambda reply: self.watching.discard(locks) if reply.error is not None else None)
        watch = waits and self._watch(items)

        def listed(reply: ZkReply) -> None:
            if reply.error is not None:
                take.first_look = ""  # not listed: no second look at once
                if watch:
                    self.watching.discard(items)
                lost = reply.error in ("connection_loss", "session_expired")
                self._nothing(take, "" if lost else f"ZooKeeper answered {reply.error}", soon=lost)
                return
            numbers = sorted(_number(name) for name in reply.value)  # type: ignore[attr-defined]
            self.listings[queue] = (self.ctx.now(), numbers)
            listed_now = set(numbers)
            for key in [key for key in self.backoff if key[0] == queue and key[1] not in listed_now]:
                del self.backoff[key]  # committed or dead-lettered meanwhile
            self._try_fresh(take, self._candidates(take, numbers))

        self._call(ZkGetChildren(items, watch=watch), listed)

    def _candidates(self, take: _Take, numbers: list[int], *, one: bool = False) -> list[str]:
        """The first ``CANDIDATES`` items not in backoff that no transaction of ours claims, in an order drawn
        from the context's random (replayable in the simulator; contenders spread out) unless ``strict_fifo``;
        ``one``: only the first of that order (one draw, no shuffle)."""
        locks, claimed, backoff = self._path(take.request.queue, "locks"), self.claimed, self.backoff
        names: list[str] = []
        for number in numbers:  # with several transactions at once the listing's first items are ours: skipped cheaply
            if backoff and self._in_backoff(take, number):
                continue
            if f"{locks}/lock-{number}" not in claimed:
                names.append(f"item-{number:010d}")
                if len(names) == CANDIDATES:
                    break
        if self.strict_fifo or not names:
            return names[:1] if one else names
        rng = self.ctx.random  # the context's: the simulator replays it
        if one:
            return [names[rng.randrange(len(names))]]
        rng.shuffle(names)
        return names

    def _listing_changed(self, *, gone: Iterable[ItemKey] = (), created: Iterable[ItemKey] = ()) -> None:
        """Keep the cached listings up to date with items this backend saw go or created."""
        for key in gone:
            numbers = self.listings.get(key.queue, (0.0, []))[1]
            index = bisect.bisect_left(numbers, key.number)
            if index < len(numbers) and numbers[index] == key.number:
                del numbers[index]
        for key in created:
            numbers = self.listings.get(key.queue, (0.0, []))[1]
            index = bisect.bisect_left(numbers, key.number)
            if index == len(numbers) or numbers[index] != key.number:
                numbers.insert(index, key.number)

    def _claim_first(self, queue: str, candidates: list[str]) -> tuple[int, list[str], str] | None:
        """The first candidate whose lock no transaction of this backend holds or is taking, claimed: its number,
        the candidates after it and its lock's path; None when every one is claimed (or there is none)."""
        for index, name in enumerate(candidates):
            number = _number(name)
            lock = self._path(queue, "locks", f"lock-{number}")
            if lock not in self.claimed:
                self.claimed.add(lock)
                return number, candidates[index + 1:], lock
        return None

    def _try(self, take: _Take, candidates: list[str]) -> None:
        """Lock the first candidate that can be locked, else answer that nothing was taken.

        A take ahead stops here: it takes a fresh item in one multi or nothing."""
        claimed = (None if take.cancelled or take.ahead or self.expired
                   else self._claim_first(take.request.queue, candidates))
        if claimed is None:
            self._nothing(take)
            return
        number, rest, lock = claimed
        uuid = self._uuid().encode()
        epoch = self.epoch

        def created(reply: ZkReply) -> None:
            if self.epoch != epoch:  # the session that made it is gone, and its lock with it
                if reply.error != "session_expired":  # unless the create reached the server on the new one
                    self._drop_stale(lock, uuid)
                self._try(take, rest)
            elif reply.error is None:
                self._locked(take, number, rest)
            else:  # connection_loss: was it applied? our uuid says so. node_exists: is it an orphan of ours?
                self._call(ZkGetData(lock), lambda read: checked(read, lost=reply.error == "connection_loss"))

        def checked(reply: ZkReply, *, lost: bool) -> None:
            node = reply.value if reply.error is None else None
            if self.epoch != epoch:
                self._try(take, rest)
            elif isinstance(node, ZkNode) and (node.data == uuid if lost else self._orphan(node)):
                self._locked(take, number, rest)
            else:
                self.claimed.discard(lock)
                self._try(take, rest)

        self._call(ZkCreate(lock, uuid, ephemeral=True), created)

    def _try_fresh(self, take: _Take, candidates: list[str]) -> None:
        """Take the first candidate as a fresh item (no ``meta-N`` yet: never taken) in one write.

        One multi checks the item, creates our lock and creates its meta with the take counted; the
        item's read is sent right behind it (a session serves its requests in order), so a take costs
        one round trip after the listing. Anything else (the lock held, maybe by an orphan of ours; the
        item has meta) goes to ``_try``, which locks first and reads after; an item gone is skipped.
        """
        queue = take.request.queue
        claimed = None if take.cancelled or self.expired else self._claim_first(queue, candidates)
        if claimed is None:
            self._nothing(take)
            return
        number, rest, lock = claimed
        take.lock = lock
        uuid = self._uuid().encode()
        epoch = self.epoch
        key = ItemKey(queue, number)
        item_path = self._path(queue, "items", f"item-{number:010d}")
        counted = _Held(key, b"", _FIRST_TAKE, meta_version=0)  # meta-N as the multi creates it
        replies: dict[str, ZkReply] = {}

        def arrived(which: str, reply: ZkReply) -> None:
            replies[which] = reply
            if len(replies) == 2:
                decided(replies["multi"], replies["item"])

        def decided(multi: ZkReply, item: ZkReply) -> None:
            if self.epoch != epoch:  # the session that made the lock is gone, and the lock with it
                if multi.error in (None, "connection_loss"):  # unless the multi reached the server on the new one
                    self._drop_stale(lock, uuid)
                self._try(take, rest)
            elif multi.error is None:
                got_item(item)
            elif multi.error == "connection_loss":  # applied or not: our uuid in lock-N says
                self._call(ZkGetData(lock), recovered)
            else:
                self.claimed.discard(lock)
                if isinstance(multi.value, ZkMultiFailed) and multi.value.index == 0:
                    self._listing_changed(gone=(key,))  # committed away by another transaction
                    self._try_fresh(take, rest)
                else:  # locked (by another, or an orphan of ours), or taken before: lock first, then read
                    self._try(take, candidates)

        def recovered(reply: ZkReply) -> None:
            if self.epoch != epoch:
                self._try(take, rest)
            elif reply.error is None and isinstance(reply.value, ZkNode) and reply.value.data == uuid:
                self._call(ZkGetData(item_path), got_item)
            else:
                self.claimed.discard(lock)
                self._try_fresh(take, rest)

        def got_item(reply: ZkReply) -> None:
            if self.epoch != epoch:  # after an expiry the take stays counted, as a client that died holding it
                self._try(take, rest)
            elif reply.error is None and isinstance(reply.value, ZkNode):
                self._hand_over(take, attrs.evolve(counted, body=reply.value.data))
            else:  # the read was lost: give the item back, its take uncounted
                self._release([counted], failed=False, handed_over=False)
                self._try_fresh(take, rest)

        operations = (ZkCheck(item_path, -1), ZkCreate(lock, uuid, ephemeral=True),
                      ZkCreate(self._path(queue, "meta", f"meta-{number}"), _FIRST_TAKE_BYTES))
        self.multi_groups.submit(operations, lambda reply: arrived("multi", reply))  # grouped as commits are
        body = self.bodies.take(key)
        if body is None:
            self._call(ZkGetData(item_path), lambda reply: arrived("item", reply))
        else:  # put by this backend: the multi's check says it is still there, with this body
            arrived("item", ZkReply(-1, ZkNode(body, 0, 0)))

    def _hand_over(self, take: _Take, held: _Held) -> None:
        """The item is locked with its take counted: answer ``Taken``, or give it back if nobody waits any more;
        an item taken ahead waits for the next take (``ready``)."""
        if take.ahead:
            self._ahead_over(take)
            self._keep_ready(held)
            return
        request = take.request
        if take.cancelled or request.session not in self.watched:
            self._release([held], failed=False, handed_over=False)
            self._nothing(take)
            return
        self.held.setdefault((request.session, request.tx), []).append(held)
        self._finish(take, Taken(request.tx, TxItem(held.key, held.body, held.meta.takes)))

    # --- take ahead ------------------------------------------------------------------------------

    def _take_ahead(self, queue: str) -> None:
        """Take a fresh item of ``queue`` for the next take, in the multi of the commit now submitted.

        A transaction that took from ``queue`` commits: its client most likely takes from it again at once.
        The fresh take's multi (check the item, create our lock, create its meta with the take counted)
        goes in the same multi as the commit (``MultiGroups.together``) and its body's read right behind,
        so the next take is answered with no call. Every guarantee is the fresh take's: the lock is ephemeral,
        the take counted before it is handed over, a combined multi that fails is sent again part by part.
        Only for ``AtLeastOnce`` queues, where a count the next take never used costs no delivery: an
        expiry leaves the item's take counted as for a client that died holding it, and under ``ConsumeTimes``
        that would be one of its K. Items from the cached listing only, while it is young (``AHEAD_LISTING_S``); at most
        ``AHEAD_MAX`` a queue; one no take asks for within ``AHEAD_HOLD_S`` is given back (``_give_back``).
        """
        settings = self.settings.get(queue)
        if settings is None or not isinstance(settings.policy, AtLeastOnce) or self.expired or self.closed:
            return
        if len(self.ready.get(queue, ())) + len(self.ahead.get(queue, ())) >= AHEAD_MAX:
            return
        cached = self.listings.get(queue)
        if cached is None or self.ctx.now() - cached[0] >= AHEAD_LISTING_S:
            return
        take = _Take(TakeItem(self.ctx.self_ref, 1, queue), None, self.ctx.now(), ahead=True)
        candidates = self._candidates(take, cached[1], one=True)  # a take ahead tries no second item
        if candidates:
            self.ahead.setdefault(queue, []).append(take)
            self._try_fresh(take, candidates)

    def _ahead_over(self, take: _Take) -> None:
        """A take ahead ended (its item ready, or none): no take can adopt it any more."""
        pending = self.ahead.get(take.request.queue, [])
        for index, other in enumerate(pending):
            if other is take:
                del pending[index]
                break

    def _adopt(self, take: _Take) -> bool:
        """Make a take ahead in progress on ``take``'s queue this take's own: it answers ``take``'s client,
        with its deadline; finding nothing, it lists again as a take whose first look was the cache."""
        pending = self.ahead.get(take.request.queue)
        if not pending or take.cancelled:
            return False
        adopted = pending.pop(0)
        adopted.ahead = False
        adopted.request, adopted.reply_to, adopted.deadline = take.request, take.reply_to, take.deadline
        adopted.first_look = "cache"
        self.takes[(take.request.session, take.request.tx)] = adopted
        return True

    def _keep_ready(self, held: _Held) -> None:
        """An item taken ahead waits for the next take of its queue, ``AHEAD_HOLD_S`` to twice that at most."""
        self.ready.setdefault(held.key.queue, []).append(_Ready(held, self.epoch, self.ctx.now()))
        if not self.sweeping:
            self.sweeping = True
            self._after(AHEAD_HOLD_S, self._sweep_ready)

    def _sweep_ready(self) -> None:
        """Give back the items taken ahead that waited ``AHEAD_HOLD_S``; look again later while any wait.

        One timer for all of them, not one an item: most are taken within milliseconds, and a timer
        each was about a tenth of the client's CPU with 8 concurrent transactions."""
        self.sweeping = False
        now = self.ctx.now()
        for queue, entries in self.ready.items():
            for entry in [entry for entry in entries if now - entry.since >= AHEAD_HOLD_S]:
                self._give_back(queue, entry)
        if any(self.ready.values()):
            self.sweeping = True
            self._after(AHEAD_HOLD_S, self._sweep_ready)

    def _from_ready(self, take: _Take) -> bool:
        """Hand ``take`` an item taken ahead on this session, if one is ready."""
        ready = self.ready.get(take.request.queue)
        while ready and not self.expired:
            entry = ready.pop(0)
            if entry.epoch == self.epoch:
                self._hand_over(take, entry.held)
                return True
        return False

    def _ahead_locks(self, queue: str) -> set[str]:
        """The lock paths of ``queue``'s items taken ahead, ready or being taken."""
        ready = {self._path(queue, "locks", f"lock-{entry.held.key.number}") for entry in self.ready.get(queue, ())}
        return ready | {take.lock for take in self.ahead.get(queue, ())}

    def _give_back(self, queue: str, entry: _Ready) -> None:
        """An item taken ahead that no take asked for: delete its meta and lock, as fresh as before (if still
        ready: a take may have had it, an expiry took its lock)."""
        ready = self.ready.get(queue, [])
        index = next((n for n, other in enumerate(ready) if other is entry), None)
        if index is None:
            return
        del ready[index]
        if entry.epoch != self.epoch:
            return
        key = entry.held.key
        lock = self._path(queue, "locks", f"lock-{key.number}")
        self.claimed.discard(lock)
        meta = ZkDelete(self._path(queue, "meta", f"meta-{key.number}"), entry.held.meta_version)
        self._call(ZkMulti((meta, ZkDelete(lock))), lambda _: None)

    def _drop_stale(self, lock: str, uuid: bytes, tries: int = COMMIT_CHECKS) -> None:
        """A lock create (alone or in a fresh take's multi) begun on an expired session that the session actor
        sent again on the new one: if
        ``lock`` is there with this attempt's uuid, no transaction holds it; delete it, or it would stay
        for the new session's whole life when its item is gone (no take would ever reclaim it)."""

        def read() -> None:
            epoch = self.epoch

            def got(reply: ZkReply) -> None:
                node = reply.value if reply.error is None else None
                if reply.error in _TRANSIENT and tries > 1:  # a lost read proves nothing: read again
                    self._when_back(lambda: self._drop_stale(lock, uuid, tries - 1))
                elif isinstance(node, ZkNode) and node.data == uuid and self._orphan(node) and lock not in self.claimed:
                    self._unlock(lock, epoch, node.ephemeral_owner)

            self._call(ZkGetData(lock), got)

        self._when_connected(read)

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
        epoch = self.epoch

        owner = self.session_id  # as this backend knows it: a guard of an older session deletes nothing

        def give_up(_: ZkReply | None = None) -> None:
            if self.epoch != epoch:  # the lock went with its session; another may hold lock-N now
                self._try(take, rest)
                return
            self.claimed.discard(lock)
            self._unlock(lock, epoch, owner)
            self._try(take, rest)

        def got_item(reply: ZkReply) -> None:
            if reply.error is not None or not isinstance(reply.value, ZkNode):
                give_up()  # committed away by another transaction meanwhile
                return
            body = reply.value.data
            self._call(ZkGetData(meta_path), lambda meta_reply: got_meta(body, meta_reply))

        def got_meta(body: bytes, reply: ZkReply) -> None:
            if self.epoch != epoch:
                give_up()
                return
            meta = _meta_of(reply.value) if reply.error is None else ItemMeta()
            meta_exists = reply.error is None
            version = reply.value.version if isinstance(reply.value, ZkNode) else -1
            if meta.not_before > self.ctx.now():
                self.backoff[(queue, number)] = meta.not_before
                take.wake_at = meta.not_before if take.wake_at is None else min(take.wake_at, meta.not_before)
                give_up()
                return
            reason = refuse_take(settings, meta)
            if reason is not None:
                self._dead_letter(_Held(key, body, meta, version), reason, meta_exists, lambda: self._try(take, rest))
                return
            counted = attrs.evolve(meta, takes=meta.takes + 1)
            # at its version: a take counted meanwhile by anyone else fails this write (at most K holds regardless)
            write = ZkSetData(meta_path, _meta_bytes(counted), version) if meta_exists else ZkCreate(
                meta_path, _meta_bytes(counted))

            def counted_done(reply: ZkReply) -> None:
                if reply.error is not None or self.epoch != epoch:
                    give_up()  # after an expiry the take stays counted, as a client that died holding it
                    return
                self._hand_over(take, _Held(key, body, counted, reply.value if isinstance(reply.value, int) else 0))

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
            write = ZkSetData(meta_path, _meta_bytes(released.meta), item.meta_version)
            self._call(ZkMulti((write, ZkDelete(lock))), lambda _: None)

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
            operations.append(ZkDelete(self._path(queue, "meta", f"meta-{number}"), item.meta_version))
        lock = self._path(queue, "locks", f"lock-{number}")
        self.claimed.discard(lock)
        operations.append(ZkDelete(lock))
        self._call(ZkMulti(tuple(operations)), lambda _: then())

    # --- commit ----------------------------------------------------------------------------------

    def _commit(self, request: CommitTx) -> None:
        reply_to = self.ctx.sender
        if not self._commit_refused(request, reply_to):  # a put's queue may have to be read from ZooKeeper first
            self._with_queues([put.queue for put in request.puts], lambda: self._apply_commit(request, reply_to),
                              lambda why: self._abort(request, reply_to, f"put to {why}"))

    def _abort(self, request: CommitTx, reply_to: ActorRef | None, why: str) -> None:
        """Answer ``TxAborted``: the transaction's locks are released, as by a rollback of a lost client."""
        self._release(self.held.pop((request.session, request.tx), []), failed=False, handed_over=True)
        if reply_to is not None:
            self.ctx.send(reply_to, TxAborted(request.tx, why))

    def _commit_refused(self, request: CommitTx, reply_to: ActorRef | None) -> bool:
        """Abort before any call a commit that cannot apply: its session's locks gone, or takes not held."""
        owner = (request.session, request.tx)
        if owner in self.lost or self.expired:
            self.lost.discard(owner)
            closed = self._session_problem() if self.closed else ""
            self._abort(request, reply_to, closed or "the ZooKeeper session expired: its locks are gone")
            return True
        held = {item.key for item in self.held.get(owner, [])}
        missing = [key for key in request.takes if key not in held]
        if missing:
            self._abort(request, reply_to, f"not locked by this transaction: {missing}")
            return True
        return False

    def _apply_commit(self, request: CommitTx, reply_to: ActorRef | None) -> None:
        """Every take held and every put's queue known: the one multi, its result checked."""
        if self._commit_refused(request, reply_to):  # again: things may have changed while a queue was read
            return
        owner = (request.session, request.tx)
        held = {item.key: item for item in self.held.get(owner, [])}

        def answer(message: TxCommitted | TxAborted) -> None:
            if reply_to is not None:
                self.ctx.send(reply_to, message)

        operations: list[Any] = []
        for key in request.takes:
            operations += [
                ZkDelete(self._path(key.queue, "items", f"item-{key.number:010d}")),
                ZkDelete(self._path(key.queue, "meta", f"meta-{key.number}"), held[key].meta_version),
                ZkDelete(self._path(key.queue, "locks", f"lock-{key.number}")),
            ]
        marker = f"{self._commits()}/commit-{self._uuid()}"
        # Ephemeral: it is read back on the same session only (a reconnection keeps it), and goes with the
        # session, so no marker outlives its writer, a crashed process's included.
        operations.append(ZkCreate(marker, ephemeral=True))
        first_put = len(operations)
        operations += [ZkCreate(self._path(put.queue, "items", "item-"), put.body, sequential=True)
                       for put in request.puts]
        epoch, session_id = self.epoch, self.session_id

        def committed(created: tuple[ItemKey, ...]) -> None:
            self.held.pop(owner, None)
            self.lost.discard(owner)
            if self.epoch == epoch:
                for key in request.takes:
                    self.claimed.discard(self._path(key.queue, "locks", f"lock-{key.number}"))
            self._listing_changed(gone=request.takes, created=created)
            self.bodies.remember(zip(created, (put.body for put in request.puts), strict=False))  # () if lost
            answer(TxCommitted(request.tx, created))
            self._spend_marker(marker, epoch)

        def aborted(reason: str) -> None:
            self.lost.discard(owner)
            self._abort(request, reply_to, reason)

        def done(reply: ZkReply) -> None:
            if reply.error is None:
                paths = cast("tuple[str, ...]", reply.value)[first_put:]
                committed(tuple(ItemKey(put.queue, _number(path.rsplit("/", 1)[1]))
                                for put, path in zip(request.puts, paths, strict=True)))
            elif reply.error == "connection_loss":
                read_marker(COMMIT_CHECKS)
            else:
                aborted(f"the commit's multi failed: {reply.value or reply.error}")

        def read_marker(checks_left: int) -> None:
            if self.epoch != epoch:
                after_expiry()
            else:
                self._call(ZkExists(marker), lambda found: resolved(found, checks_left))

        def resolved(reply: ZkReply, checks_left: int) -> None:
            """The multi's outcome after a lost connection: its marker exists iff it was applied."""
            if self.epoch != epoch or reply.error == "session_expired":
                after_expiry()  # the marker went with the session: it can no longer tell
            elif reply.error is None:
                if reply.value is not None:
                    committed(())  # applied; the created numbers were in the lost reply
                elif request.takes:  # was that read on our session? one of our locks still there says so
                    key = request.takes[0]
                    self._call(ZkExists(self._path(key.queue, "locks", f"lock-{key.number}")), same_session)
                else:
                    aborted("the connection was lost before the commit's multi was applied")
            elif reply.error == "connection_loss" and checks_left > 1:
                self._after(COMMIT_CHECK_PAUSE_S, lambda: read_marker(checks_left - 1))
            # else: the outcome stays unknown; no answer, the client's ask times out (as for a crashed backend)

        def same_session(reply: ZkReply) -> None:
            """A lock of the multi's session still there: the marker was read on that session, before this."""
            node = reply.value if reply.error is None else None
            if self.epoch == epoch and isinstance(node, ZkNode) and node.ephemeral_owner == session_id:
                aborted("the connection was lost before the commit's multi was applied")
            else:
                after_expiry()  # the lock went with the session: the marker's absence proved nothing

        def after_expiry() -> None:
            """A taken item still there proves the multi was not applied (it deletes them all); else unknown."""
            if request.takes:
                key = request.takes[0]
                item = self._path(key.queue, "items", f"item-{key.number:010d}")
                self._when_connected(lambda: self._call(ZkExists(item), proved))

        def proved(reply: ZkReply) -> None:
            if reply.error is None and reply.value is not None:
                aborted("the ZooKeeper session expired before the commit's multi was applied")

        with self.multi_groups.together():  # the takes ahead ride in the commit's multi
            self.multi_groups.submit(tuple(operations), done)
            for queue in dict.fromkeys(key.queue for key in request.takes):
                self._take_ahead(queue)

    def _unlock(self, lock: str, epoch: int, owner: int | None, tries: int = COMMIT_CHECKS) -> None:
        """Delete a lock of session ``owner`` that no transaction claims; a delete lost to the connection is
        repeated while the lock is still there and still our session's (else it was applied, or went with it).

        Needed where nobody would reclaim it as an orphan: a lock on an item committed away meanwhile
        stays (its number never offered again) until the session ends otherwise. The delete rides in a
        multi with a check of ``owner``'s guard node (``_guard``): a session actor sends a call on the
        session it has now, and one that expired before this backend heard of it may have let another
        client take ``lock-N`` meanwhile; its guard gone with it, the multi then deletes nothing.
        """

        def deleted(reply: ZkReply) -> None:
            guard_missing = isinstance(reply.value, ZkMultiFailed) and reply.value.index == 0
            if (reply.error == "connection_loss" or guard_missing) and tries > 1:
                # a guard missing was not created yet (its create lost to the connection) or went with its
                # session, and the lock with it: the lock still there and still owner's says which
                self._after(COMMIT_CHECK_PAUSE_S, lambda: self._call(ZkExists(lock), checked))

        def checked(reply: ZkReply) -> None:
            node = reply.value if reply.error is None else None
            if isinstance(node, ZkNode) and node.ephemeral_owner == owner and lock not in self.claimed:
                self._unlock(lock, epoch, owner, tries - 1)
            elif reply.error == "connection_loss" and tries > 1:
                self._after(COMMIT_CHECK_PAUSE_S, lambda: self._call(ZkExists(lock), checked))

        if self.epoch == epoch and owner is not None:  # else it went with its session; lock-N may be another's
            self._call(ZkMulti((ZkCheck(self._guard(owner), -1), ZkDelete(lock))), deleted)

    def _guard(self, session_id: int) -> str:
        """The ephemeral node that exists exactly while session ``session_id`` does (``_keep_guard``)."""
        return f"/{self.root}-sessions/session-{session_id:x}"

    def _keep_guard(self, session_id: int, tries: int = COMMIT_CHECKS) -> None:
        """Create the new session's guard node (a lost create is repeated; ``node_exists`` means done)."""

        def created(reply: ZkReply) -> None:
            if reply.error == "connection_loss" and tries > 1 and self.session_id == session_id:
                self._after(COMMIT_CHECK_PAUSE_S, lambda: self._keep_guard(session_id, tries - 1))

        self._call(ZkCreate(self._guard(session_id), ephemeral=True, make_parents=True), created)

    def _spend_marker(self, marker: str, epoch: int) -> None:
        """An answered commit's marker is no longer read: delete it with others, in one multi.

        A delete of its own would be one more write (one more fsync) a transaction; batched, markers
        cost one write per ``MARKERS_A_BATCH`` commits, or one ``MARKERS_AFTER_S`` after the first of a
        batch when commits are few. A marker of an earlier session is left: ephemeral, it went with it.
        """
        if self.epoch != epoch:
            return
        self.spent_markers.append(marker)
        if len(self.spent_markers) >= MARKERS_A_BATCH:
            self._delete_markers(epoch)
        elif len(self.spent_markers) == 1:
            self._after(MARKERS_AFTER_S, lambda: self._delete_markers(epoch))

    def _delete_markers(self, epoch: int, batch: list[str] | None = None, tries: int = COMMIT_CHECKS) -> None:
        """Delete ``batch`` (by default the markers spent so far) in one multi while its session lives; a lost
        delete is repeated (the session would take them anyway), a marker already gone fails the multi: one by one."""
        if self.epoch != epoch:  # they went with their session; the new one's batch has its own timer
            return
        if batch is None:
            batch, self.spent_markers = self.spent_markers, []
        if not batch:
            return

        def deleted(reply: ZkReply) -> None:
            if reply.error == "connection_loss" and tries > 1:
                self._after(COMMIT_CHECK_PAUSE_S, lambda: self._delete_markers(epoch, batch, tries - 1))
            elif reply.error is not None and len(batch) > 1:
                for marker in batch:
                    self._delete_markers(epoch, [marker], tries)

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
        def known(reply_to: ActorRef | None) -> None:
            def read(found: list[tuple[str, bytes]]) -> None:
                if reply_to is not None:
                    items = tuple((ItemKey(queue, _number(name)), body) for name, body in found)
                    self.ctx.send(reply_to, QueueItems(queue, items))

            self._read_all(queue, "items", read)

        self._known("ReadItems", queue, known)

    def _read_dead(self, queue: str) -> None:
        def known(reply_to: ActorRef | None) -> None:
            def read(found: list[tuple[str, bytes]]) -> None:
                letters = []
                for _, data in found:
                    fields = json.loads(data)
                    letters.append(DeadLetter(ItemKey(queue, fields["number"]), fields["body"].encode("latin-1"),
                                              fields["takes"], fields["rollbacks"], fields["reason"]))
                if reply_to is not None:
                    self.ctx.send(reply_to, DeadLetters(queue, tuple(letters)))

            self._read_all(queue, "dlq", read)

        self._known("ReadDeadLetters", queue, known)

    def _stats(self, queue: str) -> None:
        """Count ``queue``'s items, locks and dead letters; ``locked`` counts the items transactions hold, not
        those this backend took ahead for its next take (another process's backend counts those too)."""

        def known(reply_to: ActorRef | None) -> None:
            def counted(items: list[str], locks: list[str], dead: list[str]) -> None:
                ahead = self._ahead_locks(queue)
                held = [lock for lock in locks if self._path(queue, "locks", lock) not in ahead]
                if reply_to is not None:
                    self.ctx.send(reply_to, TxQueueStats(queue, len(items), len(held), len(dead)))

            self._children(queue, "items", lambda items: self._children(
                queue, "locks", lambda locks: self._children(queue, "dlq", lambda dead: counted(items, locks, dead))))

        self._known("GetTxStats", queue, known)
