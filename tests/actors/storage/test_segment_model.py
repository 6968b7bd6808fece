"""The segment log against a dict: random puts, deletes, syncs, GC, clean reopens and crashes."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from conveyor.actors.storage import SegmentLog

from .helpers import crash

KEYS = [b"k%d" % i for i in range(12)]


class LogAgainstDict(RuleBasedStateMachine):
    """Every step keeps the log equal to the model; a crash recovers every synced write and a prefix of the rest."""

    base: Path
    runs: itertools.count[int]

    def __init__(self) -> None:
        super().__init__()
        self.directory = self.base / f"run-{next(self.runs)}"
        self.log = self.open()
        self.model: dict[bytes, bytes] = {}
        self.durable: dict[bytes, bytes] = {}
        self.pending: list[tuple[bytes, bytes | None]] = []

    def open(self) -> SegmentLog:
        return SegmentLog(self.directory, segment_size=160, flush_bytes=100)

    @rule(name=st.sampled_from(KEYS), value=st.one_of(st.sampled_from([b"", b"w" * 60]), st.binary(max_size=60)))
    def put(self, name: bytes, value: bytes) -> None:
        if name in self.model:
            with pytest.raises(ValueError, match="already stored"):
                self.log.put(name, value)
            return
        self.log.put(name, value)
        self.model[name] = value
        self.pending.append((name, value))

    @rule(name=st.sampled_from(KEYS))
    def delete(self, name: bytes) -> None:
        if name not in self.model:
            with pytest.raises(KeyError):
                self.log.delete(name)
            return
        self.log.delete(name)
        del self.model[name]
        self.pending.append((name, None))

    @rule()
    def sync(self) -> None:
        synced = self.log.sync()
        assert synced.records == len(self.pending)
        self.durable = dict(self.model)
        self.pending.clear()

    @rule(threshold=st.sampled_from([0.2, 0.5, 0.8, 1.0]))
    def collect_garbage(self, threshold: float) -> None:
        self.log.collect_garbage(threshold)
        self.durable = dict(self.model)
        self.pending.clear()
        assert dict(self.log.items()) == self.model

    @rule()
    def reopen(self) -> None:
        before = self.log.stats()
        self.log.close()
        self.log = self.open()
        after = self.log.stats()
        assert (after.keys, after.tombstones, after.live_bytes, after.total_bytes) == (
            before.keys, before.tombstones, before.live_bytes, before.total_bytes,
        ), "recovery counts live bytes as the running log did"
        assert self.log.recovery.truncated == () and self.log.recovery.damaged == ()
        self.durable = dict(self.model)
        self.pending.clear()

    @rule()
    def crash_and_recover(self) -> None:
        crash(self.log)
        self.log = self.open()
        recovered = dict(self.log.items())
        candidates = [dict(self.durable)]
        for name, value in self.pending:
            state = dict(candidates[-1])
            if value is None:
                state.pop(name, None)
            else:
                state[name] = value
            candidates.append(state)
        assert recovered in candidates, (recovered, candidates)
        self.model = recovered
        self.durable = dict(recovered)
        self.pending.clear()

    @invariant()
    def holds_what_the_model_holds(self) -> None:
        assert sorted(self.log.keys()) == sorted(self.model)
        for name, value in self.model.items():
            assert self.log.get(name) == value

    def teardown(self) -> None:
        self.log.close()


def test_the_log_behaves_as_a_dict_across_gc_reopen_and_crash(tmp_path: Path) -> None:
    machine = type("Machine", (LogAgainstDict,), {"base": tmp_path, "runs": itertools.count()})
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=60, stateful_step_count=50, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow]),
    )
