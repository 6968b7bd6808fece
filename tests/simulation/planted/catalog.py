"""The planted bugs of issues 5, 15, 17 and 18, each with the registry scenario that exposes it and a seed budget.

One table shared by the tests (``test_planted.py``) and the measurement of seeds-to-find
(``seeds_to_find.py``), so both judge the same variants on the same scenarios.
"""

from __future__ import annotations

from typing import final

import attrs

from conveyor.simulation.scenarios import Variant

from . import (
    broker,
    broker_promises,
    callback_consumer,
    durable_paging,
    kernel,
    kernel_notices,
    lease_ends,
    lease_schedule,
    lifecycle,
    promises,
    pubsub,
    pubsub_delivery,
    pubsub_limits,
    pubsub_promises,
    queue_stats,
    recovery_order,
    storage,
    subscriber,
    transactions,
    transactions_zk,
    zero_deadline_decision,
    zookeeper,
)


@final
@attrs.frozen
class PlantedBug:
    """A broken variant and how the simulator finds it.

    Attributes:
        name: a short handle (test ids, the table in docs/simulation.md).
        summary: the broken rule, in words.
        scenario: the registry scenario run with it.
        variant: the broken actors, plugged into ``run_scenario``.
        budget: seeds (0, 1, ...) within which the default strategy (random walk) must find it.
        checkers: the checkers any of which may report it (the first failing one is shrunk).
        shrink_runs: simulations the shrinker may spend.
    """

    name: str
    summary: str
    scenario: str
    variant: Variant
    budget: int
    checkers: frozenset[str]
    shrink_runs: int = 200


