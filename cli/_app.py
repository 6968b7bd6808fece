"""``conveyor``: demo and benchmarks from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from conveyor.runtime.extras import MissingExtra

from ._analyze import IN_PROCESS_MAX_MB, Engine
from ._extras import needs_extra, tell_missing
from ._help import HELP_OPTIONS, FlagsAsFlagsCommand, FlagsAsFlagsGroup
from ._logging import LogLevel, add_log_level
from ._options import FAULTS_GRAMMAR, STRATEGIES_GRAMMAR, deprecated
from ._simulate import replay_command, simulate_command

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="conveyor: actors for message queues.",
    context_settings=HELP_OPTIONS, cls=FlagsAsFlagsGroup,
)
bench_app = typer.Typer(no_args_is_help=True, help="Run a benchmark and print ratios against its peers.",
                        context_settings=HELP_OPTIONS, cls=FlagsAsFlagsGroup)
app.add_typer(bench_app, name="bench")
app.command("simulate")(simulate_command)
app.command("replay")(replay_command)


def package_version() -> str:
    """The installed conveyor's version (the package metadata's, as pip shows it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("conveyor")
    except PackageNotFoundError:
        return "unknown (not installed)"


def show_version(value: bool) -> None:
    """``--version``: print ``conveyor VERSION`` and exit."""
    if value:
        typer.echo(f"conveyor {package_version()}")
        raise typer.Exit


@app.callback()
def conveyor(
    _version: bool = typer.Option(
        False, "--version", is_eager=True, callback=show_version, help="Print conveyor's version and exit."
    ),
) -> None:
    """conveyor: actors for message queues."""


@app.command()
def demo() -> None:
    """Run the same actors on trio, threads and the simulator and show what they did."""
    from ._demo import run_demo

    run_demo()


SWEEP_OUT = Path("reports/sweep")
"""Where ``conveyor sweep`` writes its report unless told."""


def check_sweep_faults(value: str) -> str:
    """The sweep's fault plans, checked before Spark starts: an empty one is refused, never read as default."""
    from conveyor.simulation.sweep import parse_fault_plans

    try:
        parse_fault_plans(value)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    return value


@app.command()
def sweep(
    scenarios: str = typer.Option(
        "all", help="Comma-separated scenario names (built-in, an installed plugin's, MODULE:NAME); all: the "
        "built-ins; plugins: the installed ones."),
    seeds: int = typer.Option(20, min=1, help="Seeds per (scenario, strategy, fault plan)."),
    strategy: str = typer.Option("random,pct", "--strategy", help=STRATEGIES_GRAMMAR),
    faults: str = typer.Option("default", callback=check_sweep_faults, help=FAULTS_GRAMMAR),
    depth: int = typer.Option(3, min=1, help="PCT's bug depth."),
    first_seed: int = typer.Option(0, "--first-seed", min=0, help="The first seed."),
    master: str | None = typer.Option(
        None, help="Spark master (default: $CONVEYOR_SPARK_MASTER, else local[*], embedded)."
    ),
    out: Annotated[Path, typer.Option(help="Report folder: runs.parquet, summary.parquet, report.md.")] = SWEEP_OUT,
    partitions_per_core: int = typer.Option(4, min=1, help="Spark partitions per core (each runs many seeds)."),
    max_steps: int = typer.Option(500_000, min=1, help="Each run's step budget; a run not quiet by then fails."),
    py_files: str = typer.Option(
        "", help="Comma-separated .py/.zip files of your own (scenario modules) shipped to the executors; "
        "conveyor's own code is shipped to a cluster's executors by itself."
    ),
    strategies: str | None = typer.Option(None, "--strategies", hidden=True, help="Deprecated: --strategy."),
    seed_start: int | None = typer.Option(None, "--seed-start", min=0, hidden=True, help="Deprecated: --first-seed."),
) -> None:
    """Run scenario x seed x strategy x fault plan as a Spark job; rows to Parquet, report with plots.

    Exits 1 when any run failed (a checker's violation, an error, a step budget run out), so a CI
    gate on it fails too.
    """
    if strategies is not None:
        deprecated("sweep --strategies", "--strategy")
        strategy = strategies
    if seed_start is not None:
        deprecated("sweep --seed-start", "--first-seed")
        first_seed = seed_start
    needs_extra("spark", "sweep")
    from ._sweep import run_sweep

    try:
        outcome, _ = run_sweep(
            scenarios=scenarios, seeds=seeds, strategies=strategy, faults=faults, depth=depth,
            seed_start=first_seed, master=master, out=out, partitions_per_core=partitions_per_core,
            max_steps=max_steps, py_files=[Path(name) for name in py_files.split(",") if name.strip()],
        )
    except ValueError as error:
        raise typer.BadParameter(str(error)) from error
    if outcome.failed:
        raise typer.Exit(1)


