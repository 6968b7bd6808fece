"""The simulator's ZooKeeper: a server actor owning ``SimZooKeeper`` and session actors that speak the protocol.

A ``SimZooKeeperEnsemble`` made for a ``Simulation`` spawns one server actor (the ensemble, as one
linearizable server) around a ``SimZooKeeper`` and hands out session actors: each answers the
kernel's session protocol (``ZkCall`` -> ``ZkReply``, watches, ``ZkWatchSession``, ``ZkClose``;
``conveyor.runtime.lowlevel``) for one client, exactly as the kazoo-backed session actor does
against a real ensemble, so the same client actors run on both. The network between a session and
the server misbehaves as ``ZkFaults`` says, every decision drawn from a generator made by
``seeded_random`` (a choice of the run's stream: the run replays and shrinks):

* a slow server: a request waits a drawn time before the server applies it (its reply comes that
  much later, and the others see its effect only then); a session's requests keep their order;
* connection loss: a request is lost before the server sees it, or after it applied it (the
  reply is lost): either way the client hears ``connection_loss`` and cannot tell which. Every
  other request in flight is answered ``connection_loss`` too, the session reports
  ``suspended``, calls made meanwhile wait, and watch events are held;
* reconnection within the session timeout (``reconnected``: held calls go, held events arrive),
  or session expiry: the server expires the session after its timeout (its ephemeral nodes all
  vanish in one step, which the other sessions see at once), the session reports ``expired`` and
  then, as kazoo does, opens a new session and reports ``connected`` with its new id; calls made
  in between are answered ``session_expired`` (``reopen=False``: it stays expired for good).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, final

import attrs

from conveyor.runtime import Actor, ActorRef
from conveyor.runtime.lowlevel import (
    ZkCall,
    ZkClose,
    ZkErrorCode,
    ZkGetChildren,
    ZkOperation,
    ZkReply,
    ZkSessionEvent,
    ZkSessionState,
    ZkWatchFired,
    ZkWatchSession,
)
from conveyor.runtime.validators import non_negative_int, non_negative_seconds, positive_seconds

from ._choices import seeded_random
from ._disk import _probability
from ._zk_model import SimZooKeeper, WatchDelivery

if TYPE_CHECKING:
    from ._simulation import Simulation


@final
@attrs.frozen
class ZkFaults:
    """How the simulated ZooKeeper's network and server misbehave; drawn per request from the run's stream.

    Attributes:
        slow: the chance that a request waits before the server applies it.
        slow_s: it waits a uniform draw up to this many virtual seconds.
        connection_loss: the chance that a request loses the connection: before the server applies
            it or after (the reply is lost), half and half; the client cannot tell which.
        losses: at most this many connection losses per session.
        reconnect_s: a lost connection comes back after a uniform draw up to this long ...
        expiry: ... unless it does not (this chance): the server expires the session after
            ``session_timeout_s``, with every ephemeral node it owned.
        session_timeout_s: how long the server keeps a disconnected session before it expires it.
        shuffle_children: children come in an order drawn from the run, as ZooKeeper promises none.
    """

    slow: float = attrs.field(default=0.0, validator=_probability)
    slow_s: float = attrs.field(default=0.5, validator=non_negative_seconds)
    connection_loss: float = attrs.field(default=0.0, validator=_probability)
    losses: int = attrs.field(default=2, validator=non_negative_int)
    reconnect_s: float = attrs.field(default=1.0, validator=non_negative_seconds)
    expiry: float = attrs.field(default=0.0, validator=_probability)
    session_timeout_s: float = attrs.field(default=4.0, validator=positive_seconds)
    shuffle_children: bool = True


CALM = ZkFaults(shuffle_children=False)
"""A ZooKeeper that never misbehaves, children in name order."""


@final
@attrs.frozen
class ZkFaultInjected:
    """A session actor's note: a fault it drew for session ``session_id`` (``what`` says which, in words)."""

    session_id: int
    what: str


@final
@attrs.frozen
class ZkSessionEnded:
    """The server's note: it ended live session ``session_id`` (``expired`` or ``closed``) at this step."""

    session_id: int
    state: ZkSessionState


