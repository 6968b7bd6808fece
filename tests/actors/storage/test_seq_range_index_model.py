"""The per-segment queue index against a dict: publishes, delivery marks, acks, syncs, GC, reopens and crashes.

After a crash each segment must hold its state at the last sync with a prefix of its later records
applied (each segment's records are appended in order; a crash keeps some of them, never a later one
without an earlier one).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from conveyor.actors.storage import SeqRangeIndex, StorageFailed

from .helpers import InjectedCrash, RecordingFileSystem, crash_index

IDS = 4
"""Ids per segment: small, so a run spans many segments and deletes some whole."""
SEQ_IDS = st.integers(min_value=0, max_value=23)
State = dict[int, tuple[bytes, bool]]
Op = tuple[str, int, bytes]


def apply(state: State, op: Op) -> None:
    kind, seq_id, entry = op
    if kind == "publish":
        state[seq_id] = (entry, False)
    elif kind == "deliver":
        state[seq_id] = (state[seq_id][0], True)
    else:
        del state[seq_id]


class IndexAgainstDict(RuleBasedStateMachine):
    """Every step keeps the index equal to the model; a crash recovers, per segment, the synced state plus a prefix."""

    base: Path
    runs: itertools.count[int]

    def __init__(self) -> None:
        super().__init__()
        self.directory = self.base / f"run-{next(self.runs)}"
        self.fs = RecordingFileSystem()
        self.index = SeqRangeIndex(self.directory, fs=self.fs, ids_per_segment=IDS)
        self.model: State = {}
        self.durable: State = {}
        self.since_sync: list[Op] = []

    def record(self, op: Op) -> None:
        apply(self.model, op)
        self.since_sync.append(op)

    @rule(seq_id=SEQ_IDS, entry=st.binary(max_size=40))
    def publish(self, seq_id: int, entry: bytes) -> None:
        self.index.publish(seq_id, entry)
        self.record(("publish", seq_id, entry))

    @rule(seq_id=SEQ_IDS)
    def deliver(self, seq_id: int) -> None:
        if seq_id not in self.model:
            with pytest.raises(KeyError, match=f"seq_id {seq_id} is not in the index"):
                self.index.deliver(seq_id)
            return
        self.index.deliver(seq_id)
        self.record(("deliver", seq_id, b""))

    @rule(seq_id=SEQ_IDS)
    def ack(self, seq_id: int) -> None:
        if seq_id not in self.model:
            with pytest.raises(KeyError):
                self.index.ack(seq_id)
            return
        self.index.ack(seq_id)
        self.record(("ack", seq_id, b""))

    @rule()
    def sync(self) -> None:
        synced = self.index.sync()
        assert synced.records == len(self.since_sync)
        self.durable, self.since_sync = dict(self.model), []

    @rule(start=SEQ_IDS, limit=st.integers(min_value=1, max_value=30))
    def read_from(self, start: int, limit: int) -> None:
        expected = [(i, self.model[i][0], self.model[i][1]) for i in sorted(self.model) if i >= start][:limit]
        got = [(r.seq_id, r.entry, r.delivered) for r in self.index.read_records(start, limit)]
        assert got == expected
        if expected:
            assert self.index.read(expected[0][0]) == expected[0][1]
        in_range = [(i, e, d) for i, e, d in expected if i < start + limit]
        assert [(r.seq_id, r.entry, r.delivered) for r in self.index.read_range(start, start + limit)] == in_range

    @rule(threshold=st.sampled_from([0.3, 0.5, 1.0]))
    def collect_garbage(self, threshold: float) -> None:
        self.index.collect_garbage(threshold)
        self.durable, self.since_sync = dict(self.model), []

    @rule()
    def reopen(self) -> None:
        self.index.close()
        self.index = SeqRangeIndex(self.directory, fs=self.fs, ids_per_segment=IDS)
        self.durable, self.since_sync = dict(self.model), []

    @rule()
    def crash(self) -> None:
        crash_index(self.index)
        self.recover()

    @rule(step=st.integers(min_value=0, max_value=12))
    def crash_during_sync(self, step: int) -> None:
        self.fs.fail_at = len(self.fs.operations) + step
        try:
            self.index.sync()
        except InjectedCrash:
            with pytest.raises(StorageFailed):
                self.index.publish(0, b"refused")
            crash_index(self.index)
            self.fs.fail_at = None
            self.recover()
            return
        self.fs.fail_at = None
        self.durable, self.since_sync = dict(self.model), []

    def recover(self) -> None:
        self.index = SeqRangeIndex(self.directory, fs=self.fs, ids_per_segment=IDS)
        recovered: State = {r.seq_id: (r.entry, r.delivered) for r in self.index.read_records(0, 1000)}
        for segment in {i // IDS for i in [*self.durable, *recovered, *(op[1] for op in self.since_sync)]}:
            ops = [op for op in self.since_sync if op[1] // IDS == segment]
            state = {i: v for i, v in self.durable.items() if i // IDS == segment}
            candidates = [dict(state)]
            for op in ops:
                apply(state, op)
                candidates.append(dict(state))
            got = {i: v for i, v in recovered.items() if i // IDS == segment}
            assert got in candidates, f"segment {segment}: recovered {got}, expected one of {candidates}"
        self.model, self.durable, self.since_sync = recovered, dict(recovered), []

    @invariant()
    def matches_the_model(self) -> None:
        assert len(self.index) == len(self.model)
        assert self.index.seq_ids() == sorted(self.model)
        assert self.index.span() == ((min(self.model), max(self.model) + 1) if self.model else None)
        for seq_id in range(24):
            assert (seq_id in self.index) == (seq_id in self.model)

    def teardown(self) -> None:
        self.index.close()


def test_the_index_against_a_dict_with_crashes(tmp_path: Path) -> None:
    IndexAgainstDict.base = tmp_path
    IndexAgainstDict.runs = itertools.count()
    run_state_machine_as_test(
        IndexAgainstDict,
        settings=settings(max_examples=150, stateful_step_count=40, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]),
    )
