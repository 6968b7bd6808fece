"""The storage threads' heap trim: once per ``TRIM_EVERY_BYTES`` handled, never per call."""

from __future__ import annotations

import ctypes.util

import pytest

from conveyor.actors.storage import TRIM_EVERY_BYTES, note_bytes_handled


@pytest.mark.skipif(ctypes.util.find_library("c") is None, reason="no C library to trim with on this platform")
def test_a_trim_runs_once_enough_bytes_passed_and_the_count_starts_again() -> None:
    note_bytes_handled(TRIM_EVERY_BYTES)  # whatever was counted before: trims and starts again
    assert not note_bytes_handled(TRIM_EVERY_BYTES - 1)
    assert note_bytes_handled(1)
    assert not note_bytes_handled(TRIM_EVERY_BYTES // 2)
