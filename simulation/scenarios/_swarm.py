"""Swarm scenarios: each seed draws which features its run uses, and their settings.

Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012; FoundationDB's BUGGIFY): rather than one
configuration with every feature on, each seed switches features on or off and draws their
parameters, so one scenario covers many configurations, including the small ones where a feature
is exercised alone and the crowded ones where several meet. The draws come from the scenario's
seeded generator, so a seed replays them; they are written into the workload (``draws``), noted in
the trace by the publisher, and printed with a failing run (``scenario_draws``).
"""

from __future__ import annotations

import random

import attrs

from conveyor.actors.broker import HeaderEquals, Overflow, RetryPolicy
from conveyor.actors.subscriber import CALLBACKS_PER_JOB, FlowControl
from conveyor.simulation import seeded_random

from ._broker import BrokerScenario, ClientPolicy
from ._kernel_probe import draw_kernel_probe, probe_words
from ._subscriber import SubscriberScenario


def _policy(rng: random.Random, crashes: bool) -> ClientPolicy:
    return ClientPolicy(
        nack=rng.choice((0.0, 0.1, 0.3)),
        release=rng.choice((0.0, 0.05, 0.2)),
        ignore=rng.choice((0.0, 0.05, 0.2)),
        late_ack=rng.choice((0.0, 0.1, 0.3)),
        late_ack_s=rng.uniform(0.1, 2.0),
        crash_after=rng.randint(1, 10) if crashes and rng.random() < 0.3 else 0,
        extend=rng.choice((0.0, 0.0, 0.2)),
        extend_s=rng.uniform(1.0, 4.0),
    )


def broker_swarm(seed: int) -> BrokerScenario:
    """One broker configuration drawn from the seed: every feature on or off, every setting drawn.

    Features: message priorities, consumer priorities, selectors, groups, browsers, TTLs,
    delays, a retry policy, a delivery limit, a length limit (either overflow policy), prefetch,
    ack deadlines, and clients that nack, release, ignore, ack late, crash or nack by a zero deadline. Client 0 never
    crashes and takes everything, so the queue can drain.
    """
    rng = seeded_random(f"scenario:broker-swarm:{seed}")
    drawn: list[str] = []
    count = rng.randint(1, 6)
    crashes = rng.random() < 0.3
    consumers = tuple(_policy(rng, crashes and index > 0) for index in range(count))
    drawn.append(f"consumers={count}{' crashing' if crashes else ''}")
    messages = rng.randint(5, 40)
    drawn.append(f"messages={messages}")
    priorities: tuple[int, ...] = (4,)
    if rng.random() < 0.5:
        priorities = tuple(sorted(rng.sample(range(10), rng.randint(2, 4))))
        drawn.append(f"priorities={priorities}")
    consumer_priorities: tuple[int, ...] = ()
    if count > 1 and rng.random() < 0.3:
        consumer_priorities = tuple(rng.randint(0, 2) for _ in range(count))
        drawn.append(f"consumer_priorities={consumer_priorities}")
    selectors: tuple[object, ...] = ()
    if count > 1 and rng.random() < 0.3:
        choices = (None, HeaderEquals("colour", "red"), HeaderEquals("colour", "blue"))
        selectors = (None, *(rng.choice(choices) for _ in range(count - 1)))
        drawn.append(f"selectors={sum(s is not None for s in selectors)}")
    groups = rng.randint(1, 4) if rng.random() < 0.3 else 0
    if groups:
        drawn.append(f"groups={groups}")
    browsers = rng.randint(1, 2) if rng.random() < 0.3 else 0
    if browsers:
        drawn.append(f"browsers={browsers}")
    ttls: tuple[float | None, ...] = ()
    if rng.random() < 0.5:
        ttls = (None, round(rng.uniform(0.05, 0.5), 3), round(rng.uniform(0.5, 3.0), 3))
        drawn.append(f"ttls={ttls}")
    delays: tuple[float | None, ...] = ()
    if rng.random() < 0.4:
        delays = (None, round(rng.uniform(0.01, 0.3), 3), round(rng.uniform(0.3, 1.5), 3))
        drawn.append(f"delays={delays}")
    retry = None
    if rng.random() < 0.6:
        low = round(rng.uniform(0.01, 0.3), 3)
        retry = RetryPolicy(low, round(low * rng.choice((1, 4, 16)), 3))
        drawn.append(f"retry=({retry.min_backoff_s}, {retry.max_backoff_s})")
    max_deliveries = rng.randint(1, 5)
    drawn.append(f"max_deliveries={max_deliveries}")
    max_length = None
    overflow = Overflow.REJECT_PUBLISH
    if rng.random() < 0.3:
        max_length = rng.randint(2, 15)
        overflow = rng.choice((Overflow.REJECT_PUBLISH, Overflow.DROP_HEAD))
        drawn.append(f"max_length={max_length} {overflow.value}")
    prefetch = rng.randint(1, 8)
    ack_deadline_s = round(rng.uniform(0.3, 2.0), 3)
    drawn.append(f"prefetch={prefetch} ack_deadline={ack_deadline_s}")
    span = 0.0 if rng.random() < 0.25 else round(rng.uniform(0.1, 2.0), 3)
    drawn.append(f"publish_span={span}")
    if rng.random() < 0.3:  # drawn last, so the draws above stay what they were for every seed
        zero = rng.choice((0.1, 0.3))
        consumers = tuple(attrs.evolve(policy, zero_deadline=zero) for policy in consumers)
        drawn.append(f"zero_deadline={zero}")
    pokes: tuple[float, ...] = ()
    if rng.random() < 0.3:  # a flaky actor beside the broker: 4 or more failures spend its restart budget
        pokes = tuple(sorted(round(rng.uniform(0.0, 2.0), 3) for _ in range(rng.randint(2, 6))))
        drawn.append(f"pokes={len(pokes)}")
    hand_over_waits = rng.random() < 0.2
    if hand_over_waits:
        drawn.append("hand_over_timeout=None")
    pokes_stop = bool(pokes) and rng.random() < 0.4
    if rng.random() < 0.3:  # late nacks naming their attempt: some are stale (the lease lapsed meanwhile)
        late = rng.choice((0.1, 0.3))
        consumers = tuple(attrs.evolve(policy, late_nack=late, late_nack_s=3 * ack_deadline_s) for policy in consumers)
        drawn.append(f"late_nack={late}")
    if pokes_stop:
        drawn.append("pokes under stop")
    scenario = with_callback_clients(seed, broker_promise_features(seed, BrokerScenario(
        messages=messages, consumers=consumers, consumer_priorities=consumer_priorities, selectors=selectors,
        browsers=browsers, priorities=priorities, groups=groups, publish_span_s=span,
        ack_deadline_s=ack_deadline_s, max_deliveries=max_deliveries, prefetch=prefetch, retry=retry,
        ttls=ttls, delays=delays, max_length=max_length, overflow=overflow, draws="swarm: " + " ".join(drawn),
        pokes=pokes, hand_over_waits=hand_over_waits, pokes_stop=pokes_stop,
    )))
    probe = draw_kernel_probe(seed)  # a generator of its own: the draws above keep their values
    if probe is None:
        return scenario
    return attrs.evolve(scenario, kernel_probe=probe, draws=f"{scenario.draws} {probe_words(probe)}")


