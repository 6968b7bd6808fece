"""Trace analysis on Spark: the broker checkers' order, accounting and fairness, for traces larger than memory.

A trace is what ``write_jsonl`` wrote (one JSON object per event, from a TrioSystem,
ThreadSystem or Simulation run) or what ``write_trace_parquet`` wrote (the same events
as Parquet rows with an explicit sequence number). Each event keeps its place in the
file as ``seq``; the queue's processing order is that order restricted to the queue's
own events, exactly as ``queue_story`` reads it, so window functions ordered by
``seq`` see what the in-process checkers see.

Messages are parsed in two steps: first only the envelope (``$type`` and the raw text
of ``fields``), then, per message type, its fields with a schema of that type alone.
One schema for every type would make fields of the same name but different types
collide (``queue`` is a name in one message and an actor reference in another).

The verdicts are ``CheckResult`` values with the same checker names, metrics and
violation lines as ``strict_order`` (judging the queue's ``Delivered`` messages:
``from_clients=False``), ``accounting`` and ``fairness``, so a test can compare both on a
small trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, final

import attrs
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as sf
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from conveyor.actors.broker import (
    Delivered,
    EntryEnqueued,
    EntryReturned,
    EntrySettled,
    QueueClosed,
    Subscribe,
    Subscribed,
)
from conveyor.runtime import TraceEvent
from conveyor.simulation.checkers import CheckResult, jain_index

from ._verdicts import QueueVerdict, TraceAnalysis, is_parquet_trace

MAX_REPORTED = 20
"""Violation lines kept per checker, as ``CheckResult.of`` keeps them."""

EVENT_SCHEMA = StructType(
    [
        StructField("kind", StringType()),
        StructField("time", DoubleType()),
        StructField("sender", StringType()),
        StructField("receiver", StringType()),
        StructField("message", StringType()),  # the encoded message, kept as raw JSON text
        StructField("error", StringType()),
    ]
)
"""One JSON Lines event; ``message`` stays text until its type is known."""

TRACE_COLUMNS = ("seq", "kind", "time", "sender", "receiver", "message", "error")
"""A Parquet trace's columns (``seq``: the event's place in the trace, from 0)."""

_ENVELOPE = StructType([StructField("$type", StringType()), StructField("fields", StringType())])


def _qualified(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


_DELIVERED, _ENQUEUED, _SETTLED, _RETURNED, _CLOSED, _SUBSCRIBE, _SUBSCRIBED = (
    _qualified(cls)
    for cls in (Delivered, EntryEnqueued, EntrySettled, EntryReturned, QueueClosed, Subscribe, Subscribed)
)
_TYPES = (_DELIVERED, _ENQUEUED, _SETTLED, _RETURNED, _CLOSED, _SUBSCRIBE, _SUBSCRIBED)


def _struct(**fields: Any) -> StructType:
    return StructType([StructField(name, kind) for name, kind in fields.items()])


def _tuple_of(item: Any) -> StructType:
    return _struct(**{"$tuple": ArrayType(item)})


_MESSAGE_FIELDS = _struct(fields=_struct(priority=LongType(), delay_s=DoubleType(), group=StringType()))
_DELIVERED_FIELDS = _struct(
    deliveries=_tuple_of(
        _struct(
            fields=_struct(
                tag=LongType(), consumer_id=LongType(), delivery_count=LongType(), message=_MESSAGE_FIELDS
            )
        )
    )
)
_TAG_FIELDS = _struct(tag=LongType())
_SETTLED_FIELDS = _struct(tag=LongType(), outcome=StringType(), consumer_id=LongType())
_CLOSED_FIELDS = _struct(remaining=_tuple_of(LongType()))
_SUBSCRIBE_FIELDS = _struct(consumer=_struct(**{"$ref": StringType()}), priority=LongType(), acquiring=BooleanType())
_SUBSCRIBED_FIELDS = _struct(consumer_id=LongType())


def read_trace(spark: SparkSession, path: str | Path) -> DataFrame:
    """One trace as rows (trace, seq, kind, time, sender, receiver, message, error); ``trace`` is ``path``.

    For JSON Lines, ``seq`` is ``monotonically_increasing_id`` over the file read as text:
    Spark splits one file into byte ranges in file order and numbers each partition's
    rows upwards with the partition index in the high bits, so ``seq`` increases with
    the line number (it is not dense). Lines that are not events have a null ``kind``.
    """
    name = str(path)
    if is_parquet_trace(path):
        frame = spark.read.parquet(name).select(*TRACE_COLUMNS)
    else:
        lines = spark.read.text(name).where(sf.trim(sf.col("value")) != "")
        frame = lines.select(
            sf.monotonically_increasing_id().alias("seq"), sf.from_json("value", EVENT_SCHEMA).alias("event")
        ).select("seq", "event.*")
    return frame.withColumn("trace", sf.lit(name)).select("trace", *TRACE_COLUMNS)


def write_trace_parquet(
    spark: SparkSession, source: str | Path | Iterable[TraceEvent], destination: str | Path
) -> int:
    """Store a trace (a JSON Lines file, or events in memory) as Parquet; return the number of events.

    The Parquet rows carry ``seq`` explicitly, so their order survives any later split or
    shuffle; ``message`` is the canonical JSON of the encoded message (as in JSON Lines).
    """
    if isinstance(source, (str, Path)):
        frame = read_trace(spark, source).drop("trace")
    else:
        rows = [
            (seq, event.kind.value, event.time, event.sender, event.receiver,
             json.dumps(event.to_json()["message"], sort_keys=True, separators=(",", ":")), event.error)
            for seq, event in enumerate(source)
        ]
        schema = StructType([StructField("seq", LongType(), nullable=False), *EVENT_SCHEMA.fields])
        frame = spark.createDataFrame(rows, schema)
    frame.write.mode("overwrite").parquet(str(destination))
    return spark.read.parquet(str(destination)).count()


def _field(column: Column, *path: str) -> Column:
    for name in path:
        column = column.getField(name)
    return column


def _parsed(events: DataFrame) -> DataFrame:
    """Every event with its message type; the raw fields are kept only for the types the checks read."""
    frame = events.select(
        "trace", "seq", "kind", "time", "sender", "receiver", sf.from_json("message", _ENVELOPE).alias("m")
    )
    type_name = _field(sf.col("m"), "$type")
    wanted = type_name.isin(*_TYPES)
    return frame.select(
        "trace", "seq", "kind", "time", "sender", "receiver",
        sf.when(wanted, type_name).alias("type"), sf.when(wanted, _field(sf.col("m"), "fields")).alias("fields"),
    )


def _of(parsed: DataFrame, kind: str, type_name: str, schema: StructType) -> DataFrame:
    """Events of one kind and message type, with their fields parsed by that type's schema as ``f``."""
    return parsed.where((sf.col("kind") == kind) & (sf.col("type") == type_name)).withColumn(
        "f", sf.from_json("fields", schema)
    )


