"""pykka's conveniences on every backend: ``ref.ask``, typed proxies of ``MethodActor``s, the actor registry."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

import attrs
import mypy.api
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conveyor.runtime import (
    Actor,
    ActorDeadError,
    ActorNameTaken,
    ActorRef,
    AskFailed,
    AskTimeout,
    ConveyorError,
    EventKind,
    MethodActor,
    MethodCall,
    MutableMessageError,
    ThreadSystem,
    TrioSystem,
)
from conveyor.simulation import Simulation
from tests.conftest import BACKENDS, Harness
from tests.runtime.actors import Echo, Get, Silent


class Counter(Protocol):
    """What callers on threads and in the simulator see: each call returns the answer."""

    label: str

    def add(self, amount: int, *, times: int = 1) -> int: ...
    def total(self) -> int: ...
    def divide(self, by: int) -> int: ...
    def history(self) -> tuple[int, ...]: ...


class AsyncCounter(Protocol):
    """The same methods as callers on trio see them: each call returns an awaitable."""

    label: str

    async def add(self, amount: int, *, times: int = 1) -> int: ...
    async def total(self) -> int: ...
    async def divide(self, by: int) -> int: ...
    async def history(self) -> tuple[int, ...]: ...


class Leaky(Protocol):
    def leak(self) -> list[int]: ...


class AsyncLeaky(Protocol):
    async def leak(self) -> list[int]: ...


class CounterActor(MethodActor):
    """A counter served through proxies; ``Get`` (a plain message) answers its total too."""

    label = "counter"

    def __init__(self) -> None:
        self.sum = 0
        self.added: tuple[int, ...] = ()

    def add(self, amount: int, *, times: int = 1) -> int:
        for _ in range(times):
            self.sum += amount
            self.added += (amount,)
        return self.sum

    def total(self) -> int:
        return self.sum

    def divide(self, by: int) -> int:
        self.sum //= by  # raises ZeroDivisionError on 0, before changing anything
        return self.sum

    def history(self) -> tuple[int, ...]:
        return self.added

    def leak(self) -> list[int]:
        return [self.sum]  # mutable: refused as an answer

    def _private(self) -> int:
        return -1

    def receive(self, message: Any) -> None:
        match message:
            case Get():
                self.ctx.reply(self.sum)
            case _:
                super().receive(message)


class LoudCounter(CounterActor):
    """A subclass, for ``by_class``."""


def counter_interface(backend: Harness) -> Any:
    return AsyncCounter if backend.name == "trio" else Counter


@attrs.frozen
class AskInside:
    target: ActorRef


@attrs.frozen
class CallVia:
    target: ActorRef
    call: MethodCall


class InsideAsker(Actor):
    """Tries ``ref.ask`` inside its handler and replies with the error it got."""

    def receive(self, message: Any) -> None:
        match message:
            case AskInside(target=target):
                try:
                    target.ask(Get())
                except ConveyorError as error:
                    self.ctx.reply(str(error))
                else:
                    self.ctx.reply("no error")


class Caller(Actor):
    """Sends a ``MethodCall`` with ``ctx.send`` and keeps the answers that come back as messages."""

    def __init__(self) -> None:
        self.answers: tuple[object, ...] = ()

    def receive(self, message: Any) -> None:
        match message:
            case CallVia(target=target, call=call):
                self.ctx.send(target, call)
            case Get():
                self.ctx.reply(self.answers)
            case _:
                self.answers += (message,)


# --- ref.ask ------------------------------------------------------------------------------------


async def test_ref_ask_returns_what_the_systems_ask_returns(backend: Harness) -> None:
    echo = backend.spawn(Echo)
    assert await backend.answer(echo.ask("hello")) == "hello"
    assert await backend.answer(echo.ask(("a", 1), timeout=2.0)) == ("a", 1)


async def test_ref_ask_times_out_and_refuses_mutable_questions(backend: Harness) -> None:
    silent = backend.spawn(Silent)
    with pytest.raises(AskTimeout, match="no reply from /silent"):
        await backend.answer(silent.ask(Get(), timeout=0.05))
    with pytest.raises(MutableMessageError):
        await backend.answer(silent.ask([1, 2]))


async def test_ref_ask_inside_a_handler_is_refused(backend: Harness) -> None:
    echo = backend.spawn(Echo, name="echo")
    asker = backend.spawn(InsideAsker, name="asker")
    said = await backend.ask(asker, AskInside(echo))
    assert "/asker called ask() on /echo inside its handler" in said
    assert "ctx.send()" in said


async def test_ref_ask_after_the_system_shut_down_says_so(backend: Harness) -> None:
    echo = backend.spawn(Echo, name="echo")
    await backend.shutdown()
    system = type(backend.system).__name__
    with pytest.raises(ActorDeadError, match=f"/echo stopped when its {system} shut down; cannot ask it Get"):
        await backend.answer(echo.ask(Get()))


async def test_ref_ask_of_a_stopped_actor_fails_fast(backend: Harness) -> None:
    echo = backend.spawn(Echo, name="echo")
    backend.system.stop(echo)
    await backend.quiet()
    with pytest.raises(ActorDeadError, match="/echo has stopped"):
        await backend.answer(echo.ask(Get()))


async def test_a_trio_ask_from_another_thread_is_refused_at_once_and_ask_from_thread_answers() -> None:
    # Awaiting the coroutine on another thread's loop would touch the system's state off its thread
    async with TrioSystem() as system:
        echo = system.spawn(Echo, name="echo")

        def from_a_worker_thread() -> tuple[str, Any]:
            with pytest.raises(ConveyorError, match="on a thread other than the TrioSystem's") as refused:
                echo.ask("hello")
            return str(refused.value), system.ask_from_thread(echo, "hello")

        said, answer = await trio.to_thread.run_sync(from_a_worker_thread)
        assert "use system.ask_from_thread(ref, message)" in said
        assert answer == "hello"
        assert await echo.ask("on the trio thread") == "on the trio thread"


# --- proxies ------------------------------------------------------------------------------------


async def test_proxy_calls_run_in_the_actor_in_order(backend: Harness) -> None:
    ref = backend.spawn(CounterActor, name="counter")
    counter = ref.proxy(counter_interface(backend))
    assert await backend.answer(counter.add(2)) == 2
    assert await backend.answer(counter.add(3, times=2)) == 8
    assert await backend.answer(counter.total()) == 8
    assert await backend.answer(counter.history()) == (2, 3, 3)
    assert await backend.ask(ref, Get()) == 8  # plain messages still reach receive
    assert repr(counter) == f"<proxy {counter_interface(backend).__qualname__} of /counter>"


async def test_system_proxy_is_the_refs_proxy(backend: Harness) -> None:
    ref = backend.spawn(CounterActor)
    counter = backend.system.proxy(ref, counter_interface(backend), timeout=2.0)
    assert await backend.answer(counter.add(7)) == 7


async def test_a_methods_exception_is_the_asks_error_and_the_actor_keeps_its_state(backend: Harness) -> None:
    ref = backend.spawn(CounterActor, name="counter")
    counter = ref.proxy(counter_interface(backend))
    await backend.answer(counter.add(10))
    with pytest.raises(ZeroDivisionError):
        await backend.answer(counter.divide(0))
    with pytest.raises(TypeError, match="unexpected keyword argument 'twice'"):
        await backend.answer(counter.add(1, twice=True))
    with pytest.raises(MutableMessageError):
        await backend.answer(ref.ask(MethodCall("leak")))
    offered = r"\(its methods: add, divide, history, leak, total\)"
    with pytest.raises(AttributeError, match=f"CounterActor has no method 'missing' to call {offered}"):
        await backend.answer(ref.ask(MethodCall("missing")))
    assert await backend.answer(counter.divide(5)) == 2  # same instance, same state: no restart
    kinds = [event.kind for event in backend.trace if "/counter" in (event.sender, event.receiver)]
    assert EventKind.FAILED not in kinds
    assert EventKind.RESTARTED not in kinds
    notes = [event.message for event in backend.trace if event.kind is EventKind.NOTE]
    assert [type(note) for note in notes] == [AskFailed] * 4
    assert isinstance(notes[0], AskFailed)
    assert notes[0].error.startswith("ZeroDivisionError")


async def test_a_told_call_that_raises_goes_to_supervision(backend: Harness) -> None:
    ref = backend.spawn(CounterActor, name="counter")
    ref.tell(MethodCall("add", (4,)))
    ref.tell(MethodCall("divide", (0,)))
    await backend.quiet()
    assert any(event.kind is EventKind.RESTARTED and event.receiver == "/counter" for event in backend.trace)
    assert await backend.answer(ref.proxy(counter_interface(backend)).total()) == 0  # fresh state


async def test_a_call_an_actor_sends_is_answered_to_it(backend: Harness) -> None:
    counter = backend.spawn(CounterActor)
    caller = backend.spawn(Caller)
    caller.tell(CallVia(counter, MethodCall("add", (5,), (("times", 2),))))
    caller.tell(CallVia(counter, MethodCall("total")))
    await backend.quiet()
    assert await backend.ask(caller, Get()) == (10, 10)


async def test_a_proxy_reads_no_attribute_and_sets_nothing(backend: Harness) -> None:
    counter = backend.spawn(CounterActor).proxy(counter_interface(backend))
    with pytest.raises(AttributeError, match="label is an attribute: a proxy calls methods only"):
        _ = counter.label
    with pytest.raises(AttributeError, match="declares no method 'reset'"):
        counter.reset()
    with pytest.raises(AttributeError, match="cannot set 'label'"):
        counter.label = "other"


async def test_a_proxy_checks_its_interface_against_the_backend_and_the_actor(backend: Harness) -> None:
    ref = backend.spawn(CounterActor)
    wrong, method_kind = (Counter, "async def") if backend.name == "trio" else (AsyncCounter, "plain `def`")
    with pytest.raises(TypeError, match=f"{wrong.__qualname__}.add must be .*{method_kind}"):
        ref.proxy(wrong)
    with pytest.raises(TypeError, match="runs Echo, not a MethodActor"):
        backend.spawn(Echo).proxy(counter_interface(backend))
    with pytest.raises(TypeError, match="interface must be a class"):
        ref.proxy(lambda: None)
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds, got 0"):
        ref.proxy(counter_interface(backend), timeout=0)
    leaky: Any = AsyncLeaky if backend.name == "trio" else Leaky
    assert "leak" in CounterActor.proxy_methods
    assert "receive" not in CounterActor.proxy_methods
    assert "_private" not in CounterActor.proxy_methods
    with pytest.raises(MutableMessageError):
        await backend.answer(ref.proxy(leaky).leak())


async def test_the_actor_class_itself_may_be_the_interface_where_calls_answer_at_once(backend: Harness) -> None:
    ref = backend.spawn(LoudCounter)
    if backend.name == "trio":
        with pytest.raises(TypeError, match=r"LoudCounter\.add must be declared `async def`"):
            ref.proxy(LoudCounter)
        return
    counter = ref.proxy(LoudCounter)  # typed as the class, pykka's way
    assert counter.add(4) == 4
    with pytest.raises(AttributeError, match="label is an attribute"):
        _ = counter.label
    with pytest.raises(AttributeError, match="declares no method 'receive'"):
        counter.receive(Get())


async def test_a_proxy_of_a_stopped_actor_fails_fast(backend: Harness) -> None:
    ref = backend.spawn(CounterActor, name="counter")
    counter = ref.proxy(counter_interface(backend))
    backend.system.stop(ref)
    await backend.quiet()
    with pytest.raises(ActorDeadError, match="/counter has stopped"):
        await backend.answer(counter.total())
    with pytest.raises(ActorDeadError, match="cannot make a proxy"):
        ref.proxy(counter_interface(backend))


def test_method_call_validates_its_fields() -> None:
    with pytest.raises(ValueError, match=r"MethodCall\.method must be the name of a public method"):
        MethodCall("_hidden")
    with pytest.raises(TypeError, match=r"MethodCall.args must be a tuple"):
        MethodCall("add", [1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"MethodCall.kwargs must be a tuple of \(name, value\) pairs"):
        MethodCall("add", (), {"times": 2})  # type: ignore[arg-type]


# --- the registry ------------------------------------------------------------------------------


@attrs.frozen
class SpawnChild:
    name: str


class Nest(Actor):
    """Spawns children on request; answers ``Get`` with their refs."""

    def __init__(self) -> None:
        self.children: tuple[ActorRef, ...] = ()

    def receive(self, message: Any) -> None:
        match message:
            case SpawnChild(name=name):
                self.children += (self.ctx.spawn(CounterActor, name=name),)
            case Get():
                self.ctx.reply(self.children)


async def test_the_registry_finds_actors_by_name_and_class(backend: Harness) -> None:
    registry = backend.system.registry
    plain = backend.spawn(CounterActor, name="plain")
    loud = backend.spawn(LoudCounter, name="loud")
    echo = backend.spawn(Echo, name="echo")
    nest = backend.spawn(Nest, name="nest")
    nest.tell(SpawnChild("inner"))
    await backend.quiet()
    (inner,) = await backend.ask(nest, Get())
    assert registry.all() == (plain, loud, echo, nest, inner)
    assert registry.by_name("loud") == loud
    assert registry.by_name("inner") == inner
    assert registry.by_name("/nest/inner") == inner
    assert registry.by_name("/inner") is None
    assert registry.by_name("nobody") is None
    assert registry.by_class(CounterActor) == (plain, loud, inner)  # subclasses included
    assert registry.by_class(LoudCounter) == (loud,)
    assert registry.by_class(MethodActor) == (plain, loud, inner)
    assert registry.by_class(Actor) == registry.all()


async def test_registry_entries_vanish_when_actors_stop(backend: Harness) -> None:
    registry = backend.system.registry
    first = backend.spawn(CounterActor, name="first")
    second = backend.spawn(CounterActor, name="second")
    nest = backend.spawn(Nest, name="nest")
    nest.tell(SpawnChild("inner"))
    await backend.quiet()
    backend.system.stop(first)
    await backend.quiet()
    assert registry.by_name("first") is None
    assert registry.by_class(CounterActor) == (second, registry.by_name("inner"))
    backend.system.stop(nest)  # its child stops with it
    await backend.quiet()
    assert registry.all() == (second,)
    again = backend.spawn(CounterActor, name="first")  # the name is free again
    assert registry.by_name("first") == again
    await backend.shutdown()
    assert registry.all() == ()


async def test_the_registry_refuses_ambiguous_names_and_bad_arguments(backend: Harness) -> None:
    registry = backend.system.registry
    for parent in ("left", "right"):
        backend.spawn(Nest, name=parent).tell(SpawnChild("twin"))
    await backend.quiet()
    with pytest.raises(ConveyorError, match=r"2 live actors are called 'twin' \(/left/twin, /right/twin\)"):
        registry.by_name("twin")
    assert registry.by_name("/right/twin") is not None
    with pytest.raises(TypeError, match="by_name\\(\\) name must be a str"):
        registry.by_name(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        registry.by_name("")
    with pytest.raises(TypeError, match="actor_class must be a class"):
        registry.by_class("Nest")  # type: ignore[arg-type]


# --- properties -------------------------------------------------------------------------------

Call = tuple[str, tuple[int, ...], tuple[tuple[str, int], ...]]
"""(method, args, kwargs) of one call of the counter."""

calls_of_a_counter = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.tuples(st.integers(-50, 50)), st.just(())),
        st.tuples(st.just("add"), st.tuples(st.integers(-50, 50)), st.tuples(st.tuples(st.just("times"),
                                                                                       st.integers(0, 3)))),
        st.tuples(st.just("divide"), st.tuples(st.integers(-3, 3)), st.just(())),
        st.tuples(st.just("total"), st.just(()), st.just(())),
        st.tuples(st.just("history"), st.just(()), st.just(())),
    ),
    max_size=12,
)


def outcome_of(target: Any, call: Call) -> object:
    """What calling ``call`` on ``target`` answered, or the type of the error it raised."""
    method, args, kwargs = call
    try:
        return getattr(target, method)(*args, **dict(kwargs))
    except Exception as error:
        return type(error)


def calls_on(kind: str, calls: list[Call]) -> list[object]:
    """Each call's outcome through a proxy of a fresh ``CounterActor`` on backend ``kind``."""
    if kind == "trio":

        async def on_trio() -> list[object]:
            async with TrioSystem() as system:
                counter = system.spawn(CounterActor).proxy(AsyncCounter)
                outcomes: list[object] = []
                for method, args, kwargs in calls:
                    try:
                        outcomes.append(await getattr(counter, method)(*args, **dict(kwargs)))
                    except Exception as error:
                        outcomes.append(type(error))
                return outcomes

        return trio.run(on_trio)
    if kind == "threads":
        with ThreadSystem() as threads:
            counter = threads.spawn(CounterActor).proxy(Counter)
            return [outcome_of(counter, call) for call in calls]
    sim = Simulation(seed=len(calls))
    counter = sim.spawn(CounterActor).proxy(Counter)
    return [outcome_of(counter, call) for call in calls]


