"""``conveyor``: demo and benchmarks from the command line."""

from __future__ import annotations

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="conveyor: actors for message queues.")
bench_app = typer.Typer(no_args_is_help=True, help="Run a benchmark and print ratios against its peers.")
app.add_typer(bench_app, name="bench")


@app.command()
def demo() -> None:
    """Run the same actors on trio, threads and the simulator and show what they did."""
    from ._demo import run_demo

    run_demo()


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


def main() -> None:
    """Entry point of the ``conveyor`` script."""
    app()