@final
@attrs.frozen
class _Consumer:
    trace: str
    queue: str
    seq: int
    consumer_id: int
    priority: int
    acquiring: bool


_CONSUMER_SCHEMA = StructType(
    [
        StructField("trace", StringType()),
        StructField("queue", StringType()),
        StructField("consumer_id", LongType()),
        StructField("acquiring", BooleanType()),
    ]
)


def _consumers(parsed: DataFrame) -> list[_Consumer]:
    """Subscriptions, paired as ``queue_story`` pairs them: a ``Subscribed`` answers the pending ``Subscribe``.

    There are a handful per queue, so they are collected and paired in order here.
    """
    rows = parsed.where(
        ((sf.col("kind") == "delivered") & (sf.col("type") == _SUBSCRIBE))
        | ((sf.col("kind") == "sent") & (sf.col("type") == _SUBSCRIBED))
    ).select("trace", "seq", "type", "sender", "receiver", "fields").collect()
    pending: dict[tuple[str, str, str], tuple[int, bool]] = {}
    consumers: list[_Consumer] = []
    for row in sorted(rows, key=lambda row: (row.trace, row.seq)):
        fields = json.loads(row.fields)
        if row.type == _SUBSCRIBE:
            path = fields.get("consumer", {}).get("$ref")
            wants = (int(fields.get("priority", 0)), bool(fields.get("acquiring", True)))
            pending[(row.trace, row.receiver, path)] = wants
        elif (key := (row.trace, row.sender, row.receiver)) in pending:
            priority, acquiring = pending.pop(key)
            consumers.append(_Consumer(row.trace, row.sender, row.seq, int(fields["consumer_id"]), priority, acquiring))
    return consumers