@pytest.mark.parametrize("kind", BACKENDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=calls_of_a_counter)
def test_a_proxy_answers_as_the_object_would_and_its_errors_leave_the_state(kind: str, calls: list[Call]) -> None:
    plain = CounterActor()  # called directly: the model
    expected = [outcome_of(plain, call) for call in calls]
    assert calls_on(kind, calls) == expected


@attrs.frozen
class Grow:
    """Spawn a child of kind ``kind`` called ``name``; answer its ref."""

    name: str
    kind: str


class Node(Actor):
    def receive(self, message: Any) -> None:
        match message:
            case Grow(name=name, kind=kind):
                self.ctx.reply(self.ctx.spawn(NODE_KINDS[kind], name=name))


class Branch(Node):
    """A subclass of ``Node``, for ``by_class``."""


class Leaf(Actor):
    """Not a ``Node``; it grows nothing."""

    def receive(self, message: Any) -> None:
        pass


NODE_KINDS: dict[str, type[Actor]] = {"node": Node, "branch": Branch, "leaf": Leaf}
NAMES = st.sampled_from(("a", "b", "c"))


@attrs.define
class Entry:
    """The model's view of one live actor."""

    ref: ActorRef
    kind: str
    parent: ActorRef | None


class RegistryMachine(RuleBasedStateMachine):
    """Spawn, grow and stop actors in the simulator; the registry always equals the model's live set."""

    def __init__(self) -> None:
        super().__init__()
        self.sim = Simulation(seed=3)
        self.live: list[Entry] = []  # in spawn order

    @rule(name=NAMES, kind=st.sampled_from(sorted(NODE_KINDS)))
    def spawn_top(self, name: str, kind: str) -> None:
        if any(entry.parent is None and entry.ref.name == name for entry in self.live):
            with pytest.raises(ActorNameTaken):
                self.sim.spawn(NODE_KINDS[kind], name=name)
            return
        self.live.append(Entry(self.sim.spawn(NODE_KINDS[kind], name=name), kind, None))

    @precondition(lambda self: any(entry.kind != "leaf" for entry in self.live))
    @rule(data=st.data(), name=NAMES, kind=st.sampled_from(sorted(NODE_KINDS)))
    def grow(self, data: st.DataObject, name: str, kind: str) -> None:
        parent = data.draw(st.sampled_from([entry.ref for entry in self.live if entry.kind != "leaf"]))
        if any(entry.parent == parent and entry.ref.name == name for entry in self.live):
            return  # the parent would fail on ActorNameTaken: not the registry's rule
        self.live.append(Entry(self.sim.ask(parent, Grow(name, kind)), kind, parent))

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def stop(self, data: st.DataObject) -> None:
        ref = data.draw(st.sampled_from([entry.ref for entry in self.live]))
        self.sim.stop(ref)
        self.sim.run()
        gone = {ref}
        for entry in self.live:  # parents come before children, so descendants follow in one pass
            if entry.parent in gone:
                gone.add(entry.ref)
        self.live = [entry for entry in self.live if entry.ref not in gone]

    @invariant()
    def the_registry_is_the_live_set(self) -> None:
        registry = self.sim.registry
        assert registry.all() == tuple(entry.ref for entry in self.live)
        for actor_class in (Actor, Node, Branch, Leaf):
            expected = tuple(entry.ref for entry in self.live if issubclass(NODE_KINDS[entry.kind], actor_class))
            assert registry.by_class(actor_class) == expected
        for name in ("a", "b", "c"):
            named = [entry.ref for entry in self.live if entry.ref.name == name]
            if len(named) > 1:
                with pytest.raises(ConveyorError, match="find one by its path"):
                    registry.by_name(name)
            else:
                assert registry.by_name(name) == (named[0] if named else None)
            for ref in named:
                assert registry.by_name(ref.path) == ref

    def teardown(self) -> None:
        self.sim.shutdown()
        assert self.sim.registry.all() == ()


