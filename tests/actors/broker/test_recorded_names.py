"""The broker's messages keep the names traces record them by, wherever their code lives.

A trace names a message ``module:qualname``; trace hashes, stored traces and the Spark analysis
rest on those names, so moving a message between modules must not change them.
"""

from __future__ import annotations

import importlib
import io

from conveyor.actors import broker
from conveyor.actors.broker import _model
from conveyor.actors.broker._values import RECORDED_MODULE
from conveyor.runtime import EventKind, TraceEvent, dumps_jsonl, read_jsonl


def test_every_message_of_the_model_is_recorded_under_it_and_resolves_there() -> None:
    classes = [value for value in vars(_model).values() if isinstance(value, type)]
    assert len(classes) == 40
    for cls in classes:
        assert cls.__module__ == RECORDED_MODULE == _model.__name__, cls
        assert getattr(importlib.import_module(cls.__module__), cls.__qualname__) is cls
        assert getattr(broker, cls.__qualname__) is cls  # and it is public


def test_a_trace_names_a_message_by_its_module_of_record_and_reads_back() -> None:
    message = broker.EntryReturned("q", 3, 1, "lease lapsed", 1.5)
    line = dumps_jsonl([TraceEvent(EventKind.NOTE, 0.5, "/q", None, message)])
    assert '"$type":"conveyor.actors.broker._model:EntryReturned"' in line
    (back,) = read_jsonl(io.StringIO(line))
    assert back.message == message
