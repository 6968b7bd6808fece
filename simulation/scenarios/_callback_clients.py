"""Callback clients: consumers whose client is a function run as a job, as an embedded user writes it.

``ConsumerActor`` hands each delivery either to a client actor (every other scenario client) or
to a callback it runs as a job off the actor: returning acks the delivery, raising nacks it with
the error (``DeliveryError``, kept for the dead letter). A swarm draws a few of these beside its
actor clients, so the job path (``ConsumerActor.jobs``, ``JobDone``, ``JobFailed``) runs under the
same checkers: the queue's own notes judge what they were given and what they settled.

The callback decides from the delivery alone (it has no context to draw from, and runs off the
actor): it refuses the first delivery of every third message, and acks everything else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, final

from conveyor.actors.broker import ConsumerActor, ConsumerSettings, Delivery
from conveyor.runtime import Actor, ActorRef
from conveyor.simulation.checkers import CallbackHandled, CallbackRefused

CallbackConsumerFactory = Callable[[ActorRef, Callable[[Delivery], object], ConsumerSettings], ConsumerActor]
"""Builds a callback client's consumer from (queue, callback, settings): ``ConsumerActor``, or a planted variant."""

CALLBACK_CLIENTS = "/callback-"
"""Path prefix of the callback clients (``/callback-0`` ...): their consumer is ``/callback-k/consumer``."""


def answer_by_callback(queue_path: str, delivery: Delivery) -> CallbackHandled:
    """Ack (return) every delivery but the first of every third message, which it refuses (raises).

    What it handled is its answer either way (``CallbackHandled``, or ``CallbackRefused.handled``):
    the job's outcome in the trace is the callback client's history.
    """
    message_id = delivery.message.message_id or ""
    handled = CallbackHandled(queue_path, delivery.consumer_id, delivery.tag, message_id, delivery.delivery_count)
    if delivery.delivery_count == 1 and message_id[1:].isdigit() and int(message_id[1:]) % 3 == 0:
        raise CallbackRefused(handled)
    return handled


@final
class CallbackClient(Actor):
    """Owns a ``ConsumerActor`` (or the scenario variant's consumer) whose client is ``answer_by_callback``; it
    answers nothing itself."""

    def __init__(self, queue: ActorRef, settings: ConsumerSettings,
                 consumer_factory: CallbackConsumerFactory = ConsumerActor) -> None:
        self.queue = queue
        self.settings = settings
        self.consumer_factory = consumer_factory

    def on_start(self) -> None:
        """Spawn the consumer, supervised by this client."""
        callback = functools.partial(answer_by_callback, str(self.queue.path))
        self.ctx.spawn(lambda: self.consumer_factory(self.queue, callback, self.settings), name="consumer")

    def receive(self, message: Any) -> None:
        """Nothing comes here: the consumer runs the callback itself."""
