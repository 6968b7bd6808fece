"""The settlement calls' ack ids, cut into requests: every id once, in order, none over a request's limits.

``_chunks`` sends a batch that fits as one call (sized with one encode for the lot) and cuts one that
does not at ``_IDS_PER_CALL`` ids or ``_BYTES_PER_CALL`` bytes, whichever comes first.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.pubsub import _transport as transport_module

_IDS = st.lists(st.text(alphabet="0123456789abcdef-.é", min_size=1, max_size=60), max_size=60)


def _size(chunk: tuple[str, ...]) -> int:
    return sum(len(ack_id.encode()) + 4 for ack_id in chunk)


@settings(max_examples=200, deadline=None)
@given(ids=_IDS, per_call=st.integers(min_value=1, max_value=20), byte_limit=st.integers(min_value=64, max_value=800))
def test_every_id_goes_once_in_order_and_no_call_is_over_a_limit(ids: list[str], per_call: int,
                                                                 byte_limit: int) -> None:
    with pytest.MonkeyPatch.context() as patch:  # the limits of this example only
        patch.setattr(transport_module, "_IDS_PER_CALL", per_call)
        patch.setattr(transport_module, "_BYTES_PER_CALL", byte_limit)
        chunks = list(transport_module._chunks(tuple(ids)))
    assert [ack_id for chunk in chunks for ack_id in chunk] == ids
    assert all(chunk for chunk in chunks), "no empty call"
    assert all(len(chunk) <= per_call for chunk in chunks)
    assert all(_size(chunk) <= byte_limit or len(chunk) == 1 for chunk in chunks), "only a lone id may be over"
    if len(ids) <= per_call and _size(tuple(ids)) <= byte_limit:
        assert len(chunks) == (1 if ids else 0), "a batch that fits goes as one call"
