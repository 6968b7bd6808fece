"""DiskBodyStore: bodies by seq in segment files of a seq range, delta chunks in a small log, both modes.

Transient: a body written twice or read after its delete is a bug (an error says so); a segment whose
bodies are all deleted goes. Durable, on the simulator's disk: every write and delete is synced before
the call returns, so a crash between calls keeps exactly what the calls did; a crash inside one keeps,
for each body it touched, the old or the new value (never a torn one: the CRC cuts it), and for a
chunk it replaced, the old, the new or none; a body not stored reads as None. A hypothesis machine
checks both against a dict.
"""

from __future__ import annotations

import gc
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from conveyor.actors.broker import DiskBodyStore, PageBatch, run_page_batch
from conveyor.simulation import DiskFaults, SimDisk

SEQS = 4
"""Seqs per body segment in these tests: small, so a few bodies span several segments."""


def disk(torn: float = 0.0) -> SimDisk:
    return SimDisk(random.Random(7), DiskFaults(torn_write=torn))


def body(seq: int) -> bytes:
    return b"body-%d" % seq * (1 + seq % 3)


def test_bodies_span_segments_and_an_emptied_segment_is_deleted() -> None:
    fs = disk()
    store = DiskBodyStore("/q", fs=fs, seqs_per_segment=SEQS)
    store.write([(seq, body(seq)) for seq in range(1, 11)])
    assert store.read([10, 1, 5]) == [body(10), body(1), body(5)]
    assert [path for path in fs.paths if path.endswith(".qidx")] == [
        "/q/seqs/0000000000.qidx", "/q/seqs/0000000001.qidx", "/q/seqs/0000000002.qidx",
    ]
    store.delete([1, 2, 3, 4])  # seqs 4..7 share a segment: the first one still holds 1..3
    store.delete([5, 6, 7])
    assert "/q/seqs/0000000001.qidx" not in fs.paths
    assert store.read([8, 9, 10]) == [body(8), body(9), body(10)]


def test_a_transient_store_refuses_a_second_write_and_a_read_of_a_deleted_body() -> None:
    store = DiskBodyStore("/q", fs=disk(), seqs_per_segment=SEQS)
    store.write([(1, b"one")])
    with pytest.raises(ValueError, match="body of entry 1 is stored already"):
        store.write([(1, b"again")])
    store.delete([1])
    with pytest.raises(KeyError, match="body of entry 1 is not in the store"):
        store.read([1])
    with pytest.raises(KeyError):
        store.delete([1])


def test_a_transient_store_never_syncs() -> None:
    fs = disk()
    store = DiskBodyStore("/q", fs=fs, seqs_per_segment=SEQS)
    store.write([(1, b"one"), (-1, b"chunk")])
    fs.crash()
    assert fs.paths == ()


def test_a_collected_transient_store_closes_its_files() -> None:
    fs = disk()
    store = DiskBodyStore("/q", fs=fs, seqs_per_segment=SEQS)
    store.write([(1, b"one"), (-1, b"chunk")])
    assert store.read([1, -1]) == [b"one", b"chunk"]
    assert fs._fds
    del store
    gc.collect()
    assert not fs._fds


def test_garbage_collection_compacts_a_sparse_segment_and_keeps_its_bodies() -> None:
    fs = disk()
    store = DiskBodyStore("/q", fs=fs, collect_every=2, seqs_per_segment=SEQS)
    store.write([(seq, b"%d" % seq * 500) for seq in range(4, 8)])
    before = fs.size("/q/seqs/0000000001.qidx")
    store.delete([4, 6])  # half the segment's bodies gone: collected
    assert fs.size("/q/seqs/0000000001.qidx") < before * 0.6
    assert store.read([5, 7]) == [b"5" * 500, b"7" * 500]


def test_a_durable_store_keeps_what_it_synced_across_a_crash() -> None:
    fs = disk()
    store = DiskBodyStore("/q", fs=fs, durable=True, seqs_per_segment=SEQS)
    run_page_batch(store, PageBatch(writes=((1, b"one"), (2, b"two"), (9, b"nine")), chunk_writes=((-1, ()),)))
    store.write([(2, b"two again")])  # a durable store replaces (a recovery writes a body a snapshot carried)
    store.delete([1, 3])  # 3 was never stored: skipped
    fs.crash()
    again = DiskBodyStore("/q", fs=fs, durable=True, seqs_per_segment=SEQS)
    assert again.read([1, 2, 9, 3]) == [None, b"two again", b"nine", None]
    assert run_page_batch(again, PageBatch(chunk_reads=(-1,))).chunks == ((-1, ()),)
    again.forget_from(2)
    fs.crash()
    assert DiskBodyStore("/q", fs=fs, durable=True, seqs_per_segment=SEQS).read([2, 9]) == [None, None]


def test_a_durable_store_of_the_earlier_layout_is_refused_not_read_as_lost(tmp_path: Path) -> None:
    old = tmp_path / "q"
    old.mkdir()
    (old / "0000000001.seg").write_bytes(b"a segment log of bodies keyed by seq")
    store = DiskBodyStore(str(old), durable=True)
    with pytest.raises(RuntimeError, match="earlier conveyor"):
        store.read([1])
    assert sorted(path.name for path in old.iterdir()) == ["0000000001.seg"]  # nothing made, nothing dropped


def test_a_torn_write_is_cut_at_open_and_the_bodies_before_it_read() -> None:
    fs = disk(torn=1.0)
    store = DiskBodyStore("/q", fs=fs, durable=True, seqs_per_segment=SEQS)
    store.write([(1, b"one")])
    index = store._opened.bodies
    assert index is not None
    index.publish(2, b"two" * 100)  # appended, not synced: the crash keeps part of it
    index._flush(0, index._segments[0])
    fs.crash()
    assert fs.torn
    again = DiskBodyStore("/q", fs=fs, durable=True, seqs_per_segment=SEQS)
    assert again.read([1, 2]) == [b"one", None]
    assert again._opened.bodies is not None and again._opened.bodies.recovery.truncated


