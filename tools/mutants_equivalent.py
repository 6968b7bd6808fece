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
    "actors/broker/_queue.py:QueueActor._compact_if_long:constant:0 -> -1#1": (
        "the default of held_bytes: its one caller (journal_calls' after) always passes it"
    ),
    "actors/subscriber/_ordering.py:OrderingKeyHolds.__init__:constant:0 -> -1#3": (
        "fences are numbered from 0 instead of 1: a fence number is only compared for equality with "
        "another, and the shell tests it against None, never for truth"
    ),
    "actors/pubsub/_ackid.py:<module>:constant:12 -> 13#1": (
        "a 13-byte seal instead of 12: issue and read use the same length, so every id issued still "
        "reads back and a forged one still fails (with odds 2**-104 instead of 2**-96)"
    ),
    "actors/subscriber/_leases.py:LeaseTable.add:remove:remove `self._advance(now, 'add lease', ack_id)`#1": (
        "_advance only checks that time does not go back and remembers it for the next check; the leaser "
        "passes ctx.now(), which never goes back, so every valid call behaves the same"
    ),
    "runtime/_cell.py:ActorCell.__init__:remove:remove `self.termination: Terminated | None = None`#1": (
        "terminate sets it before anything reads it directly (a dead letter's Watch answer needs a "
        "stopped cell), and ActorRef.termination reads it with getattr(cell, 'termination', None)"
    ),
    "actors/broker/_entries.py:EntryList.remove_consumer:constant:0 -> -1#1": (
        "the top consumer priority once the last consumer left: only a take or browse of a registered "
        "consumer reads it, and add_consumer first recomputes it from the consumers registered (a snapshot "
        "taken meanwhile records -1 and restore loads it back for the same recomputation; on a disk journal "
        "the snapshot pickles 3 bytes longer, which moves record offsets, not what the queue does)"
    ),
    "actors/broker/_entries.py:EntryList.evict_least_significant:remove:remove `return None`#1": (
        "the trailing `return None`: a function that falls off its end returns None"
    ),
    "actors/broker/_queue.py:QueueActor._compact_now:constant:0 -> -1#1": (
        "the default of held_bytes: its one caller (receive) always passes it"
    ),
    "actors/broker/_queue.py:<module>:constant:256 -> 255#1": (
        "a paging granularity: the most entries a paged queue moves out of RAM at a time, "
        "min(this, target / 1 KiB), so it counts only for targets of 255 KiB or more; any chunk of 2 or more "
        "keeps the paging promises (RAM under target, order, no loss): 255 only shifts which entries of a "
        "deep tail sit in RAM at a given moment (QueueStats' paged count then), which no promise fixes"
    ),
    "actors/subscriber/_ordering.py:OrderingKeyHolds.lift:boolean:True -> False#1": (
        "lift's answer (whether the fence was still up) is read by no actor: the key handler's FenceLifted "
        "handler calls it for its effect and ignores what it returns"
    ),
    "actors/pubsub/_ackid.py:<module>:constant:32 -> 31#1": (
        "KEY_BYTES: the length of the ack-id key drawn when none is given (31 or 33 bytes instead of 32); the "
        "codec takes 16 to 64 and seals with whatever it is given, so ids issue and verify alike"
    ),
    "actors/pubsub/_ackid.py:<module>:constant:32 -> 33#1": (
        "KEY_BYTES: the length of the ack-id key drawn when none is given (31 or 33 bytes instead of 32); the "
        "codec takes 16 to 64 and seals with whatever it is given, so ids issue and verify alike"
    ),
    "actors/pubsub/_subscription.py:Binding.__init__:remove:remove `self.consumer: ActorRef | None = None`#1": (
        "on_start assigns the consumer (_spawn_consumer) before the binding handles any message, and nothing "
        "reads it before"
    ),
    "actors/pubsub/_subscription.py:Binding.__init__:constant:0 -> -1#1": (
        "waiter_serial starts at -1 instead of 0: serials are only compared for equality with the one a timer "
        "was armed with, and every one is taken after an increment"
    ),
    "actors/pubsub/_subscription.py:Binding._unlapsed:compare:< -> <=#1": (
        "the guard only skips, when no buffered delivery lapsed, a loop that would then find nothing to forget"
    ),
}

