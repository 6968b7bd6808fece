"""The record codec: entries and frames round-trip, and a scan finds exactly where valid records end."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.storage import (
    Compacted,
    CorruptRecord,
    Delete,
    Put,
    decode_entry,
    encode_entry,
    encode_records,
    frame,
    put_record,
    read_heads,
    scan,
    unframe,
)

keys = st.binary(max_size=40)
seqs = st.integers(min_value=0, max_value=2**64 - 1)
segments = st.integers(min_value=0, max_value=2**32 - 1)
entries = st.one_of(
    st.builds(Put, seqs, keys, st.binary(max_size=300)),
    st.builds(Delete, seqs, keys, segments),
    st.builds(Compacted, st.lists(segments, max_size=8).map(tuple)),
)


@given(entries)
def test_an_entry_round_trips(entry: Put | Delete | Compacted) -> None:
    assert decode_entry(encode_entry(entry)) == entry


@given(st.lists(entries, max_size=20))
def test_a_scan_finds_every_record_of_a_clean_buffer(found: list[Put | Delete | Compacted]) -> None:
    buffer = encode_records(found)
    result = scan(buffer)
    assert result.damage is None
    assert result.end == len(buffer)
    assert [decode_entry(unframe(buffer, offset)) for offset, _ in result.spans] == found


@given(st.lists(entries, min_size=1, max_size=6), st.data())
def test_a_torn_last_record_is_found_at_every_cut(found: list[Put | Delete | Compacted], data: st.DataObject) -> None:
    whole = encode_records(found)
    last = len(whole) - len(frame(encode_entry(found[-1])))
    cut = data.draw(st.integers(min_value=last + 1, max_value=len(whole) - 1), label="cut")
    result = scan(whole[:cut])
    assert result.end == last
    assert len(result.spans) == len(found) - 1
    assert result.damage is not None
    assert (result.damage.kind, result.damage.offset, result.damage.discarded) == ("torn", last, cut - last)


def test_every_cut_of_the_last_record_is_torn_not_corrupt() -> None:
    whole = encode_records([Put(1, b"a", b"x" * 50), Delete(2, b"a", 7), Put(3, b"b", b"y" * 40)])
    last = len(whole) - len(frame(encode_entry(Put(3, b"b", b"y" * 40))))
    for cut in range(last + 1, len(whole)):
        result = scan(whole[:cut])
        assert result.damage is not None and result.damage.kind == "torn", cut
        assert result.end == last, cut


def test_a_flipped_bit_in_the_middle_is_corruption_and_stops_the_scan() -> None:
    records = [Put(i, b"k%d" % i, b"v" * 30) for i in range(5)]
    whole = bytearray(encode_records(records))
    size = len(frame(encode_entry(records[0])))
    whole[2 * size + 20] ^= 0x01
    result = scan(bytes(whole))
    assert len(result.spans) == 2
    assert result.damage is not None
    assert (result.damage.kind, result.damage.offset) == ("corrupt", 2 * size)
    assert result.damage.discarded == len(whole) - 2 * size
    assert "CRC" in result.damage.reason


def test_a_zero_filled_tail_is_torn_not_an_empty_record() -> None:
    whole = encode_records([Put(1, b"a", b"x")])
    result = scan(whole + bytes(64))
    assert result.damage is not None and result.damage.kind == "torn"
    assert result.end == len(whole)


def test_a_garbled_last_record_of_full_length_is_torn() -> None:
    whole = bytearray(encode_records([Put(1, b"a", b"x" * 10), Put(2, b"b", b"y" * 10)]))
    whole[-1] ^= 0xFF
    result = scan(bytes(whole))
    assert result.damage is not None and result.damage.kind == "torn"


def test_unframe_refuses_a_bad_crc() -> None:
    record = bytearray(frame(b"payload"))
    record[-1] ^= 0x10
    with pytest.raises(CorruptRecord, match="CRC mismatch"):
        unframe(bytes(record))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\x09rest", "unknown entry kind 9"),
        (b"\x01\x00", "cut short"),
        (b"\x03\x02\x00\x00\x00\x01", "names 2 sources"),
    ],
)
def test_a_malformed_entry_is_reported(payload: bytes, message: str) -> None:
    with pytest.raises(CorruptRecord, match=message):
        decode_entry(payload)


def test_an_empty_payload_and_an_oversized_key_are_refused() -> None:
    with pytest.raises(ValueError, match="payload length 0"):
        frame(b"")
    with pytest.raises(ValueError, match="key must be bytes of at most 65535"):
        encode_entry(Put(1, b"k" * 70_000, b""))


@given(st.lists(st.one_of(st.builds(Put, seqs, keys, st.binary(max_size=50)), st.builds(Delete, seqs, keys, segments)),
                max_size=15),
       st.booleans())
def test_heads_are_the_entries_without_their_values(found: list[Put | Delete], compacted: bool) -> None:
    first: list[Put | Delete | Compacted] = [Compacted((3, 4))] if compacted else []
    buffer = encode_records([*first, *found])
    heads = read_heads(buffer, scan(buffer).spans)
    assert heads.bad_offset is None
    assert heads.compacted == (Compacted((3, 4)) if compacted else None)
    assert [(seq, key, target) for _, _, seq, key, target in heads.heads] == [
        (e.seq, e.key, e.target if isinstance(e, Delete) else -1) for e in found
    ]


def test_heads_stop_at_a_record_that_is_no_entry() -> None:
    buffer = encode_records([Put(1, b"a", b"x")]) + frame(b"\x09junk") + encode_records([Put(2, b"b", b"y")])
    heads = read_heads(buffer, scan(buffer).spans)
    assert heads.bad_offset == len(encode_records([Put(1, b"a", b"x")]))
    assert "unknown entry kind 9" in heads.reason
    assert len(heads.heads) == 1


@given(seqs, keys, st.binary(max_size=300))
def test_the_publish_path_frames_a_put_as_the_codec_does(seq: int, key: bytes, value: bytes) -> None:
    assert put_record(seq, key, value) == frame(encode_entry(Put(seq, key, value)))