# -- messages between the session actors and the server (the simulated network) --------------------


@final
@attrs.frozen
class ExpireZkSession:
    """To the server actor: expire ``session_id`` now (its ephemeral nodes go), as after a long partition."""

    session_id: int


@final
@attrs.frozen
class EndZkFaults:
    """To the server actor: the run is over, its sessions stop misbehaving (slow, lost, expired)."""


@final
@attrs.frozen
class _Open:
    """A session actor asks the server for a new session."""

    session: ActorRef


@final
@attrs.frozen
class _Opened:
    """The server's answer: the new session's id; ``calm`` once the run's faults ended."""

    session_id: int
    calm: bool


@final
@attrs.frozen
class _Request:
    """A session sends ``operation`` to the server; ``lose_reply``: the connection drops once it is applied."""

    session_id: int
    ticket: int
    operation: ZkOperation
    watcher: ActorRef
    lose_reply: bool


@final
@attrs.frozen
class _Response:
    """The server applied ticket ``ticket``: its value or error."""

    ticket: int
    value: object
    error: ZkErrorCode | None
    lose_reply: bool


@final
@attrs.frozen
class _Watch:
    """The server tells a session that a watch of ``watcher`` fired."""

    watcher: ActorRef
    event: ZkWatchFired


@final
@attrs.frozen
class _Ended:
    """The server tells a session it ended (``expired``: by the server, ``closed``: by its client)."""

    state: ZkSessionState


@final
@attrs.frozen
class _CloseSession:
    """A session actor closes its session cleanly."""

    session_id: int


@final
@attrs.frozen
class _Forward:
    """A slow request's timer: send the requests held whose time has come, in order."""


@final
@attrs.frozen
class _Reconnect:
    """The lost connection (number ``loss``) is back."""

    loss: int


@final
@attrs.frozen
class _TimedOut:
    """The lost connection (number ``loss``) stayed lost past the session timeout."""

    loss: int


# -- the server --------------------------------------------------------------------------------------


@final
class ZkServerActor(Actor):
    """The ensemble: applies each session's requests to the model in arrival order; routes watch events.

    The model and ``sessions`` (each session's actor, by id) are the ensemble's and outlive a restart
    of this actor (a leader's restart: its mailbox, kept, is applied after it).
    """

    def __init__(
        self, model: SimZooKeeper, rng: random.Random, shuffle_children: bool, sessions: dict[int, ActorRef],
    ) -> None:
        self._model = model
        self._rng = rng
        self._shuffle = shuffle_children
        self._sessions = sessions
        self._calm = False

    def receive(self, message: object) -> None:
        """Open, apply, expire and close sessions, as a ZooKeeper server does."""
        if isinstance(message, _Request):
            self._apply(message)
        elif isinstance(message, _Open):
            session_id = self._model.open_session()
            self._sessions[session_id] = message.session
            self.ctx.send(message.session, _Opened(session_id, self._calm))
        elif isinstance(message, ExpireZkSession):
            self._end(message.session_id, "expired")
        elif isinstance(message, _CloseSession):
            self._end(message.session_id, "closed")
        elif isinstance(message, EndZkFaults):
            self._calm = True
            for session in self._sessions.values():
                self.ctx.send(session, message)

    def _apply(self, request: _Request) -> None:
        outcome = self._model.apply(request.session_id, request.operation, request.watcher)
        self._deliver(outcome.fired)  # before the reply, as ZooKeeper sends a session's events first
        value = outcome.value
        if self._shuffle and not self._calm and isinstance(request.operation, ZkGetChildren) and outcome.error is None:
            names = list(value)  # type: ignore[call-overload]
            self._rng.shuffle(names)
            value = tuple(names)
        session = self._sessions.get(request.session_id)
        if session is not None:
            self.ctx.send(session, _Response(request.ticket, value, outcome.error, request.lose_reply))

    def _end(self, session_id: int, state: ZkSessionState) -> None:
        status = self._model.session_status(session_id)
        fired = self._model.expire(session_id) if state == "expired" else self._model.close(session_id)
        if status == "alive":
            self.ctx.note(ZkSessionEnded(session_id, state))
        self._deliver(fired)
        session = self._sessions.get(session_id)
        if session is not None and status == "alive":
            self.ctx.send(session, _Ended(state))

    def _deliver(self, fired: tuple[WatchDelivery, ...]) -> None:
        for delivery in fired:
            session = self._sessions.get(delivery.session_id)
            if session is not None and isinstance(delivery.watcher, ActorRef):
                self.ctx.send(session, _Watch(delivery.watcher, delivery.event))