@app.command()
def analyze(
    traces: Annotated[list[Path], typer.Argument(help="JSON Lines traces (write_jsonl) or Parquet trace folders.")],
    engine: Annotated[Engine, typer.Option(
        case_sensitive=False, help="Where the checks run: auto (in process up to --in-process-max-mb of JSON Lines, "
        "else Spark), in-process, or spark. Both give the same verdicts.",
    )] = Engine.AUTO,
    in_process_max_mb: float = typer.Option(
        IN_PROCESS_MAX_MB, min=0, help="auto's threshold: traces of more MB in all (or any Parquet one) go to Spark."
    ),
    master: str | None = typer.Option(
        None, help="Spark master (default: $CONVEYOR_SPARK_MASTER, else local[*], embedded)."
    ),
    priorities: int = typer.Option(10, min=1, max=10, help="The queues' priority levels."),
    min_jain: float = typer.Option(0.9, min=0.0, max=1.0, help="Fairness threshold (Jain's index)."),
) -> None:
    """Check recorded traces for strict order, accounting and fairness (small ones in process, large ones on
    Spark); exit 1 on a violation."""
    if engine is Engine.SPARK:
        needs_extra("spark", "analyze")
    from ._analyze import run_analyze

    try:
        analysis = run_analyze(traces, engine=engine, max_mb=in_process_max_mb, master=master,
                               priorities=priorities, min_jain=min_jain)
    except (FileNotFoundError, ValueError) as error:
        raise typer.BadParameter(str(error)) from error
    if not analysis.ok:
        raise typer.Exit(1)


@bench_app.command("runtime")
def bench_runtime(
    messages: int = typer.Option(200_000, min=1000, help="Messages per throughput measurement."),
    repeat: int = typer.Option(3, min=1, help="Runs per measurement; the best is reported."),
) -> None:
    """Kernel throughput and latency beside pykka, raw trio channels and a bare deque loop."""
    from conveyor.benchmarks.runtime import main as run

    run(messages=messages, repeat=repeat)


@bench_app.command("broker")
def bench_broker(
    messages: int = typer.Option(100_000, min=1000, help="Messages per measurement."),
    repeat: int = typer.Option(3, min=1, help="Runs per measurement; the best is reported."),
) -> None:
    """Publish -> deliver -> ack through one queue, beside an asyncio.Queue."""
    from conveyor.benchmarks.broker import main as run

    run(messages=messages, repeat=repeat)


@bench_app.command("subscriber")
def bench_subscriber(
    messages: int = typer.Option(3000, min=100, help="Messages per measurement."),
    repeat: int = typer.Option(2, min=1, help="Runs per measurement; the best is reported."),
) -> None:
    """subscribe() with an acking no-op callback, beside a trio channel + to_thread baseline."""
    from conveyor.benchmarks.subscriber import main as run

    run(messages=messages, repeat=repeat)


@bench_app.command("sweep")
def bench_sweep(
    seeds: int = typer.Option(500, min=4, help="Runs per measurement (seeds of a cheap scenario mix)."),
    repeat: int = typer.Option(1, min=1, help="Rounds; the best of each is reported."),
) -> None:
    """The Spark sweep on local[2] beside a plain loop and multiprocessing.Pool(2), in one run."""
    needs_extra("spark", "bench sweep")
    from conveyor.benchmarks.sweep import main as run

    run(seeds=seeds, repeat=repeat)


@app.command()
def serve(
    host_port: str = typer.Option(
        "127.0.0.1:8085", "--host-port", "--pubsub",
        help="HOST:PORT for the google.pubsub.v1 gRPC front, as gcloud's emulator spells it (loopback by default; "
        "port 0 picks a free one). --pubsub is the older spelling.",
    ),
    max_streams: int = typer.Option(64, min=1, help="Most StreamingPulls open at once."),
    log_level: Annotated[LogLevel, typer.Option(
        case_sensitive=False, help="info: start, drain and stop; debug: also one line per request."
    )] = LogLevel.INFO,
    max_memory: str | None = typer.Option(
        None, help="Memory budget for the server's resident size (512MB, 2GiB or bytes): publishes that could "
        "pass it are refused with RESOURCE_EXHAUSTED, which clients retry. Unset: no budget."),
    data_dir: str | None = typer.Option(
        None, help="Keep topics, subscriptions and messages in this directory across restarts and kill -9 "
        "(a publish is answered once it is on disk). Unset: in memory only."),
    metrics_port: int | None = typer.Option(
        None, min=0, max=65535, help="Serve Prometheus metrics (queue depth, in flight, deliveries, acks, nacks, "
        "redeliveries, dead letters per subscription) on http://HOST:PORT/metrics, HOST as --host-port's. "
        "Unset: no metrics endpoint."),
    rest_port: int | None = typer.Option(
        None, min=0, max=65535, help="Also serve the REST (HTTP/JSON) mapping of the same API on http://HOST:PORT, "
        "HOST as --host-port's (port 0 picks a free one; GET / answers Ok). Unset: gRPC only."),
) -> None:
    """Serve conveyor as a Pub/Sub emulator (point PUBSUB_EMULATOR_HOST at it) until SIGTERM or SIGINT, then drain."""
    needs_extra("pubsub", "serve")
    if metrics_port is not None:
        needs_extra("metrics", "serve --metrics-port")
    from ._serve import run_serve

    run_serve(host_port, max_streams=max_streams, log_level=log_level, max_memory=max_memory, data_dir=data_dir,
              metrics_port=metrics_port, rest_port=rest_port)


