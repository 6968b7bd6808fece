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


@given(numbers=st.tuples(*(st.integers(min_value=0, max_value=2**40) for _ in range(5))),
       message_id=st.integers(min_value=1, max_value=2**40).map(str), data=st.binary(max_size=16),
       flags=st.tuples(st.booleans(), st.booleans(), st.booleans()))
def test_a_bindings_unchecked_ack_ids_and_batches_equal_the_checked_builds(
        numbers: tuple[int, int, int, int, int], message_id: str, data: bytes, flags: tuple[bool, bool, bool]) -> None:
    """What ``Binding._answer`` builds once per delivery and per response, without the checks."""
    from conveyor.actors.pubsub import AckId, Batch
    from conveyor.actors.pubsub._ackid import ack_id_unchecked
    from conveyor.actors.pubsub._model import batch_unchecked

    ack_id = ack_id_unchecked(*numbers, message_id)
    assert ack_id == AckId(*numbers, message_id) and hash(ack_id) == hash(AckId(*numbers, message_id))
    received = (("text", PubMessage(data, message_id=message_id), numbers[4]),)
    batch = batch_unchecked(received, *flags[:2], None, flags[2])
    expected = Batch(received, *flags[:2], None, flags[2])
    assert batch == expected and repr(batch) == repr(expected)
    ensure_immutable(batch)