# -- a session ---------------------------------------------------------------------------------------


@final
class SimZkSession(Actor):
    """One client's ZooKeeper session in the simulator: answers the session protocol (see the module)."""

    def __init__(self, server: ActorRef, faults: ZkFaults, rng: random.Random, *, reopen: bool = True) -> None:
        self._server = server
        self._faults = faults
        self._rng = rng
        self._reopen = reopen
        """After an expiry, open a new session (as kazoo does) rather than stay expired."""
        self._state: ZkSessionState | None = None  # None: connecting
        self._session_id = 0
        self._watchers: list[ActorRef] = []
        self._waiting: list[ZkCall] = []  # calls made while connecting or suspended
        self._in_flight: dict[int, ZkCall] = {}  # by ticket: sent (or about to be) and unanswered
        self._held_events: list[_Watch] = []  # watch events that came while suspended
        self._next_ticket = 0
        self._forward_due = 0.0  # when the last slow request goes: later ones wait behind it
        self._held: list[tuple[float, int | None, bool]] = []  # (due, ticket or None: the close, lose_reply), in order
        self._losses = 0
        self._closing = False  # ZkClose asked, the server has not closed the session yet

    def on_start(self) -> None:
        """Ask the server for a session."""
        self.ctx.send(self._server, _Open(self.ctx.self_ref))

    def on_stop(self) -> None:
        """A stopping client closes its session (its ephemeral nodes go at once); what it still owes is ``closed``."""
        if self._state in ("connected", "reconnected", "suspended"):
            self.ctx.send(self._server, _CloseSession(self._session_id))
        if self._in_flight or self._waiting:
            self._ended("closed")

    def receive(self, message: object) -> None:
        """Protocol messages from clients; the server's answers, events and the session's timers."""
        if isinstance(message, ZkCall):
            self._call(message)
        elif isinstance(message, _Response):
            self._response(message)
        elif isinstance(message, _Watch):
            self._watch_fired(message)
        elif isinstance(message, _Forward):
            self._release_held()
        elif isinstance(message, ZkWatchSession):
            self._watchers.append(message.ref)
            if self._state is not None:
                live = self._state in ("connected", "reconnected")
                self.ctx.send(message.ref, ZkSessionEvent(self._session_id, "connected" if live else self._state))
        elif isinstance(message, _Opened):
            if self._state == "closed" or self._closing:  # closed before the server answered: close it
                self.ctx.send(self._server, _CloseSession(message.session_id))
                return
            self._session_id = message.session_id
            if message.calm:
                self._faults = CALM
            self._connected("connected")
        elif isinstance(message, _Reconnect):
            if self._state == "suspended" and message.loss == self._losses:
                self._connected("reconnected")
        elif isinstance(message, _TimedOut):
            if self._state == "suspended" and message.loss == self._losses:
                self.ctx.send(self._server, ExpireZkSession(self._session_id))
        elif isinstance(message, _Ended):
            self._ended(message.state)
        elif isinstance(message, ZkClose):
            self._close()
        elif isinstance(message, EndZkFaults):
            self._faults = CALM

    # -- requests -----------------------------------------------------------------------------

    def _call(self, call: ZkCall) -> None:
        state = self._state
        if self._closing:
            self.ctx.send(call.reply_to, ZkReply(call.request_id, error="closed"))
        elif state == "expired":
            self.ctx.send(call.reply_to, ZkReply(call.request_id, error="session_expired"))
        elif state == "closed":
            self.ctx.send(call.reply_to, ZkReply(call.request_id, error="closed"))
        elif state is None or state == "suspended":
            self._waiting.append(call)
        else:
            self._send(call)

    def _send(self, call: ZkCall) -> None:
        """Send ``call`` to the server, through the faults: lost before or after, or slow."""
        faults = self._faults
        rng = self._rng
        ticket = self._next_ticket
        self._next_ticket += 1
        self._in_flight[ticket] = call
        lost = faults.connection_loss > 0 and self._losses < faults.losses and rng.random() < faults.connection_loss
        lose_reply = lost and rng.random() < 0.5
        if lost and not lose_reply:
            self.ctx.note(ZkFaultInjected(self._session_id, f"request {call.request_id} lost before it was applied"))
            self._lose_connection()  # the request never reached the server
            return
        now = self.ctx.now()
        due = self._forward_due
        if faults.slow > 0 and rng.random() < faults.slow:
            wait = rng.uniform(0.0, faults.slow_s)
            self.ctx.note(ZkFaultInjected(self._session_id, f"request {call.request_id} waits {wait:.3f} s"))
            due = max(due, now + wait)
        if due > now or self._held:  # behind a slow request, even one due now whose timer has not fired yet
            self._hold(due, ticket, lose_reply)
        else:
            self._forward(ticket, lose_reply)

    def _hold(self, due: float, ticket: int | None, lose_reply: bool) -> None:
        """Hold a request (or the close: ``ticket`` None) until ``due``, behind those held before it."""
        self._forward_due = max(self._forward_due, due)
        self._held.append((self._forward_due, ticket, lose_reply))
        self.ctx.schedule(self._forward_due - self.ctx.now(), _Forward())

    def _release_held(self) -> None:
        """Send every held request whose time has come, in the order they were sent."""
        now = self.ctx.now()
        while self._held and self._held[0][0] <= now:
            _, ticket, lose_reply = self._held.pop(0)
            if ticket is None:
                self.ctx.send(self._server, _CloseSession(self._session_id))
            else:
                self._forward(ticket, lose_reply)

    def _forward(self, ticket: int, lose_reply: bool) -> None:
        call = self._in_flight.get(ticket)
        if call is None:
            return  # answered meanwhile (the connection was lost, or the session ended)
        self.ctx.send(self._server, _Request(self._session_id, ticket, call.operation, call.reply_to, lose_reply))

    def _response(self, response: _Response) -> None:
        call = self._in_flight.pop(response.ticket, None)
        if call is None:
            return  # already answered connection_loss: the client never learns this outcome
        if response.lose_reply and self._state in ("connected", "reconnected"):
            self.ctx.note(ZkFaultInjected(self._session_id, f"request {call.request_id} lost after it was applied"))
            self._in_flight[response.ticket] = call
            self._lose_connection()  # applied, but the reply is lost with the connection
            return
        self.ctx.send(call.reply_to, ZkReply(call.request_id, response.value, response.error))

    def _watch_fired(self, watch: _Watch) -> None:
        if self._state == "suspended":
            self._held_events.append(watch)
        elif self._state in ("connected", "reconnected"):
            self.ctx.send(watch.watcher, watch.event)

    # -- the session's life -------------------------------------------------------------------

    def _emit(self, state: ZkSessionState) -> None:
        for ref in self._watchers:
            self.ctx.send(ref, ZkSessionEvent(self._session_id, state))

    def _connected(self, state: ZkSessionState) -> None:
        self._state = state
        self._emit(state)
        held, self._held_events = self._held_events, []
        for watch in held:
            self.ctx.send(watch.watcher, watch.event)
        waiting, self._waiting = self._waiting, []
        for call in waiting:
            self._send(call)

    def _fail_in_flight(self, error: ZkErrorCode) -> None:
        in_flight, self._in_flight = self._in_flight, {}
        for call in in_flight.values():
            self.ctx.send(call.reply_to, ZkReply(call.request_id, error=error))

    def _lose_connection(self) -> None:
        """The connection drops: what is in flight is answered ``connection_loss``, then reconnect or expiry."""
        self._losses += 1
        self._state = "suspended"
        self._forward_due = 0.0
        self._held.clear()  # answered connection_loss below, with the rest in flight
        self._emit("suspended")
        self._fail_in_flight("connection_loss")
        faults = self._faults
        if faults.expiry > 0 and self._rng.random() < faults.expiry:
            self.ctx.note(ZkFaultInjected(self._session_id, f"connection lost past the {faults.session_timeout_s:g} s "
                                                            "session timeout: the session expires"))
            self.ctx.schedule(faults.session_timeout_s, _TimedOut(self._losses))
        else:
            self.ctx.schedule(self._rng.uniform(0.0, min(faults.reconnect_s, faults.session_timeout_s)),
                              _Reconnect(self._losses))

    def _ended(self, state: ZkSessionState) -> None:
        if self._state in ("expired", "closed"):
            return
        self._state = state
        error: ZkErrorCode = "session_expired" if state == "expired" else "closed"
        self._fail_in_flight(error)
        waiting, self._waiting = self._waiting, []
        for call in waiting:
            self.ctx.send(call.reply_to, ZkReply(call.request_id, error=error))
        self._held_events.clear()
        self._emit(state)
        if state == "expired" and self._reopen:
            self.ctx.send(self._server, _Open(self.ctx.self_ref))  # as kazoo: a new session, ``connected`` follows

    def _close(self) -> None:
        """Close cleanly, as kazoo's ``stop``: the close goes behind the requests already on their way, which
        are answered first; calls made from now on are answered ``closed``."""
        if self._state == "expired" and self._reopen:  # between two sessions: the next one is closed on arrival
            self._state = "closed"
            self._emit("closed")
            return
        if self._state in ("expired", "closed") or self._closing:
            return
        if self._state in ("connected", "reconnected"):
            self._closing = True
            now = self.ctx.now()
            if self._held or self._forward_due > now:  # behind the slow requests still to go
                self._hold(now, None, False)
            else:
                self.ctx.send(self._server, _CloseSession(self._session_id))
            return  # the server's _Ended("closed") ends it
        if self._state == "suspended":
            self.ctx.send(self._server, _CloseSession(self._session_id))
        self._ended("closed")


