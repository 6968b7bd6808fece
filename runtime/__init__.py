"""conveyor's actor kernel: one actor API on trio, on threads and in the simulator.

Backends and libraries of message types find the kernel's parts in ``conveyor.runtime.lowlevel``.
"""

from . import lowlevel as lowlevel
from ._actor import Actor as Actor
from ._actor import Context as Context
from ._errors import ActorDeadError as ActorDeadError
from ._errors import ActorNameTaken as ActorNameTaken
from ._errors import AskTimeout as AskTimeout
from ._errors import ConveyorError as ConveyorError
from ._errors import EscalatedError as EscalatedError
from ._errors import MutableMessageError as MutableMessageError
from ._errors import is_finite_number as is_finite_number
from ._errors import quote as quote
from ._heap import freeze_start_up_heap as freeze_start_up_heap
from ._immutability import ensure_immutable as ensure_immutable
from ._journal import Journal as Journal
from ._journal import JournalSynced as JournalSynced
from ._messages import AskFailed as AskFailed
from ._messages import JobDone as JobDone
from ._messages import JobFailed as JobFailed
from ._messages import Terminated as Terminated
from ._messages import TimerHandle as TimerHandle
from ._proxy import MethodActor as MethodActor
from ._proxy import MethodCall as MethodCall
from ._ref import ActorRef as ActorRef
from ._registry import ActorRegistry as ActorRegistry
from ._supervision import Directive as Directive
from ._supervision import SupervisorStrategy as SupervisorStrategy
from ._system import ActorSystemBase as ActorSystemBase
from ._threads import ThreadSystem as ThreadSystem
from ._trace import EventKind as EventKind
from ._trace import RecordedMessage as RecordedMessage
from ._trace import RefPath as RefPath
from ._trace import TraceEvent as TraceEvent
from ._trace import Tracer as Tracer
from ._trace import dumps_jsonl as dumps_jsonl
from ._trace import iter_jsonl as iter_jsonl
from ._trace import read_jsonl as read_jsonl
from ._trace import trace_hash as trace_hash
from ._trace import write_jsonl as write_jsonl
from ._trio import TrioSystem as TrioSystem

__all__ = [
    "Actor",
    "ActorDeadError",
    "ActorNameTaken",
    "ActorRef",
    "ActorRegistry",
    "AskFailed",
    "ActorSystemBase",
    "AskTimeout",
    "Context",
    "ConveyorError",
    "Directive",
    "EscalatedError",
    "EventKind",
    "JobDone",
    "JobFailed",
    "Journal",
    "JournalSynced",
    "MethodActor",
    "MethodCall",
    "MutableMessageError",
    "RecordedMessage",
    "RefPath",
    "SupervisorStrategy",
    "Terminated",
    "ThreadSystem",
    "TimerHandle",
    "TraceEvent",
    "Tracer",
    "TrioSystem",
    "dumps_jsonl",
    "ensure_immutable",
    "freeze_start_up_heap",
    "is_finite_number",
    "iter_jsonl",
    "quote",
    "read_jsonl",
    "trace_hash",
    "write_jsonl",
]