_TESTS_ONLY = "a query no actor calls (only its unit tests and __repr__ do)"
_SERVER_SHAPE = (
    "only looks_like_ack_id, which only the gRPC server calls, sees the change; AckIdCodec.read, which the "
    "actors call, refuses the same texts by their seal"
)
_GONE_CELL = (
    "GoneCell: made only by a journal store on disk (Backend.gone_ref) for a path no actor of the running system "
    "ever had. The simulator's disk store (durable-crash) recovers journals its own run wrote on an empty SimDisk, "
    "and Simulation.gone_ref maps each path they name to the latest actor at it (a client, or the queue's own "
    "child, live or stopped): durable-crash's 20 default seeds call gone_ref 208 times and make no GoneCell"
)

UNREACHABLE: dict[str, str] = {
    "actors/broker/_consumer_lists.py:ConsumerLists.is_acquiring:return:return x -> return not x#1": _TESTS_ONLY,
    "actors/broker/_consumer_lists.py:ConsumerLists.awaiting_ids:remove:remove `return tuple(self._awaiting)`#1": (
        _TESTS_ONLY
    ),
    "actors/broker/_queue.py:QueueActor._unsubscribe:remove:remove `del self.by_ref[record.ref]`#1": (
        "the stale ref entry matters only to a consumer that sends Unsubscribe and subscribes again from the "
        "same ref; no actor sends Unsubscribe (a ConsumerActor leaves by stopping, and a stopped ref never "
        "subscribes again)"
    ),
    "actors/subscriber/_leases.py:LeaseTable.on_hold:return:return x -> return not x#1": _TESTS_ONLY,
    "actors/subscriber/_flow.py:LoadTracker.flow:remove:remove `return self._flow`#1": _TESTS_ONLY,
    "actors/subscriber/_ledger.py:AckLedger.snapshot:remove:remove `return LedgerSnapshot(pending=len(self._pend"
    "ing), expired=le`#1": _TESTS_ONLY,
    "actors/pubsub/_ackid.py:_split:boolop:or -> and#2": _SERVER_SHAPE,
    "actors/pubsub/_ackid.py:_split:remove:remove `return None`#3": _SERVER_SHAPE,
    "actors/pubsub/_ackid.py:looks_like_ack_id:remove:remove `return _split(text) is not None`#1": (
        "looks_like_ack_id: only the gRPC server calls it"
    ),
    "actors/pubsub/_ackid.py:looks_like_ack_id:return:return x -> return not x#1": (
        "looks_like_ack_id: only the gRPC server calls it"
    ),
    "actors/pubsub/_subscription.py:<module>:constant:31 -> 30#1": (
        "a subscription queue's bound of 2 GiB per message (1 GiB mutated): the server refuses publishes over "
        "10 MB before they reach the actors, and no simulated client sends one near either bound"
    ),
    "runtime/_cell.py:GoneCell.__init__:constant:1 -> 0#1": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:constant:1 -> 0#2": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:remove:remove `self.error = None`#1": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:remove:remove `CellBase.__init__(self, system, uid, path.rsplit('/', 1)"
    "[-1]`#1": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:boolop:or -> and#1": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:constant:1 -> 2#1": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:constant:1 -> 2#2": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:remove:remove `self.answered = self.settled = True`#1": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:boolean:True -> False#1": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:remove:remove `self.alive = False`#1": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:boolean:False -> True#1": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:remove:remove `self.result = None`#1": _GONE_CELL,
    "runtime/_cell.py:GoneCell.__init__:remove:remove `self.termination = Terminated(self.ref, 'gone', None)`#1": (
        _GONE_CELL
    ),
    "runtime/_cell.py:ActorCell._remember_unanswered:negate:c -> not c#1": (
        "which answered or settled asks the cell forgets, and when: terminate fails only those neither answered nor "
        "settled, so no ask's outcome changes; what changes is memory, once an actor holds 64 asks unanswered at "
        "once (then the mutant never prunes again). No simulated system asks any actor more than one question at "
        "a time (the kernel probe and the Pub/Sub driver ask one and wait)"
    ),
    "actors/subscriber/_leases.py:LeaseTable.add:remove:remove `self._bytes += size`#1": (
        "LeaseTable.bytes is a query no actor calls (the load controller counts bytes in its own LoadTracker)"
    ),
    "actors/subscriber/_ordering.py:OrderingKeyHolds._place:arith:+= -> -=#1": (
        "_held feeds only held_count() and snapshot(), queries no actor calls (only unit tests and __repr__)"
    ),
    "actors/subscriber/_ordering.py:OrderingKeyHolds.state_of:remove:remove `item = self._items.get(item_id)`#1": (
        _TESTS_ONLY
    ),
    "actors/subscriber/_ordering.py:OrderingKeyHolds.__len__:remove:remove `return len(self._items)`#1": _TESTS_ONLY,
    "actors/subscriber/_ordering.py:OrderingKeyHolds.drop_key:negate:not c -> c#1": (
        "drop_key is called by no actor: the key handler sends a key back through send_back, which uses drop_held"
    ),
    "actors/subscriber/_flow.py:LoadTracker.add:minmax:max -> min#1": (
        "_max_count_seen feeds only snapshot(), a query no actor calls (only unit tests and __repr__)"
    ),
    "actors/subscriber/_ledger.py:AckLedger.refuse:negate:c -> not c#1": (
        "the ledger then never forgets a refused ack; it forgets one REFUSED_MEMORY_S (3600 s) after the "
        "refusal, and no subscriber run reaches that: a scenario stops waiting at its horizon_s (3600 s from "
        "its start) and cancels its subscriptions, so no delivery comes an hour after a refusal"
    ),
    "actors/subscriber/_ledger.py:AckLedger.drop:remove:remove `return None`#1": (
        "a drop of a message not pending: only a callback's own SubscriberMessage.drop() reaches AckLedger.drop "
        "(the leaser's give-up goes to expire), a SubscriberMessage sends one decision (a zero deadline now "
        "counts as its nack), and nothing settles a copy while its callback runs (the manager nacks only "
        "copies never started); the one way left, ack_with_response timing out and the callback dropping "
        "after it, needs a backend that blocks a callback for an answer, which the simulator cannot"
    ),
    "actors/pubsub/_ackid.py:<module>:constant:512 -> 511#1": (
        "MAX_ACK_ID_CHARS: only a text of exactly 512 characters is judged otherwise; AckIdCodec.read refuses it "
        "by its seal anyway (no id this codec issues is a fifth that long), so only looks_like_ack_id, which "
        "only the gRPC server calls, sees the change"
    ),
    "actors/pubsub/_ackid.py:_split:remove:remove `return None`#1": _SERVER_SHAPE,
    "actors/pubsub/_ackid.py:_split:remove:remove `return None`#2": _SERVER_SHAPE,
    "actors/pubsub/_subscription.py:<module>:constant:1 -> 0#3": (
        "a subscription queue's bound of 2 GiB per message (one byte more mutated): the front refuses publishes "
        "over 10 MB before they are stored, and no simulated client sends one near either bound"
    ),
    "actors/pubsub/_subscription.py:Binding._confirmations:compare:is not -> is#2": (
        "Confirmations reach a binding only from the gRPC glue's StreamingPull reader (stream acks and deadline "
        "changes); no simulated client settles on a stream"
    ),
    "actors/pubsub/_subscription.py:SubscriptionActor._storable:remove:remove `converted: list[Message] = []`#1": (
        "_storable runs only when a routed message cannot become a broker Message, which the topic refuses "
        "before it routes (unpublishable): defence in depth no simulated publish reaches"
    ),
    "actors/pubsub/_subscription.py:SubscriptionActor._dead_letter:constant:0 -> -1#2": (
        "which attributes are dropped before the dead-letter source attributes are added: only a message "
        "dead-lettered a second time has them, and the simulated dead-letter subscription has no dead-letter policy"
    ),
    "actors/pubsub/_subscription.py:SubscriptionActor._use_config:compare:is not -> is#2": (
        "UseConfig comes only from an UpdateSubscription (the registry's ReplaceSubscription), which no "
        "simulated client sends"
    ),
    "actors/pubsub/_seek_log.py:SeekLog.confirm:compare:> -> >=#1": (
        "the bound of CONFIRMED_MEMORY (100,000) confirmed exactly-once ack ids is reached by no simulated run"
    ),
}
"""Mutants in code that no simulated system runs (a query only unit tests call, the gRPC server's own
parsing, a ref to an actor of an earlier process, which no simulated run names): the sweep cannot kill
them, so they are judged by the tests alone and reported apart from the score (and in a second score
that counts them as survivors)."""