@final
class SimZooKeeperEnsemble:
    """One simulated ZooKeeper ensemble in a ``Simulation``: its server actor, its model, its sessions.

    Args:
        sim: the simulation it runs in.
        faults: how its network and server misbehave (``ZkFaults``; none by default).
        name: the server actor's name (a top-level actor), and the key of its random draws.
        model: the ensemble's model (a fresh ``SimZooKeeper`` by default; a planted bug's subclass).
    """

    def __init__(
        self, sim: Simulation, faults: ZkFaults | None = None, *, name: str = "zookeeper",
        model: SimZooKeeper | None = None,
    ) -> None:
        self.model = model if model is not None else SimZooKeeper()
        """The ensemble's data, for checkers and tests to read (never to change) during or after the run."""
        self.faults = faults or CALM
        self._key = f"zookeeper:{sim.seed}:{name}"
        self._sessions_made = 0
        model, rng, shuffle = self.model, seeded_random(self._key), self.faults.shuffle_children
        sessions: dict[int, ActorRef] = {}
        self.server: ActorRef = sim.spawn(lambda: ZkServerActor(model, rng, shuffle, sessions), name=name)

    def session(self, faults: ZkFaults | None = None, *, reopen: bool = True) -> Callable[[], Actor]:
        """A factory of session actors: each one spawned opens its own session (spawn it where the client lives).

        Each session draws its faults from its own generator (``zookeeper:SEED:NAME:N``, the N-th
        session made), so one client's faults do not move when another's requests do. ``faults``:
        this client's network, if not the ensemble's. ``reopen``: after an expiry the actor opens a
        new session, as ``KazooSession`` does (False: it stays expired).
        """
        network = faults or self.faults

        def make() -> Actor:
            key = f"{self._key}:{self._sessions_made}"
            self._sessions_made += 1
            return SimZkSession(self.server, network, seeded_random(key), reopen=reopen)

        return make

    def expire(self, session_id: int) -> None:
        """Expire ``session_id`` now (from outside the actors: a test's or a harness's hand)."""
        self.server.tell(ExpireZkSession(session_id))

    def end_faults(self) -> None:
        """The run is over: no more slow requests, lost connections or expiries (``Simulation.end_faults``'s twin)."""
        self.server.tell(EndZkFaults())