def _deliveries(parsed: DataFrame, consumers: DataFrame, priorities: int) -> DataFrame:
    """One row per delivery a queue sent (``Delivered`` exploded), with its consumer's ``acquiring`` flag."""
    delivered = _of(parsed, "sent", _DELIVERED, _DELIVERED_FIELDS).select(
        "trace", sf.col("sender").alias("queue"), "seq", "time",
        sf.posexplode(_field(sf.col("f"), "deliveries", "$tuple")).alias("pos", "d"),
    )
    fields = _field(sf.col("d"), "fields")
    offset = 5 - (priorities + 1) // 2
    priority = _field(fields, "message", "fields", "priority")
    return delivered.select(
        "trace", "queue", "seq", "pos", "time",
        _field(fields, "tag").alias("tag"),
        _field(fields, "consumer_id").alias("consumer_id"),
        _field(fields, "delivery_count").alias("delivery_count"),
        priority.alias("priority"),
        sf.least(sf.lit(priorities - 1), sf.greatest(sf.lit(0), priority - offset)).alias("level"),
        _field(fields, "message", "fields", "delay_s").alias("delay_s"),
        _field(fields, "message", "fields", "group").alias("group"),
    ).join(sf.broadcast(consumers), ["trace", "queue", "consumer_id"], "left")


