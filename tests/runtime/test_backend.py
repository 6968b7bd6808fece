"""Every backend implements the declared ``Backend`` protocol, and nothing else of the kernel."""

from __future__ import annotations

import inspect

import pytest

from conveyor.runtime import ActorSystemBase, ThreadSystem, TrioSystem
from conveyor.runtime.lowlevel import Backend
from conveyor.simulation import Simulation

BACKENDS: tuple[type[Backend], ...] = (TrioSystem, ThreadSystem, Simulation)
"""mypy checks each class against the protocol here: a missing or mistyped member fails ``make typecheck``."""

DECLARED = sorted(name for name in vars(Backend) if not name.startswith("_"))
ATTRIBUTES = sorted(Backend.__annotations__)


def test_the_protocol_declares_the_hooks_and_the_hot_path() -> None:
    hooks = {"now", "current_cell", "enqueue", "schedule_timer", "cancel_timer", "start_job", "attach", "detach"}
    assert hooks | {"send", "tell", "open_journal", "store_hook"} <= set(DECLARED)
    assert ATTRIBUTES == ["journal_store", "tracer"]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda backend: backend.__name__)
def test_every_declared_method_is_implemented(backend: type[Backend]) -> None:
    for name in DECLARED:
        if name in ATTRIBUTES:
            continue
        implementation = inspect.getattr_static(backend, name)
        assert implementation is not vars(Backend)[name], f"{backend.__name__} leaves Backend.{name} unimplemented"


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda backend: backend.__name__)
def test_no_backend_overrides_a_private_member_of_the_base(backend: type[Backend]) -> None:
    private = {
        name
        for name, member in vars(backend).items()
        if name.startswith("_")
        and not name.startswith("__")
        and (inspect.isfunction(member) or isinstance(member, property))
    }
    assert sorted(private & set(dir(ActorSystemBase))) == [], "a backend hook must be declared in Backend"


def test_the_declared_attributes_are_set() -> None:
    simulation = Simulation(trace=False)
    assert simulation.tracer is None
    assert simulation.journal_store is None  # journals in memory unless a store is given
    assert TrioSystem(trace=True).tracer is not None
    with ThreadSystem() as threads:
        assert threads.tracer is None
