"""Unit tests of the kernel's sans-IO pieces: immutability, supervision values, trace encoding."""

from __future__ import annotations

import enum
import io
import json
import subprocess
import sys
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.runtime import (
    Directive,
    EventKind,
    MutableMessageError,
    RecordedMessage,
    RefPath,
    SupervisorStrategy,
    TraceEvent,
    Tracer,
    ensure_immutable,
    read_jsonl,
    trace_hash,
    write_jsonl,
)
from conveyor.runtime._supervision import RestartBudget
from conveyor.simulation import Simulation
from tests.runtime.actors import Echo


class Colour(enum.Enum):
    RED = "red"


@attrs.frozen
class Inner:
    values: tuple[int, ...]
    tags: frozenset[str]


@attrs.frozen
class Outer:
    name: str
    inner: Inner
    colour: Colour
    body: bytes
    ratio: float
    nothing: None = None


@attrs.frozen
class Empty:
    pass


def sample() -> Outer:
    return Outer("o", Inner((1, 2, 3), frozenset({"a", "b"})), Colour.RED, b"\x00\xff", 0.5)


def test_deeply_immutable_messages_pass() -> None:
    for message in (sample(), Empty(), (1, "a", b"b", None, 2.5, True, 3j), frozenset({1, 2}), Colour.RED, "s"):
        ensure_immutable(message)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ([1], "message is a builtins.list"),
        (Inner((1, [2]), frozenset()), r"message.values\[1\] is a builtins.list"),  # type: ignore[arg-type]
        ((1, {2: 3}), r"message\[1\] is a builtins.dict"),
        (object(), "builtins.object"),
    ],
)
def test_mutable_parts_are_named(message: object, expected: str) -> None:
    with pytest.raises(MutableMessageError, match=expected) as caught:
        ensure_immutable(message)
    assert isinstance(caught.value, TypeError)
    assert "attrs frozen" in str(caught.value)


def test_non_frozen_attrs_class_is_refused() -> None:
    @attrs.define
    class Loose:
        x: int

    with pytest.raises(MutableMessageError, match="Loose"):
        ensure_immutable(Loose(1))


def test_supervisor_strategy_validates_at_construction() -> None:
    with pytest.raises(ValueError, match="max_restarts must be an int >= 0"):
        SupervisorStrategy(max_restarts=-1)
    with pytest.raises(ValueError, match="within_s must be a finite number > 0"):
        SupervisorStrategy(within_s=0)
    with pytest.raises(TypeError):
        SupervisorStrategy(directive="restart")  # type: ignore[arg-type]
    bad = SupervisorStrategy(decider=lambda error: "stop")  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="must return a Directive"):
        bad.decide(ValueError())


def test_restart_budget_slides_its_window() -> None:
    strategy = SupervisorStrategy(Directive.RESTART, max_restarts=2, within_s=10)
    budget = RestartBudget()
    assert budget.try_spend(0.0, strategy)
    assert budget.try_spend(1.0, strategy)
    assert not budget.try_spend(2.0, strategy)
    assert budget.try_spend(10.5, strategy)  # the restart at 0.0 left the window


def test_trace_round_trips_through_json_lines() -> None:
    sim = Simulation(seed=4)
    echo = sim.spawn(Echo, name="echo")
    message = sample()
    assert sim.ask(echo, message) == message
    buffer = io.StringIO()
    count = write_jsonl(sim.trace, buffer)
    assert count == len(sim.trace) > 0
    buffer.seek(0)
    events = read_jsonl(buffer)
    assert [(e.kind, e.time, e.sender, e.receiver, e.error) for e in events] == [
        (e.kind, e.time, e.sender, e.receiver, e.error) for e in sim.trace
    ]
    delivered = [e for e in events if e.kind is EventKind.DELIVERED and e.receiver == "/echo"]
    assert delivered[-1].message == message  # rebuilt as the real class
    assert trace_hash(events) == trace_hash(sim.trace)


def test_trace_survives_unknown_classes_and_refs() -> None:
    line = json.dumps(
        {
            "kind": "sent",
            "time": 1.5,
            "sender": "/a",
            "receiver": "/b",
            "error": None,
            "message": {"$type": "nowhere:Gone", "fields": {"who": {"$ref": "/c"}, "n": 1}},
        }
    )
    (event,) = read_jsonl(io.StringIO(line + "\n"))
    assert event.message == RecordedMessage("nowhere:Gone", (("who", RefPath("/c")), ("n", 1)))
    with pytest.raises(ValueError, match="trace line 1 is not a trace event"):
        read_jsonl(io.StringIO('{"kind": "nonsense"}\n'))


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text() | st.binary() | st.floats(allow_nan=False),
        lambda children: st.lists(children, max_size=4).map(tuple) | st.frozensets(st.integers(), max_size=4),
        max_leaves=12,
    )
)
def test_any_immutable_value_round_trips(value: Any) -> None:
    event = TraceEvent(EventKind.SENT, 0.0, None, "/x", value)
    buffer = io.StringIO()
    write_jsonl([event], buffer)
    buffer.seek(0)
    (back,) = read_jsonl(buffer)
    assert back.message == value
    assert trace_hash([back]) == trace_hash([event])