PLANTED: tuple[PlantedBug, ...] = (
    PlantedBug(
        "tail-release", "a released message goes to the tail of its level, not back to its position", "groups",
        Variant(queue=broker.queue_with_entries(broker.TailRelease)), budget=10,
        checkers=frozenset({"browser_completeness", "queue_order", "group_exclusivity"}),
    ),
    PlantedBug(
        "herd", "the consumer manager notifies two consumers of each piece of work", "fairness",
        Variant(queue=broker.queue_with_lists(broker.Herd)), budget=5, checkers=frozenset({"single_wakeup"}),
    ),
    PlantedBug(
        "forgotten-consumer", "a consumer that ran dry is not moved back to Interested", "fairness",
        Variant(queue=broker.queue_with_lists(broker.Forgetful)), budget=10,
        checkers=frozenset({"drained", "stall", "prompt_delivery", "starvation"}),
    ),
    PlantedBug(
        "stuck-priority-pointer", "a higher-priority publish does not move the pointers back", "priorities",
        Variant(queue=broker.queue_with_entries(broker.StuckPriorityPointer)), budget=5,
        checkers=frozenset({"drained", "stall", "priority_order", "queue_order", "prompt_delivery"}),
    ),
    PlantedBug(
        "blind-to-consumer-priority", "nothing is kept for a higher-priority consumer: the first to pull takes it",
        "consumer-priorities", Variant(queue=broker.queue_with_entries(broker.BlindToConsumerPriority)), budget=10,
        checkers=frozenset({"consumer_priority"}),
    ),
    PlantedBug(
        "selector-dropped", "a consumer's selector is dropped when it registers", "selectors",
        Variant(queue=broker.queue_with_entries(broker.SelectorDropped)), budget=5,
        checkers=frozenset({"selector_match"}),
    ),
    PlantedBug(
        "shared-groups", "a message group's owner is not enforced", "groups",
        Variant(queue=broker.queue_with_entries(broker.SharedGroups)), budget=10,
        checkers=frozenset({"group_exclusivity"}),
    ),
    PlantedBug(
        "backwards-batch", "a pull's entries are handed out last first", "broker-swarm",
        Variant(queue=broker.queue_with_entries(broker.BackwardsBatch)), budget=10,
        checkers=frozenset({"strict_order", "queue_order", "priority_order", "group_exclusivity"}),
    ),
    PlantedBug(
        "amnesiac-queue", "a durable queue does not recover its journal after a crash", "queue-crash",
        Variant(queue=broker.AmnesiacQueue), budget=5,
        checkers=frozenset({"accounting", "drained", "stall"}),
    ),
    PlantedBug(
        "unjournaled-acks", "a durable queue does not journal acks: after a crash acked messages return",
        "queue-crash", Variant(queue=broker.UnjournaledAcks), budget=5, checkers=frozenset({"accounting"}),
    ),
    PlantedBug(
        "silent-drop", "the queue confirms a publish it never enqueued, and leaves no note of it (issue 17, item 3)",
        "fairness", Variant(queue=broker.SilentDrop), budget=5, checkers=frozenset({"total_queue"}),
    ),
    PlantedBug(
        "misdeclared-consumer", "an acquiring client's consumer subscribes as a browser (issue 17, item 3)",
        "fairness", Variant(consumer=broker.MisdeclaredConsumer), budget=5,
        checkers=frozenset({"total_queue", "delivery_count", "exclusive_lease"}),
    ),
    PlantedBug(
        "fresh-ttl-on-return", "a message given back starts its TTL again", "broker-swarm",
        Variant(queue=broker.queue_with_entries(broker.FreshTtlOnReturn)), budget=10,
        checkers=frozenset({"expiry"}), shrink_runs=600,
    ),
    PlantedBug(
        "no-backoff", "a nacked message is offered again at once, without the retry policy's backoff",
        "broker-swarm", Variant(queue=broker.queue_with_entries(broker.NoBackoff)), budget=10,
        checkers=frozenset({"not_before"}),
    ),
    PlantedBug(
        "browsing-counts", "a browser's look at a message counts as a delivery", "broker-swarm",
        Variant(queue=broker.queue_with_entries(broker.BrowsingCounts)), budget=10,
        checkers=frozenset({"delivery_count", "delivery_limit", "priority_order", "queue_order"}), shrink_runs=600,
    ),
    PlantedBug(
        "late-dead-letter", "the delivery limit is checked one delivery late", "broker-swarm",
        Variant(queue=broker.queue_with_entries(broker.LateDeadLetter)), budget=10,
        checkers=frozenset({"delivery_limit"}), shrink_runs=1500,
    ),
    PlantedBug(
        "one-too-long", "the length limit lets one message more in", "broker-swarm",
        Variant(queue=broker.OneTooLong), budget=10, checkers=frozenset({"length_limit"}),
    ),
    PlantedBug(
        "overtaking-channel", "the kernel lets a message overtake an earlier one on its channel", "fairness",
        Variant(simulation=kernel.Overtaking), budget=5, checkers=frozenset({"mailbox_fifo"}),
    ),
    PlantedBug(
        "lossy-channel", "the kernel loses a message it recorded as sent", "fairness",
        Variant(simulation=kernel.Lossy), budget=5, checkers=frozenset({"nothing_vanishes", "mailbox_fifo"}),
    ),
    PlantedBug(
        "forgotten-watchers", "an actor that stops does not send its watchers Terminated", "crash-recovery",
        Variant(simulation=kernel.ForgetsWatchers), budget=5, checkers=frozenset({"supervision"}),
    ),
    PlantedBug(
        "ignored-extensions", "the queue ignores lease extensions: every lease lapses at its first deadline",
        "broker-swarm",
        Variant(queue=broker.queue_with_entries(broker.IgnoresExtensions)), budget=15,
        checkers=frozenset({"exclusive_lease", "lease_validity"}),
    ),
    PlantedBug(
        "reversing-consumer", "a consumer hands each delivered batch to its client backwards (issue 17, item 3)",
        "fairness", Variant(consumer=broker.ReversingConsumer), budget=10, checkers=frozenset({"strict_order"}),
    ),
    PlantedBug(
        "group-releasing-consumer",
        "a consumer releases a group's message behind its client's back (issue 17, item 3)", "groups",
        Variant(consumer=broker.GroupReleasingConsumer), budget=5,
        checkers=frozenset({"group_exclusivity", "consumer_credit"}), shrink_runs=1500,
    ),
    PlantedBug(
        "selector-dropping-consumer",
        "a consumer subscribes with no selector, whatever its client asked for (issue 17, item 3)", "selectors",
        Variant(consumer=broker.SelectorDroppingConsumer), budget=5, checkers=frozenset({"consumer_priority"}),
    ),
    PlantedBug(
        "key-released-on-ack", "an ordering key's next message is released on ack, not on callback end",
        # budget 10 -> 15 with key runs (branch keyjobs): a key run's acks reach the manager with its job's
        # settlements, so an ack-time release overlaps a callback in fewer interleavings (first found: seed 12)
        "ordering-keys", Variant(manager=subscriber.AckReleasesKey), budget=15,
        checkers=frozenset({"ordering_keys"}),
    ),
    PlantedBug(
        "flow-blind-to-holds", "flow control does not count messages on hold (keyed ones)", "ordering-keys",
        Variant(manager=subscriber.manager_with(load=subscriber.HoldBlindLoad)), budget=5,
        checkers=frozenset({"flow_bound"}),
    ),
    PlantedBug(
        "late-leaser", "the leaser extends leases after their deadline", "leases",
        Variant(manager=subscriber.manager_with(leaser=subscriber.LateLeaser)), budget=5,
        checkers=frozenset({"lease_validity"}),
    ),
    PlantedBug(
        "swallowed-failure", "a callback that raised is acked instead of nacked", "subscriber-swarm",
        Variant(manager=subscriber.SwallowsFailures), budget=10, checkers=frozenset({"no_loss"}),
    ),
    PlantedBug(
        "never-resumes", "flow control pauses the stream and never resumes it", "flow-control",
        Variant(manager=subscriber.manager_with(load=subscriber.NeverResumes)), budget=5,
        checkers=frozenset({"all_settled", "stall", "prompt_delivery", "flow_pause"}),
    ),
    PlantedBug(
        "refused-ack-run-again", "a message whose ack the queue refused is run again when it comes back",
        "leases", Variant(manager=subscriber.RunsRefusedAgain), budget=25,
        checkers=frozenset({"runs_once", "ordering_keys"}),
        shrink_runs=600,
    ),
    PlantedBug(
        "poison-publish", "a topic confirms a publish the broker cannot store whole (issue 15, item 1)",
        "pubsub-front", Variant(topic=pubsub.ConfirmingTopic), budget=5,
        checkers=frozenset({"no_confirmed_loss", "contained_failures"}),
    ),
    PlantedBug(
        "tag-only-ack-ids", "a subscription settles ack ids by binding and tag, unverified (issue 15, item 2)",
        "pubsub-front", Variant(subscription=pubsub.TagOnlySubscription), budget=10,
        checkers=frozenset({"acks_from_receivers"}),
    ),
    PlantedBug(
        "eager-exactly-once", "an exactly-once subscription confirms acks without waiting for its queue",
        "pubsub-exactly-once", Variant(subscription=pubsub.EagerExactlyOnce), budget=10,
        checkers=frozenset({"exactly_once"}), shrink_runs=600,
    ),
    PlantedBug(
        "resumed-failure", "a failed actor carries on with the instance that failed, neither restarted nor stopped",
        "queue-crash", Variant(simulation=lifecycle.Resuming), budget=30,
        checkers=frozenset({"supervision", "drained"}),  # the resumed queue may keep what it failed on
    ),
    PlantedBug(
        "orphaned-children", "a restart forgets the actor's children instead of stopping them", "queue-crash",
        Variant(simulation=lifecycle.Orphaning), budget=5, checkers=frozenset({"supervision"}),
    ),
    PlantedBug(
        "lost-mailbox", "a restart throws away the messages waiting for the actor", "queue-crash",
        Variant(simulation=lifecycle.MailboxLosing), budget=10,
        checkers=frozenset({"nothing_vanishes", "mailbox_fifo"}),
    ),
    PlantedBug(
        "forgotten-retry", "the failed message retry_failed asked for is never handed to the restarted actor",
        "queue-crash", Variant(simulation=lifecycle.ForgetfulRetry), budget=30, checkers=frozenset({"supervision"}),
    ),
    PlantedBug(
        "retried-twice", "the failed message retry_failed asked for is handed to the restarted actor twice",
        "queue-crash", Variant(simulation=lifecycle.TwiceRetried), budget=30,
        checkers=frozenset({"mailbox_fifo", "supervision"}),
    ),
    PlantedBug(
        "start-overtaken", "a message that overtakes Start is handled before on_start ran", "queue-crash",
        Variant(simulation=lifecycle.StartOvertaken), budget=30, checkers=frozenset({"supervision"}),
    ),
    PlantedBug(
        "timers-survive-restart", "a restart leaves the old instance's timers armed", "queue-crash",
        Variant(simulation=lifecycle.TimersSurviveRestart), budget=5, checkers=frozenset({"timers"}),
    ),
    PlantedBug(
        "ignored-timer-cancel", "the simulator answers a cancel but leaves the timer armed: it comes due", "fairness",
        Variant(simulation=lifecycle.IgnoresCancel), budget=5, checkers=frozenset({"timers"}),
    ),
    PlantedBug(
        "favours-first-consumer", "new work goes to the first registered consumer that wants it", "fairness",
        Variant(queue=promises.FavouringQueue), budget=10, checkers=frozenset({"fairness", "starvation"}),
    ),
    PlantedBug(
        "forgotten-on-stop", "a stopping consumer gives back all it held but one entry", "groups",
        Variant(queue=promises.ForgetfulStopQueue), budget=10,
        checkers=frozenset({"drained", "stall", "prompt_delivery", "total_queue", "accounting", "group_exclusivity"}),
    ),
    PlantedBug(
        "tail-on-stop", "what a stopping consumer held goes back to the tail, not each entry to its position",
        "groups", Variant(queue=promises.TailOnStopQueue), budget=10,
        checkers=frozenset({"browser_completeness", "queue_order", "group_exclusivity", "strict_order"}),
    ),
    PlantedBug(
        "endless-lease", "the leaser ignores max_lease_duration_s and extends a lease as long as its callback runs",
        "leases", Variant(manager=promises.EndlessLeases), budget=10, checkers=frozenset({"lease_cap"}),
    ),
    PlantedBug(
        "early-lease-clock", "a keyed message's max-lease clock starts on receipt, not when its callback is scheduled",
        "leases", Variant(manager=promises.EarlyClocks), budget=10,
        checkers=frozenset({"lease_cap", "lease_validity"}),
    ),
    PlantedBug(
        "acks-on-shutdown", "shutting down acks every unfinished message instead of leaving it to the queue",
        "subscriber-crash", Variant(manager=promises.AcksOnShutdown), budget=10,
        checkers=frozenset({"total_queue", "no_loss", "accounting", "all_settled", "runs_once"}),
    ),
    PlantedBug(
        "confirm-before-sync", "the journal store says a write is synced when it is queued (issue 18, item 7)",
        "durable-crash", Variant(simulation=storage.eager_confirms), budget=30,
        checkers=frozenset({"durable_total_queue", "acked_stays_acked"}),  # a confirmed publish or ack undone
    ),
    PlantedBug(
        "recovery-skips-last-segment", "recovery does not see the newest segment file (issue 18, item 7)",
        "durable-crash", Variant(simulation=storage.hides_last_segment), budget=30,
        checkers=frozenset({"durable_total_queue", "found_order"}),
    ),
    PlantedBug(
        "gc-drops-live-message", "garbage collection leaves a live message out of its copy (issue 18, item 7)",
        "paging", Variant(shell=storage.collects_live_message), budget=30,
        checkers=frozenset({"paging_no_loss", "paging_order"}),
    ),
    PlantedBug(
        "q1-not-moved-to-q4", "the variable queue never moves q1 to q4 when nothing is on disk (issue 18, item 7)",
        "paging", Variant(shell=storage.keeps_q1), budget=30,
        checkers=frozenset({"paging_order", "paging_no_loss"}),
    ),
    PlantedBug(
        "unacked-bodies-kept", "reducing memory leaves delivered, unacked bodies in RAM over the target (issue 18)",
        "paging", Variant(shell=storage.keeps_unacked_bodies), budget=30, checkers=frozenset({"paging_ram"}),
    ),
    PlantedBug(
        "expiry-leaves-an-ephemeral", "a session's end deletes all its ephemeral nodes but the newest (issue 19)",
        "zk-basics", Variant(zookeeper=zookeeper.LeavesOneEphemeral), budget=10,
        checkers=frozenset({"ephemerals_die_with_their_session"}),
    ),
    PlantedBug(
        "sequence-from-child-count", "a sequential node's number is its parent's child count: names repeat "
        "after a delete (issue 19)", "zk-basics", Variant(zookeeper=zookeeper.ChildCountSequence), budget=10,
        checkers=frozenset({"sequential_names_never_repeat"}),
    ),
    PlantedBug(
        "endless-restart-budget", "the restart budget is never spent: a failing actor is restarted for ever",
        "broker-swarm", Variant(simulation=lifecycle.EndlessBudget), budget=30, checkers=frozenset({"supervision"}),
    ),
    PlantedBug(
        "early-expiry", "a message expires half way through its time to live", "broker-swarm",
        Variant(queue=broker.queue_with_entries(promises.EarlyExpiry)), budget=30,
        checkers=frozenset({"expiry_not_early"}),
    ),
    PlantedBug(
        "greedy-consumer", "each pull asks for one message more than the client has room for", "fairness",
        Variant(consumer=promises.GreedyConsumer), budget=10, checkers=frozenset({"consumer_credit"}),
    ),
    PlantedBug(
        "short-extensions", "the leaser asks for the shortest extension allowed, not the processing times' p99",
        "subscriber-swarm", Variant(manager=promises.ShortExtensions), budget=30,
        checkers=frozenset({"lease_extension"}),
    ),
    PlantedBug(
        "ack-confirmed-before-sync", "the queue answers Ack(confirm=True) before the journal synced the ack (issue 18)",
        # budget 40: one run in 25 finds it (11/300 seeds, 12/300 before the durable publish path's
        # changes of 2026-11-26, which moved its seeds-to-find from 22 to 38)
        "durable-crash", Variant(queue=storage.EagerAckConfirms), budget=40, checkers=frozenset({"acked_stays_acked"}),
    ),
    PlantedBug(
        "stale-nack-applied", "a nack's attempts are ignored: a stale nack returns the newer delivery", "broker-swarm",
        Variant(queue=broker.queue_with_entries(broker_promises.StaleNackApplied)), budget=30,
        checkers=frozenset({"stale_nack", "exclusive_lease", "ack_confirms"}),
    ),
    PlantedBug(
        "immediate-ignored", "Publish(immediate=True) is enqueued whether a consumer can take it now or not",
        "broker-swarm", Variant(queue=broker_promises.ImmediateIgnored), budget=30,
        checkers=frozenset({"immediate_publish"}),
    ),
    PlantedBug(
        "confirms-every-ack", "a confirmed ack reports every tag acked, also a lapsed lease's", "broker-swarm",
        Variant(queue=broker_promises.ConfirmsEveryAck), budget=30, checkers=frozenset({"ack_confirms"}),
    ),
    PlantedBug(
        "oversize-by-one", "max_message_bytes lets a message one byte over the limit in", "broker-swarm",
        Variant(queue=broker_promises.OversizeByOne), budget=30, checkers=frozenset({"publish_outcomes"}),
    ),
    PlantedBug(
        "batch-skips-size-limit", "the messages of a PublishBatch are not checked against max_message_bytes",
        "broker-swarm", Variant(queue=broker_promises.BatchSkipsSizeLimit), budget=30,
        checkers=frozenset({"publish_outcomes"}),
    ),
    PlantedBug(
        "reconfigure-keeps-deadline", "Reconfigure takes every new setting but the ack deadline", "broker-swarm",
        Variant(queue=broker_promises.ReconfigureKeepsDeadline), budget=30, checkers=frozenset({"reconfigure"}),
    ),
    PlantedBug(
        "consumer-lease-ignored", "a consumer's own lease (ConsumerSettings.lease_s) gives way to the queue's",
        "broker-swarm", Variant(queue=broker_promises.ConsumerLeaseIgnored), budget=30,
        checkers=frozenset({"reconfigure"}),
    ),
    PlantedBug(
        "reconfigure-keeps-delivery-limit", "Reconfigure's delivery limit never reaches the entries: the old one stays",
        "broker-swarm", Variant(queue=broker_promises.ReconfigureKeepsDeliveryLimit), budget=30,
        checkers=frozenset({"delivery_limit"}),
    ),
    PlantedBug(
        "reconfigure-keeps-retry", "Reconfigure takes all but the retry policy: nacks keep the old backoff",
        "broker-swarm", Variant(queue=broker_promises.ReconfigureKeepsRetry), budget=30,
        checkers=frozenset({"not_before"}),
    ),
    PlantedBug(
        "reconfigure-keeps-dead-letter", "Reconfigure takes all but the dead-letter queue, which stays the old one",
        "broker-swarm", Variant(queue=broker_promises.ReconfigureKeepsDeadLetter), budget=30,
        checkers=frozenset({"dead_letter_target"}),
    ),
    PlantedBug(
        "filter-blind-topic", "the topic routes every message to every subscription, whatever its filter",
        "pubsub-front", Variant(topic=pubsub_promises.FilterBlindTopic), budget=10,
        checkers=frozenset({"filter_respected"}),
    ),
    PlantedBug(
        "last-first-bindings", "a binding hands its client the deliveries it buffered newest first", "pubsub-front",
        Variant(subscription=pubsub_promises.LastFirstBindings), budget=10, checkers=frozenset({"key_order"}),
    ),
    PlantedBug(
        "one-more-outstanding", "a stream's flow control lets one message more out than max_outstanding_messages",
        "pubsub-front", Variant(subscription=pubsub_promises.OneMoreOutstanding), budget=10,
        checkers=frozenset({"stream_flow"}),
    ),
    PlantedBug(
        "timeless-seek", "a Seek ignores its time: nothing published before it is marked acked", "pubsub-front",
        Variant(subscription=pubsub_promises.TimelessSeek), budget=15, checkers=frozenset({"seek_effect"}),
    ),
    PlantedBug(
        "confirm-before-body-sync", "a durable paged queue confirms a publish before its body is synced",
        "durable-crash", Variant(queue=durable_paging.ConfirmsBeforeBodySync), budget=30,
        checkers=frozenset({"durable_total_queue"}),
    ),
    PlantedBug(
        "reused-chunk-keys",
        "a recovered durable queue names new delta chunks from -1 again, over chunks its deltas name",
        "durable-crash", Variant(queue=durable_paging.ReusesChunkKeys), budget=30,
        checkers=frozenset({"durable_total_queue"}),
    ),
    PlantedBug(
        "pages-at-twice-the-target",
        "a paged queue's pager is built with twice its memory target and room for one more small message",
        "paged-swarm", Variant(queue=durable_paging.PagesAtTwiceTheTarget), budget=10,
        checkers=frozenset({"ram_under_target"}),
    ),
    PlantedBug(
        "silent-escalation", "a child supervised with ESCALATE is stopped as under STOP: its parent is never told",
        "broker-swarm", Variant(simulation=kernel_notices.SilentEscalation), budget=30,
        checkers=frozenset({"escalation"}),
    ),
    PlantedBug(
        "causeless-stop", "a stop's Terminated never carries the error, not even a failure's", "crash-recovery",
        Variant(simulation=kernel_notices.CauselessStop), budget=10, checkers=frozenset({"termination_cause"}),
    ),
    PlantedBug(
        "lazy-timer-books", "a timer is booked only after the handler that armed it: a cancel there misses it",
        "broker-swarm", Variant(simulation=kernel_notices.LazyTimers), budget=30,
        checkers=frozenset({"timer_cancel"}),
    ),
    PlantedBug(
        "swallowed-late-answer", "a message that reaches a settled ask's promise vanishes, no dead letter",
        "broker-swarm", Variant(simulation=kernel_notices.SwallowsLateAnswers), budget=30,
        checkers=frozenset({"ask_answers"}),
    ),
    PlantedBug(
        "stacked-snapshot-restore", "restoring a snapshot rebuilds each level's undelivered messages newest first",
        "durable-crash", Variant(queue=broker.queue_with_entries(recovery_order.StackedSnapshotRestore)), budget=30,
        # On a paged draw the places it hands out in reverse break the deltas' order (a level's places in seq
        # order), and messages go missing: durable_total_queue finds that first.
        checkers=frozenset({"found_order", "durable_total_queue"}), shrink_runs=600,
    ),
    PlantedBug(
        "acks-counted-as-asked", "QueueStats.acked counts an ack's tags the consumer no longer held", "priorities",
        Variant(queue=broker.queue_with_entries(queue_stats.AcksCountedAsAsked)), budget=10,
        checkers=frozenset({"queue_stats"}),
    ),
    PlantedBug(
        "zero-deadline-as-lapse", "ModifyAckDeadline(0) ends the lease as a lapse, without the nack's backoff",
        "broker-swarm", Variant(queue=lease_ends.ZeroDeadlineAsLapse), budget=30, checkers=frozenset({"not_before"}),
    ),
    PlantedBug(
        "trusting-leaser", "the leaser trusts a receipt's extension: a fresh lease waits 0.9 x it - 1 s for a pass",
        "leases", Variant(manager=lease_schedule.Trusting), budget=5, checkers=frozenset({"lease_schedule"}),
    ),
    PlantedBug(
        "restless-leaser", "the leaser passes over every lease whenever a keyed callback is scheduled",
        "ordering-keys", Variant(manager=lease_schedule.Restless), budget=5, checkers=frozenset({"lease_schedule"}),
    ),
    PlantedBug(
        "half-applied-publish", "a Publish refused for a message over a limit still stores the messages before it",
        "pubsub-front", Variant(topic=pubsub_limits.HalfAppliedPublish), budget=10,
        checkers=frozenset({"request_limits", "no_confirmed_loss"}),
    ),
    PlantedBug(
        "acked-stay-in-log", "an ack leaves its message in the Seek log: a Seek back replays acked, unretained ones",
        "pubsub-front", Variant(subscription=pubsub_delivery.AckedStayInLog), budget=10,
        checkers=frozenset({"seek_replay"}),
    ),
    PlantedBug(
        "seek-keeps-acked", "with retained acked messages, a Seek back leaves the acked ones after its time acked",
        "pubsub-front", Variant(subscription=pubsub_delivery.SeekKeepsAcked), budget=15,
        checkers=frozenset({"seek_replay"}),
    ),
    PlantedBug(
        "short-pulls", "a Pull's batch stops a byte short of max_bytes: an exact fit loses its last message",
        "pubsub-front", Variant(subscription=pubsub_delivery.ShortPulls), budget=15, checkers=frozenset({"pull_fill"}),
    ),
    PlantedBug(
        "immortal-idle-streams", "a stream whose client asks nothing for an hour is never closed",
        "pubsub-front", Variant(subscription=pubsub_delivery.ImmortalIdleStreams), budget=5,
        checkers=frozenset({"idle_stream"}),
    ),
    PlantedBug(
        "brittle-nacks", "a nack makes the subscription's handler raise (contained, answered INTERNAL)",
        "pubsub-front", Variant(subscription=pubsub_delivery.BrittleNacks), budget=5,
        checkers=frozenset({"contained_failures"}),
    ),
    PlantedBug(
        "acked-failed-callbacks", "a callback client's consumer acks a delivery whose callback raised, not nacks it",
        "broker-swarm", Variant(consumer=callback_consumer.AcksFailedCallbacks), budget=10,
        checkers=frozenset({"total_queue"}),
    ),
    PlantedBug(
        "undecided-zero-deadline", "a zero ack deadline is sent as a deadline change, not taken as the message's nack",
        "subscriber-swarm", Variant(manager=zero_deadline_decision.ZeroDeadlineUndecided), budget=10,
        # shrink_runs 600 -> 1500 with key runs (branch keyjobs): 600 runs left 25 deliveries, over 15
        checkers=frozenset({"ordering_keys", "runs_once", "no_loss"}), shrink_runs=1500,
    ),
    PlantedBug(
        "tx-locks-not-ephemeral", "a transaction store keeps a dead session's locks (ZooKeeper locks not ephemeral)",
        "tx-broker", Variant(tx_store=transactions.LocksNotEphemeral), budget=20,
        checkers=frozenset({"tx_no_lock_left", "tx_drained"}), shrink_runs=60,
    ),
    PlantedBug(
        "tx-puts-before-takes-checked", "a commit writes its puts before it checks its takes: an abort leaves them",
        "tx-broker", Variant(tx_store=transactions.PutsBeforeTakesChecked), budget=20,
        checkers=frozenset({"tx_no_phantom"}), shrink_runs=60,
    ),
    PlantedBug(
        "tx-k-per-session", "a dead session's takes are given back: ConsumeTimes(K) counted per session, not per item",
        "tx-broker", Variant(tx_store=transactions.CountsPerSession), budget=20,
        checkers=frozenset({"tx_at_most_k"}), shrink_runs=60,
    ),
    PlantedBug(
        "tx-rollback-keeps-locks", "a failed transaction's rollback answers but leaves its locks",
        "tx-broker", Variant(tx_store=transactions.RollbackKeepsLocks), budget=20,
        checkers=frozenset({"tx_drained"}), shrink_runs=60,
    ),
    PlantedBug(
        "tx-commit-without-locks", "a commit removes the items it names without holding their locks",
        "tx-broker", Variant(tx_store=transactions.CommitsWithoutItsLocks), budget=20,
        checkers=frozenset({"tx_atomicity"}), shrink_runs=60,
    ),
    PlantedBug(
        "tx-loses-dead-letters", "the DLQ keeps nothing: an item past its policy's limit is lost",
        "tx-broker", Variant(tx_store=transactions.LosesDeadLetters), budget=20,
        checkers=frozenset({"tx_no_loss"}), shrink_runs=60,
    ),
    *(PlantedBug(name, summary, "tx-zk", Variant(zk_tx_backend=backend), budget=20, checkers=frozenset(found),
                 shrink_runs=60) for name, summary, backend, found in (
        ("zk-locks-not-ephemeral", "ZkTxBackend creates lock-N persistent: it outlives its session",
         transactions_zk.ZkLocksNotEphemeral, {"tx_no_lock_left", "tx_drained"}),
        ("zk-puts-before-takes-checked", "ZkTxBackend commits in two steps: the puts, then the takes checked",
         transactions_zk.ZkPutsBeforeTakesChecked, {"tx_no_phantom"}),
        ("zk-k-per-session", "ZkTxBackend counts takes in memory, not in meta-N: K per session",
         transactions_zk.ZkCountsPerSession, {"tx_at_most_k"}),
        ("zk-rollback-keeps-locks", "ZkTxBackend's rollback of a failed transaction answers but leaves its locks",
         transactions_zk.ZkRollbackKeepsLocks, {"tx_no_lock_left", "tx_drained"}))),
)
"""Every planted bug, in the order docs/simulation.md lists them."""


def checkers_of(violations: tuple[str, ...]) -> set[str]:
    """The checker names in a report's violations (``checker: line``)."""
    return {line.split(":", 1)[0] for line in violations}
