"""The front's files in a data directory: the ack-id key is made once (owner-only) and the starts are counted."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from conveyor.actors.pubsub import AckId, AckIdCodec, PubSubRegistry
from conveyor.actors.pubsub._data_dir import DIRECTORY, KEY_FILE, STARTS_FILE, ack_key, count_start


def test_the_key_is_made_once_owner_only_and_read_back_the_same(tmp_path: Path) -> None:
    first = ack_key(tmp_path)
    path = tmp_path / DIRECTORY / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ack_key(tmp_path) == first == path.read_bytes()
    assert ack_key(tmp_path / "elsewhere") != first  # drawn, not derived
    assert sorted(os.listdir(tmp_path / DIRECTORY)) == [KEY_FILE]  # no temporary file left behind


def test_an_ack_id_sealed_before_a_restart_verifies_after_it(tmp_path: Path) -> None:
    issued = AckIdCodec(ack_key(tmp_path)).issue(AckId(1 << 32 | 1, 0, 1, 7, 1, "42"))
    assert AckIdCodec(ack_key(tmp_path)).read(issued) == AckId(1 << 32 | 1, 0, 1, 7, 1, "42")


def test_a_damaged_key_is_refused_naming_the_file(tmp_path: Path) -> None:
    ack_key(tmp_path)
    (tmp_path / DIRECTORY / KEY_FILE).write_bytes(b"short")
    with pytest.raises(ValueError, match=f"{KEY_FILE} holds 5 bytes"):
        ack_key(tmp_path)


def test_starts_are_counted_from_one(tmp_path: Path) -> None:
    assert [count_start(tmp_path) for _ in range(3)] == [1, 2, 3]
    assert (tmp_path / DIRECTORY / STARTS_FILE).read_text() == "3\n"
    (tmp_path / DIRECTORY / STARTS_FILE).write_text("three")
    with pytest.raises(ValueError, match="number of earlier starts"):
        count_start(tmp_path)


def test_the_registry_refuses_a_start_it_cannot_number() -> None:
    with pytest.raises(ValueError, match="PubSubRegistry start"):
        PubSubRegistry(start=-1)
