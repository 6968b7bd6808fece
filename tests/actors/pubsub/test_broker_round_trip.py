"""A Pub/Sub message stored as a broker message comes back as the message it was, built without its checks.

``from_broker`` runs once per delivery on the server and builds its ``PubMessage`` unchecked
(``pub_message_unchecked``): what it builds must equal the checked build, hash and print alike, and pass
the immutability walk a send makes.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.pubsub import PubMessage
from conveyor.actors.pubsub._subscription import from_broker, to_broker
from conveyor.runtime import ensure_immutable

_NAMES = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8).filter(
    lambda name: not name.startswith("goog"))


@given(data=st.binary(max_size=64),
       attributes=st.dictionaries(_NAMES, st.text(max_size=8), max_size=4).map(lambda d: tuple(sorted(d.items()))),
       ordering_key=st.text(max_size=8), publish_time_ns=st.integers(min_value=0, max_value=2**62),
       message_id=st.integers(min_value=1, max_value=2**40).map(str), ordered=st.booleans())
def test_a_stored_message_comes_back_equal_to_the_checked_build(
        data: bytes, attributes: tuple[tuple[str, str], ...], ordering_key: str, publish_time_ns: int,
        message_id: str, ordered: bool) -> None:
    message = PubMessage(data, attributes, ordering_key, publish_time_ns, message_id)
    back = from_broker(to_broker(message, ordered, 0.0))
    assert type(back) is PubMessage
    assert back == message and hash(back) == hash(message) and repr(back) == repr(message)
    ensure_immutable(back)