TestRegistryMachine = RegistryMachine.TestCase
TestRegistryMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


USER_CODE = '''
from typing import Protocol
from conveyor.runtime import ActorRef, ThreadSystem, TrioSystem

class Counter(Protocol):
    def add(self, amount: int) -> int: ...

class AsyncCounter(Protocol):
    async def add(self, amount: int) -> int: ...

def on_threads(system: ThreadSystem, ref: ActorRef) -> None:
    counter = ref.proxy(Counter)
    total: int = counter.add(2)
    wrong: str = counter.add(2)
    counter.add("two")
    reveal_type(system.proxy(ref, Counter))

async def on_trio(system: TrioSystem, ref: ActorRef) -> None:
    counter = system.proxy(ref, AsyncCounter)
    total: int = await counter.add(2)
    wrong: str = await counter.add(2)
'''


def test_mypy_types_a_users_proxy_calls(tmp_path: Path) -> None:
    """A Protocol is accepted where mypy refuses one for ``type[T]``, and every call is checked against it."""
    (tmp_path / "user_code.py").write_text(USER_CODE, encoding="utf-8")
    report, errors, _ = mypy.api.run(["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                                      str(tmp_path / "user_code.py")])
    lines = [line.split("user_code.py:", 1)[1] for line in report.splitlines() if "user_code.py:" in line]
    assert lines == [
        '14: error: Incompatible types in assignment (expression has type "int", variable has type "str")  '
        "[assignment]",
        '15: error: Argument 1 to "add" of "Counter" has incompatible type "str"; expected "int"  [arg-type]',
        '16: note: Revealed type is "user_code.Counter"',
        '21: error: Incompatible types in assignment (expression has type "int", variable has type "str")  '
        "[assignment]",
    ], errors


def test_the_architecture_pages_example_runs_as_written() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("### Asking a ref, typed proxies and the registry", 1)[1].split("\n### ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    exec(compile(block, "docs/architecture.md", "exec"), {"__name__": "architecture_example"})
