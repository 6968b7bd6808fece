"""``Message.from_decoded`` and ``delivery_unchecked``: the unchecked builds equal the checked ones."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.broker import Delivery, Message, delivery_unchecked
from conveyor.runtime import ensure_immutable

_KEYS = st.text(min_size=1, max_size=8)


@given(body=st.binary(max_size=64), attributes=st.dictionaries(_KEYS, st.text(max_size=8), max_size=5),
       group=st.text(max_size=6), message_id=st.text(max_size=10))
def test_from_decoded_equals_the_checked_message(body: bytes, attributes: dict[str, str], group: str,
                                                 message_id: str) -> None:
    decoded = Message.from_decoded(body, attributes, group, message_id)
    checked = Message(body, headers=attributes, group=group or None, message_id=message_id)
    assert decoded == checked
    assert decoded.size == checked.size, "size counts the body and every header's key and value"
    assert decoded.headers == checked.headers, "headers sorted by key, as the checked build sorts them"
    assert (decoded.priority, decoded.ttl_s, decoded.delay_s) == (checked.priority, None, None)
    assert pickle.loads(pickle.dumps(decoded)) == checked, "a durable queue's snapshot rebuilds it checked"


def test_an_empty_ordering_key_is_no_group() -> None:
    assert Message.from_decoded(b"x", {}, "", "1").group is None


@given(queue=st.text(max_size=5), tag=st.integers(), count=st.integers(),
       deadline=st.none() | st.floats(allow_nan=False), consumer_id=st.integers(), body=st.binary(max_size=8))
def test_delivery_unchecked_equals_the_checked_delivery(queue: str, tag: int, count: int, deadline: float | None,
                                                         consumer_id: int, body: bytes) -> None:
    message = Message(body)
    fast = delivery_unchecked(queue, tag, message, count, deadline, consumer_id)
    checked = Delivery(queue, tag, message, count, deadline, consumer_id)
    assert fast == checked and hash(fast) == hash(checked) and repr(fast) == repr(checked)
    ensure_immutable(fast)