def with_callback_clients(seed: int, scenario: BrokerScenario) -> BrokerScenario:
    """``scenario`` with, in 30% of seeds, one or two callback clients beside its actor clients (drawn last).

    From a generator of its own, so every earlier draw keeps its value: the ``ConsumerActor`` path
    of an embedded user's callback, run as a job (``_callback_clients``).
    """
    rng = seeded_random(f"scenario:broker-swarm:{seed}:callbacks")
    if rng.random() >= 0.3:
        return scenario
    count = rng.randint(1, 2)
    return attrs.evolve(scenario, callback_clients=count, draws=f"{scenario.draws} callback_clients={count}")


def subscriber_swarm(seed: int) -> SubscriberScenario:
    """One subscriber configuration drawn from the seed: every feature on or off, every setting drawn.

    Features: ordering keys, flow control by messages and by bytes (with messages larger than
    ``max_bytes``), callbacks that raise, nack or outlive the ack deadline (with leases capped
    below them or not), workers and callbacks per job, the delivery limit, the retry policy,
    bursts, a pause of the whole process past its leases, a crash with a fresh subscription, and
    callbacks that drop their message (some after nacking it by a zero deadline), callbacks' ends
    reaching the manager late (a stalled channel from the worker pool), and leases capped below the
    leaser's lead (the time from one pass to the next), so a cap falls between passes.
    """
    rng = seeded_random(f"scenario:subscriber-swarm:{seed}")
    drawn: list[str] = []
    deadline = rng.choice((1.0, 2.0, 5.0))
    messages = rng.randint(5, 25)
    drawn.append(f"messages={messages} ack_deadline={deadline}")
    keys = rng.randint(1, 4) if rng.random() < 0.5 else 0
    if keys:
        drawn.append(f"keys={keys}")
    max_messages = rng.randint(1, 20)
    max_bytes = rng.choice((500, 2000, 100_000)) if rng.random() < 0.4 else 100 * 1024 * 1024
    sizes = (10, 100) if max_bytes > 100_000 else (20, int(max_bytes * rng.choice((0.5, 1.5))))
    slow = rng.choice((0.2, 0.5)) if rng.random() < 0.4 else 0.0
    capped = slow > 0 and rng.random() < 0.3
    flow = FlowControl(
        max_messages=max_messages, max_bytes=max_bytes,
        min_duration_per_lease_extension_s=max(2.0, deadline),
        max_duration_per_lease_extension_s=max(2.0, 2 * deadline),
        max_lease_duration_s=2.5 * deadline if capped else 3600.0,
    )
    drawn.append(f"max_messages={max_messages}" + (f" max_bytes={max_bytes} sizes={sizes}" if max_bytes <= 100_000
                                                    else ""))
    if slow:
        drawn.append(f"slow={slow}{' capped' if capped else ''}")
    fail = rng.choice((0.0, 0.1, 0.2))
    nack = rng.choice((0.0, 0.1, 0.2))
    if fail or nack:
        drawn.append(f"fail={fail} nack={nack}")
    workers = rng.randint(1, 6)
    per_job = rng.choice((1, CALLBACKS_PER_JOB))
    drawn.append(f"workers={workers} callbacks_per_job={per_job}")
    max_deliveries = rng.choice((None, 3, 8))
    retry = rng.choice((RetryPolicy(0.05, 0.4), RetryPolicy(0.05, 4.0), None))
    backoff = None if retry is None else (retry.min_backoff_s, retry.max_backoff_s)
    drawn.append(f"max_deliveries={max_deliveries} retry={backoff}")
    burst = rng.randint(1, 15)
    gap = round(rng.uniform(0.05, 1.0), 3)
    drawn.append(f"burst={burst} gap={gap}")
    pause_at = None
    pause_s = 0.0
    crash_at = None
    restart_after_s = 0.5
    event = rng.random()
    if event < 0.2:
        pause_at = round(rng.uniform(0.05, 1.0), 3)
        pause_s = round(rng.uniform(2.0, 6.0) * deadline, 3)
        drawn.append(f"pause at {pause_at} for {pause_s}")
    elif event < 0.4:
        crash_at = round(rng.uniform(0.05, 1.5), 3)
        restart_after_s = round(rng.uniform(0.0, 2.0 * deadline), 3)
        drawn.append(f"crash at {crash_at}, restart after {restart_after_s}")
    slow_factor = (1.2, 4.0)
    if rng.random() < 0.3:  # drawn last, so the draws above stay what they were for every seed
        # Extensions up to a minute and some callbacks of 11-16 s: the processing-time percentile
        # (whole seconds, at least 10) then sets the extension, where a cap of two ack deadlines (at
        # most 10 s) always would.
        flow = attrs.evolve(flow, max_duration_per_lease_extension_s=60.0)
        slow = max(slow, 0.2)
        slow_factor = (11.0 / deadline, 16.0 / deadline)
        drawn.append(f"max_extension=60 slow={slow} for 11-16 s")
    drop = 0.0
    if rng.random() < 0.3:  # drawn last: callbacks that drop (half after a zero-deadline nack)
        drop = rng.choice((0.1, 0.3))
        drawn.append(f"drop={drop}")
    late_ends: tuple[tuple[int, float], ...] = ()
    if rng.random() < 0.5:  # drawn last: the pool's channel to the manager stalls, so callbacks' ends come late
        late_ends = tuple((rng.randint(20, 600), round(rng.uniform(0.2, 1.0), 3)) for _ in range(rng.randint(2, 5)))
        drawn.append(f"late_ends={late_ends}")
    if rng.random() < 0.25:  # drawn last: leases capped below the leaser's lead, so a pass may fall past a cap
        lead = 0.9 * flow.max_duration_per_lease_extension_s - 1.0
        cap = round(max(0.1, rng.uniform(0.3, 0.9) * lead), 3)
        flow = attrs.evolve(flow, max_lease_duration_s=cap)
        slow = max(slow, 0.3)  # callbacks that outlive the cap
        drawn.append(f"short_cap={cap} slow={slow}")
    return SubscriberScenario(
        messages=messages, keys=keys, sizes=sizes, fail=fail, nack=nack, fast_s=rng.choice((0.05, 0.5)),
        slow=slow, slow_factor=slow_factor, flow=flow, workers=workers, callbacks_per_job=per_job,
        ack_deadline_s=deadline, max_deliveries=max_deliveries, retry=retry, burst=burst, burst_gap_s=gap,
        pause_at=pause_at, pause_s=pause_s, crash_at=crash_at, restart_after_s=restart_after_s,
        draws="swarm: " + " ".join(drawn), drop=drop, late_ends=late_ends,
    )