def _ordered(deliveries: DataFrame) -> DataFrame:
    """strict_order's view: first deliveries without delay or group, each with the highest tag before it.

    ``previous`` is the highest tag delivered earlier to the same consumer at the same
    priority level (0 for the first); a delivery whose tag is below it broke the order.
    """
    firsts = deliveries.where(
        (sf.col("delivery_count") == 1) & (sf.coalesce(sf.col("delay_s"), sf.lit(0.0)) == 0) & sf.col("group").isNull()
    )
    before = (
        Window.partitionBy("trace", "queue", "consumer_id", "level")
        .orderBy("seq", "pos")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    return firsts.select(
        "trace", "queue", "seq", "pos", "time", "tag", "consumer_id", "priority",
        sf.coalesce(sf.max("tag").over(before), sf.lit(0)).alias("previous"),
    )


_LAST = 2**62
"""Where violations found at the end of a trace sort: after every event."""


def _flagged(parsed: DataFrame, deliveries: DataFrame) -> DataFrame:
    """accounting's view: every tag's steps in queue order, each flagged with the violations it shows.

    The steps of a tag are E (enqueued), D (delivered), R (returned), S (settled) and C (in
    the queue at its last close). One window per tag gives, for each step, how many E and
    S came before it and the last holder-changing step before it, which is all the
    checker's state: D without E before is unexpected, D to an acquiring consumer right
    after another such D is held twice, S without E before is unexpected, S after S is a
    second settle, E never settled nor left at the close is lost, C after S is both.
    """
    null_long, null_text = sf.lit(None).cast("long"), sf.lit(None).cast("string")

    def steps(frame: DataFrame, step: str, consumer: Column, acquiring: Column, outcome: Column) -> DataFrame:
        return frame.select(
            "trace", "queue", "tag", "seq", "pos", "time", sf.lit(step).alias("step"),
            consumer.alias("consumer_id"), acquiring.alias("acquiring"), outcome.alias("outcome"),
        )

    def notes(type_name: str, schema: StructType, outcome: Column) -> DataFrame:
        return _of(parsed, "note", type_name, schema).select(
            "trace", sf.col("sender").alias("queue"), "seq", sf.lit(0).alias("pos"), "time",
            _field(sf.col("f"), "tag").alias("tag"), outcome.alias("outcome"),
        )

    closes = (
        _of(parsed, "note", _CLOSED, _CLOSED_FIELDS)
        .groupBy("trace", sf.col("sender").alias("queue"))
        .agg(
            sf.max("seq").alias("seq"),
            sf.max_by(_field(sf.col("f"), "remaining", "$tuple"), sf.col("seq")).alias("remaining"),
        )
    )
    remaining = closes.select(
        "trace", "queue", "seq", sf.explode("remaining").alias("tag"), sf.lit(0).alias("pos"),
        sf.lit(None).cast("double").alias("time"),
    )
    outcome = _field(sf.col("f"), "outcome")
    no_flag = sf.lit(None).cast("boolean")
    union = (
        steps(notes(_ENQUEUED, _TAG_FIELDS, null_text), "E", null_long, no_flag, null_text)
        .unionByName(
            steps(deliveries, "D", sf.col("consumer_id"), sf.coalesce(sf.col("acquiring"), sf.lit(True)), null_text)
        )
        .unionByName(steps(notes(_RETURNED, _TAG_FIELDS, null_text), "R", null_long, no_flag, null_text))
        .unionByName(steps(notes(_SETTLED, _SETTLED_FIELDS, outcome), "S", null_long, no_flag, sf.col("outcome")))
        .unionByName(steps(remaining, "C", null_long, no_flag, null_text))
        .join(sf.broadcast(closes.select("trace", "queue", sf.lit(True).alias("closed"))), ["trace", "queue"], "left")
    )
    step = sf.col("step")
    per_tag = Window.partitionBy("trace", "queue", "tag")
    before = per_tag.orderBy("seq", "pos").rowsBetween(Window.unboundedPreceding, -1)
    holding = (step == "R") | (step == "S") | ((step == "D") & sf.col("acquiring"))
    counted = union.select(
        "*",
        sf.coalesce(sf.sum(sf.when(step == "E", 1)).over(before), sf.lit(0)).alias("enqueues_before"),
        sf.coalesce(sf.sum(sf.when(step == "S", 1)).over(before), sf.lit(0)).alias("settles_before"),
        sf.last(sf.when(holding, sf.struct(step.alias("step"), sf.col("consumer_id").alias("consumer"))), True)
        .over(before).alias("last_hold"),
        sf.max(sf.when(step == "S", True)).over(per_tag).alias("ever_settled"),
        sf.max(sf.when(step == "C", True)).over(per_tag).alias("left_at_close"),
    )
    early = sf.col("enqueues_before") == 0
    kinds = sf.array_compact(
        sf.array(
            sf.when((step == "D") & early, "unexpected_delivery"),
            sf.when((step == "D") & sf.col("acquiring") & (_field(sf.col("last_hold"), "step") == "D"), "held"),
            sf.when((step == "S") & early, "unexpected_settle"),
            sf.when((step == "S") & ~early & (sf.col("settles_before") > 0), "twice"),
            sf.when(
                (step == "E") & early & sf.coalesce(sf.col("closed"), sf.lit(False))
                & sf.col("ever_settled").isNull() & sf.col("left_at_close").isNull(),
                "lost",
            ),
            sf.when((step == "C") & sf.col("ever_settled").isNotNull(), "both"),
        )
    )
    return counted.withColumn("kinds", kinds).withColumn("holder", _field(sf.col("last_hold"), "consumer"))


def _violation_rows(ordered: DataFrame, flagged: DataFrame) -> DataFrame:
    """Every violation as (trace, queue, checker, kind, sort keys, the values its line shows)."""
    order = ordered.where(sf.col("tag") < sf.col("previous")).select(
        "trace", "queue", sf.lit("strict_order").alias("checker"), sf.lit("order").alias("kind"),
        "seq", "pos", sf.lit(0).alias("rank"), "time", "tag", sf.col("consumer_id").alias("a"),
        sf.col("previous").alias("b"), sf.col("priority").cast("string").alias("s"),
    )
    exploded = flagged.where(sf.size("kinds") > 0).select(
        "*", sf.posexplode("kinds").alias("rank", "kind")
    )
    at_end = sf.col("kind").isin("lost", "both")
    accounting = exploded.select(
        "trace", "queue", sf.lit("accounting").alias("checker"), "kind",
        sf.when(at_end, sf.lit(_LAST)).otherwise(sf.col("seq")).alias("seq"),
        sf.when(at_end, sf.when(sf.col("kind") == "lost", 0).otherwise(1)).otherwise(sf.col("pos")).alias("pos"),
        sf.when(at_end, sf.col("tag")).otherwise(sf.col("rank")).alias("rank"),
        "time", "tag", sf.col("consumer_id").alias("a"), sf.col("holder").alias("b"), sf.col("outcome").alias("s"),
    )
    return order.unionByName(accounting)


def _line(kind: str, row: Any) -> str:
    match kind:
        case "order":
            return f"t={row.time:g}: consumer {row.a} got tag {row.tag} after tag {row.b} (priority {row.s})"
        case "unexpected_delivery":
            return f"t={row.time:g}: tag {row.tag} delivered but never enqueued"
        case "held":
            return f"t={row.time:g}: tag {row.tag} delivered to consumer {row.a} while consumer {row.b} held it"
        case "unexpected_settle":
            return f"t={row.time:g}: tag {row.tag} {row.s} but never enqueued"
        case "twice":
            return f"t={row.time:g}: tag {row.tag} settled twice (now {row.s})"
        case "lost":
            return f"tag {row.tag} was enqueued, never settled, and not in the queue at the end"
        case _:
            return f"tag {row.tag} was settled yet still in the queue at the end"


def _result(checker: str, lines: Sequence[str], total: int, **metrics: float) -> CheckResult:
    shown = tuple(lines[:MAX_REPORTED])
    if total > MAX_REPORTED:
        shown += (f"... and {total - MAX_REPORTED} more",)
    return CheckResult(checker, total == 0, shown, tuple(sorted(metrics.items())))


def _fairness(consumers: Sequence[_Consumer], counts: dict[int, int], min_jain: float) -> CheckResult:
    """Jain's index over the acquiring consumers of the top priority, in subscription order (as ``fairness``)."""
    acquiring = {c.consumer_id: c.priority for c in sorted(consumers, key=lambda c: c.seq) if c.acquiring}
    if not acquiring:
        return CheckResult.of("fairness", [], jain=1.0, consumers=0)
    top = max(acquiring.values())
    values = [float(counts.get(cid, 0)) for cid, priority in acquiring.items() if priority == top]
    jain = jain_index(values)
    violations = [] if jain >= min_jain else [f"Jain's index {jain:.4f} < {min_jain} over deliveries {values}"]
    return CheckResult.of("fairness", violations, jain=jain, consumers=len(values), low=min(values), high=max(values))


_ACCOUNTING_SQL_COUNTS = {
    "enqueued": "count_if(step = 'E' AND enqueues_before = 0)",
    "settled": "count_if(step = 'S' AND settles_before = 0)",
    "remaining": "count_if(step = 'C')",
    "closed": "max(IF(closed, 1.0, 0.0))",
    "lost": "count_if(array_contains(kinds, 'lost'))",
    "unexpected": "count_if(arrays_overlap(kinds, array('unexpected_delivery', 'unexpected_settle')))",
    "duplicated": "count_if(arrays_overlap(kinds, array('held', 'twice')))",
    "violations": "sum(size(kinds))",
}


def analyze_traces(
    spark: SparkSession, paths: Sequence[str | Path], *, priorities: int = 10, min_jain: float = 0.9
) -> TraceAnalysis:
    """Check every queue of every trace for strict order, accounting and fairness, on Spark.

    A queue is every actor that enqueued something (as ``queue_paths``). The event stream is
    parsed once and kept (memory, spilling to disk); each check is then one window pass.

    Args:
        spark: the session.
        paths: JSON Lines files or Parquet traces; each is one trace.
        priorities: the queues' priority levels (``QueueConfig.priorities``; 10 by default).
        min_jain: the fairness threshold (the ``fairness`` checker's default).

    Raises:
        ValueError: no paths.
    """
    if not paths:
        msg = "no trace given: pass one or more JSON Lines files or Parquet trace folders"
        raise ValueError(msg)
    events = read_trace(spark, paths[0])
    for path in paths[1:]:
        events = events.unionByName(read_trace(spark, path))
    parsed = _parsed(events).persist(StorageLevel.MEMORY_AND_DISK)
    kept: list[DataFrame] = [parsed]
    try:
        counts = parsed.groupBy("trace").agg(
            sf.count(sf.lit(1)).alias("events"), sf.count_if(sf.col("kind").isNull()).alias("unreadable")
        ).collect()
        consumers = _consumers(parsed)
        consumer_frame = spark.createDataFrame(
            [(c.trace, c.queue, c.consumer_id, c.acquiring) for c in consumers], _CONSUMER_SCHEMA
        )
        deliveries = _deliveries(parsed, consumer_frame, priorities).persist(StorageLevel.MEMORY_AND_DISK)
        ordered = _ordered(deliveries).persist(StorageLevel.MEMORY_AND_DISK)
        flagged = _flagged(parsed, deliveries).persist(StorageLevel.MEMORY_AND_DISK)
        kept += [deliveries, ordered, flagged]
        accounting = {
            (row.trace, row.queue): row
            for row in flagged.groupBy("trace", "queue")
            .agg(*(sf.expr(sql).alias(name) for name, sql in _ACCOUNTING_SQL_COUNTS.items()))
            .where(sf.col("enqueued") > 0)
            .collect()
        }
        order = {
            (row.trace, row.queue): row
            for row in ordered.groupBy("trace", "queue")
            .agg(
                sf.count(sf.lit(1)).alias("checked"),
                sf.count_if(sf.col("tag") < sf.col("previous")).alias("violations"),
            )
            .collect()
        }
        delivered = {
            (row.trace, row.queue, row.consumer_id): int(row["count"])
            for row in deliveries.groupBy("trace", "queue", "consumer_id").count().collect()
        }
        ranked = Window.partitionBy("trace", "queue", "checker").orderBy("seq", "pos", "rank")
        shown = (
            _violation_rows(ordered, flagged)
            .withColumn("n", sf.row_number().over(ranked))
            .where(sf.col("n") <= MAX_REPORTED)
            .collect()
        )
    finally:
        for frame in kept:
            frame.unpersist()
    lines: dict[tuple[str, str, str], list[tuple[int, str]]] = {}
    for row in shown:
        lines.setdefault((row.trace, row.queue, row.checker), []).append((row.n, _line(row.kind, row)))
    verdicts = []
    for (trace, queue), figures in sorted(accounting.items()):
        order_figures = order.get((trace, queue))
        checked = int(order_figures.checked) if order_figures is not None else 0
        order_total = int(order_figures.violations) if order_figures is not None else 0

        def shown_lines(checker: str, trace: str = trace, queue: str = queue) -> list[str]:
            return [line for _, line in sorted(lines.get((trace, queue, checker), []))]

        verdicts.append(
            QueueVerdict(
                trace=trace,
                queue=queue,
                strict_order=_result("strict_order", shown_lines("strict_order"), order_total, checked=checked),
                accounting=_result(
                    "accounting", shown_lines("accounting"), int(figures.violations),
                    enqueued=int(figures.enqueued), settled=int(figures.settled), remaining=int(figures.remaining),
                    lost=int(figures.lost), unexpected=int(figures.unexpected), duplicated=int(figures.duplicated),
                    closed=float(figures.closed or 0.0),
                ),
                fairness=_fairness(
                    [c for c in consumers if c.trace == trace and c.queue == queue],
                    {cid: count for (t, q, cid), count in delivered.items() if t == trace and q == queue},
                    min_jain,
                ),
            )
        )
    return TraceAnalysis(
        events=tuple(sorted((row.trace, int(row.events)) for row in counts)),
        unreadable=tuple(sorted((row.trace, int(row.unreadable)) for row in counts)),
        verdicts=tuple(verdicts),
    )
