"""BrokerActor: the registry of named queues, so clients can find a queue or hear that it is unknown."""

from __future__ import annotations

from typing import Any, final

import attrs

from conveyor.runtime import Actor, ActorRef

from ._client_protocol import Publish
from ._queue import QueueActor
from ._values import Message, QueueConfig


@final
@attrs.frozen
class DeclareQueue:
    """Create the queue if it does not exist; answered by ``QueueDeclared`` or ``Refused``."""

    config: QueueConfig = attrs.field(validator=attrs.validators.instance_of(QueueConfig))


@final
@attrs.frozen
class LookupQueue:
    """Find a queue by name; answered by ``QueueDeclared`` or ``Refused``."""

    name: str


@final
@attrs.frozen
class PublishTo:
    """Route ``message`` to the named queue (the queue confirms to the broker, not to you);
    an unknown name is answered with ``Refused``."""

    queue: str
    message: Message = attrs.field(validator=attrs.validators.instance_of(Message))


@final
@attrs.frozen
class QueueDeclared:
    """The queue ``name`` is the actor ``ref``."""

    name: str
    ref: ActorRef


@final
@attrs.frozen
class Refused:
    """A broker request could not be done; ``reason`` says why and what would work."""

    request: str
    reason: str


@final
class BrokerActor(Actor):
    """Holds the queues (as children) by name."""

    def __init__(self) -> None:
        self.queues: dict[str, tuple[QueueConfig, ActorRef]] = {}

    def receive(self, message: Any) -> None:
        """Declare, look up, or route."""
        match message:
            case DeclareQueue(config=config):
                known = self.queues.get(config.name)
                if known is None:
                    ref = self.ctx.spawn(lambda: QueueActor(config), name=config.name)
                    self.queues[config.name] = (config, ref)
                    self.ctx.reply(QueueDeclared(config.name, ref))
                elif known[0] == config:
                    self.ctx.reply(QueueDeclared(config.name, known[1]))
                else:
                    self.ctx.reply(Refused("DeclareQueue", f"queue {config.name!r} exists with another configuration"))
            case LookupQueue(name=name):
                known = self.queues.get(name)
                if known is None:
                    self.ctx.reply(Refused("LookupQueue", self._unknown(name)))
                else:
                    self.ctx.reply(QueueDeclared(name, known[1]))
            case PublishTo(queue=name, message=payload):
                known = self.queues.get(name)
                if known is None:
                    if self.ctx.sender is not None:
                        self.ctx.reply(Refused("PublishTo", self._unknown(name)))
                else:
                    self.ctx.send(known[1], Publish(payload))

    def _unknown(self, name: str) -> str:
        declared = ", ".join(sorted(self.queues)) or "none"
        return f"unknown queue {name!r}; declared queues: {declared}"
