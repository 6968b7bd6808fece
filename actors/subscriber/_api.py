"""subscribe(): the public entry of the streaming subscriber, on any of the three systems."""

from __future__ import annotations

from collections.abc import Callable
from typing import final

from conveyor.actors.broker import Selector, parse_selector
from conveyor.runtime import ActorRef, ActorSystemBase, ConveyorError, TrioSystem, quote

from ._manager import CALLBACKS_PER_JOB, StreamingPullManager, SubscriptionFailed
from ._message import SubscriberMessage
from ._protocol import Cancel
from ._settings import FlowControl, check_subscriber_settings


@final
class Subscription:
    """A running subscription: ``cancel()`` it; ``result()`` / ``await wait()`` until it has stopped."""

    def __init__(self, system: ActorSystemBase, manager: ActorRef) -> None:
        self.system = system
        self.manager = manager

    @property
    def running(self) -> bool:
        """True until the subscription has stopped."""
        return self.manager.is_alive

    def cancel(self) -> None:
        """Stop receiving; from any thread. Nothing stays leased: unfinished messages go back to the queue."""
        if self.manager.is_alive:
            self.system.tell_from_thread(self.manager, Cancel())

    def result(self, timeout: float | None = None) -> None:
        """Block (threads) or run the simulation until the subscription stops.

        Raises:
            TimeoutError: still running after ``timeout`` seconds (virtual in the Simulation).
            SubscriptionFailed: it stopped because its source is gone (a deleted subscription).
            ConveyorError: on a TrioSystem, where ``await wait()`` is the way.
        """
        system = self.system
        if isinstance(system, TrioSystem):
            msg = "on a TrioSystem use `await subscription.wait()`"
            raise ConveyorError(msg)
        join: Callable[[ActorRef, float | None], None] | None = getattr(system, "join", None)
        if join is None:
            msg = f"result() does not know how to wait on a {type(system).__name__}"
            raise ConveyorError(msg)
        join(self.manager, timeout)
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        termination = self.manager.termination
        if termination is not None and termination.reason == "failed":
            msg = f"subscription {self.manager.path} failed: {termination.error}"
            raise SubscriptionFailed(msg)

    async def wait(self) -> None:
        """On a TrioSystem: return once the subscription has stopped."""
        system = self.system
        if not isinstance(system, TrioSystem):
            msg = "wait() is for a TrioSystem; use result() elsewhere"
            raise ConveyorError(msg)
        await system.join(self.manager)
        self._raise_if_failed()


def subscribe(
    system: ActorSystemBase,
    queue: ActorRef,
    callback: Callable[[SubscriberMessage], object],
    *,
    flow_control: FlowControl | None = None,
    workers: int = 4,
    selector: Selector | object = None,
    heartbeat_s: float = 30.0,
    await_callbacks_on_shutdown: bool = False,
    name: str | None = None,
    callbacks_per_job: int = CALLBACKS_PER_JOB,
) -> Subscription:
    """Subscribe ``callback`` to ``queue``: each message runs it on a worker, off the actors.

    Messages with the same ordering key (the broker message's ``group``) reach the callback one at
    a time and in order; the callback calls ``ack()``, ``nack()``, ``modify_ack_deadline(s)`` or
    ``ack_with_response()`` on the message (raising nacks it). On ``cancel()`` the queue takes back
    whatever is not acked; with ``await_callbacks_on_shutdown`` the running callbacks finish first.
    When many unordered messages wait, one worker job runs up to ``callbacks_per_job`` of them in
    turn (1: a job per callback), which saves the hand-overs between threads that would otherwise
    cost more than a short callback.

    Raises:
        TypeError / ValueError: any bad argument, at the call and before anything is spawned, naming
            it and what it may be (``heartbeat_s`` must be a finite number of seconds >= 1, say).
        SelectorError: a malformed ``selector`` (a ``ValueError``).
    """
    if not isinstance(system, ActorSystemBase):
        msg = (
            "subscribe() system must be an actor system (TrioSystem, ThreadSystem or Simulation), "
            f"got {quote(system)}"
        )
        raise TypeError(msg)
    if type(queue) is not ActorRef:
        msg = f"subscribe() queue must be the ActorRef of a queue, got {quote(queue)}"
        raise TypeError(msg)
    if flow_control is not None and not isinstance(flow_control, FlowControl):
        msg = f"subscribe() flow_control must be None or a FlowControl, got {quote(flow_control)}"
        raise TypeError(msg)
    check_subscriber_settings(callback, workers, heartbeat_s, await_callbacks_on_shutdown, callbacks_per_job)
    if name is not None and not isinstance(name, str):
        msg = f"subscribe() name must be None or a str of letters, digits, '_', '.', ':' or '-', got {quote(name)}"
        raise TypeError(msg)
    parsed = None if selector is None else parse_selector(selector)
    flow = flow_control if flow_control is not None else FlowControl()
    manager = system.spawn(
        lambda: StreamingPullManager(queue, callback, flow, workers, parsed, heartbeat_s, await_callbacks_on_shutdown,
                                     callbacks_per_job),
        name=name,
    )
    return Subscription(system, manager)