class _Colour(enum.Enum):
    RED = "red"


@attrs.frozen
class _Everything:
    """A message with one of each kind of value the trace encodes."""

    text: str
    number: int
    ratio: float
    blob: bytes
    colour: _Colour
    pair: tuple[Any, ...]
    tags: frozenset[Any]
    nothing: None = None
    flag: bool = True


@attrs.frozen
class _One:
    """One init field (its layout reads a single value) and one field that is not an init field."""

    value: Any
    derived: int = attrs.field(init=False, default=0)


@attrs.frozen
class _Empty:
    """No fields at all."""


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(max_size=8)
    | st.just(_Colour.RED),
    lambda inner: st.tuples(inner, inner) | st.frozensets(st.integers() | st.text(max_size=3), max_size=3),
    max_leaves=6,
)


@given(st.lists(st.tuples(_values, _values, st.text(max_size=5), st.floats()), max_size=4))
def test_trace_hash_is_the_hash_of_the_written_json_lines(items: list[tuple[Any, Any, str, float]]) -> None:
    import hashlib

    from conveyor.runtime import dumps_jsonl

    events = []
    for index, (a, b, text, time) in enumerate(items):
        shared = _Everything(text, index, time, text.encode(), _Colour.RED, (a, b), frozenset({index, text}))
        events.append(TraceEvent(EventKind.SENT, time, "/a", None, shared))
        events.append(TraceEvent(EventKind.DELIVERED, float(index), None, "/b", shared, error=text or None))
        recorded = RecordedMessage("x:Y", (("z", a), ("b", RefPath("/p"))))
        events.append(TraceEvent(EventKind.NOTE, 0, "/a", "/b", recorded))
        events.append(TraceEvent(EventKind.NOTE, time, "/b", None, (_One(a), _One(_One(b)), _Empty(), shared)))
        events.append(TraceEvent(EventKind.FAILED, 1.5, "/a", "/b", ValueError(text)))
    expected = hashlib.sha256(dumps_jsonl(events).encode("utf-8")).hexdigest()
    assert trace_hash(events) == expected


def test_trace_hash_of_a_long_trace_is_the_hash_of_its_json_lines() -> None:
    """Past the lines hashed per update (512), with values shared across chunks."""
    import hashlib

    from conveyor.runtime import dumps_jsonl

    shared = _One(("x", 1, 2.5))
    events = [
        TraceEvent(EventKind.SENT if index % 3 else EventKind.NOTE, index / 7, f"/a{index % 5}", "/b",
                   (shared, _One(index)) if index % 2 else shared)
        for index in range(1_500)
    ]
    assert trace_hash(events) == hashlib.sha256(dumps_jsonl(events).encode("utf-8")).hexdigest()
    assert trace_hash(events[:512]) == hashlib.sha256(dumps_jsonl(events[:512]).encode("utf-8")).hexdigest()


