"""A crash at any point of garbage collection (or of the recovery after it) loses no live record."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conveyor.actors.storage import FileSystem, SegmentLog

from .helpers import InjectedCrash, RecordingFileSystem, crash, key


def open_log(directory: Path, fs: FileSystem | None = None) -> SegmentLog:
    """The log under test: small segments and a small buffer, so a GC has many steps."""
    return SegmentLog(directory, segment_size=600, flush_bytes=256, fs=fs)


def prepare(directory: Path, count: int, deleted: set[int]) -> dict[bytes, bytes]:
    """A synced log with ``count`` puts, the ``deleted`` ones deleted; returns the live set."""
    live = {}
    with open_log(directory) as log:
        for i in range(count):
            log.put(key(i), b"value-%d-" % i * (1 + i % 5))
            live[key(i)] = b"value-%d-" % i * (1 + i % 5)
        for i in sorted(deleted):
            log.delete(key(i))
            del live[key(i)]
    return live


def operations_of_gc(directory: Path, threshold: float) -> list[str]:
    """The disk-changing operations a full garbage collection of ``directory`` makes (on a copy)."""
    trial = directory.with_name(directory.name + "-trial")
    shutil.copytree(directory, trial)
    fs = RecordingFileSystem()
    with open_log(trial, fs) as log:
        fs.operations.clear()
        log.collect_garbage(threshold)
        return list(fs.operations)


def crash_gc_at(source: Path, target: Path, threshold: float, step: int) -> None:
    """Copy ``source`` to ``target`` and run a GC there that dies before its ``step``-th disk operation."""
    shutil.copytree(source, target)
    fs = RecordingFileSystem()
    log = open_log(target, fs)
    fs.operations.clear()
    fs.fail_at = step
    with pytest.raises(InjectedCrash):
        log.collect_garbage(threshold)
    crash(log)


def test_a_crash_before_any_operation_of_gc_loses_no_live_record(tmp_path: Path) -> None:
    source = tmp_path / "source"
    live = prepare(source, 80, {i for i in range(80) if i % 4})
    operations = operations_of_gc(source, 0.6)
    assert {"write", "fsync", "rename", "unlink", "fsync_dir"} <= set(operations)
    for step in range(len(operations)):
        target = tmp_path / f"crash-{step}"
        crash_gc_at(source, target, 0.6, step)
        with open_log(target) as log:
            assert dict(log.items()) == live, f"crash before operation {step} ({operations[step]})"
            assert log.recovery.damaged == ()
            log.collect_garbage(0.6)
        with open_log(target) as log:
            assert dict(log.items()) == live, f"crash before operation {step}, then a full GC"


def test_a_crash_during_the_recovery_that_finishes_a_gc_loses_nothing_either(tmp_path: Path) -> None:
    source = tmp_path / "source"
    live = prepare(source, 60, {i for i in range(60) if i % 3})
    operations = operations_of_gc(source, 0.6)
    renames = [i for i, name in enumerate(operations) if name == "rename"]
    checked = 0
    for step in (renames[0] + 1, renames[0] + 2, renames[-1] + 2):  # after a rename, before its sources go
        interrupted = tmp_path / f"gc-{step}"
        crash_gc_at(source, interrupted, 0.6, step)
        probe = RecordingFileSystem()
        shutil.copytree(interrupted, tmp_path / f"gc-{step}-probe")
        probe_log = open_log(tmp_path / f"gc-{step}-probe", probe)
        recovery_operations = len(probe.operations)
        assert probe_log.recovery.finished_compactions, "the crash left sources behind"
        probe_log.close()
        for recovery_step in range(recovery_operations):
            target = tmp_path / f"gc-{step}-recovery-{recovery_step}"
            shutil.copytree(interrupted, target)
            with pytest.raises(InjectedCrash):
                open_log(target, RecordingFileSystem(fail_at=recovery_step))
            with open_log(target) as log:
                assert dict(log.items()) == live, (step, recovery_step)
            checked += 1
    assert checked > 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    count=st.integers(min_value=1, max_value=60),
    deleted=st.sets(st.integers(min_value=0, max_value=59)),
    threshold=st.sampled_from([0.3, 0.6, 1.0]),
    data=st.data(),
)
def test_random_workloads_survive_a_crash_at_a_random_point_of_gc(
    tmp_path_factory: pytest.TempPathFactory, count: int, deleted: set[int], threshold: float, data: st.DataObject,
) -> None:
    base = tmp_path_factory.mktemp("workload")
    source = base / "source"
    live = prepare(source, count, {i for i in deleted if i < count})
    operations = operations_of_gc(source, threshold)
    if not operations:
        return
    step = data.draw(st.integers(min_value=0, max_value=len(operations) - 1), label="step")
    crash_gc_at(source, base / "crashed", threshold, step)
    with open_log(base / "crashed") as log:
        assert dict(log.items()) == live
