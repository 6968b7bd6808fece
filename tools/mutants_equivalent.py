"""Equivalent mutants, reviewed by hand: each changes the code but no run can tell it from the original.

``tools/mutants.py`` does not run these, and leaves them out of the score. Keys are mutant ids as
``python tools/mutants.py --list`` prints them; the value says why the change cannot be seen (a
performance threshold, a value nothing reads, a branch no state reaches). ``tests/test_mutants.py``
fails when an id here no longer names a mutant, so the list cannot go stale silently.
"""

from __future__ import annotations

_GENERATIONS = (
    "generations are only compared for equality, start at 0 and grow, so any negative start value (or 0, "
    "whose first fresh dict is empty either way) means 'no generation yet'"
)
_LONE_NOTE = (
    "a batching threshold: how many acks go straight to the queue after a flush that caught a lone ack; "
    "every ack is forwarded either way, only how they are grouped changes"
)

EQUIVALENT: dict[str, str] = {
    "actors/broker/_consumer_lists.py:_Level:constant:1 -> 2#1": _GENERATIONS,
    "actors/broker/_consumer_lists.py:_Level:constant:1 -> 0#1": _GENERATIONS,
    "actors/broker/_consumer_lists.py:ConsumerLists.work_available:constant:1 -> 2#1": (
        "the generation advances by 2 instead of 1: generations are only compared for equality, so any "
        "strictly growing sequence does"
    ),
    "actors/broker/_consumer.py:<module>:constant:8 -> 9#1": _LONE_NOTE,
    "actors/broker/_consumer.py:<module>:constant:8 -> 7#1": _LONE_NOTE,
}

UNREACHABLE: dict[str, str] = {}
"""Mutants in code that no simulated system runs (a query only unit tests call, the gRPC server's own
parsing, a disk store the simulator never has): the sweep cannot kill them, so they are judged by the
tests alone and reported apart from the score (and in a second score that counts them as survivors)."""