def test_checked_when_built_refuses_a_mutable_field_at_construction_and_sends_skip_the_walk() -> None:
    from conveyor.runtime._immutability import SCALAR_TYPES, checked_when_built

    @checked_when_built
    @attrs.frozen
    class Batch:
        name: str
        items: tuple[int, ...] = ()

    assert Batch in SCALAR_TYPES
    ensure_immutable((Batch("a", (1, 2)),))
    with pytest.raises(MutableMessageError, match=r"Batch\.items is a builtins\.list"):
        Batch("a", [1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a frozen attrs class with fields"):
        checked_when_built(int)


def _convert_pair(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


@given(name=st.text(max_size=5), count=st.integers() | st.floats(allow_nan=False) | st.none(),
       items=st.lists(st.integers(), max_size=3).map(tuple) | st.lists(st.integers(), max_size=3)
       | st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
       pair=st.lists(st.integers(), max_size=2) | st.none())
def test_checked_when_built_builds_what_attrs_builds_and_refuses_what_the_walk_refuses(
        name: str, count: object, items: object, pair: object) -> None:
    """The fused ``__init__`` (attrs' own with the checks appended) keeps defaults, converters, validators and
    post-init hooks, and refuses exactly the instances ``ensure_immutable`` refuses, naming the field."""
    from conveyor.runtime._immutability import checked_when_built

    def make(checked: bool) -> type:
        @attrs.frozen
        class Sample:
            name: str = attrs.field(validator=attrs.validators.instance_of(str))
            count: object = None
            items: object = ()
            pair: object = attrs.field(default=None, converter=_convert_pair)
            size: int = attrs.field(init=False)

            def __attrs_post_init__(self) -> None:
                object.__setattr__(self, "size", len(self.name))

        return checked_when_built(Sample) if checked else Sample

    plain, checked = make(False), make(True)
    assert vars(checked)["__init__"].__qualname__.endswith("Sample.__init__"), "the fused __init__, not the wrapper"
    expected = plain(name, count, items, pair=pair)
    try:
        ensure_immutable(expected)
    except MutableMessageError as error:
        field = str(error).partition(" is ")[0].rpartition(".")[2]
        with pytest.raises(MutableMessageError, match=rf"Sample\.{field} is "):
            checked(name, count, items, pair=pair)
        return
    built = checked(name, count, items, pair=pair)
    assert attrs.asdict(built, recurse=False) == attrs.asdict(expected, recurse=False)
    assert checked(name).pair is None and checked(name).items == ()
    with pytest.raises(TypeError):
        checked(5)  # the validator still runs


@given(name=st.text(max_size=5), count=st.integers(), items=st.lists(st.integers(), max_size=3).map(tuple))
def test_unchecked_builder_builds_what_the_class_builds(name: str, count: int, items: tuple[int, ...]) -> None:
    """Equal, same hash and repr, immutable, its slots all set; a builder naming the fields wrongly is refused."""
    from conveyor.runtime.lowlevel import checked_when_built, unchecked_builder

    @checked_when_built
    @attrs.frozen
    class Sample:
        name: str
        count: int = 0
        items: tuple[int, ...] = ()

    build = unchecked_builder(Sample, ("name", "count", "items"))
    built, expected = build(name, count, items), Sample(name, count, items)
    assert type(built) is Sample
    assert built == expected and hash(built) == hash(expected) and repr(built) == repr(expected)
    ensure_immutable(built)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        built.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"has the fields \('name', 'count', 'items'\)"):
        unchecked_builder(Sample, ("name", "items", "count"))
    with pytest.raises(TypeError, match="has the fields"):
        unchecked_builder(Sample, ("name", "count"))


# --- quoting bad values in error messages ----------------------------------------------------------


def test_quote_keeps_short_values_as_their_repr() -> None:
    from conveyor.runtime._errors import quote

    assert quote(1.5) == "1.5"
    assert quote("abc") == "'abc'"
    assert quote((1, "a")) == "(1, 'a')"
    assert quote(-(10**20)) == "-100000000000000000000"


def test_quote_cuts_a_long_value_to_a_short_prefix() -> None:
    from conveyor.runtime._errors import quote

    quoted = quote("x" * 100_000)
    assert quoted.startswith("'xxxx") and quoted.endswith("... (100002 characters)")
    assert len(quoted) < 120


@given(st.integers(min_value=4301, max_value=20_000), st.sampled_from([1, -1]), st.integers(1, 9))
def test_quote_of_an_int_python_refuses_to_print_gives_its_first_digits(digits: int, sign: int, lead: int) -> None:
    from conveyor.runtime._errors import quote

    value = sign * (lead * 10 ** (digits - 1) + 12345)
    quoted = quote(value)  # str(value) raises ValueError: the int is past Python's 4300-digit limit
    assert quoted.startswith(f"{'-' if sign < 0 else ''}{lead}{'0' * 10}")
    assert quoted.endswith(f"... ({digits} digits)")
    assert len(quoted) < 80


def test_quote_survives_a_failing_repr() -> None:
    from conveyor.runtime._errors import quote

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert quote(Broken()) == "<Broken (repr raised RuntimeError)>"


class _PathOnly:
    """Stands in for a cell: ``Tracer.record`` reads only its path."""

    def __init__(self, path: str) -> None:
        self.path = path


@pytest.mark.parametrize("error", [None, "ValueError('x')"])
def test_a_recorded_event_is_the_one_the_class_builds_frozen_and_hashed_alike(error: str | None) -> None:
    """``Tracer.record`` builds its events through the slots' descriptors (faster): same fields, same hash."""
    tracer = Tracer()
    message = ("payload", 3)
    tracer.record(EventKind.SENT, 1.5, _PathOnly("/a"), None, message, error=error)  # type: ignore[arg-type]
    tracer.record(EventKind.NOTE, 2.0, None, _PathOnly("/b"), None)  # type: ignore[arg-type]
    built = [
        TraceEvent(EventKind.SENT, 1.5, "/a", None, message, error), TraceEvent(EventKind.NOTE, 2.0, None, "/b", None)
    ]
    assert tracer.events == built
    assert [event.message for event in tracer.events] == [message, None]  # message is left out of ==
    assert trace_hash(tracer.events) == trace_hash(built)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        tracer.events[0].time = 3.0  # type: ignore[misc]


def test_freeze_start_up_heap_leaves_start_up_objects_out_of_collections_and_collects_what_comes_after() -> None:
    # In a child: freezing the test process's heap would keep its garbage for the rest of the run.
    child = """
import gc, json, sys
import conveyor.runtime
from conveyor.runtime import freeze_start_up_heap
frozen = freeze_start_up_heap()
walked = {id(o) for o in gc.get_objects()}
made_after = []
made_after.append(made_after)  # a cycle, garbage once the name goes
del made_after
print(json.dumps({"frozen": frozen, "module_walked": id(conveyor.runtime.__dict__) in walked,
                  "collected": gc.collect()}))
"""
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True, timeout=60)
    found = json.loads(out.stdout)
    assert found["frozen"] > 1000
    assert found["module_walked"] is False
    assert found["collected"] >= 1
