"""A client of the Pub/Sub front that probes its request limits: requests just over a limit, or just at it.

``LimitProber`` sends each ``LimitProbe`` of the scenario at its time, through the registry as every
client does (so the topic's and subscription's ``request_refusal``, the check the gRPC glue makes
too), and writes ``LimitProbeSent`` / ``LimitProbeDone`` for ``request_limits``. A probe publish is
also a publish (``PublishSent`` / ``PublishDone``): one at the limit is confirmed and must be
delivered like any other, one over it must never be. A probe settlement first pulls one delivery of
its subscription and puts that delivery's ack id first in the probe, then acks it for real
(``SettleSent``), so a refused probe that still acked or nacked it would be an unbacked settlement.
Probes are drawn last in ``pubsub-front`` (``draw_limit_probes``), from a generator of their own.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final, final

import attrs

from conveyor.actors.pubsub import (
    ACK_ID_MAX_BYTES,
    ACK_IDS_MAX,
    ATTRIBUTE_KEY_MAX_BYTES,
    ATTRIBUTE_VALUE_MAX_BYTES,
    ATTRIBUTES_MAX,
    MODACK_MAX_S,
    ORDERING_KEY_MAX_BYTES,
    PUBLISH_MAX_BYTES,
    PUBLISH_MAX_MESSAGES,
    Batch,
    Failed,
    Publish,
    PublishedIds,
    PubMessage,
    PullMessages,
    Settle,
    SettleKind,
    SettleOutcome,
)
from conveyor.runtime import Actor, ActorRef
from conveyor.simulation import seeded_random
from conveyor.simulation.checkers import (
    BatchReceived,
    LimitProbeDone,
    LimitProbeSent,
    ProbesFinished,
    PublishDone,
    PublishSent,
    SettleDone,
    SettleSent,
)

from ._pubsub_clients import StopClient

PUBLISH_KINDS: Final = ("attributes", "attribute-key", "attribute-value", "ordering-key", "messages", "request-bytes")
"""Probes of a Publish: a message's attributes (count, key, value), its ordering key, the request's count and bytes."""
SETTLE_KINDS: Final = ("ack-ids", "ack-id-length", "modack-seconds")
"""Probes of an Acknowledge or ModifyAckDeadline: how many ids, one id's length, the deadline."""
OVER_ONLY: Final = frozenset({"messages", "request-bytes", "pull-max-messages"})
"""Kinds only probed over the limit (at it they would be a thousand messages, 10 MB, or a real Pull)."""
PROBE_KINDS: Final = (*PUBLISH_KINDS, *SETTLE_KINDS, "pull-max-messages")
ACK_AFTER_S: Final = 0.2
"""How long after a settlement probe's answer the prober acks the delivery it named: long enough for an ack or
nack the refused probe still made to reach the queue first, so that ``acks_from_receivers`` finds it unbacked."""


@final
@attrs.frozen
class LimitProbe:
    """One probe: at ``at_s``, a request of ``kind`` (``PROBE_KINDS``) over its limit, or at it."""

    at_s: float
    kind: str
    over: bool


def draw_limit_probes(seed: int, span_s: float) -> tuple[LimitProbe, ...]:
    """The probes of a ``pubsub-front`` run (none in a quarter of runs, else 1-4), from a generator of their own."""
    rng = seeded_random(f"pubsub-scenario:front:{seed}:limits")
    if rng.random() < 0.25:
        return ()
    probes = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(PROBE_KINDS)
        probes.append(LimitProbe(round(rng.uniform(0.2, max(0.5, span_s)), 3), kind,
                                 kind in OVER_ONLY or rng.random() < 0.6))
    return tuple(sorted(probes, key=lambda probe: probe.at_s))


@final
@attrs.frozen
class _ProbeDue:
    """Prober's timer: probe ``number`` is due."""

    number: int


@final
@attrs.frozen
class _AckHeld:
    """Prober's timer: ack the delivery a settlement probe named, for real."""


@final
@attrs.frozen
class _GiveUp:
    """Prober's timer: request ``serial`` had no answer in time (its binding crashed): go on without it."""

    serial: int