def test_a_durable_store_syncs_at_open_what_an_earlier_store_left_unsynced() -> None:
    fs = disk()
    first = DiskBodyStore("/q", fs=fs, durable=True, seqs_per_segment=SEQS)
    index = first._opened.bodies if first._opened.bodies is not None else first._bodies()
    index.publish(5, b"five")  # a store that failed before its sync
    index._flush(1, index._segments[1])
    DiskBodyStore("/q", fs=fs, durable=True, seqs_per_segment=SEQS).read([5])
    fs.crash()
    assert DiskBodyStore("/q", fs=fs, durable=True, seqs_per_segment=SEQS).read([5]) == [b"five"]


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(ValueError, match="seqs_per_segment"):
        DiskBodyStore(seqs_per_segment=0)
    with pytest.raises(ValueError, match="collect_every"):
        DiskBodyStore(collect_every=0)
    with pytest.raises(ValueError, match="needs a directory"):
        DiskBodyStore(durable=True)


# --- against a dict --------------------------------------------------------------------------------

KEYS = st.integers(min_value=-3, max_value=14)
"""Seqs over four segments of four, and three chunk keys."""


class _Crashing:
    """The simulator's disk, failing the ``fail_at``-th change to it from now on (a crash inside a call)."""

    def __init__(self, fs: SimDisk) -> None:
        self.fs = fs
        self.fail_at: int | None = None

    def __getattr__(self, name: str) -> object:
        operation = getattr(self.fs, name)
        if name not in ("open_append", "write", "fsync", "truncate", "rename", "unlink", "fsync_dir"):
            return operation

        def counted(*args: object) -> object:
            if self.fail_at is not None:
                if self.fail_at == 0:
                    raise OSError(f"injected crash before {name}")
                self.fail_at -= 1
            return operation(*args)

        return counted


class StoreAgainstDict(RuleBasedStateMachine):
    """Each call keeps the store equal to a dict; a durable store's crash keeps old or new for what it touched."""

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[int, bytes] = {}
        self.count = 0

    @initialize(durable=st.booleans(), seed=st.integers(0, 1000))
    def open(self, durable: bool, seed: int) -> None:
        self.disk = SimDisk(random.Random(seed), DiskFaults(torn_write=0.5))
        self.fs = _Crashing(self.disk)
        self.durable = durable
        self.store = self.reopen_store()

    def reopen_store(self) -> DiskBodyStore:
        return DiskBodyStore("/q", fs=self.fs, durable=self.durable, collect_every=3,  # type: ignore[arg-type]
                             seqs_per_segment=4)

    def value(self) -> bytes:
        self.count += 1
        return b"v%d-" % self.count * (1 + self.count % 5)

    @rule(keys=st.lists(KEYS, max_size=4, unique=True))
    def write(self, keys: list[int]) -> None:
        if not self.durable:
            keys = [key for key in keys if key not in self.model]
        bodies = [(key, self.value()) for key in keys]
        self.store.write(bodies)
        self.model.update(bodies)

    @rule(keys=st.lists(KEYS, max_size=4, unique=True))
    def delete(self, keys: list[int]) -> None:
        if not self.durable:
            keys = [key for key in keys if key in self.model]
        self.store.delete(keys)
        for key in keys:
            self.model.pop(key, None)

    @precondition(lambda self: self.durable)
    @rule(seq=st.integers(min_value=0, max_value=15))
    def forget_from(self, seq: int) -> None:
        self.store.forget_from(seq)
        self.model = {key: value for key, value in self.model.items() if key < seq}

    @precondition(lambda self: self.durable)
    @rule()
    def reopen(self) -> None:
        self.disk.crash()
        self.store = self.reopen_store()

    @precondition(lambda self: self.durable)
    @rule(keys=st.lists(KEYS, min_size=1, max_size=4, unique=True), deleting=st.booleans(),
          step=st.integers(min_value=0, max_value=8))
    def crash_inside_a_call(self, keys: list[int], deleting: bool, step: int) -> None:
        bodies = [(key, self.value()) for key in keys]
        self.fs.fail_at = step
        try:
            if deleting:
                self.store.delete(keys)
            else:
                self.store.write(bodies)
        except OSError:
            self.disk.crash()
            self.fs.fail_at = None
            self.store = self.reopen_store()
            found = self.store.read(keys)
            for (key, new), got in zip(bodies, found, strict=True):
                # A chunk replaced is deleted then put in its log: a crash may keep the delete alone.
                allowed = (self.model.get(key), None) if deleting else (self.model.get(key), new, *([None] * (key < 0)))
                assert got in allowed, f"key {key}: {got!r}"
                if got is None:
                    self.model.pop(key, None)
                else:
                    self.model[key] = got
            return
        self.fs.fail_at = None
        for key, new in bodies:
            if deleting:
                self.model.pop(key, None)
            else:
                self.model[key] = new

    @invariant()
    def matches_the_model(self) -> None:
        if not hasattr(self, "store"):
            return
        keys = list(range(-3, 15))
        if self.durable:
            assert self.store.read(keys) == [self.model.get(key) for key in keys]
        else:
            present = sorted(self.model)
            assert self.store.read(present) == [self.model[key] for key in present]


def test_the_store_against_a_dict_with_crashes() -> None:
    run_state_machine_as_test(
        StoreAgainstDict,
        settings=settings(max_examples=100, stateful_step_count=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow]),
    )