def broker_promise_features(seed: int, scenario: BrokerScenario) -> BrokerScenario:
    """``scenario`` with the request-level features drawn for ``seed`` (issue 17, item 1).

    Stale nacks, confirmed acks, immediate publishes, batches, a size limit with messages at its
    edge, and a ``Reconfigure`` mid-run. Drawn from a generator of their own, so the draws of
    ``broker_swarm`` before them keep their values for every seed.
    """
    rng = seeded_random(f"scenario:broker-swarm:{seed}:promises")
    drawn: list[str] = []
    stale = rng.choice((0.3, 0.6)) if rng.random() < 0.4 else 0.0
    confirm = rng.choice((0.3, 1.0)) if rng.random() < 0.4 else 0.0
    if stale or confirm:
        drawn.append(f"stale_nack={stale} confirm={confirm}")
    immediate = rng.choice((0.4, 0.8)) if rng.random() < 0.5 else 0.0
    if immediate:
        drawn.append(f"immediate={immediate}")
    batch = rng.randint(2, 4) if rng.random() < 0.35 else 0
    if batch:
        drawn.append(f"batch={batch}")
    limit = None
    oversize = 0.0
    if rng.random() < 0.4:
        limit = rng.randint(30, 60)
        oversize = rng.choice((0.2, 0.4))
        drawn.append(f"max_message_bytes={limit} oversize={oversize}")
    reconfigure_at = None
    deadline = scenario.ack_deadline_s
    new_limit = None
    if rng.random() < 0.35:
        reconfigure_at = round(rng.uniform(0.0, max(0.5, 1.5 * scenario.publish_span_s)), 3)
        deadline = round(rng.uniform(0.3, scenario.ack_deadline_s), 3)  # longer would outlast the liveness bounds
        new_limit = rng.randint(30, 60) if limit is not None else None
        drawn.append(f"reconfigure at {reconfigure_at}: ack_deadline={deadline} max_message_bytes={new_limit}")
    new_deliveries = None
    if reconfigure_at is not None and rng.random() < 0.5:  # the delivery limit too, from the next nack or lapse
        new_deliveries = rng.randint(1, 5)
        drawn.append(f"max_deliveries={new_deliveries}")
    new_retry: RetryPolicy | None = None
    if reconfigure_at is not None and rng.random() < 0.7:  # and the retry policy, for the nacks from then on
        # Longer than before: a queue that kept the old policy then redelivers too early, which shows.
        before = scenario.retry.max_backoff_s if scenario.retry is not None else 0.0
        low = round(min(2.0, max(0.05, before) * rng.uniform(1.2, 2.0)), 3)
        new_retry = RetryPolicy(low, round(low * rng.choice((1, 2)), 3))
        drawn.append(f"retry=({new_retry.min_backoff_s}, {new_retry.max_backoff_s})")
    switch_dead_letters = reconfigure_at is not None and rng.random() < 0.5  # to a second dead-letter queue
    if switch_dead_letters:
        drawn.append("dead_letter=/dead-letters-2")
    leases: tuple[float | None, ...] = ()
    if rng.random() < 0.3:  # consumers leased for their own deadline (a Pub/Sub stream's), not the queue's
        leases = tuple(round(rng.uniform(0.3, scenario.ack_deadline_s), 3) if rng.random() < 0.5 else None
                       for _ in scenario.consumers)
        drawn.append(f"consumer leases={leases}")
    if not drawn:
        return scenario
    consumers = tuple(attrs.evolve(policy, stale_nack=stale, confirm=confirm) for policy in scenario.consumers)
    return attrs.evolve(
        scenario, consumers=consumers, immediate=immediate, batch=batch, max_message_bytes=limit, oversize=oversize,
        reconfigure_at=reconfigure_at, reconfigure_ack_deadline_s=deadline, reconfigure_max_message_bytes=new_limit,
        reconfigure_max_deliveries=new_deliveries, reconfigure_retry=new_retry,
        reconfigure_dead_letter=switch_dead_letters, consumer_leases=leases,
        draws=f"{scenario.draws} {' '.join(drawn)}",
    )