@bench_app.command("pubsub")
def bench_pubsub(
    messages: int = typer.Option(5000, min=100, help="Messages per measurement."),
    rounds: int = typer.Option(3, min=1, help="Receive runs per case and subscriber, alternated; the best is shown."),
    pin: bool = typer.Option(True, help="Keep conveyor's actors on one CPU (ThreadSystem(cpu=...)); "
                             "--no-pin leaves them where the operating system puts them."),
) -> None:
    """Publish and receive+ack through the Pub/Sub front: Google's subscriber beside conveyor's."""
    needs_extra("pubsub", "bench pubsub")
    from conveyor.benchmarks.pubsub import main as run

    run(messages=messages, rounds=rounds, pin=pin)


@bench_app.command("transactions")
def bench_transactions(
    transactions: int = typer.Option(20_000, min=8, help="Take-1 / put-1 transactions a round."),
    repeat: int = typer.Option(3, min=1, help="Rounds; the best is reported."),
) -> None:
    """Transactions per second on the broker backend: 1 and 8 clients, in memory and durable, in one run."""
    from conveyor.benchmarks.transactions import main as run

    run(transactions=transactions, repeat=repeat)


@bench_app.command("ackids")
def bench_ackids(
    ids: int = typer.Option(100_000, min=100, help="Ids per round."),
    repeat: int = typer.Option(5, min=1, help="Rounds; the best is reported."),
) -> None:
    """Sealed ack ids (issue and verify) beside the unsealed layout they replaced, in one run."""
    from conveyor.benchmarks.ackids import main as run

    run(ids=ids, repeat=repeat)


@bench_app.command("ackdepth")
def bench_ackdepth(
    shallow: int = typer.Option(10_000, min=1, help="Messages queued, the shallow case."),
    deep: int = typer.Option(300_000, min=2, help="Messages queued, the deep case."),
    repeat: int = typer.Option(3, min=1, help="Rounds per depth; the best is reported."),
) -> None:
    """An ack's cost in the queue's entry list, acks out of order, at a shallow and a deep backlog, in one run."""
    from conveyor.benchmarks.ackdepth import main as run

    try:
        run(shallow=shallow, deep=deep, repeat=repeat)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--shallow / --deep") from None


@bench_app.command("simulation")
def bench_simulation(
    seeds: int = typer.Option(20, min=1, help="Fairness seeds per round (about 1,400 deliveries each)."),
    repeat: int = typer.Option(3, min=1, help="Rounds per measurement; the best is reported."),
    profile: bool = typer.Option(False, help="Also print a cProfile of the raw simulation."),
    spark_seeds: int = typer.Option(
        200, "--spark-seeds", min=0, help="Fairness runs in the Spark sweep's schedules/hour (0: no Spark)."
    ),
) -> None:
    """Simulator deliveries/s and schedules/min on the broker fairness scenario, beside a bare loop; schedules/hour
    with every checker on, one core and the Spark sweep."""
    if spark_seeds:
        needs_extra("spark", f"bench simulation --spark-seeds {spark_seeds}")
    from conveyor.benchmarks.simulation import main as run

    run(seeds=seeds, repeat=repeat, profile=profile, spark_seeds=spark_seeds)


@bench_app.command("storage")
def bench_storage(
    messages: int = typer.Option(100_000, min=100, help="Messages of the throughput row (publish, consume)."),
    memory_messages: int = typer.Option(1_000_000, min=100, help="Messages queued in the memory and recovery rows."),
    memory_target_mib: int = typer.Option(64, min=1, help="The memory target of the memory row, MiB."),
    repeat: int = typer.Option(1, min=1, help="Throughput runs per side; the best is reported."),
    rabbitmq: bool = typer.Option(True, help="Measure RabbitMQ 3.x beside conveyor (make rabbitmq installs it)."),
    png: str = typer.Option("reports/storage-rss.png", help="Where the picture of RSS over time goes."),
    broker_memory_option: str | None = typer.Option(
        None, help="QueueConfig field of the broker queue's memory target in bytes (default: the first field "
        "named memory_target*, if any; none: the broker row runs without paging)."),
) -> None:
    """Durable storage: publish+confirm and consume+ack on disk beside RabbitMQ, RSS under a memory target,
    recovery time and bytes on disk (minutes at full size)."""
    needs_extra("plots", "bench storage")
    from conveyor.benchmarks.storage import main as run

    try:
        run(messages=messages, memory_messages=memory_messages, memory_target_mib=memory_target_mib, repeat=repeat,
            rabbitmq=rabbitmq, png=png, broker_memory_option=broker_memory_option)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from error


add_log_level(app, command_class=FlagsAsFlagsCommand)


def main() -> None:
    """Entry point of the ``conveyor`` script; an extra found missing deep in a command is told as one line too."""
    try:
        app()
    except MissingExtra as missing:
        tell_missing(missing)
        raise SystemExit(1) from None
