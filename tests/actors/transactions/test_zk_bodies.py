"""``BodyCache``: the bodies a ZooKeeper backend put, bounded in bytes, oldest dropped first, each handed over once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.transactions import ItemKey
from conveyor.actors.transactions._zk_backend import BodyCache

_keys = st.builds(ItemKey, st.sampled_from(("a", "b")), st.integers(0, 20))
_puts = st.lists(st.tuples(_keys, st.binary(max_size=12)), max_size=4)
_steps = st.lists(st.one_of(st.tuples(st.just("put"), _puts), st.tuples(st.just("take"), _keys)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(max_bytes=st.integers(0, 64), steps=_steps)
def test_the_cache_keeps_the_newest_bodies_within_its_bound_and_hands_each_over_once(
        max_bytes: int, steps: list[tuple[str, object]]) -> None:
    cache = BodyCache(max_bytes)
    model: dict[ItemKey, bytes] = {}  # what should be kept, oldest first
    for kind, argument in steps:
        if kind == "put":
            puts: list[tuple[ItemKey, bytes]] = argument  # type: ignore[assignment]
            cache.remember(puts)
            for key, body in puts:
                model.pop(key, None)
                model[key] = body
            while sum(map(len, model.values())) > max_bytes:
                del model[next(iter(model))]
        else:
            taken: ItemKey = argument  # type: ignore[assignment]
            assert cache.take(taken) == model.pop(taken, None), "the body put last for it, if still kept"
            assert cache.take(taken) is None, "handed over once"
        assert cache.size == sum(map(len, model.values())) <= max_bytes
        assert len(cache) == len(model)