@final
class LimitProber(Actor):
    """Sends the scenario's ``LimitProbe``s to the front, one request in flight at a time.

    Args:
        registry: the front's registry.
        topic: the topic it publishes its probe publishes to.
        subscription: the subscription it pulls from and settles on.
        probes: what to send, and when.
        patience_s: how long it waits for an answer before going on without it.
        seed: the run's seed (the number of ordinary messages before a probe publish's bad one).
    """

    def __init__(self, registry: ActorRef, topic: str, subscription: str, probes: tuple[LimitProbe, ...],
                 patience_s: float, seed: int) -> None:
        self.registry = registry
        self.topic = topic
        self.subscription = subscription
        self.probes = probes
        self.patience_s = patience_s
        self.seed = seed
        self.due: deque[int] = deque()
        self.serial = 0
        self.waiting: str | None = None  # what the request in flight is: "probe", "pull", "ack"
        self.current: int | None = None  # the probe being made
        self.held: tuple[str, ...] = ()  # ack ids of the delivery pulled for a settlement probe
        self.acking: tuple[str, ...] = ()  # the ack in flight
        self.finished = 0  # probes made (or given up)
        self.publish: tuple[PubMessage, ...] | None = None  # the probe publish in flight

    def on_start(self) -> None:
        """Plan every probe."""
        for number, probe in enumerate(self.probes):
            self.ctx.schedule(probe.at_s, _ProbeDue(number))

    def receive(self, message: Any) -> None:
        """Probes due, answers in; anything the probes pulled is acked."""
        cls = type(message)
        if cls is _ProbeDue:
            self.due.append(message.number)
            self._next()
        elif cls is _GiveUp:
            if message.serial == self.serial and self.waiting is not None:
                self.waiting = None
                self._finish()
        elif cls in (PublishedIds, Failed, SettleOutcome, Batch):
            self._answered(message)
        elif cls is _AckHeld:
            self._ack_held()
        elif cls is StopClient:
            self.ctx.stop()

    def _next(self) -> None:
        if self.waiting is not None or self.current is not None or not self.due:
            return
        self.current = self.due.popleft()
        kind = self.probes[self.current].kind
        if kind in SETTLE_KINDS:
            self._send("pull", PullMessages(self.subscription, 1, 0.5))
        else:
            self._probe()

    def _send(self, waiting: str, request: object) -> None:
        self.waiting = waiting
        self.serial += 1
        self.ctx.send(self.registry, request)
        self.ctx.schedule(self.patience_s, _GiveUp(self.serial))

    def _probe(self) -> None:
        """Send probe ``current``, noting what a refusal must name."""
        number = self.current
        assert number is not None
        probe = self.probes[number]
        kind, over = probe.kind, probe.over
        if kind in PUBLISH_KINDS:
            messages, field = self._probe_messages(number, probe)
            self.publish = messages
            self.ctx.note(LimitProbeSent(number, kind, over, field, tuple(m.data for m in messages)))
            self.ctx.note(PublishSent(self.topic, messages))
            self._send("probe", Publish(self.topic, messages))
        elif kind == "pull-max-messages":
            self.ctx.note(LimitProbeSent(number, kind, over, "max_messages"))
            self._send("probe", PullMessages(self.subscription, 0, 0.5))
        else:
            request, field = self._probe_settle(probe)
            self.ctx.note(LimitProbeSent(number, kind, over, field))
            if not over and request.kind is SettleKind.ACK:
                self.ctx.note(SettleSent(request.subscription, request.kind, request.seconds, request.ack_ids))
            self._send("probe", request)

    def _probe_messages(self, number: int, probe: LimitProbe) -> tuple[tuple[PubMessage, ...], str]:
        """A probe publish: 1-2 ordinary messages, then the one at or over the limit (none for the request's own)."""
        rng = seeded_random(f"pubsub-limits:{self.seed}:{number}")
        now_ns = int(self.ctx.now() * 1e9)
        colour = (("colour", rng.choice(("red", "blue"))),)

        def message(index: int, attributes: tuple[tuple[str, str], ...] = colour, key: str = "",
                    data: bytes = b"") -> PubMessage:
            return PubMessage(data or f"limit.{number}.{index}".encode(), attributes, key, now_ns)

        if probe.kind == "messages":
            return tuple(message(i) for i in range(PUBLISH_MAX_MESSAGES + 1)), "messages"
        if probe.kind == "request-bytes":
            return (message(0, data=b"L" * (PUBLISH_MAX_BYTES + 1)),), "messages"
        ordinary = [message(i) for i in range(rng.randint(1, 2))]
        last, extra = len(ordinary), int(probe.over)
        where = f"messages[{last}]"
        if probe.kind == "attributes":
            attributes = (*colour, *((f"a{i:03d}", "v") for i in range(ATTRIBUTES_MAX - 1 + extra)))
            bad, field = message(last, attributes), f"{where}.attributes"
        elif probe.kind == "attribute-key":
            bad = message(last, (*colour, ("k" * (ATTRIBUTE_KEY_MAX_BYTES + extra), "v")))
            field = f"{where}.attributes["
        elif probe.kind == "attribute-value":
            bad = message(last, (*colour, ("value", "v" * (ATTRIBUTE_VALUE_MAX_BYTES + extra))))
            field = f"{where}.attributes["
        else:
            bad, field = message(last, key="o" * (ORDERING_KEY_MAX_BYTES + extra)), f"{where}.ordering_key"
        return (*ordinary, bad), field

    def _probe_settle(self, probe: LimitProbe) -> tuple[Settle, str]:
        """A probe settlement: the pulled delivery's id first (over the limit only), then ids that name nothing."""
        extra = int(probe.over)
        real = self.held if probe.over or probe.kind != "modack-seconds" else ()  # no 600 s lease at the limit
        if probe.kind == "ack-ids":
            padding = tuple(f"none-{i}" for i in range(ACK_IDS_MAX + extra - len(real)))
            return Settle(self.subscription, SettleKind.ACK, real + padding), "ack_ids"
        if probe.kind == "ack-id-length":
            long_id = "9" * (ACK_ID_MAX_BYTES + extra)
            return Settle(self.subscription, SettleKind.ACK, (*real, long_id)), f"ack_ids[{len(real)}]"
        ids = real or ("none-0",)
        return Settle(self.subscription, SettleKind.MODACK, ids, MODACK_MAX_S + extra), "ack_deadline_seconds"

    def _answered(self, answer: Any) -> None:
        waiting, self.waiting = self.waiting, None
        cls = type(answer)
        if cls is Batch and answer.received:  # a pull's (or a Pull probe wrongly served): ours to ack
            sender = self.ctx.sender
            self.ctx.note(BatchReceived(self.subscription, sender.path if sender is not None else "?", answer.received))
            ids = tuple(ack_id for ack_id, _, _ in answer.received)
            self.held += ids
        if waiting == "pull":
            self._probe()
            return
        if waiting == "ack":
            invalid = answer.invalid if cls is SettleOutcome else ()
            failure = f"{answer.code}: {answer.message[:80]}" if cls is Failed else ""
            self.ctx.note(SettleDone(self.subscription, SettleKind.ACK, 0, self.acking, invalid, failure))
        if waiting == "probe":
            number = self.current
            assert number is not None
            if self.publish is not None:
                if cls is PublishedIds:
                    self.ctx.note(PublishDone(self.topic, self.publish, answer.message_ids))
                else:
                    failure = f"{answer.code}: {answer.message[:80]}" if cls is Failed else "unanswered"
                    self.ctx.note(PublishDone(self.topic, self.publish, (), failure))
                self.publish = None
            probe = self.probes[number]
            if not probe.over and probe.kind in SETTLE_KINDS and probe.kind != "modack-seconds":
                invalid = answer.invalid if cls is SettleOutcome else ()
                failure = f"{answer.code}: {answer.message[:80]}" if cls is Failed else ""
                self.ctx.note(SettleDone(self.subscription, SettleKind.ACK, 0, self._last_ids(probe), invalid,
                                         failure))
            if cls is Failed:
                self.ctx.note(LimitProbeDone(number, answer.code, answer.message))
            else:
                self.ctx.note(LimitProbeDone(number))
        self._finish()

    def _last_ids(self, probe: LimitProbe) -> tuple[str, ...]:
        request, _ = self._probe_settle(probe)
        return request.ack_ids

    def _finish(self) -> None:
        """After a probe: ack what was pulled for real, a little later (see ``ACK_AFTER_S``); then the next probe."""
        if self.held:
            self.waiting = "pause"
            self.ctx.schedule(ACK_AFTER_S, _AckHeld())
            return
        if self.current is not None:
            self.current = None
            self.finished += 1
            if self.finished == len(self.probes):
                self.ctx.note(ProbesFinished())
        self._next()

    def _ack_held(self) -> None:
        held, self.held = self.held, ()
        self.acking = held
        self.ctx.note(SettleSent(self.subscription, SettleKind.ACK, 0, held))
        self._send("ack", Settle(self.subscription, SettleKind.ACK, held))

