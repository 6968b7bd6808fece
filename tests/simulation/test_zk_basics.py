"""The zk-basics scenario and its checkers: green on the real model, red on broken ones, replayable."""

from __future__ import annotations

from conveyor.runtime import Actor, ActorRef, EventKind, TraceEvent
from conveyor.runtime.lowlevel import ZkCall, ZkCreate, ZkExists, ZkNode, ZkReply
from conveyor.simulation import ChoiceStream, Simulation, ZkFaults, ZkSessionEnded, choice_stream
from conveyor.simulation.checkers import (
    delivery_steps,
    ephemerals_die_with_their_session,
    every_call_answered_once,
    sequential_names_never_repeat,
    story_lines,
)
from conveyor.simulation.scenarios import Variant, run_scenario

from .planted.zookeeper import ChildCountSequence, LeavesOneEphemeral
from .zk_harness import SimZkHarness


class _Idle(Actor):
    def receive(self, message: object) -> None:
        del message


def _client_ref() -> ActorRef:
    sim = Simulation(0)
    return sim.spawn(_Idle, name="client")


def _sent(time: float, sender: str, receiver: str, message: object) -> TraceEvent:
    return TraceEvent(EventKind.SENT, time, sender, receiver, message)


def test_a_read_asked_after_the_end_must_not_find_the_sessions_ephemeral() -> None:
    client = _client_ref()
    ended = TraceEvent(EventKind.NOTE, 1.0, "/zookeeper", None, ZkSessionEnded(7, "expired"))
    before = [_sent(0.5, "/client", "/client/session", ZkCall(0, client, ZkExists("/e"))), ended,
              _sent(1.5, "/client/session", "/client", ZkReply(0, ZkNode(b"", 0, 7)))]
    after = [ended, _sent(1.5, "/client", "/client/session", ZkCall(1, client, ZkExists("/e"))),
             _sent(1.6, "/client/session", "/client", ZkReply(1, ZkNode(b"", 0, 7)))]
    assert ephemerals_die_with_their_session(before).ok  # asked before the end: may have been applied before
    result = ephemerals_die_with_their_session(after)
    assert not result.ok
    assert "ephemeral node of session 7" in result.violations[0]


def test_sequential_names_and_answers_once_on_a_made_up_trace() -> None:
    client = _client_ref()
    create = ZkCreate("/s-", sequential=True)
    trace = [_sent(0.1, "/client", "/s", ZkCall(0, client, create)),
             _sent(0.2, "/s", "/client", ZkReply(0, "/s-0000000000")),
             _sent(0.3, "/client", "/s", ZkCall(1, client, create)),
             _sent(0.4, "/s", "/client", ZkReply(1, "/s-0000000000")),
             _sent(0.5, "/client", "/s", ZkCall(2, client, create))]
    names = sequential_names_never_repeat(trace)
    assert not names.ok and "already given to /client" in names.violations[0]
    answered = every_call_answered_once(trace)
    assert answered.violations == ("/client: request 2 sent at t=0.5 was never answered",)
    assert every_call_answered_once(trace[:4]).ok


def test_zk_basics_is_green_on_the_model_and_red_on_the_planted_bugs() -> None:
    assert all(run_scenario("zk-basics", seed).report.ok for seed in range(5))
    leaky = run_scenario("zk-basics", 0, variant=Variant(zookeeper=LeavesOneEphemeral))
    assert any(line.startswith("ephemerals_die_with_their_session:") for line in leaky.report.violations)
    repeating = run_scenario("zk-basics", 0, variant=Variant(zookeeper=ChildCountSequence))
    assert any(line.startswith("sequential_names_never_repeat:") for line in repeating.report.violations)


def test_a_zk_basics_run_replays_from_its_seed_and_from_its_choice_stream() -> None:
    first = run_scenario("zk-basics", 4)
    assert run_scenario("zk-basics", 4).report.trace_hash == first.report.trace_hash
    stream = ChoiceStream()
    with choice_stream(stream):
        recorded = run_scenario("zk-basics", 4)
    assert recorded.report.trace_hash == first.report.trace_hash
    with choice_stream(ChoiceStream(stream.drawn)):
        assert run_scenario("zk-basics", 4).report.trace_hash == first.report.trace_hash


def test_the_story_tells_calls_answers_session_events_and_drawn_faults() -> None:
    harness = SimZkHarness(0, ZkFaults(connection_loss=1.0, losses=1, expiry=1.0, session_timeout_s=2.0))
    client = harness.client("c")
    harness.call(client, ZkCreate("/e", ephemeral=True))
    story = story_lines(harness.sim.trace)
    assert any("/c/session -> /c: create ephemeral /e: connection_loss" in line for line in story), story
    assert any("fault: session 1: connection lost past the 2 s session timeout" in line for line in story), story
    assert any("/zookeeper: ended session 1 (expired)" in line for line in story), story
    assert story[-2].endswith("/c/session: session 1 expired")
    assert story[-1].endswith("/c/session: session 2 connected")  # as kazoo, a new session follows
    assert delivery_steps(harness.sim.trace) == 1  # one answer given
